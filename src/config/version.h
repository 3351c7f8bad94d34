// The program version printed by `ditgen --version` and written into PNG
// metadata. Kept in step with project(VERSION) in CMakeLists.txt by hand: a
// constexpr string needs no generated header, so every layer can include it.
#pragma once

namespace ditgen {

inline constexpr const char* kDitgenVersion = "0.1.0";

}  // namespace ditgen
