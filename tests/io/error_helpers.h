// Helpers shared by the io tests: the message of the ModelError (or
// ConfigError) a call throws, and substring checks on it.
#pragma once
#include <exception>
#include <functional>
#include <string>

#include "util/error.h"

namespace ditgen::testing {

// The message of the error E that `f` throws, or a marker if it throws none
// or another kind.
template <class E>
std::string error_of(const std::function<void()>& f, const char* kind) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a ") + kind + ": " + e.what() + ">";
  }
  return "<no exception>";
}

inline std::string model_error_of(const std::function<void()>& f) { return error_of<ModelError>(f, "ModelError"); }
inline std::string config_error_of(const std::function<void()>& f) { return error_of<ConfigError>(f, "ConfigError"); }

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace ditgen::testing
