#include "util/content_hash.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "util/error.h"

namespace ditgen {

void ContentHash::mix(uint64_t w) {
  a_ = (a_ ^ w) * 0x100000001B3ull;
  a_ ^= a_ >> 29;
  b_ = (b_ + w) * 0xFF51AFD7ED558CCDull;
  b_ ^= b_ >> 32;
}

void ContentHash::update(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  length_ += size;
  while (size > 0 && tail_size_ != 0) {  // finish a partial word first
    tail_[tail_size_++] = *p++;
    --size;
    if (tail_size_ == 8) {
      uint64_t w;
      std::memcpy(&w, tail_, 8);
      mix(w);
      tail_size_ = 0;
    }
  }
  for (; size >= 8; p += 8, size -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    mix(w);
  }
  std::memcpy(tail_, p, size);
  tail_size_ = size;
}

std::string ContentHash::hex() const {
  ContentHash h = *this;
  uint64_t w = 0;
  std::memcpy(&w, h.tail_, h.tail_size_);
  h.mix(w);
  h.mix(h.length_);
  // Final avalanche of each lane (murmur3's fmix64).
  auto fmix = [](uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ull;
    return k ^ (k >> 33);
  };
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(fmix(h.a_)),
                static_cast<unsigned long long>(fmix(h.b_)));
  return out;
}

std::string hash_file(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw RuntimeFailure(path + ": cannot read: " + errno_text(errno));
  ContentHash h;
  std::vector<char> buffer(size_t{4} << 20);
  size_t got;
  while ((got = std::fread(buffer.data(), 1, buffer.size(), f.get())) > 0) h.update(buffer.data(), got);
  if (std::ferror(f.get())) throw RuntimeFailure(path + ": read failed: " + errno_text(errno));
  return h.hex();
}

std::string hash_text(const std::string& text) {
  ContentHash h;
  h.update(text);
  return h.hex();
}

}  // namespace ditgen
