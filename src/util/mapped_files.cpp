#include "util/mapped_files.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace ditgen {

namespace {

// More than any model directory ditgen opens at once (shards included).
constexpr int kSlots = 256;
constexpr size_t kPathBytes = 512;

struct Slot {
  std::atomic<bool> live{false};
  uintptr_t begin = 0, end = 0;
  char path[kPathBytes] = {};
};

Slot g_slots[kSlots];
std::mutex g_register;  // writers only; the signal handler never takes it

}  // namespace

int register_mapping(const void* begin, size_t size, const std::string& path) {
  std::lock_guard<std::mutex> lock(g_register);
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = g_slots[i];
    if (s.live.load(std::memory_order_relaxed)) continue;
    s.begin = reinterpret_cast<uintptr_t>(begin);
    s.end = s.begin + size;
    const size_t n = std::min(path.size(), kPathBytes - 1);
    std::memcpy(s.path, path.data(), n);
    s.path[n] = '\0';
    s.live.store(true, std::memory_order_release);  // fields first, then visible
    return i;
  }
  return -1;
}

void unregister_mapping(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  std::lock_guard<std::mutex> lock(g_register);
  g_slots[slot].live.store(false, std::memory_order_release);
}

const char* mapped_file_at(const void* addr) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  for (Slot& s : g_slots)
    if (s.live.load(std::memory_order_acquire) && a >= s.begin && a < s.end) return s.path;
  return nullptr;
}

}  // namespace ditgen
