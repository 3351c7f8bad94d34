// UTF-8 validation and decoding against hand-encoded byte sequences.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "util/utf8.h"

using namespace ditgen;

TEST_CASE("utf8: valid text of every sequence length round-trips") {
  const std::string text = "a \xc3\xa9 \xe2\x96\x81 \xf0\x9f\x9a\x80";  // a, é, ▁, 🚀
  CHECK(first_invalid_utf8(text) == std::string::npos);
  const std::u32string cps = utf8_decode(text);
  CHECK(cps == std::u32string{U'a', U' ', 0xE9, U' ', 0x2581, U' ', 0x1F680});
  CHECK(utf8_encode(cps) == text);
  CHECK(utf8_encode({0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0x10000, 0x10FFFF}) ==
        "\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf");
}

TEST_CASE("utf8: the first invalid byte is found, decoding it throws") {
  CHECK(first_invalid_utf8("ab\xe2\x96") == 2);           // truncated
  CHECK(first_invalid_utf8("x\xc0\xaf") == 1);            // overlong '/'
  CHECK(first_invalid_utf8("\xed\xa0\x80") == 0);         // surrogate
  CHECK(first_invalid_utf8("ok\xf4\x90\x80\x80") == 2);   // past U+10FFFF
  CHECK(first_invalid_utf8("\x80") == 0);                 // lone continuation
  CHECK(first_invalid_utf8("\xe2\x28\xa1") == 0);         // bad continuation
  CHECK_THROWS_AS(utf8_decode("a\xff"), std::invalid_argument);
}
