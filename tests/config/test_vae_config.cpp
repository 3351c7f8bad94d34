// The vae section (docs/vae-tiling.md): diffusers' enable_tiling names,
// "auto" by default, each bad value exit 2 naming its field; written back
// by to_json only when it is not the default. What needs the VAE (multiples
// of its spatial factor) is tested in tests/pipeline/test_vae_tiling.cpp.
#include "config_test_support.h"

namespace ditgen::test {

TEST_CASE("vae: absent is auto with the VAE's own tile sizes, and to_json leaves it out") {
  const RunConfig c = load_config(write_config(minimal_config()), {});
  CHECK(c.vae == VaeConfig{});
  CHECK(c.vae.tiling == VaeTiling::kAuto);
  CHECK_FALSE(to_json(c).contains("vae"));
}

TEST_CASE("vae: tiling and the four sizes are read, and round-trip") {
  const json vae = {{"tiling", "on"},
                    {"tile_sample_min_height", 320},
                    {"tile_sample_min_width", 384},
                    {"tile_sample_stride_height", 256},
                    {"tile_sample_stride_width", 288}};
  const RunConfig c = load_config(write_config(with(minimal_config(), "vae", vae)), {});
  CHECK(c.vae.tiling == VaeTiling::kOn);
  CHECK(c.vae.tile_sample_min_height == 320);
  CHECK(c.vae.tile_sample_min_width == 384);
  CHECK(c.vae.tile_sample_stride_height == 256);
  CHECK(c.vae.tile_sample_stride_width == 288);
  CHECK(to_json(c)["vae"] == vae);
  CHECK(load_config(write_config(to_json(c), "again.json"), {}).vae == c.vae);
  CHECK(load_config(write_config(minimal_config()), {"vae.tiling=off"}).vae.tiling == VaeTiling::kOff);
}

TEST_CASE("vae: bad values are errors naming the field") {
  const std::vector<std::pair<std::string, json>> bad = {
      {"vae.tiling", "yes"},
      {"vae.tiling", true},
      {"vae.tile_sample_min_height", 0},
      {"vae.tile_sample_min_width", -8},
      {"vae.tile_sample_stride_height", 12.5},
      {"vae.tile_sample_stride_width", "192"},
      {"vae.tile_size", 256},
  };
  for (const auto& [key, value] : bad) {
    CAPTURE(key);
    CAPTURE(value.dump());
    CHECK(contains(load_error(with(minimal_config(), key, value)), key));
  }
  // A stride over its tile leaves gaps.
  const std::string m = load_error(
      with(with(minimal_config(), "vae.tile_sample_min_width", 128), "vae.tile_sample_stride_width", 160));
  CHECK(contains(m, "vae.tile_sample_stride_width: 160 is over tile_sample_min_width 128"));
}

}  // namespace ditgen::test
