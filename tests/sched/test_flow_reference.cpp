// The flow samplers (unipc, euler) against numbers recorded from diffusers
// 0.42.1 by scripts/fixtures/make_flow_sched_fixtures.py
// (tests/fixtures/sched/flow_*.json): timesteps exactly (UniPC's int64,
// Euler's float32 sigma * 1000), float32 sigmas bit for bit, and sampler
// trajectories within 1e-5 normwise (max |error| / max |reference| over the
// sample after each recorded step), as tests/sched/test_reference.cpp
// holds DDIM and DPM-Solver++. The recorded run is WanPipeline's loop with
// model_output = noise[i] + 0.5 * sample at step i, from a fixed random
// sample (flow_inputs.json).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sched/flow_match_euler.h"
#include "sched/scheduler.h"
#include "sched/scheduler_config.h"
#include "sched/unipc_flow.h"

using namespace ditgen;
using namespace ditgen::sched;

namespace {

std::string fixture_path(const std::string& name) {
  return std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/sched/" + name + ".json";
}

nlohmann::json load(const std::string& name) { return load_scheduler_config(fixture_path(name)); }

std::vector<float> floats(const nlohmann::json& j) {
  std::vector<float> v;
  for (const auto& x : j) v.push_back(static_cast<float>(x.get<double>()));
  return v;
}

struct Inputs {
  std::vector<float> sample0;
  std::vector<std::vector<float>> noise;  // one per step
};

const Inputs& inputs() {
  static const Inputs in = [] {
    const nlohmann::json fx = load("flow_inputs");
    Inputs r;
    r.sample0 = floats(fx.at("sample0"));
    for (const auto& row : fx.at("noise")) r.noise.push_back(floats(row));
    return r;
  }();
  return in;
}

double normwise_error(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double scale = 0, err = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    scale = std::max(scale, std::fabs(double(want[k])));
    err = std::max(err, std::fabs(double(got[k]) - double(want[k])));
  }
  return err / std::max(scale, 1e-30);
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& sampler, const std::string& where) {
  const double e = normwise_error(got, want);
  INFO(sampler << ", " << where << ": normwise error " << e);
  CHECK(e <= 1e-5);
}

// Runs every recorded step count of `runs` (one sampler's entry) on `sched`
// and compares. Two identical images in one batch: the step is
// elementwise, so both must follow the single-image reference.
void check_runs(Scheduler& sched, const nlohmann::json& runs, const std::string& label) {
  const Inputs& in = inputs();
  const int64_t per_image = static_cast<int64_t>(in.sample0.size());
  for (const auto& [count, run] : runs.items()) {
    const std::string where = label + ", " + count + " steps";
    CAPTURE(where);
    sched.set_timesteps(std::stoi(count));
    // Timesteps: exactly what diffusers feeds the model.
    CHECK(sched.timesteps() == run.at("timesteps").get<std::vector<double>>());
    const std::vector<float>* sigmas = nullptr;
    if (auto* u = dynamic_cast<UniPcFlowScheduler*>(&sched)) sigmas = &u->sigmas();
    if (auto* e = dynamic_cast<FlowMatchEulerScheduler*>(&sched)) sigmas = &e->sigmas();
    REQUIRE(sigmas);
    // Bit for bit: float64 numpy arithmetic rounded once to float32 (UniPC),
    // or torch's float32 construction then numpy (Euler).
    CHECK(*sigmas == floats(run.at("sigmas")));

    std::vector<float> both(in.sample0);
    both.insert(both.end(), in.sample0.begin(), in.sample0.end());
    Tensor sample = Tensor::from_vector({2, per_image}, both);
    Tensor out = Tensor::empty({2, per_image});
    const int steps = static_cast<int>(sched.timesteps().size());
    REQUIRE(steps <= static_cast<int>(in.noise.size()));
    for (int i = 0; i < steps; ++i) {
      for (int64_t k = 0; k < sample.numel(); ++k) {
        out[k] = in.noise[i][k % per_image] + 0.5f * sample[k];
      }
      sched.step(out, i, sample);
      if (run.contains("trajectory")) {
        const auto got = sample.to_vector();
        expect_close({got.begin(), got.begin() + per_image}, floats(run["trajectory"][i]),
                     sched.name(), where + ", step " + std::to_string(i));
      }
    }
    const auto got = sample.to_vector();
    const auto want = floats(run.at("final"));
    expect_close({got.begin(), got.begin() + per_image}, want, sched.name(), where + ", final");
    expect_close({got.begin() + per_image, got.end()}, want, sched.name(), where + ", final, image 1");
  }
}

