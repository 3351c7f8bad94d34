// DDIM and DPM-Solver++(2M) against numbers recorded from diffusers by
// scripts/fixtures/make_sched_fixtures.py (tests/fixtures/sched/*.json): timesteps and
// alphas_cumprod exactly, DPM sigmas within 1 ulp, sampler trajectories
// within 1e-5 relative (normwise: max |error| / max |reference| per vector).
// The remaining difference comes from torch's CPU sqrt (MKL), off by one ulp
// for a few inputs; with torch's sqrt values the arithmetic is bit-exact.
// The recorded run uses model_output[j] = 0.5 * sample[j] + f32(0.1*i + 0.01*j)
// at step i, a deterministic stand-in for a model.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sched/ddim.h"
#include "sched/dpmpp_2m.h"
#include "sched/scheduler.h"
#include "sched/scheduler_config.h"

using namespace ditgen;
using namespace ditgen::sched;

namespace {

const char* const kFixtures[] = {"dit",
                                 "scaled_linear_trailing",
                                 "scaled_linear_leading",
                                 "scaled_linear_linspace",
                                 "v_prediction_clip",
                                 "cosine_sample",
                                 "trained_betas",
                                 "dpm_heun_sigma_min",
                                 "dpm_euler_at_final_leading"};

std::string fixture_path(const std::string& name) {
  return std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/sched/" + name + ".json";
}

std::vector<float> floats(const nlohmann::json& j) {
  std::vector<float> v;
  for (const auto& x : j) v.push_back(static_cast<float>(x.get<double>()));
  return v;
}

void fake_model(const Tensor& sample, int step, int64_t per_image, Tensor& out) {
  for (int64_t k = 0; k < sample.numel(); ++k) {
    const int64_t j = k % per_image;
    out[k] = 0.5f * sample[k] + static_cast<float>(0.1 * step + 0.01 * static_cast<double>(j));
  }
}

// Worst errors seen, printed once at the end for the record.
struct Worst {
  double normwise = 0;  // max |a - b| / max |b| over a vector
  double elementwise = 0;  // max |a - b| / |b|
  std::string where;
} worst;

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& where) {
  REQUIRE(got.size() == want.size());
  double scale = 0;
  for (float w : want) scale = std::max(scale, std::fabs(double(w)));
  for (size_t k = 0; k < got.size(); ++k) {
    const double err = std::fabs(double(got[k]) - double(want[k]));
    const double normwise = err / std::max(scale, 1e-30);
    if (normwise > worst.normwise) {
      worst.normwise = normwise;
      worst.where = where;
    }
    if (std::fabs(double(want[k])) > 1e-3 * scale) {
      worst.elementwise = std::max(worst.elementwise, err / std::fabs(double(want[k])));
    }
    INFO(where << " element " << k << ": got " << got[k] << " want " << want[k]);
    CHECK(normwise <= 1e-5);
  }
}

