// Just enough of the protobuf wire format to read and edit a SentencePiece
// ModelProto (spiece.model) without its generated code, which Debian's
// libsentencepiece-dev does not ship: a message split into its top-level
// fields, each with its number, wire type, varint / fixed value or
// length-delimited payload, and its exact bytes. Bounds-checked: malformed
// bytes give false, never a read past the buffer.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace ditgen::io::protobuf {

inline bool read_varint(const std::string& b, size_t& i, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (i >= b.size()) return false;
    const auto byte = static_cast<unsigned char>(b[i++]);
    v |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

inline void write_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

struct Field {
  uint64_t number = 0;
  int wire_type = 0;                          // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
  size_t begin = 0, end = 0;                  // the whole field (tag included) in the buffer
  size_t payload_begin = 0, payload_end = 0;  // length-delimited payload (payload_end > 0 when there is one)
  uint64_t value = 0;                         // varint value, or the fixed32 / fixed64 bits
};

// Splits a message into its fields; false if malformed.
inline bool split_fields(const std::string& b, std::vector<Field>& fields) {
  size_t i = 0;
  while (i < b.size()) {
    Field f{};
    f.begin = i;
    uint64_t tag = 0, v = 0;
    if (!read_varint(b, i, tag)) return false;
    f.number = tag >> 3;
    f.wire_type = static_cast<int>(tag & 7);
    switch (tag & 7) {
      case 0:
        if (!read_varint(b, i, v)) return false;
        f.value = v;
        break;
      case 1:
      case 5: {
        const size_t width = (tag & 7) == 1 ? 8 : 4;
        if (width > b.size() - i) return false;
        for (size_t k = width; k-- > 0;) f.value = (f.value << 8) | static_cast<unsigned char>(b[i + k]);
        i += width;
        break;
      }
      case 2:
        if (!read_varint(b, i, v) || v > b.size() - i) return false;
        f.payload_begin = i;
        i += v;
        f.payload_end = i;
        break;
      default: return false;
    }
    if (f.number == 0) return false;
    f.end = i;
    fields.push_back(f);
  }
  return true;
}

// A fixed32 field's bits as the float they are.
inline float fixed32_float(uint64_t bits) {
  const auto u = static_cast<uint32_t>(bits);
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace ditgen::io::protobuf
