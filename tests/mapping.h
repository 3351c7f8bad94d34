// Whether a pointer lies inside this process's mapping of a file (from
// /proc/self/maps): how tests tell a tensor borrowed from an mmapped
// safetensors file (zero copy) from a copy, and how many bytes of a file
// are mapped at all (a released model maps none), and how many of a
// mapping's bytes are resident (a released weight's pages are not). Shared
// by every test area.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ditgen::testing {

inline bool points_into_mapping_of(const void* p, const std::string& file) {
  const std::string canonical = std::filesystem::canonical(file).string();
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode, path;
    fields >> range >> perms >> offset >> dev >> inode >> path;
    if (path != canonical) continue;
    const uintptr_t begin = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
    const uintptr_t end = std::stoull(range.substr(range.find('-') + 1), nullptr, 16);
    if (addr >= begin && addr < end) return true;
  }
  return false;
}

// Bytes of this process's address space mapped from `file`.
inline uint64_t mapped_bytes_of(const std::string& file) {
  const std::string canonical = std::filesystem::canonical(file).string();
  std::ifstream maps("/proc/self/maps");
  std::string line;
  uint64_t total = 0;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode, path;
    fields >> range >> perms >> offset >> dev >> inode >> path;
    if (path != canonical) continue;
    total += std::stoull(range.substr(range.find('-') + 1), nullptr, 16) -
             std::stoull(range.substr(0, range.find('-')), nullptr, 16);
  }
  return total;
}

// Resident bytes of the mapping that contains `p` (0 if none does), from
// /proc/self/smaps.
inline int64_t mapping_rss(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= at && at < hi;
      continue;
    }
    if (inside && line.rfind("Rss:", 0) == 0) return std::stoll(line.substr(4)) * 1024;
  }
  return 0;
}

// Reads one byte of every 512 of [p, p + bytes), so every page is resident.
inline void touch_pages(const void* p, size_t bytes) {
  const auto* b = static_cast<const volatile uint8_t*>(p);
  for (size_t i = 0; i < bytes; i += 512) (void)b[i];
}

}  // namespace ditgen::testing