void check_fixture(const std::string& name, const std::string& kind) {
  const std::string path = fixture_path(name);
  const nlohmann::json fx = load_scheduler_config(path);
  const nlohmann::json& ref = fx.at(kind);
  auto sched = make_scheduler(*sampler_named(kind), fx.at("scheduler_config"), path);
  REQUIRE(sched->name() == kind);

  const std::vector<float>* ac = nullptr;
  if (auto* d = dynamic_cast<DdimScheduler*>(sched.get())) ac = &d->alphas_cumprod();
  if (auto* d = dynamic_cast<DpmSolverPP2MScheduler*>(sched.get())) ac = &d->alphas_cumprod();
  REQUIRE(ac);
  if (ref.contains("alphas_cumprod")) {  // every entry, bit for bit
    const auto want = floats(ref["alphas_cumprod"]);
    REQUIRE(ac->size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO(name << " alphas_cumprod[" << i << "]");
      CHECK((*ac)[i] == want[i]);
    }
  } else {
    for (const auto& [idx, v] : ref["alphas_cumprod_at"].items()) {
      INFO(name << " alphas_cumprod[" << idx << "]");
      CHECK((*ac)[std::stoul(idx)] == static_cast<float>(v.get<double>()));
    }
  }

  const std::vector<float> sample0 = floats(fx["sample0"]);
  const int64_t per_image = static_cast<int64_t>(sample0.size());
  for (const auto& [count, run] : ref["runs"].items()) {
    const std::string where = name + " " + kind + " " + count + " steps";
    CAPTURE(where);
    sched->set_timesteps(std::stoi(count));
    // The recorded integers, exactly (timesteps() holds them as doubles).
    const auto want_t = run["timesteps"].get<std::vector<int64_t>>();
    CHECK(sched->timesteps() == std::vector<double>(want_t.begin(), want_t.end()));
    if (auto* d = dynamic_cast<DpmSolverPP2MScheduler*>(sched.get())) {
      const auto want = floats(run["sigmas"]);
      REQUIRE(d->sigmas().size() == want.size());
      // Within 1 ulp, not bit for bit: torch's CPU sqrt (MKL vsSqrt) is not
      // always correctly rounded; 6 of DiT-like tables' 1000 values differ.
      for (size_t i = 0; i < want.size(); ++i) {
        INFO("sigma " << i);
        CHECK(std::fabs(d->sigmas()[i] - want[i]) <= std::fabs(want[i]) * 1.2e-7f);
      }
    }
    // Two identical images in one batch: the step is elementwise, so both must
    // follow the single-image reference.
    std::vector<float> both(sample0);
    both.insert(both.end(), sample0.begin(), sample0.end());
    Tensor sample = Tensor::from_vector({2, per_image}, both);
    Tensor out = Tensor::empty({2, per_image});
    const int steps = static_cast<int>(sched->timesteps().size());
    for (int i = 0; i < steps; ++i) {
      fake_model(sample, i, per_image, out);
      sched->step(out, i, sample);
      if (run.contains("trajectory")) {
        const auto want = floats(run["trajectory"][i]);
        const auto got = sample.to_vector();
        expect_close({got.begin(), got.begin() + per_image}, want,
                     where + " step " + std::to_string(i));
      }
    }
    const auto got = sample.to_vector();
    const auto want = floats(run["final"]);
    expect_close({got.begin(), got.begin() + per_image}, want, where + " final");
    expect_close({got.begin() + per_image, got.end()}, want, where + " final, image 1");
  }
}

}  // namespace

TEST_CASE("DDIM matches diffusers' DDIMScheduler") {
  for (const char* name : kFixtures) check_fixture(name, "ddim");
}

TEST_CASE("DPM-Solver++(2M) matches diffusers' DPMSolverMultistepScheduler.from_config") {
  for (const char* name : kFixtures) check_fixture(name, "dpmpp_2m");
}

TEST_CASE("reference match summary") {
  // Runs after the two cases above (doctest keeps file order).
  std::printf("sched reference: worst normwise rel err %.3g (%s), worst elementwise rel err %.3g\n",
              worst.normwise, worst.where.c_str(), worst.elementwise);
  CHECK(worst.normwise <= 1e-5);
}

TEST_CASE("DiT's own scheduler: DDIM, 50 leading steps 980..0, DPM linspace 999..20") {
  const nlohmann::json dit = load_scheduler_config(fixture_path("dit")).at("scheduler_config");
  auto own = make_scheduler(Sampler::kModelDefault, dit, "dit/scheduler_config.json");
  CHECK(own->name() == "ddim");
  own->set_timesteps(50);
  CHECK(own->timesteps().front() == 980);
  CHECK(own->timesteps().back() == 0);
  auto dpm = make_scheduler(Sampler::kDpmpp2m, dit, "dit/scheduler_config.json");
  dpm->set_timesteps(50);
  CHECK(dpm->timesteps().front() == 999);
  CHECK(dpm->timesteps()[25] == 500);
  CHECK(dpm->timesteps().back() == 20);
}
