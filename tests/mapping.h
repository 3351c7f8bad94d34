// Whether a pointer lies inside this process's mapping of a file (from
// /proc/self/maps): how tests tell a tensor borrowed from an mmapped
// safetensors file (zero copy) from a copy, and how many bytes of a file
// are mapped at all (a released model maps none). Shared by every test area.
#pragma once
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

}  // namespace ditgen::testing
