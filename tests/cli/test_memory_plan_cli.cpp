// `ditgen plan`'s peak memory per rank against what a run of the same config
// measures (each rank's VmHWM, which the run reports on stderr), within
// 15%, for the shipped image default (configs/shapes-image.json), the video
// default (configs/default.json) and the Wan fixture, in one process and as
// two ranks (sp 2) under mpirun; the runs take 2 steps (the peak is one
// step's, the first step's already). Also: under mpirun only rank 0
// decodes, and its decode needs no more than one process's; a model not
// downloaded yet plans from its published config; the time estimate, and
// --no-calibrate without it.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../models/fixture.h"
#include "fixture_runs.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;

namespace {

// "211.00 MiB" / "1.20 GiB" at `at` in `text` -> bytes.
double bytes_at(const std::string& text, size_t at) {
  size_t used = 0;
  const double value = std::stod(text.substr(at), &used);
  const std::string unit = text.substr(at + used + 1, 3);
  const double scale = unit == "GiB" ? 1024.0 * 1024 * 1024 : unit == "MiB" ? 1024.0 * 1024 : unit == "KiB" ? 1024.0 : 1;
  return value * scale;
}

// plan's "peak memory per rank: rank 0 X (stage)[, rank 1 Y (stage)]" -> {X, Y}.
std::vector<double> planned_peaks(const std::string& out) {
  const std::string head = "peak memory per rank: rank 0 ";
  const size_t at = out.find(head);
  REQUIRE_MESSAGE(at != std::string::npos, out);
  std::vector<double> peaks = {bytes_at(out, at + head.size())};
  const size_t line_end = out.find('\n', at);
  const size_t other = out.find(", rank 1 ", at);
  if (other < line_end) peaks.push_back(bytes_at(out, other + 9));
  return peaks;
}

// The run's "ditgen: peak memory (resident): rank 0 X MiB (estimated ...), rank 1 ..." -> per rank.
std::vector<double> measured_peaks(const std::string& out) {
  const size_t at = out.find("ditgen: peak memory (resident):");
  REQUIRE_MESSAGE(at != std::string::npos, out);
  std::vector<double> peaks;
  for (int r = 0;; ++r) {
    const std::string key = "rank " + std::to_string(r) + " ";
    const size_t k = out.find(key, at);
    if (k == std::string::npos || k > out.find('\n', at)) break;
    peaks.push_back(bytes_at(out, k + key.size()));
  }
  return peaks;
}

struct Case {
  std::string name, config;  // the config and what it needs set to run here
};

std::vector<Case> cases() {
  const std::string src = DITGEN_SOURCE_DIR;
  const std::string wan = testing::reference_dir("wan_tiny") + "run_unipc.json --set model.path=" +
                          testing::fixture_dir("wan_tiny");
  return {{"image default", src + "/configs/shapes-image.json"},
          {"video default", src + "/configs/default.json"},
          {"Wan fixture", wan}};
}

}  // namespace

TEST_CASE("memory plan CLI: plan's peak per rank is within 15% of a run's, one process and two ranks") {
  testing::TempDir tmp("memory_plan");
  for (const Case& c : cases())
    for (const int ranks : {1, 2}) {
      CAPTURE(c.name);
      CAPTURE(ranks);
      const std::string threads = ranks > 1 ? "1" : "2";
      const std::string layout = ranks > 1 ? " --set parallel.sp=2" : "";
      const testing::Run plan = testing::run_command(std::string(DITGEN_EXE) + " plan --no-calibrate --device cpu "
                                                     "--threads " + threads + " --config " + c.config + layout);
      REQUIRE_MESSAGE(plan.code == 0, plan.output);
      const std::vector<double> planned = planned_peaks(plan.output);
      REQUIRE(planned.size() == static_cast<size_t>(ranks));
      const std::string launcher = ranks > 1 ? std::string(DITGEN_MPIEXEC) + " --oversubscribe -np 2 -x "
                                                                             "OMP_NUM_THREADS=1 "
                                             : "";
      const std::string out = tmp.file(c.name.substr(0, c.name.find(' ')) + std::to_string(ranks));
      const testing::Run run = testing::run_command(
          launcher + DITGEN_EXE + " --device cpu --threads " + threads + " --config " + c.config + layout +
          " --set generate.steps=2 --output " + out + (c.name == "video default" ? ".mp4" : ".png"));
      REQUIRE_MESSAGE(run.code == 0, run.output);
      const std::vector<double> measured = measured_peaks(run.output);
      REQUIRE(measured.size() == static_cast<size_t>(ranks));
      for (int r = 0; r < ranks; ++r) {
        const double rel = std::abs(planned[static_cast<size_t>(r)] - measured[static_cast<size_t>(r)]) /
                           measured[static_cast<size_t>(r)];
        MESSAGE(c.name << ", " << ranks << " rank(s), rank " << r << ": planned "
                       << planned[static_cast<size_t>(r)] / (1 << 20) << " MiB, measured "
                       << measured[static_cast<size_t>(r)] / (1 << 20) << " MiB (" << 100 * rel << "%)");
        CHECK(rel <= 0.15);
      }
    }
}

