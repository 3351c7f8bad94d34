// Access to the committed parity fixtures (tests/fixtures/<name>/), made by
// scripts/fixtures/make_fixtures.py with diffusers: model directories plus
// reference/expected.safetensors holding diffusers' outputs.
#pragma once
#include <string>

#include "io/safetensors.h"

namespace ditgen::testing {

inline std::string fixture_dir(const std::string& name) {
  return std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/" + name;
}

inline Tensor fixture_tensor(const std::string& name, const std::string& file, const std::string& tensor) {
  return io::SafetensorsFile::open(fixture_dir(name) + "/reference/" + file)->load(tensor).to(DType::kF32).clone();
}

}  // namespace ditgen::testing
