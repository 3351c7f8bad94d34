// The flow samplers' side of make_scheduler: the model's kind (diffusion or
// flow) and the samplers that fit it, the shift override, and the UniPC /
// FlowMatchEuler options ditgen refuses ("not supported yet", exit 2) or
// rejects (ConfigError for bad values, ModelError for wrong JSON types),
// each message naming the file and the key.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>

#include "sched/flow_match_euler.h"
#include "sched/scheduler.h"
#include "sched/scheduler_config.h"
#include "sched/unipc_flow.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::sched;
using nlohmann::json;

namespace {

const char* const kPath = "models/wan/scheduler/scheduler_config.json";

// Wan-AI/Wan2.1-T2V-1.3B-Diffusers scheduler/scheduler_config.json.
json wan_config() {
  return json::parse(R"({"_class_name": "UniPCMultistepScheduler", "_diffusers_version": "0.33.0.dev0",
    "beta_end": 0.02, "beta_schedule": "linear", "beta_start": 0.0001, "disable_corrector": [],
    "dynamic_thresholding_ratio": 0.995, "final_sigmas_type": "zero", "flow_shift": 3.0,
    "lower_order_final": true, "num_train_timesteps": 1000, "predict_x0": true,
    "prediction_type": "flow_prediction", "rescale_betas_zero_snr": false, "sample_max_value": 1.0,
    "solver_order": 2, "solver_p": null, "solver_type": "bh2", "steps_offset": 0,
    "thresholding": false, "timestep_spacing": "linspace", "trained_betas": null,
    "use_beta_sigmas": false, "use_exponential_sigmas": false, "use_flow_sigmas": true,
    "use_karras_sigmas": false})");
}

json flow_match_config() {
  return json::parse(R"({"_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000,
    "shift": 3.0, "use_dynamic_shifting": false, "base_shift": 0.5, "max_shift": 1.15,
    "invert_sigmas": false, "shift_terminal": null, "stochastic_sampling": false,
    "time_shift_type": "exponential"})");
}

json dit_config() {
  return json::parse(R"({"_class_name": "DDIMScheduler", "beta_end": 0.02,
    "beta_schedule": "linear", "beta_start": 0.0001, "clip_sample": false,
    "num_train_timesteps": 1000, "set_alpha_to_one": true, "steps_offset": 0,
    "trained_betas": null})");
}

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

std::unique_ptr<Scheduler> build(const std::string& name, const json& cfg,
                                 std::optional<double> shift = std::nullopt) {
  auto s = make_scheduler(*sampler_named(name), cfg, kPath, shift);
  s->set_timesteps(10);
  return s;
}

}  // namespace

TEST_CASE("scheduler_names lists both kinds") {
  CHECK(scheduler_names() == std::vector<std::string>{"ddim", "dpmpp_2m", "unipc", "euler"});
  CHECK(scheduler_names(SchedulerKind::kDiffusion) == std::vector<std::string>{"ddim", "dpmpp_2m"});
  CHECK(scheduler_names(SchedulerKind::kFlow) == std::vector<std::string>{"unipc", "euler"});
  CHECK(make_scheduler(Sampler::kDdim, dit_config(), kPath)->kind() == SchedulerKind::kDiffusion);
  CHECK(make_scheduler(Sampler::kDpmpp2m, dit_config(), kPath)->kind() == SchedulerKind::kDiffusion);
  CHECK(make_scheduler(Sampler::kUnipc, wan_config(), kPath)->kind() == SchedulerKind::kFlow);
  CHECK(make_scheduler(Sampler::kEuler, wan_config(), kPath)->kind() == SchedulerKind::kFlow);
}

TEST_CASE("config_kind: a FlowMatch class, flow_prediction or use_flow_sigmas make a flow model") {
  std::string why;
  CHECK(config_kind(dit_config(), kPath, &why) == SchedulerKind::kDiffusion);
  CHECK(why.empty());
  CHECK(config_kind(wan_config(), kPath, &why) == SchedulerKind::kFlow);
  CHECK(why == "prediction_type flow_prediction");
  CHECK(config_kind(flow_match_config(), kPath, &why) == SchedulerKind::kFlow);
  CHECK(why == "_class_name FlowMatchEulerDiscreteScheduler");
  json dpm_flow = dit_config();
  dpm_flow["_class_name"] = "DPMSolverMultistepScheduler";
  dpm_flow["use_flow_sigmas"] = true;
  CHECK(config_kind(dpm_flow, kPath, &why) == SchedulerKind::kFlow);
  CHECK(why == "use_flow_sigmas = true");
  json v = dit_config();
  v["prediction_type"] = "v_prediction";
  CHECK(config_kind(v, kPath) == SchedulerKind::kDiffusion);
  v["use_flow_sigmas"] = "yes";
  expect_error([&] { config_kind(v, kPath); }, kExitBadModel, {kPath, "\"use_flow_sigmas\""});
}