std::optional<double> recorded_override(const nlohmann::json& fx) {
  const auto& s = fx.at("shift_override");
  return s.is_null() ? std::nullopt : std::optional<double>(s.get<double>());
}

// Builds each recorded sampler from the fixture's config (and shift
// override) as make_scheduler does, and checks its runs.
void check_fixture(const std::string& name) {
  const std::string path = fixture_path(name);
  const nlohmann::json fx = load(name);
  int samplers = 0;
  for (const char* sampler : {"unipc", "euler"}) {
    if (!fx.contains(sampler)) continue;
    ++samplers;
    auto sched = make_scheduler(*sampler_named(sampler), fx.at("scheduler_config"), path, recorded_override(fx));
    REQUIRE(sched->name() == sampler);
    CHECK(sched->kind() == SchedulerKind::kFlow);
    check_runs(*sched, fx.at(sampler).at("runs"), name + " " + sampler);
  }
  CHECK(samplers > 0);
}

}  // namespace

TEST_CASE("unipc matches diffusers' UniPCMultistepScheduler on Wan 2.1's config (flow_shift 3)") {
  check_fixture("flow_wan_unipc");
}

TEST_CASE("unipc and euler match diffusers at flow_shift 1 and 5") {
  check_fixture("flow_wan_unipc_shift1");
  check_fixture("flow_wan_unipc_shift5");
}

TEST_CASE("unipc with disable_corrector matches diffusers") {
  check_fixture("flow_wan_unipc_disable_corrector");
}

TEST_CASE("euler matches diffusers' FlowMatchEulerDiscreteScheduler (shift 7.3), unipc from its config") {
  check_fixture("flow_euler_shift7_3");
}

TEST_CASE("the shift override (generate.shift) matches diffusers' from_config(shift=...)") {
  // Recorded with the override: FlowMatch config of shift 7.3, run at 2.0.
  check_fixture("flow_euler_shift7_3_override2");
  // The published Wan config (flow_shift 3) overridden to 5 and to 1 must
  // give the runs recorded from configs whose flow_shift is 5 and 1.
  const nlohmann::json wan = load("flow_wan_unipc").at("scheduler_config");
  const std::string path = fixture_path("flow_wan_unipc");
  for (const double shift : {5.0, 1.0}) {
    const std::string reference = shift == 5.0 ? "flow_wan_unipc_shift5" : "flow_wan_unipc_shift1";
    const nlohmann::json want = load(reference);
    for (const char* sampler : {"unipc", "euler"}) {
      auto sched = make_scheduler(*sampler_named(sampler), wan, path, shift);
      check_runs(*sched, want.at(sampler).at("runs"),
                 std::string("Wan config, ") + sampler + " with shift override " + std::to_string(shift));
    }
  }
  auto unipc = make_scheduler(Sampler::kUnipc, wan, path, 5.0);
  CHECK(dynamic_cast<UniPcFlowScheduler&>(*unipc).shift() == 5.0);
  auto euler = make_scheduler(Sampler::kEuler, wan, path);  // the model's flow_shift carries over
  CHECK(dynamic_cast<FlowMatchEulerScheduler&>(*euler).shift() == 3.0);
}

TEST_CASE("the model's own flow scheduler comes from _class_name") {
  auto own = make_scheduler(Sampler::kModelDefault, load("flow_wan_unipc").at("scheduler_config"), "wan");
  CHECK(own->name() == "unipc");
  CHECK(own->kind() == SchedulerKind::kFlow);
  own->set_timesteps(50);
  CHECK(own->timesteps().front() == 999);  // int64(1000 * (1 - 1e-6))
  CHECK(own->timesteps().back() == 60);
  auto euler = make_scheduler(Sampler::kModelDefault, load("flow_euler_shift7_3").at("scheduler_config"), "euler");
  CHECK(euler->name() == "euler");
  euler->set_timesteps(4);
  CHECK(euler->timesteps().front() == 1000.0);
  // Not integers: float32 sigma * 1000.
  CHECK(euler->timesteps()[1] != std::floor(euler->timesteps()[1]));
}
