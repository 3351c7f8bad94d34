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
  DTypeChoice dtype;
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
constexpr DTypeChoice A = DTypeChoice::kAuto, F32c = DTypeChoice::kFloat32, BF16c = DTypeChoice::kBFloat16,
                      F16c = DTypeChoice::kFloat16;

const Case kCases[] = {
    // auto picks CUDA only when built with it and a device is visible.
    {"auto", A, "auto", false, 0, false, 0, C, F32, ""},
    {"auto", A, "auto", true, 0, false, 0, C, F32, ""},
    {"auto", A, "auto", false, 4, false, 0, C, F32, ""},  // devices but a CPU-only build
    {"auto", A, "auto", true, 1, false, 0, G, BF16, ""},
    {"cpu", A, "auto", true, 8, false, 0, C, F32, ""},
    {"cuda", A, "auto", true, 2, false, 0, G, BF16, ""},
    // auto on a CPU with bfloat16 dot products is bfloat16.
    {"auto", A, "auto", false, 0, true, 0, C, BF16, ""},
    {"cpu", A, "auto", true, 1, true, 0, C, BF16, ""},
    {"cuda", A, "auto", true, 1, true, 0, G, BF16, ""},
    // model.dtype on each device.
    {"cuda", F32c, "auto", true, 1, false, 0, G, F32, ""},
    {"cuda", BF16c, "math", true, 1, false, 0, G, BF16, ""},
    {"cuda", F16c, "flash", true, 1, false, 0, G, F16, ""},
    {"cpu", F32c, "auto", false, 0, true, 0, C, F32, ""},
    {"cpu", BF16c, "auto", true, 1, true, 0, C, BF16, ""},
    {"cpu", BF16c, "auto", false, 0, false, 0, C, BF16, ""},  // emulated: bf16 arithmetic at float32 speed
    {"auto", F16c, "auto", false, 0, true, 0, C, F32, ""},    // no float16 arithmetic on CPUs
    // --device cuda where it cannot run.
    {"cuda", A, "auto", false, 0, false, 2, C, F32, "built without the CUDA backend"},
    {"cuda", A, "auto", true, 0, false, 4, C, F32, "no CUDA device is visible"},
    // --attention forces a CUDA kernel: an error on the CPU, not ignored.
    {"cpu", A, "flash", true, 1, false, 2, C, F32, "--attention flash on CPU"},
    {"auto", A, "math", false, 0, false, 2, C, F32, "--attention math on CPU"},
    {"auto", A, "math", true, 1, false, 0, G, BF16, ""},
    {"auto", A, "fast", true, 1, false, 2, C, F32, "--attention"},
};

}  // namespace

TEST_CASE("choose_device follows the device, dtype and attention rules") {
  for (const Case& c : kCases) {
    CAPTURE(c.device);
    CAPTURE(name_of(c.dtype));
    CAPTURE(c.attention);
    CAPTURE(c.built);
    CAPTURE(c.devices);
    CAPTURE(c.cpu_bf16);
    if (c.exit_code == 0) {
      const DeviceChoice d = choose_device(c.device, c.dtype, c.attention, c.built, c.devices, c.cpu_bf16);
      CHECK(d.device == c.want_device);
      CHECK(d.dtype == c.want_dtype);
      CHECK(d.attention == c.attention);
      continue;
    }
    try {
      choose_device(c.device, c.dtype, c.attention, c.built, c.devices, c.cpu_bf16);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.exit_code() == c.exit_code);
      CHECK(std::string(e.what()).find(c.phrase) != std::string::npos);
    }
  }
}

// A model.dtype outside auto | float32 | bfloat16 | float16 never reaches
// choose_device: the config refuses it with the file and field
// (tests/config/test_validation.cpp).

}  // namespace ditgen::test