TEST_CASE("the model's own flow scheduler, and own classes of the wrong kind") {
  CHECK(make_scheduler(Sampler::kModelDefault, wan_config(), kPath)->name() == "unipc");
  CHECK(make_scheduler(Sampler::kModelDefault, flow_match_config(), kPath)->name() == "euler");
  // An epsilon UniPC (some image models ship one): ditgen's unipc is UniPC
  // on flow sigmas only.
  json eps_unipc = dit_config();
  eps_unipc["_class_name"] = "UniPCMultistepScheduler";
  expect_error([&] { make_scheduler(Sampler::kModelDefault, eps_unipc, kPath); }, kExitBadConfig,
               {"not supported yet: scheduler UniPCMultistepScheduler", kPath, "ddim or dpmpp_2m"});
  // A DPM-Solver on flow sigmas: dpmpp_2m is the epsilon / v sampler.
  json dpm_flow = wan_config();
  dpm_flow["_class_name"] = "DPMSolverMultistepScheduler";
  expect_error([&] { make_scheduler(Sampler::kModelDefault, dpm_flow, kPath); }, kExitBadConfig,
               {"not supported yet: scheduler DPMSolverMultistepScheduler", "flow_prediction", kPath,
                "unipc or euler"});
  json heun = flow_match_config();
  heun["_class_name"] = "FlowMatchHeunDiscreteScheduler";
  expect_error([&] { make_scheduler(Sampler::kModelDefault, heun, kPath); }, kExitBadConfig,
               {"not supported yet: scheduler FlowMatchHeunDiscreteScheduler", kPath, "unipc or euler"});
  // A named sampler of the right kind still runs on those configs.
  CHECK(make_scheduler(Sampler::kUnipc, dpm_flow, kPath)->name() == "unipc");
  CHECK(make_scheduler(Sampler::kEuler, heun, kPath)->name() == "euler");
  CHECK(make_scheduler(Sampler::kDpmpp2m, eps_unipc, kPath)->name() == "dpmpp_2m");
}

TEST_CASE("a sampler of the other kind is a ConfigError naming the samplers that fit") {
  json ddim_flow = dit_config();
  ddim_flow["prediction_type"] = "flow_prediction";
  json dpm_flow_sigmas = dit_config();
  dpm_flow_sigmas["_class_name"] = "DPMSolverMultistepScheduler";
  dpm_flow_sigmas["use_flow_sigmas"] = true;
  const std::tuple<json, const char*> flow_configs[] = {
      {wan_config(), "prediction_type flow_prediction"},
      {flow_match_config(), "FlowMatchEulerDiscreteScheduler"},
      {ddim_flow, "prediction_type flow_prediction"},
      {dpm_flow_sigmas, "use_flow_sigmas = true"},
  };
  for (const auto& [cfg, reason] : flow_configs) {
    for (const char* name : {"ddim", "dpmpp_2m"}) {
      const std::string where = std::string(name) + " " + reason;
      CAPTURE(where);
      expect_error([&] { make_scheduler(*sampler_named(name), cfg, kPath); }, kExitBadConfig,
                   {std::string("generate.scheduler = ") + name, "flow-matching model", reason, kPath,
                    "use unipc or euler"});
    }
  }
  json v = dit_config();
  v["prediction_type"] = "v_prediction";
  for (const json& cfg : {dit_config(), v}) {
    for (const std::string name : {"unipc", "euler"}) {
      CAPTURE(name);
      expect_error([&] { make_scheduler(*sampler_named(name), cfg, kPath); }, kExitBadConfig,
                   {std::string("generate.scheduler = ") + name, "epsilon / v-prediction model", kPath,
                    "use ddim or dpmpp_2m"});
    }
  }
}

