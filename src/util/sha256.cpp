// SHA-256 as FIPS 180-4 §6.2 states it: the message padded with 0x80, zeros
// and its bit length (big-endian) to whole 64-byte blocks, each block
// expanded to 64 words and mixed into the 8-word state in 64 rounds.
#include "util/sha256.h"

#include <algorithm>
#include <cstring>

namespace ditgen {
namespace {

constexpr uint32_t kRound[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
    0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
    0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
    0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
    0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
    0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
    0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u,
};

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

uint32_t load_be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

}  // namespace

void Sha256::compress(const uint8_t block[64]) {
  uint32_t w[64];
  for (int t = 0; t < 16; ++t) w[t] = load_be32(block + 4 * t);
  for (int t = 16; t < 64; ++t) {
    const uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
  for (int t = 0; t < 64; ++t) {
    const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[t] + w[t];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
  state_[4] += e;
  state_[5] += f;
  state_[6] += g;
  state_[7] += h;
}

void Sha256::update(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  length_ += size;
  if (block_size_ > 0) {
    const size_t take = std::min(size, sizeof(block_) - block_size_);
    std::memcpy(block_ + block_size_, p, take);
    block_size_ += take;
    p += take;
    size -= take;
    if (block_size_ < sizeof(block_)) return;
    compress(block_);
    block_size_ = 0;
  }
  for (; size >= 64; p += 64, size -= 64) compress(p);
  std::memcpy(block_, p, size);
  block_size_ = size;
}

std::array<uint8_t, 32> Sha256::digest() const {
  Sha256 tail = *this;
  const uint64_t bits = length_ * 8;
  const uint8_t one = 0x80;
  tail.update(&one, 1);
  const uint8_t zero = 0;
  while (tail.block_size_ != 56) tail.update(&zero, 1);
  uint8_t length_be[8];
  for (int i = 0; i < 8; ++i) length_be[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  tail.update(length_be, 8);
  std::array<uint8_t, 32> out;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<uint8_t>(tail.state_[i] >> (24 - 8 * j));
  return out;
}

std::string Sha256::hex() const {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t byte : digest()) {
    s.push_back(digits[byte >> 4]);
    s.push_back(digits[byte & 15]);
  }
  return s;
}

std::string sha256_hex(const void* data, size_t size) {
  Sha256 h;
  h.update(data, size);
  return h.hex();
}

}  // namespace ditgen
