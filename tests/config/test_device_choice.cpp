// choose_device: every combination of --device, model.dtype and --attention
// against builds with and without CUDA and machines with and without a
// device, checked against the rules written out in the table below.
#include <doctest/doctest.h>

#include <string>

#include "config/device_choice.h"
#include "util/error.h"

namespace ditgen::test {

namespace {

struct Case {
  const char* device;
  const char* dtype;
  const char* attention;
  bool built;
  int devices;
  bool cpu_bf16;  // the CPU has bfloat16 dot products
  // Expected: exit code 0 (and the choice), else the error's exit code and
  // a phrase of its message.
  int exit_code;
  Device want_device;
  DType want_dtype;
  const char* phrase;
};

constexpr Device C = Device::kCPU, G = Device::kCUDA;
constexpr DType F32 = DType::kF32, BF16 = DType::kBF16, F16 = DType::kF16;

const Case kCases[] = {
    // auto picks CUDA only when built with it and a device is visible.
    {"auto", "auto", "auto", false, 0, false, 0, C, F32, ""},
    {"auto", "auto", "auto", true, 0, false, 0, C, F32, ""},
    {"auto", "auto", "auto", false, 4, false, 0, C, F32, ""},  // devices but a CPU-only build
    {"auto", "auto", "auto", true, 1, false, 0, G, BF16, ""},
    {"cpu", "auto", "auto", true, 8, false, 0, C, F32, ""},
    {"cuda", "auto", "auto", true, 2, false, 0, G, BF16, ""},
    // auto on a CPU with bfloat16 dot products is bfloat16.
    {"auto", "auto", "auto", false, 0, true, 0, C, BF16, ""},
    {"cpu", "auto", "auto", true, 1, true, 0, C, BF16, ""},
    {"cuda", "auto", "auto", true, 1, true, 0, G, BF16, ""},
    // model.dtype on each device.
    {"cuda", "float32", "auto", true, 1, false, 0, G, F32, ""},
    {"cuda", "bfloat16", "math", true, 1, false, 0, G, BF16, ""},
    {"cuda", "float16", "flash", true, 1, false, 0, G, F16, ""},
    {"cpu", "float32", "auto", false, 0, true, 0, C, F32, ""},
    {"cpu", "bfloat16", "auto", true, 1, true, 0, C, BF16, ""},
    {"cpu", "bfloat16", "auto", false, 0, false, 0, C, BF16, ""},  // emulated: bf16 arithmetic at float32 speed
    {"auto", "float16", "auto", false, 0, true, 0, C, F32, ""},    // no float16 arithmetic on CPUs
    {"cpu", "int8", "auto", false, 0, false, 2, C, F32, "model.dtype"},
    // --device cuda where it cannot run.
    {"cuda", "auto", "auto", false, 0, false, 2, C, F32, "built without the CUDA backend"},
    {"cuda", "auto", "auto", true, 0, false, 4, C, F32, "no CUDA device is visible"},
    // --attention forces a CUDA kernel: an error on the CPU, not ignored.
    {"cpu", "auto", "flash", true, 1, false, 2, C, F32, "--attention flash on CPU"},
    {"auto", "auto", "math", false, 0, false, 2, C, F32, "--attention math on CPU"},
    {"auto", "auto", "math", true, 1, false, 0, G, BF16, ""},
    {"auto", "auto", "fast", true, 1, false, 2, C, F32, "--attention"},
};

}  // namespace

TEST_CASE("choose_device follows the device, dtype and attention rules") {
  for (const Case& c : kCases) {
    CAPTURE(c.device);
    CAPTURE(c.dtype);
    CAPTURE(c.attention);
    CAPTURE(c.built);
    CAPTURE(c.devices);
    CAPTURE(c.cpu_bf16);
    if (c.exit_code == 0) {
      const DeviceChoice d = choose_device(c.device, c.dtype, c.attention, c.built, c.devices, c.cpu_bf16, "run.json");
      CHECK(d.device == c.want_device);
      CHECK(d.dtype == c.want_dtype);
      CHECK(d.attention == c.attention);
      continue;
    }
    try {
      choose_device(c.device, c.dtype, c.attention, c.built, c.devices, c.cpu_bf16, "run.json");
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.exit_code() == c.exit_code);
      CHECK(std::string(e.what()).find(c.phrase) != std::string::npos);
    }
  }
}

TEST_CASE("a bad model.dtype names the config file and field") {
  try {
    choose_device("cpu", "float8", "auto", false, 0, true, "configs/run.json");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("configs/run.json: model.dtype") != std::string::npos);
  }
}

}  // namespace ditgen::test
