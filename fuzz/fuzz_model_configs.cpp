/* fuzz_model_configs: the input is split at NUL bytes into up to five JSON
 * files of a diffusers model directory: transformer/config.json,
 * vae/config.json, model_index.json, text_encoder/config.json and
 * scheduler/scheduler_config.json (a missing piece reuses the first one).
 * They are written into a scratch directory made once per process, then:
 * io::ModelDir::open, id2label(), part_config("transformer") ->
 * models::transformer_spec -> latent_shape(0, 0, 0, {8}) (the model's default
 * size) -> workload -> parallel::weight_elements_per_rank;
 * part_config("vae") -> models::vae_spec (the registry's VAE seam)
 * -> scale_factor(); part_config("text_encoder") -> models::T5Config::from_json
 * -> the expected tensor list and parameter count, and the same text as an
 * image_encoder/config.json -> models::ClipVisionConfig::from_json -> its
 * declared tensors, parameter count and bytes; and the scheduler text ->
 * sched::parse_scheduler_config (diffusers' -Infinity tokens) ->
 * make_scheduler for the model's own class and every name of
 * sched::scheduler_names() ("ddim", "dpmpp_2m", "unipc", "euler") ->
 * set_timesteps(25).
 *
 * Expected failures: ditgen::Error, i.e. ModelError (invalid JSON, a missing
 * or mistyped key, an unknown _class_name, inconsistent sizes) or
 * ConfigError ("not supported yet: <family>"). Anything else is a finding. */
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "io/model_dir.h"
#include "models/clip_vision.h"
#include "models/clip_vision_spec.h"
#include "models/registry.h"
#include "models/t5.h"
#include "models/t5_spec.h"
#include "parallel/plan.h"
#include "sched/scheduler.h"
#include "sched/scheduler_config.h"
#include "util/error.h"

namespace {

struct Fixture {
  ditgen::fuzz::ScratchDir dir;
  Fixture() {
    std::filesystem::create_directory(dir / "transformer");
    std::filesystem::create_directory(dir / "vae");
    std::filesystem::create_directory(dir / "text_encoder");
    std::filesystem::create_directory(dir / "scheduler");
  }
};

volatile double g_sink;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture;
  const auto parts = ditgen::fuzz::split(std::string_view(reinterpret_cast<const char*>(data), size), '\0', 5);
  ditgen::fuzz::write_bytes(fixture.dir / "transformer/config.json", parts[0]);
  ditgen::fuzz::write_bytes(fixture.dir / "vae/config.json", parts.size() > 1 ? parts[1] : parts[0]);
  ditgen::fuzz::write_bytes(fixture.dir / "model_index.json", parts.size() > 2 ? parts[2] : parts[0]);
  ditgen::fuzz::write_bytes(fixture.dir / "text_encoder/config.json", parts.size() > 3 ? parts[3] : parts[0]);
  const std::string_view scheduler_text = parts.size() > 4 ? parts[4] : parts[0];

  try {
    const ditgen::io::ModelDir model = ditgen::io::ModelDir::open(fixture.dir.path());
    ditgen::fuzz::allow_reader_errors([&] { g_sink = static_cast<double>(model.id2label().size()); });
    ditgen::fuzz::allow_reader_errors([&] {
      const std::string path = model.part_config_path("transformer");
      const auto spec = ditgen::models::transformer_spec(model.part_config("transformer"), path);
      const ditgen::Shape latent = spec->latent_shape(0, 0, 0, {8}, "");
      const ditgen::parallel::Workload work = spec->workload(latent);
      g_sink = ditgen::parallel::weight_elements_per_rank(work, 1) + static_cast<double>(work.hidden());
    });
    ditgen::fuzz::allow_reader_errors([&] {
      const std::string path = model.part_config_path("vae");
      const nlohmann::json cfg = model.part_config("vae");
      const auto vae = ditgen::models::vae_spec(cfg, path);
      g_sink = static_cast<double>(vae->spatial_factor());
    });
    ditgen::fuzz::allow_reader_errors([&] {
      const std::string path = model.part_config_path("text_encoder");
      const ditgen::models::T5Spec spec(ditgen::models::T5Config::from_json(model.part_config("text_encoder"), path));
      const auto tensors = ditgen::models::T5Encoder::layer_tensors(spec.config(), 0);
      g_sink = static_cast<double>(spec.param_count()) + static_cast<double>(tensors.size());
    });
    ditgen::fuzz::allow_reader_errors([&] {
      const std::string path = model.part_config_path("text_encoder");
      const ditgen::models::ClipVisionSpec spec(
          ditgen::models::ClipVisionConfig::from_json(model.part_config("text_encoder"), path));
      const auto tensors = ditgen::models::ClipVisionEncoder::layer_tensors(spec.config(), "", 0);
      g_sink = static_cast<double>(spec.param_count()) + spec.weight_bytes({}) + spec.encode_bytes({}, 3) +
               static_cast<double>(tensors.size());
    });
  } catch (const ditgen::Error&) {
  }
  ditgen::fuzz::allow_reader_errors([&] {
    const std::string path = "scheduler/scheduler_config.json";
    const nlohmann::json cfg = ditgen::sched::parse_scheduler_config(std::string(scheduler_text), path);
    for (const ditgen::sched::SamplerRow& row : ditgen::sched::kSamplers) {
      ditgen::fuzz::allow_reader_errors([&] {
        const auto sched = ditgen::sched::make_scheduler(row.value, cfg, path);
        sched->set_timesteps(25);
        g_sink = static_cast<double>(sched->name().size());
      });
    }
  });
  return 0;
}
