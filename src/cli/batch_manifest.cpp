#include "cli/batch_manifest.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>

#include "util/atomic_file.h"
#include "util/error.h"

namespace ditgen::cli {
namespace {

// Whether every file a manifest line names exists.
bool files_exist(const nlohmann::json& line) {
  const auto it = line.find("files");
  if (it == line.end() || !it->is_array() || it->empty()) return false;
  std::error_code ec;
  for (const auto& f : *it)
    if (!f.is_string() || !std::filesystem::is_regular_file(f.get<std::string>(), ec)) return false;
  return true;
}

}  // namespace

Manifest::Manifest(std::string path, bool resume) : path_(std::move(path)) {
  if (!resume) return;
  std::ifstream in(path_);
  if (!in) return;  // no manifest yet
  // The last line of each output whose files are all there; lines that do
  // not parse (a file edited by hand) are dropped.
  std::map<int, std::string> kept;
  std::string text;
  while (std::getline(in, text)) {
    const nlohmann::json line = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!line.is_object() || !line.contains("index") || !line["index"].is_number_integer()) continue;
    if (files_exist(line)) kept[line["index"].get<int>()] = line.dump();
  }
  std::string tidy;
  for (const auto& [index, line] : kept) {
    tidy += line + "\n";
    indices_.insert(index);
  }
  write_file_atomic(path_, tidy.data(), tidy.size());
  started_ = true;
}

void Manifest::append(const nlohmann::json& line) {
  const std::string text = line.dump() + "\n";
  if (!started_) {  // this run's first line replaces an older run's manifest
    write_file_atomic(path_, text.data(), text.size());
    started_ = true;
  } else {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) throw RuntimeFailure(path_ + ": cannot open the manifest: " + errno_text(errno));
    const ssize_t wrote = ::write(fd, text.data(), text.size());
    const int err = errno;
    ::close(fd);
    if (wrote != static_cast<ssize_t>(text.size()))
      throw RuntimeFailure(path_ + ": cannot append to the manifest: " + errno_text(wrote < 0 ? err : ENOSPC));
  }
  indices_.insert(line.at("index").get<int>());
}

}  // namespace ditgen::cli
