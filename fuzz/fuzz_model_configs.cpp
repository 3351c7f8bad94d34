/* fuzz_model_configs: the input is split at NUL bytes into up to three JSON
 * files of a diffusers model directory: transformer/config.json,
 * vae/config.json and model_index.json (a missing piece reuses the first
 * one). They are written into a scratch directory made once per process,
 * then: io::ModelDir::open, id2label(), part_config("transformer") ->
 * models::transformer_spec -> latent_shape(0, 0, 0, 8) (the model's default
 * size) -> workload -> parallel::weight_elements_per_rank; and
 * part_config("vae") -> models::check_vae_family + models::VaeConfig::from_json
 * -> scale_factor().
 *
 * Expected failures: ditgen::Error, i.e. ModelError (invalid JSON, a missing
 * or mistyped key, an unknown _class_name, inconsistent sizes) or
 * ConfigError ("not supported yet: <family>"). Anything else is a finding. */
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "io/model_dir.h"
#include "models/registry.h"
#include "models/vae.h"
#include "parallel/plan.h"
#include "util/error.h"

namespace {

struct Fixture {
  ditgen::fuzz::ScratchDir dir;
  Fixture() {
    std::filesystem::create_directory(dir / "transformer");
    std::filesystem::create_directory(dir / "vae");
  }
};

volatile double g_sink;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture;
  const auto parts = ditgen::fuzz::split(std::string_view(reinterpret_cast<const char*>(data), size), '\0', 3);
  ditgen::fuzz::write_bytes(fixture.dir / "transformer/config.json", parts[0]);
  ditgen::fuzz::write_bytes(fixture.dir / "vae/config.json", parts.size() > 1 ? parts[1] : parts[0]);
  ditgen::fuzz::write_bytes(fixture.dir / "model_index.json", parts.size() > 2 ? parts[2] : parts[0]);

  try {
    const ditgen::io::ModelDir model = ditgen::io::ModelDir::open(fixture.dir.path());
    ditgen::fuzz::allow_reader_errors([&] { g_sink = static_cast<double>(model.id2label().size()); });
    ditgen::fuzz::allow_reader_errors([&] {
      const std::string path = model.part_config_path("transformer");
      const auto spec = ditgen::models::transformer_spec(model.part_config("transformer"), path);
      const ditgen::Shape latent = spec->latent_shape(0, 0, 0, 8, "");
      const ditgen::parallel::Workload work = spec->workload(latent);
      g_sink = ditgen::parallel::weight_elements_per_rank(work, 1) + static_cast<double>(work.hidden());
    });
    ditgen::fuzz::allow_reader_errors([&] {
      const std::string path = model.part_config_path("vae");
      const nlohmann::json cfg = model.part_config("vae");
      ditgen::models::check_vae_family(cfg, path);
      const ditgen::models::VaeConfig vae = ditgen::models::VaeConfig::from_json(cfg, path);
      g_sink = static_cast<double>(vae.scale_factor());
    });
  } catch (const ditgen::Error&) {
  }
  return 0;
}
