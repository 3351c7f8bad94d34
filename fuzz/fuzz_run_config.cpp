/* fuzz_run_config: the input up to its first NUL byte is a run config file
 * (docs/design.md §2); what follows, split on '\n', is the list of --set
 * overrides. load_config(file, overrides); when it succeeds, to_json of the
 * result is written to a second file and loaded again without overrides: that
 * must succeed and give the same settings (model, generate, parallel, pab,
 * cache, output), or the harness aborts (a finding: to_json must write a config
 * that regenerates the run, as the PNG metadata relies on).
 *
 * Expected failures of the first load: ditgen::Error (ConfigError naming the
 * file and dotted path: invalid JSON, duplicate or unknown keys, a bad --set,
 * a wrong type or range, a cross-field rule). Anything else is a finding. */
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "fuzz_support.h"
#include "util/error.h"

namespace {

struct Fixture {
  ditgen::fuzz::ScratchDir dir;
};

bool same_settings(const ditgen::RunConfig& a, const ditgen::RunConfig& b) {
  return a.model == b.model && a.generate == b.generate && a.parallel == b.parallel && a.pab == b.pab &&
         a.cache == b.cache && a.output == b.output;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto parts = ditgen::fuzz::split(input, '\0', 2);
  std::vector<std::string> overrides;
  if (parts.size() > 1)
    for (std::string_view line : ditgen::fuzz::split(parts[1], '\n', SIZE_MAX)) overrides.emplace_back(line);

  const std::string path = fixture.dir / "run.json";
  ditgen::fuzz::write_bytes(path, parts[0]);
  ditgen::RunConfig config;
  try {
    config = ditgen::load_config(path, overrides);
  } catch (const ditgen::Error&) {
    return 0;
  }

  const std::string dumped = ditgen::to_json(config).dump(2);
  const std::string round_trip_path = fixture.dir / "round_trip.json";
  ditgen::fuzz::write_bytes(round_trip_path, dumped);
  try {
    const ditgen::RunConfig again = ditgen::load_config(round_trip_path, {});
    if (!same_settings(config, again))
      ditgen::fuzz::harness_failure("to_json round trip changed the settings:\n" + dumped + "\nreloaded as\n" +
                                    ditgen::to_json(again).dump(2));
  } catch (const ditgen::Error& e) {
    ditgen::fuzz::harness_failure(std::string("to_json output does not load again: ") + e.what() + "\n" + dumped);
  }
  return 0;
}
