// The documentation's files, for the docs suite's tests: README.md and
// every docs/*.md of a repository, and a file's text.
#pragma once
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ditgen::testing {

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// README.md and every docs/*.md of the repository at `root`, the pages sorted.
inline std::vector<std::filesystem::path> documentation(const std::filesystem::path& root) {
  std::vector<std::filesystem::path> files{root / "README.md"};
  if (std::filesystem::is_directory(root / "docs"))
    for (const auto& entry : std::filesystem::directory_iterator(root / "docs"))
      if (entry.is_regular_file() && entry.path().extension() == ".md") files.push_back(entry.path());
  std::sort(files.begin() + 1, files.end());
  return files;
}

}  // namespace ditgen::testing
