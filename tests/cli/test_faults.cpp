// The faults a long run meets outside ditgen's control (issue 20), each
// caused for real in a child process: an output file system that fills up
// (RLIMIT_FSIZE), an allocation that fails (RLIMIT_AS), and a model file
// truncated while its weights are mapped (SIGBUS). Each must end with the
// right exit code and a message naming the file, tensor or stage, and leave
// no partial or temporary file behind. (A rank killed mid-run:
// test_video_layouts.cpp; SIGINT / SIGTERM during a PNG or an MP4 write:
// test_cli.cpp, test_mp4_cli.cpp.) Test names start with "fault:" so the
// sanitizer build can leave them out: ASan reserves terabytes of address
// space and cannot run under an RLIMIT_AS limit.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "run_command.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

const std::string kSource = DITGEN_SOURCE_DIR;

// Names of the files in `dir`, for messages.
std::string listing(const fs::path& dir) {
  std::string s;
  for (const auto& e : fs::directory_iterator(dir)) s += e.path().filename().string() + " ";
  return s;
}

// A run config of the shipped class-conditional shapes model (samples/),
// written into `dir`: eight labels, 25 DDIM steps, the contact sheet on.
std::string shapes_config(const ditgen::testing::TempDir& dir) {
  return dir.write("run.json", R"({
  "model": { "path": ")" + kSource + R"(/samples/dit-shapes", "dtype": "float32" },
  "generate": {
    "class_labels": ["red circle", "red square", "yellow triangle", "green star",
                     "cyan cross", "blue circle", "magenta square", "blue star"],
    "seed": 0, "steps": 25, "guidance_scale": 4.0, "scheduler": "ddim", "batch_size": 8
  },
  "output": { "path": "out.png", "format": "png", "grid": true }
})");
}

bool has_temp_file(const fs::path& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("fault: a full output file system (RLIMIT_FSIZE) is exit 4 naming the file, no partial file left") {
  ditgen::testing::TempDir dir("fault_fsize");
  // 20 KiB per file: the eight small PNGs fit, the contact sheet does not.
  const std::string cmd = "ulimit -f 20 && " + std::string(DITGEN_EXE) + " --device cpu --config " +
                          shapes_config(dir) + " --output " + dir.file("out.png") + " --quiet";
  const ditgen::testing::Run r = ditgen::testing::run_command("sh -c '" + cmd + "'");
  MESSAGE(r.output);
  CHECK(r.code == 4);
  CHECK(r.output.find(dir.file("out_grid.png") + ": write failed: File too large") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.file("out_grid.png")));
  CHECK_MESSAGE(!has_temp_file(dir.path), listing(dir.path));
  CHECK(fs::exists(dir.file("out_0007.png")));  // what landed before is whole
}

TEST_CASE("fault: out of memory (RLIMIT_AS) is exit 4 naming the tensor and the stage, nothing written") {
  ditgen::testing::TempDir dir("fault_oom");
  // The address space ditgen maps once loaded depends on the build (a CUDA
  // build maps cuBLAS), so it is measured first: a small run of the same
  // model pauses after loading and its VmSize is read. The limit is that
  // plus 256 MiB: enough to load and start, far too little to decode
  // 1600x1600 frames (each activation of the tiny VAE is 8 x 1600 x 1600
  // floats, 78 MiB, several live at once).
  const std::string fixture = kSource + "/tests/fixtures/latte_tiny";
  const std::string run = std::string(DITGEN_EXE) + " --device cpu --threads 1 --config " + fixture +
                          "/reference/run_ddim.json --set model.path=" + fixture + " --quiet --steps 1 --frames 4 ";
  const std::string log = dir.file("probe.txt");
  const std::string script =
      "DITGEN_TEST_PAUSE_AFTER_LOAD=2 " + run + "--output " + dir.file("probe/v.png") + " > " + log +
      " 2>&1 & pid=$!; for i in $(seq 1200); do grep -q pausing " + log +
      " && break; sleep 0.1; done; vm=$(awk \"/VmSize/ {print \\$2}\" /proc/$pid/status); wait $pid; " +
      "echo loaded: $vm kB; ulimit -v $((vm + 262144)) && " + run + "--output " + dir.file("out/v.png") +
      " --set generate.height=1600 --set generate.width=1600";
  const ditgen::testing::Run r = ditgen::testing::run_command("sh -c '" + script + "'");
  MESSAGE(r.output);
  CHECK(r.code == 4);
  // Where the limit bites depends on the build: a tensor ("cannot allocate a
  // cpu float32 tensor [1, 8, 1600, 1600] ...") or the convolution's copy of
  // one in oneDNN's layout ("cannot allocate conv2d's copy of the input [...]").
  CHECK(r.output.find("out of memory: cannot allocate ") != std::string::npos);
  CHECK(r.output.find(" [") != std::string::npos);
  CHECK(r.output.find(" during ") != std::string::npos);
  const bool nothing_written = !fs::exists(dir.path / "out") || fs::is_empty(dir.path / "out");
  CHECK_MESSAGE(nothing_written, "left behind");
}

TEST_CASE("fault: a model file truncated while mapped (SIGBUS) is exit 3 naming the file and the stage") {
  ditgen::testing::TempDir dir("fault_sigbus");
  const fs::path model = dir.path / "model";
  fs::copy(kSource + "/samples/dit-shapes", model, fs::copy_options::recursive);
  const fs::path weights = model / "transformer" / "diffusion_pytorch_model.safetensors";
  fs::create_directories(dir.path / "out");
  // ditgen pauses once its weights are loaded (their float32 GEMM weights
  // are read in place from the mapping); the file is truncated meanwhile,
  // so the first forward reads vanished pages.
  const std::string log = dir.file("log.txt");
  const std::string script =
      "DITGEN_TEST_PAUSE_AFTER_LOAD=3 " + std::string(DITGEN_EXE) + " --device cpu --threads 1 --config " +
      shapes_config(dir) + " --set model.path=" + model.string() + " --output " +
      (dir.path / "out" / "img.png").string() + " > " + log + " 2>&1 & pid=$!; " +
      "for i in $(seq 1200); do grep -q pausing " + log + " && break; sleep 0.1; done; truncate -s 1000 " +
      weights.string() + "; wait $pid; rc=$?; cat " + log + "; exit $rc";
  const ditgen::testing::Run r = ditgen::testing::run_command("sh -c '" + script + "'");
  MESSAGE(r.output);
  CHECK(r.code == 3);
  CHECK(r.output.find(weights.string() + ": the file was truncated or changed while ditgen was reading it "
                                         "(SIGBUS on its mapping) during denoise") != std::string::npos);
  CHECK_MESSAGE(fs::is_empty(dir.path / "out"), listing(dir.path / "out"));
}