TEST_CASE("the shift override: flow samplers only, a positive number") {
  auto unipc = build("unipc", wan_config(), 7.0);
  CHECK(dynamic_cast<UniPcFlowScheduler&>(*unipc).shift() == 7.0);
  auto euler = build("euler", flow_match_config(), 0.5);
  CHECK(dynamic_cast<FlowMatchEulerScheduler&>(*euler).shift() == 0.5);
  // Without one, each sampler takes the model's shift under its class's key.
  CHECK(dynamic_cast<UniPcFlowScheduler&>(*build("unipc", flow_match_config())).shift() == 3.0);
  CHECK(dynamic_cast<FlowMatchEulerScheduler&>(*build("euler", wan_config())).shift() == 3.0);
  json no_shift = wan_config();
  no_shift.erase("flow_shift");  // UniPC's default
  CHECK(dynamic_cast<UniPcFlowScheduler&>(*build("unipc", no_shift)).shift() == 1.0);

  for (const char* name : {"ddim", "dpmpp_2m"}) {
    expect_error([&] { make_scheduler(*sampler_named(name), dit_config(), kPath, 3.0); }, kExitBadConfig,
                 {"generate.shift", "unipc or euler", name, kPath});
  }
  for (const double bad : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity()}) {
    for (const char* name : {"unipc", "euler"}) {
      CAPTURE(bad);
      expect_error([&] { make_scheduler(*sampler_named(name), wan_config(), kPath, bad); }, kExitBadConfig,
                   {"generate.shift = ", "must be a positive number"});
    }
  }
}

TEST_CASE("UniPC and FlowMatchEuler options that change the math are 'not supported yet'") {
  json eps_on_flow_sigmas = wan_config();
  eps_on_flow_sigmas["prediction_type"] = "epsilon";
  const std::tuple<const char*, json, const char*, json> cases[] = {
      {"unipc", wan_config(), "solver_order", 1},
      {"unipc", wan_config(), "solver_order", 3},
      {"unipc", wan_config(), "solver_type", "bh1"},
      {"unipc", wan_config(), "predict_x0", false},
      {"unipc", wan_config(), "lower_order_final", false},
      {"unipc", wan_config(), "final_sigmas_type", "sigma_min"},
      {"unipc", wan_config(), "thresholding", true},
      {"unipc", wan_config(), "solver_p", json::object()},
      {"unipc", wan_config(), "use_karras_sigmas", true},
      {"unipc", wan_config(), "use_exponential_sigmas", true},
      {"unipc", wan_config(), "use_beta_sigmas", true},
      {"unipc", wan_config(), "use_dynamic_shifting", true},
      {"unipc", wan_config(), "shift_terminal", 0.1},
      {"unipc", wan_config(), "use_flow_sigmas", false},  // flow_prediction on VP sigmas
      {"unipc", eps_on_flow_sigmas, "prediction_type", "epsilon"},
      {"unipc", flow_match_config(), "use_dynamic_shifting", true},
      {"euler", flow_match_config(), "use_dynamic_shifting", true},
      {"euler", flow_match_config(), "invert_sigmas", true},
      {"euler", flow_match_config(), "stochastic_sampling", true},
      {"euler", flow_match_config(), "shift_terminal", 0.25},
      {"euler", flow_match_config(), "use_karras_sigmas", true},
      {"euler", flow_match_config(), "use_exponential_sigmas", true},
      {"euler", flow_match_config(), "use_beta_sigmas", true},
      {"euler", wan_config(), "use_dynamic_shifting", true},
  };
  for (const auto& [name, base, key, value] : cases) {
    const std::string where = std::string(name) + " " + key;
    CAPTURE(where);
    json cfg = base;
    cfg[key] = value;
    expect_error([&] { build(name, cfg); }, kExitBadConfig, {"not supported yet", key, kPath});
  }
  // The same keys at values that leave the math alone are fine; bh2's
  // aliases are DPM-Solver's solver names, as diffusers maps them.
  for (const char* solver : {"bh2", "midpoint", "heun", "logrho"}) {
    json cfg = wan_config();
    cfg["solver_type"] = solver;
    cfg["shift_terminal"] = nullptr;
    cfg["use_dynamic_shifting"] = false;
    cfg["timestep_spacing"] = "trailing";  // replaced by the flow sigmas
    CHECK_NOTHROW(build("unipc", cfg));
    CHECK_NOTHROW(build("euler", cfg));
  }
  for (const json& off : {json(nullptr), json(false), json(0)}) {
    json cfg = flow_match_config();
    cfg["shift_terminal"] = off;
    CHECK_NOTHROW(build("euler", cfg));
    CHECK_NOTHROW(build("unipc", cfg));
  }
}

