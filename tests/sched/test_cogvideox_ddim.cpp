// CogVideoX's DDIM (DdimScheduler's CogVideoX form, sched/cogvideox_ddim.h) against diffusers 0.42.1's
// CogVideoXDDIMScheduler, recorded by scripts/fixtures/make_cogvideox_fixtures.py
// (tests/fixtures/cogvideox_tiny/reference/scheduler.safetensors): for
// CogVideoX-2b's scheduler config (snr_shift_scale 3) and -5b's (1.0), the
// 50 trailing timesteps exactly, and a 50-step run on a fixed v prediction
// from a fixed sample within 1e-6 of the largest value. The same config
// named as a plain DDIMScheduler is refused, not run (ditgen's plain DDIM
// takes no rescale_betas_zero_snr), -5b's shift misses -2b's run (the
// schedule matters), and the model's own scheduler (no name) is this one.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "io/model_dir.h"
#include "io/safetensors.h"
#include "sched/ddim.h"
#include "sched/scheduler.h"
#include "sched/scheduler_config.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::sched;

namespace {

const std::string kDir = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/cogvideox_tiny";

Tensor reference(const std::string& name) {
  return io::SafetensorsFile::open(kDir + "/reference/scheduler.safetensors")->load(name).to(DType::kF32).clone();
}

nlohmann::json config(double snr_shift_scale) {
  nlohmann::json c = io::read_json_file(kDir + "/scheduler/scheduler_config.json");
  c["snr_shift_scale"] = snr_shift_scale;
  return c;
}

// max |a - b| / max |b|.
double normwise(const Tensor& a, const Tensor& b) {
  double err = 0, scale = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    err = std::max(err, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return err / scale;
}

Tensor run(Scheduler& s, const std::string& tag) {
  s.set_timesteps(50);
  Tensor sample = reference(tag + "_sample");
  const Tensor prediction = reference(tag + "_prediction");
  for (int i = 0; i < 50; ++i) s.step(prediction, i, sample);
  return sample;
}

}  // namespace

TEST_CASE("CogVideoX DDIM matches diffusers' CogVideoXDDIMScheduler: CogVideoX-2b's and -5b's configs") {
  for (const auto& [tag, snr] : {std::pair{std::string("2b"), 3.0}, std::pair{std::string("5b"), 1.0}}) {
    CAPTURE(tag);
    const auto s = make_scheduler(Sampler::kModelDefault, config(snr), "scheduler_config.json");
    REQUIRE(dynamic_cast<DdimScheduler*>(s.get()) != nullptr);
    CHECK(s->name() == "ddim");
    s->set_timesteps(50);
    const Tensor ts = reference(tag + "_timesteps");
    REQUIRE(static_cast<int64_t>(s->timesteps().size()) == ts.numel());
    for (int64_t i = 0; i < ts.numel(); ++i) CHECK(s->timesteps()[static_cast<size_t>(i)] == ts[i]);
    CHECK(s->timesteps().front() == 999);  // trailing: the zero-SNR timestep first
    const double err = normwise(run(*s, tag), reference(tag + "_result"));
    CHECK(err < 1e-6);
  }
}

TEST_CASE("CogVideoX DDIM: the schedule is CogVideoX's, and named ddim keeps it") {
  const auto own = make_scheduler(Sampler::kDdim, config(3.0), "scheduler_config.json");
  REQUIRE(dynamic_cast<DdimScheduler*>(own.get()) != nullptr);
  const auto& ac = dynamic_cast<DdimScheduler&>(*own).alphas_cumprod();
  CHECK(ac.back() == 0.0f);  // zero terminal SNR
  // The same config as a plain DDIMScheduler (no SNR shift, float32 schedule)
  // is refused: rescale_betas_zero_snr is CogVideoX's here.
  nlohmann::json plain = config(3.0);
  plain["_class_name"] = "DDIMScheduler";
  CHECK_THROWS_WITH_AS(make_scheduler(Sampler::kModelDefault, plain, "scheduler_config.json"),
                       doctest::Contains("rescale_betas_zero_snr"), ConfigError);
  // The shift moves the run: 1.0 is not 3.0's result.
  const auto five = make_scheduler(Sampler::kModelDefault, config(1.0), "scheduler_config.json");
  CHECK(normwise(run(*five, "2b"), reference("2b_result")) > 1e-3);
}

TEST_CASE("CogVideoX DDIM: a config it cannot reproduce names the key") {
  nlohmann::json c = config(3.0);
  c["beta_schedule"] = "linear";
  CHECK_THROWS_WITH_AS(make_scheduler(Sampler::kModelDefault, c, "scheduler_config.json"),
                       doctest::Contains("beta_schedule in scheduler_config.json"), ConfigError);
  c = config(3.0);
  c["snr_shift_scale"] = 0.0;
  CHECK_THROWS_WITH_AS(make_scheduler(Sampler::kModelDefault, c, "scheduler_config.json"),
                       doctest::Contains("scheduler_config.json: snr_shift_scale = 0.0"), ConfigError);
}
