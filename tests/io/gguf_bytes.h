// GGUF files assembled byte by byte for the io tests (the reader's hostile
// cases, the writer's expected bytes), independently of ditgen's writer:
// each call appends one field in GGUF's little-endian layout.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace ditgen::testing {

struct GgufBytes {
  std::string bytes;

  GgufBytes& raw(const std::string& s) {
    bytes += s;
    return *this;
  }
  GgufBytes& uint(uint64_t v, int size) {
    for (int k = 0; k < size; ++k) bytes += static_cast<char>((v >> (8 * k)) & 0xff);
    return *this;
  }
  GgufBytes& u32(uint64_t v) { return uint(v, 4); }
  GgufBytes& u64(uint64_t v) { return uint(v, 8); }
  GgufBytes& f32(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u32(u);
  }
  GgufBytes& str(const std::string& s) { return u64(s.size()).raw(s); }

  // "GGUF", version, tensor count, key/value count.
  GgufBytes& header(uint32_t version, uint64_t tensors, uint64_t kvs) { return raw("GGUF").u32(version).u64(tensors).u64(kvs); }
  // A key and its value type; the caller appends the value.
  GgufBytes& key(const std::string& k, uint32_t value_type) { return str(k).u32(value_type); }
  GgufBytes& kv_u32(const std::string& k, uint32_t v) { return key(k, 4).u32(v); }
  GgufBytes& kv_str(const std::string& k, const std::string& v) { return key(k, 8).str(v); }
  // A tensor info: name, dimensions (ggml order, fastest first), type, offset.
  GgufBytes& tensor(const std::string& name, const std::vector<uint64_t>& ne, uint32_t type, uint64_t offset) {
    str(name).u32(ne.size());
    for (uint64_t d : ne) u64(d);
    return u32(type).u64(offset);
  }
  // Zero bytes up to the next multiple of `alignment`.
  GgufBytes& pad(uint64_t alignment = 32) {
    bytes.append((alignment - bytes.size() % alignment) % alignment, '\0');
    return *this;
  }
};

}  // namespace ditgen::testing
