// ditgen on a committed fixture's run config from the command line, alone
// or under mpirun, for the family CLI suites (test_wan_cli.cpp,
// test_cogvideox_cli.cpp): the run pinned to the CPU, its latents read back.
#pragma once
#include <string>

#include "../models/fixture.h"
#include "io/safetensors.h"
#include "run_command.h"
#include "temp_dir.h"

namespace ditgen::testing {

inline std::string reference_dir(const std::string& fixture) { return fixture_dir(fixture) + "/reference/"; }

// ditgen (under mpirun -np ranks when ranks > 1, one thread per rank) on
// `config` of the fixture's reference/ with model.path set to the fixture,
// writing `output` in `dir`; `env` ("NAME=value" or "") set on every rank.
inline Run run_fixture(const TempDir& dir, const std::string& fixture, const std::string& config,
                       const std::string& args, int ranks = 1, const std::string& env = "",
                       const std::string& output = "video.png") {
  std::string launcher = env.empty() ? "" : env + " ";
  if (ranks > 1)
    launcher += std::string(DITGEN_MPIEXEC) + " --oversubscribe -np " + std::to_string(ranks) +
                " -x OMP_NUM_THREADS=1 " + (env.empty() ? "" : "-x " + env.substr(0, env.find('=')) + " ");
  const std::string cmd = launcher + DITGEN_EXE + " --device cpu --threads " + (ranks > 1 ? "1" : "2") +
                          " --config " + reference_dir(fixture) + config + " --set model.path=" + fixture_dir(fixture) +
                          " --output " + dir.file(output) + " --quiet " + args;
  return run_command(cmd);
}

// The latents a run saved with --save-latents.
inline Tensor saved_latents(const std::string& file) {
  return io::SafetensorsFile::open(file)->load("latents").to(DType::kF32).clone();
}

}  // namespace ditgen::testing
