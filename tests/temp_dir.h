// A fresh scratch directory under the system temp dir for one test, removed
// when the test ends (shared by every test area).
#pragma once
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace ditgen::testing {

struct TempDir {
  std::filesystem::path path;

  explicit TempDir(const std::string& prefix = "ditgen_test") {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           (prefix + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path / name).string(); }
  // Writes `text` to path/name (creating directories) and returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    std::filesystem::create_directories((path / name).parent_path());
    std::ofstream(path / name, std::ios::binary) << text;
    return file(name);
  }
};

}  // namespace ditgen::testing
