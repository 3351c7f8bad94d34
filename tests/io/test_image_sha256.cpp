// SHA-256 (util/sha256.h) against the FIPS 180-4 / NIST example vectors
// (empty, "abc", the 448- and 896-bit messages, a million 'a's), fed whole
// and in uneven pieces, and against hashlib's digests of the fixture images
// (which `sha256sum tests/fixtures/images/inputs/*` prints too).
#include <doctest/doctest.h>

#include <string>

#include "image_fixtures.h"
#include "util/sha256.h"

using namespace ditgen;

namespace {

std::string in_pieces(const std::string& text, size_t piece) {
  Sha256 h;
  for (size_t at = 0; at < text.size(); at += piece) h.update(text.data() + at, std::min(piece, text.size() - at));
  return h.hex();
}

}  // namespace

TEST_CASE("sha256: FIPS 180-4 example vectors") {
  const std::pair<std::string, std::string> vectors[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
       "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
      {std::string(1000000, 'a'), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
  };
  for (const auto& [text, digest] : vectors) {
    CAPTURE(text.size());
    CHECK(sha256_hex(text.data(), text.size()) == digest);
    for (size_t piece : {1, 3, 55, 56, 63, 64, 65, 1000}) CHECK(in_pieces(text, piece) == digest);
  }
  // Lengths around the padding boundary (55, 56, 64 bytes) against each other
  // fed whole and byte by byte; digest() leaves the state as it was.
  for (size_t n : {55, 56, 57, 63, 64, 65, 119, 120}) {
    const std::string text(n, 'x');
    Sha256 h;
    h.update(text.data(), text.size());
    CHECK(h.hex() == in_pieces(text, 1));
    CHECK(h.hex() == h.hex());
  }
}

TEST_CASE("sha256: the fixture images against hashlib") {
  for (const auto& in : testing::image_manifest().at("inputs")) {
    const std::vector<uint8_t> bytes = testing::read_file(testing::image_fixture(in.at("file")));
    CHECK(sha256_hex(bytes.data(), bytes.size()) == in.at("sha256").get<std::string>());
  }
}