TEST_CASE("bad flow values are ConfigErrors, wrong JSON types ModelErrors, naming the key") {
  const std::tuple<const char*, json, const char*, json> bad_values[] = {
      {"unipc", wan_config(), "flow_shift", 0.0},
      {"unipc", wan_config(), "flow_shift", -3.0},
      {"unipc", wan_config(), "flow_shift", "Infinity"},  // parse_scheduler_config's token
      {"euler", wan_config(), "flow_shift", 0.0},
      {"euler", flow_match_config(), "shift", -1.0},
      {"unipc", flow_match_config(), "shift", 0.0},
      {"unipc", wan_config(), "solver_type", "rk4"},
      {"unipc", wan_config(), "final_sigmas_type", "one"},
      {"unipc", wan_config(), "timestep_spacing", "even"},
      {"unipc", wan_config(), "prediction_type", "velocity"},
      {"unipc", wan_config(), "num_train_timesteps", 0},
      {"euler", flow_match_config(), "num_train_timesteps", 0},
      {"euler", flow_match_config(), "time_shift_type", "quadratic"},
  };
  for (const auto& [name, base, key, value] : bad_values) {
    const std::string where = std::string(name) + " " + key;
    CAPTURE(where);
    json cfg = base;
    cfg[key] = value;
    expect_error([&] { build(name, cfg); }, kExitBadConfig, {kPath, key});
  }
  const std::tuple<const char*, json, const char*, json> wrong_types[] = {
      {"unipc", wan_config(), "flow_shift", "3"},
      {"unipc", wan_config(), "disable_corrector", "none"},
      {"unipc", wan_config(), "disable_corrector", json::array({"0"})},
      {"unipc", wan_config(), "solver_order", 2.5},
      {"unipc", wan_config(), "lower_order_final", 1},
      {"euler", flow_match_config(), "shift", "3.0"},
      {"euler", flow_match_config(), "invert_sigmas", "false"},
      {"unipc", wan_config(), "use_flow_sigmas", "true"},
  };
  for (const auto& [name, base, key, value] : wrong_types) {
    const std::string where = std::string(name) + " " + key;
    CAPTURE(where);
    json cfg = base;
    cfg[key] = value;
    expect_error([&] { build(name, cfg); }, kExitBadModel, {kPath, std::string("\"") + key + "\""});
  }
  // A positive shift so small that the schedule underflows (0 / 0, x / 0;
  // for unipc also a float32 sigma 0 before the end).
  for (const char* name : {"unipc", "euler"}) {
    expect_error([&] { make_scheduler(*sampler_named(name), wan_config(), kPath, 5e-324)->set_timesteps(10); },
                 kExitBadConfig, {kPath, "gives the sigma", "outside"});
  }
  expect_error([&] { make_scheduler(Sampler::kUnipc, wan_config(), kPath, 1e-300)->set_timesteps(10); },
               kExitBadConfig, {kPath, "gives the sigma", "outside (0, 1]"});
  expect_error([] { make_scheduler(Sampler::kUnipc, wan_config(), kPath)->set_timesteps(0); }, kExitBadConfig,
               {"0 inference steps", kPath});
  expect_error([] { make_scheduler(Sampler::kEuler, wan_config(), kPath)->set_timesteps(1001); }, kExitBadConfig,
               {"1001 inference steps", kPath});
}

TEST_CASE("flow step() checks its arguments") {
  auto unipc = make_scheduler(Sampler::kUnipc, wan_config(), kPath);
  unipc->set_timesteps(5);
  Tensor x = Tensor::zeros({2, 3});
  Tensor m = Tensor::zeros({2, 3});
  CHECK_THROWS(unipc->step(m, 5, x));
  CHECK_THROWS(unipc->step(Tensor::zeros({3, 2}), 0, x));
  unipc->step(m, 0, x);
  CHECK_THROWS(unipc->step(m, 2, x));  // multistep: in order
  Tensor other = Tensor::zeros({4});
  CHECK_THROWS(unipc->step(Tensor::zeros({4}), 1, other));  // the sample changed size mid-run
  CHECK_NOTHROW(unipc->step(m, 1, x));
  CHECK_NOTHROW(unipc->step(m, 0, x));  // 0 restarts
  auto euler = make_scheduler(Sampler::kEuler, wan_config(), kPath);
  CHECK_THROWS(euler->step(m, 0, x));  // before set_timesteps
  euler->set_timesteps(5);
  CHECK_THROWS(euler->step(m, 5, x));
  CHECK_THROWS(euler->step(Tensor::zeros({3, 2}), 0, x));
  CHECK_NOTHROW(euler->step(m, 3, x));  // single-step: any order
}
