// make_scheduler's choice of scheduler and its errors: exit codes and
// messages that name the file and the key at fault.
#include <doctest/doctest.h>

#include <string>

#include "sched/scheduler.h"
#include "sched/scheduler_config.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::sched;
using nlohmann::json;

namespace {

const char* const kPath = "models/x/scheduler/scheduler_config.json";

json dit_config() {
  return json::parse(R"({"_class_name": "DDIMScheduler", "beta_end": 0.02,
    "beta_schedule": "linear", "beta_start": 0.0001, "clip_sample": false,
    "num_train_timesteps": 1000, "set_alpha_to_one": true, "steps_offset": 0,
    "trained_betas": null})");
}

// Runs f, expects an Error with the given exit code whose message contains
// every fragment.
template <typename F>
void expect_error(F&& f, int exit_code, std::initializer_list<std::string> fragments) {
  try {
    f();
    FAIL("no error thrown");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CAPTURE(msg);
    CHECK(e.exit_code() == exit_code);
    for (const auto& frag : fragments) CHECK(msg.find(frag) != std::string::npos);
  }
}

std::unique_ptr<Scheduler> build(const std::string& name, const json& cfg) {
  auto s = make_scheduler(*sampler_named(name), cfg, kPath);
  s->set_timesteps(10);
  return s;
}

}  // namespace

TEST_CASE("the model's own scheduler comes from _class_name") {
  CHECK(make_scheduler(Sampler::kModelDefault, dit_config(), kPath)->name() == "ddim");
  json dpm = dit_config();
  dpm["_class_name"] = "DPMSolverMultistepScheduler";
  CHECK(make_scheduler(Sampler::kModelDefault, dpm, kPath)->name() == "dpmpp_2m");
  // An explicit name builds that scheduler from any class's config.
  CHECK(make_scheduler(Sampler::kDpmpp2m, dit_config(), kPath)->name() == "dpmpp_2m");
  CHECK(make_scheduler(Sampler::kDdim, dpm, kPath)->name() == "ddim");
}

TEST_CASE("unsupported schedulers are 'not supported yet' (exit 2)") {
  json other = dit_config();
  other["_class_name"] = "EulerDiscreteScheduler";
  expect_error([&] { make_scheduler(Sampler::kModelDefault, other, kPath); }, kExitBadConfig,
               {"not supported yet: scheduler EulerDiscreteScheduler", kPath});
  // A name outside the sampler table has no Sampler (the config refuses it
  // with the table's names: tests/config/test_validation.cpp).
  CHECK_FALSE(sampler_named("euler_a").has_value());
  CHECK(sampler_named("dpmpp_2m") == Sampler::kDpmpp2m);
  json none = dit_config();
  none.erase("_class_name");
  expect_error([&] { make_scheduler(Sampler::kModelDefault, none, kPath); }, kExitBadModel, {"_class_name", kPath});
}

TEST_CASE("a wrong JSON type is a ModelError naming the file and key") {
  const std::pair<const char*, json> cases[] = {
      {"beta_start", "0.0001"},          {"num_train_timesteps", 1000.5},
      {"clip_sample", 0},                {"beta_schedule", 3},
      {"trained_betas", "none"},         {"steps_offset", nullptr},
      {"set_alpha_to_one", "true"},      {"prediction_type", json::array()},
  };
  for (const auto& [key, value] : cases) {
    CAPTURE(key);
    json cfg = dit_config();
    cfg[key] = value;
    expect_error([&] { build("ddim", cfg); }, kExitBadModel,
                 {kPath, std::string("\"") + key + "\""});
  }
  json cfg = dit_config();
  cfg["solver_order"] = "2";
  expect_error([&] { build("dpmpp_2m", cfg); }, kExitBadModel, {kPath, "\"solver_order\""});
  // Keys a scheduler does not read are ignored, whatever their type.
  cfg = dit_config();
  cfg["solver_order"] = "2";
  cfg["some_future_key"] = json::object();
  CHECK_NOTHROW(build("ddim", cfg));
}

