// Helpers shared by the io tests: the message of the ModelError a call
// throws, and substring checks on it.
#pragma once
#include <exception>
#include <functional>
#include <string>

#include "util/error.h"

namespace ditgen::testing {

// The message of the ModelError `f` throws, or a marker if it throws none.
inline std::string model_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ModelError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a ModelError: ") + e.what() + ">";
  }
  return "<no exception>";
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace ditgen::testing
