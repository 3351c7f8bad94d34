// A 128-bit content hash for cache keys and work-list agreement (the text
// embedding cache, the batch hash that mpirun ranks compare): two
// independent 64-bit multiply-xorshift lanes over 8-byte words, the byte
// length mixed in at the end. Fast (a few GB/s, so hashing a text encoder's
// weights costs about what reading them does) and good enough to tell
// files apart by accident; not a defence against anyone forging a
// collision, which no cache key here needs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ditgen {

class ContentHash {
 public:
  void update(const void* data, size_t size);
  void update(const std::string& text) { update(text.data(), text.size()); }
  // 32 lowercase hex digits. Does not change the state.
  std::string hex() const;

 private:
  void mix(uint64_t word);
  uint64_t a_ = 0x9E3779B97F4A7C15ull, b_ = 0xC2B2AE3D27D4EB4Full;
  uint64_t length_ = 0;
  unsigned char tail_[8] = {};
  size_t tail_size_ = 0;
};

// The hash of a whole file's bytes; RuntimeFailure naming it when it cannot
// be read.
std::string hash_file(const std::string& path);
// The hash of text.
std::string hash_text(const std::string& text);

}  // namespace ditgen