TEST_CASE("bad values are ConfigErrors naming the key") {
  const std::pair<const char*, json> cases[] = {
      {"beta_schedule", "quadratic"},
      {"timestep_spacing", "even"},
      {"prediction_type", "noise"},
      {"num_train_timesteps", 0},
  };
  for (const auto& [key, value] : cases) {
    for (const char* name : {"ddim", "dpmpp_2m"}) {
      CAPTURE(key);
      CAPTURE(name);
      json cfg = dit_config();
      cfg[key] = value;
      expect_error([&] { build(name, cfg); }, kExitBadConfig, {kPath, key});
    }
  }
  expect_error([&] { make_scheduler(Sampler::kDdim, dit_config(), kPath)->set_timesteps(1001); },
               kExitBadConfig, {"1001", kPath});
  expect_error([&] { make_scheduler(Sampler::kDpmpp2m, dit_config(), kPath)->set_timesteps(0); },
               kExitBadConfig, {"0 inference steps"});
}

TEST_CASE("options that change the math are 'not supported yet', never ignored") {
  const std::tuple<const char*, const char*, json> cases[] = {
      {"ddim", "thresholding", true},
      {"ddim", "rescale_betas_zero_snr", true},
      {"dpmpp_2m", "rescale_betas_zero_snr", true},
      {"dpmpp_2m", "thresholding", true},
      {"dpmpp_2m", "use_karras_sigmas", true},
      {"dpmpp_2m", "use_exponential_sigmas", true},
      {"dpmpp_2m", "use_beta_sigmas", true},
      {"dpmpp_2m", "use_lu_lambdas", true},
      {"dpmpp_2m", "solver_order", 3},
      {"dpmpp_2m", "solver_order", 1},
      {"dpmpp_2m", "algorithm_type", "sde-dpmsolver++"},
      {"dpmpp_2m", "algorithm_type", "dpmsolver"},
      {"dpmpp_2m", "variance_type", "learned_range"},
      // use_flow_sigmas / prediction_type flow_prediction make a flow config:
      // the wrong kind for dpmpp_2m (test_flow_config_errors.cpp).
  };
  for (const auto& [name, key, value] : cases) {
    CAPTURE(name);
    CAPTURE(key);
    json cfg = dit_config();
    cfg[key] = value;
    expect_error([&] { build(name, cfg); }, kExitBadConfig, {"not supported yet", key, kPath});
  }
  // The same keys at their no-op values are fine.
  json cfg = dit_config();
  cfg["use_karras_sigmas"] = false;
  cfg["thresholding"] = false;
  cfg["variance_type"] = nullptr;
  cfg["algorithm_type"] = "dpmsolver++";
  CHECK_NOTHROW(build("dpmpp_2m", cfg));
  CHECK_NOTHROW(build("ddim", cfg));
}

TEST_CASE("parse_scheduler_config accepts Python's -Infinity / NaN tokens") {
  const json j = parse_scheduler_config(
      R"({"_class_name": "DPMSolverMultistepScheduler", "lambda_min_clipped": -Infinity,
          "note": "a -Infinity inside a string stays", "x": [NaN, Infinity]})",
      kPath);
  const SchedulerConfig cfg(j, kPath);
  CHECK(std::isinf(cfg.get_number("lambda_min_clipped", 0)));
  CHECK(cfg.get_number("lambda_min_clipped", 0) < 0);
  CHECK(j["note"] == "a -Infinity inside a string stays");
  CHECK_NOTHROW(build("dpmpp_2m", j));
  expect_error([] { parse_scheduler_config("{\"a\": ", kPath); }, kExitBadModel,
               {kPath, "malformed JSON"});
  // A number beyond double: nlohmann's out_of_range, not parse_error.
  expect_error([] { parse_scheduler_config("{\"beta_end\": 1e400}", kPath); }, kExitBadModel,
               {kPath, "malformed JSON", "1e400"});
  expect_error([] { load_scheduler_config("/nonexistent/scheduler_config.json"); }, kExitBadModel,
               {"/nonexistent/scheduler_config.json"});
}

TEST_CASE("step() checks its arguments") {
  auto s = make_scheduler(Sampler::kDpmpp2m, dit_config(), kPath);
  s->set_timesteps(5);
  Tensor x = Tensor::zeros({2, 3});
  Tensor m = Tensor::zeros({2, 3});
  CHECK_THROWS(s->step(m, 5, x));
  CHECK_THROWS(s->step(Tensor::zeros({3, 2}), 0, x));
  s->step(m, 0, x);
  CHECK_THROWS(s->step(m, 2, x));  // multistep: in order
  CHECK_NOTHROW(s->step(m, 1, x));
  CHECK_NOTHROW(s->step(m, 0, x));  // 0 restarts
}
