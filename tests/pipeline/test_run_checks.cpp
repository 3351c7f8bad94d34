// pipeline::check_run, the rules that cross the request, the model and the
// layout (pipeline/run_checks.h): PAB or --pab-analyze with PipeFusion, and
// with a two-expert model, are "not supported yet" naming the settings;
// each alone, and the same request on a one-expert model or one process,
// passes. Config files only: no weight is read.
#include <doctest/doctest.h>

#include <string>

#include "pab/change_recorder.h"
#include "pipeline/run_checks.h"
#include "pipeline/text_fixture_requests.h"
#include "util/error.h"

using namespace ditgen;

namespace {

pab::Schedule spatial_pab() {
  pab::Schedule s;
  s[pab::Kind::kSpatial] = pab::KindSchedule{true, 2, 100, 800, {}};
  return s;
}

// The fixture's configs only (plan's way of opening): no weight is read.
std::unique_ptr<pipeline::Pipeline> open_configs(const std::string& fixture) {
  return pipeline::Pipeline::open(testing::fixture_dir(fixture), pipeline::Pipeline::OpenFor::kPlan);
}

std::string check_error(const pipeline::Request& req, const pipeline::Pipeline& pipe, const parallel::Layout& layout) {
  try {
    pipeline::check_run(req, pipe, layout, "run.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(passed)";
}

}  // namespace

TEST_CASE("check_run: PAB or --pab-analyze with PipeFusion is not supported yet, each alone passes") {
  const auto pipe = open_configs("wan_tiny");
  pipeline::Request req = pipe->prepare(testing::wan_fixture_config(sched::Sampler::kUnipc, 2), "run.json");
  parallel::Layout pp2;
  pp2.pp = 2;
  CHECK(check_error(req, *pipe, pp2) == "(passed)");  // PipeFusion alone
  req.pab = spatial_pab();
  CHECK(check_error(req, *pipe, parallel::Layout{}) == "(passed)");  // PAB alone
  std::string m = check_error(req, *pipe, pp2);
  CHECK(m.find("not supported yet: PAB (the pab section) together with PipeFusion") != std::string::npos);
  CHECK(m.find("run.json: parallel.pp=2") != std::string::npos);
  req.pab = {};
  pab::ChangeRecorder analysis;
  req.pab_analysis = &analysis;
  m = check_error(req, *pipe, pp2);
  CHECK(m.find("not supported yet: --pab-analyze together with PipeFusion") != std::string::npos);
}

TEST_CASE("check_run: PAB or --pab-analyze on a two-expert model is not supported yet") {
  const auto two = open_configs("wan22_tiny");
  REQUIRE(two->two_experts());
  pipeline::Request req = two->prepare(testing::wan_fixture_config(sched::Sampler::kUnipc, 2), "run.json");
  CHECK(check_error(req, *two, parallel::Layout{}) == "(passed)");
  req.pab = spatial_pab();
  const std::string m = check_error(req, *two, parallel::Layout{});
  CHECK(m.find("not supported yet: PAB (the pab section) with a two-expert model") != std::string::npos);
  CHECK(m.find("wan22_tiny/model_index.json: boundary_ratio") != std::string::npos);
  req.pab = {};
  pab::ChangeRecorder analysis;
  req.pab_analysis = &analysis;
  CHECK(check_error(req, *two, parallel::Layout{}).find("--pab-analyze with a two-expert model") != std::string::npos);
  // The same PAB request on the one-expert model passes.
  const auto one = open_configs("wan_tiny");
  req.pab_analysis = nullptr;
  req.pab = spatial_pab();
  CHECK_FALSE(one->two_experts());
  CHECK(check_error(req, *one, parallel::Layout{}) == "(passed)");
}