TEST_CASE("memory plan CLI: under mpirun only rank 0 decodes, no more than one process does") {
  const std::string wan = testing::reference_dir("wan_tiny") + "run_unipc.json --set model.path=" +
                          testing::fixture_dir("wan_tiny");
  auto decode_of = [](const std::string& out) {
    const size_t at = out.find("  VAE decode ");
    REQUIRE_MESSAGE(at != std::string::npos, out);
    return bytes_at(out, out.find_first_not_of(' ', at + 13));
  };
  const testing::Run one = testing::run_command(std::string(DITGEN_EXE) + " plan --no-calibrate --config " + wan);
  const testing::Run two =
      testing::run_command(std::string(DITGEN_EXE) + " plan --no-calibrate --config " + wan + " --set parallel.sp=2");
  REQUIRE_MESSAGE(one.code == 0, one.output);
  REQUIRE_MESSAGE(two.code == 0, two.output);
  CHECK(two.output.find("rank 0 (decodes)") != std::string::npos);
  CHECK(two.output.find("only rank 0 decodes (it writes the outputs)") != std::string::npos);
  // The other rank's column has no decode.
  const size_t row = two.output.find("  VAE decode ");
  CHECK(two.output.substr(row, two.output.find('\n', row) - row).find(" -") != std::string::npos);
  CHECK(decode_of(two.output) <= decode_of(one.output));
}

TEST_CASE("memory plan CLI: a model not downloaded yet plans from its published config, and the time estimate") {
  testing::TempDir tmp("memory_plan_published");
  const std::string config = std::string(DITGEN_SOURCE_DIR) + "/configs/wan2.1-t2v-1.3b.json";
  const std::string missing = tmp.file("models/Wan2.1-T2V-1.3B-Diffusers");
  const testing::Run plan = testing::run_command(std::string(DITGEN_EXE) + " plan --device cpu --config " + config +
                                                 " --set model.path=" + missing);
  REQUIRE_MESSAGE(plan.code == 0, plan.output);
  CHECK(plan.output.find("model.path " + missing + " does not exist yet: planning from the published config ") !=
        std::string::npos);
  CHECK(plan.output.find("configs/models/Wan2.1-T2V-1.3B-Diffusers") != std::string::npos);
  CHECK(plan.output.find("peak memory per rank: rank 0 ") != std::string::npos);
  CHECK(plan.output.find("time (estimate): ") != std::string::npos);
  CHECK(plan.output.find(" per step (") != std::string::npos);
  const testing::Run quick = testing::run_command(std::string(DITGEN_EXE) + " plan --no-calibrate --config " + config +
                                                  " --set model.path=" + missing);
  REQUIRE_MESSAGE(quick.code == 0, quick.output);
  CHECK(quick.output.find("time (estimate)") == std::string::npos);
  // No published config of that name: still the missing-model error (exit 3).
  const testing::Run none = testing::run_command(std::string(DITGEN_EXE) + " plan --config " + config +
                                                 " --set model.path=" + tmp.file("no-such-model") +
                                                 " --set model.source=someone/no-such-model");
  CHECK(none.code == 3);
}
