// SHA-256 (FIPS 180-4): the digest an output's metadata gives for a file the
// user handed in (an input image), so that anyone can check it with
// `sha256sum`. A plain streaming implementation, one 64-byte block at a time;
// util/content_hash.h is the fast non-cryptographic hash for cache keys.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ditgen {

class Sha256 {
 public:
  void update(const void* data, size_t size);
  // The 32-byte digest of everything passed to update(). Does not change the
  // state (more update() calls may follow).
  std::array<uint8_t, 32> digest() const;
  // The digest as 64 lowercase hex digits, as sha256sum prints it.
  std::string hex() const;

 private:
  void compress(const uint8_t block[64]);
  std::array<uint32_t, 8> state_ = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                    0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
  uint64_t length_ = 0;  // bytes so far
  uint8_t block_[64] = {};
  size_t block_size_ = 0;
};

// The hex digest of `size` bytes.
std::string sha256_hex(const void* data, size_t size);

}  // namespace ditgen
