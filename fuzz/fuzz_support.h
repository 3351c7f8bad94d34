// Helpers shared by the fuzz targets: the input as a file without touching
// the disk (a memfd seen as /proc/self/fd/N), a scratch directory created once
// per process and removed at exit, and writing bytes to a path.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace ditgen::fuzz {

// Runs f; a ditgen::Error (a bad file or config named and rejected: exit 2
// or 3) is the expected way for a reader to refuse fuzzed input. Anything
// else escapes to libFuzzer as a finding.
template <class F>
void allow_reader_errors(F&& f) {
  try {
    f();
  } catch (const ditgen::Error&) {
  }
}

// Aborts the fuzzer on a failure of the harness itself (not a finding).
[[noreturn]] inline void harness_failure(const std::string& what) {
  std::fprintf(stderr, "fuzz harness: %s\n", what.c_str());
  std::abort();
}

// The bytes as an anonymous in-memory file, open for the object's lifetime;
// path() opens it by name (a regular file: fstat and mmap work as on disk).
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) {
    fd_ = memfd_create("ditgen-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) harness_failure("memfd_create failed");
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) harness_failure("write to memfd failed");
      done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// A directory for the whole process (under /dev/shm when it exists: no disk
// writes per execution), removed with everything in it when the process exits
// normally. Each execution overwrites the same few files in it: nothing
// accumulates.
class ScratchDir {
 public:
  ScratchDir() {
    namespace fs = std::filesystem;
    std::string base = fs::is_directory("/dev/shm") ? "/dev/shm" : fs::temp_directory_path().string();
    std::string templ = base + "/ditgen-fuzz-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) harness_failure("mkdtemp failed in " + base);
    path_ = buf.data();
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_bytes(const std::string& path, std::string_view bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) harness_failure("cannot write " + path);
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size())
    harness_failure("short write to " + path);
  std::fclose(f);
}

// The input split at `separator` into at most `max_parts` pieces (the last
// keeps any further separators).
inline std::vector<std::string_view> split(std::string_view input, char separator, size_t max_parts) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    const size_t at = input.find(separator);
    if (at == std::string_view::npos) break;
    parts.push_back(input.substr(0, at));
    input.remove_prefix(at + 1);
  }
  parts.push_back(input);
  return parts;
}

}  // namespace ditgen::fuzz
