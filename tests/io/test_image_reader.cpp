// Input images against diffusers' load_image (Pillow 13): every fixture
// input (PNG of each colour type and depth, interlaced, JPEG 4:2:0 / 4:2:2 /
// progressive 4:4:4 / grey, EXIF and XMP orientations) decodes to exactly
// Pillow's pixels and reports Pillow's leftover transparency colour and the
// file's SHA-256; the EXIF parser on crafted blocks; every refused or broken
// file is a ConfigError (exit 2) whose message starts with the file's path
// and says what is wrong.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "error_helpers.h"
#include "image_fixtures.h"
#include "io/exif_orientation.h"
#include "io/image_reader.h"
#include "io/png.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::io;
using ditgen::testing::image_fixture;
using ditgen::testing::image_manifest;

namespace {

bool has(const std::string& s, const std::string& part) { return testing::contains(s, part); }

// The file's error message, which must start with its path.
// (ConfigError carries exit code 2 by its type, util/error.h.)
std::string read_error(const std::string& path) {
  const std::string msg = testing::config_error_of([&] { read_input_image(path); });
  CHECK_MESSAGE(msg.rfind(path + ": ", 0) == 0, msg);
  return msg;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}
void put_be32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (24 - 8 * i));
}

// Byte offset of the first chunk of `type` in a PNG (its length field).
size_t find_chunk(const std::vector<uint8_t>& png, const std::string& type) {
  for (size_t at = 8; at + 12 <= png.size(); at += 12 + be32(&png[at]))
    if (std::string(png.begin() + long(at) + 4, png.begin() + long(at) + 8) == type) return at;
  FAIL("no chunk " << type);
  return 0;
}

void fix_crc(std::vector<uint8_t>& png, size_t chunk_at) {
  const uint32_t length = be32(&png[chunk_at]);
  put_be32(&png[chunk_at + 8 + length], png_crc32(&png[chunk_at + 4], 4 + length));
}

}  // namespace

TEST_CASE("image reader: every fixture input decodes to diffusers' load_image pixels") {
  const auto& inputs = image_manifest().at("inputs");
  REQUIRE(inputs.size() >= 30);
  for (const auto& in : inputs) {
    const std::string path = image_fixture(in.at("file"));
    CAPTURE(path);
    const InputImage got = read_input_image(path);
    const RgbImage want = testing::load_reference_png(image_fixture(in.at("decoded")));
    CHECK_MESSAGE(testing::first_difference(got.image.rgb, want) == "", testing::first_difference(got.image.rgb, want));
    CHECK(got.image.rgb.width == in.at("width").get<int64_t>());
    CHECK(got.image.format == in.at("format").get<std::string>());
    CHECK(got.sha256 == in.at("sha256").get<std::string>());
    CHECK(got.path == path);
    const bool rotated = in.at("width") != in.at("stored_width");
    CHECK((got.image.orientation >= 5) == rotated);
    if (in.at("transparency").is_null()) {
      CHECK_FALSE(got.image.transparency.has_value());
    } else {
      REQUIRE(got.image.transparency.has_value());
      CHECK(*got.image.transparency == in.at("transparency").get<std::array<int32_t, 3>>());
    }
  }
}

TEST_CASE("image reader: the eight EXIF orientations and the XMP one") {
  // The fixtures: one 7 x 5 picture stored with orientation 1..8.
  const RgbImage upright = read_input_image(image_fixture("inputs/orient1_7x5.png")).image.rgb;
  for (int o = 2; o <= 8; ++o) {
    CAPTURE(o);
    const DecodedImage d = read_input_image(image_fixture("inputs/orient" + std::to_string(o) + "_7x5.png")).image;
    CHECK(d.orientation == o);
    CHECK(d.rgb.width == (o >= 5 ? 5 : 7));
    CHECK(testing::first_difference(d.rgb, apply_exif_orientation(upright, o)) == "");
  }
  CHECK(read_input_image(image_fixture("inputs/jpeg_exif6_29x17.jpg")).image.orientation == 6);
  CHECK(read_input_image(image_fixture("inputs/jpeg_xmp8_29x17.jpg")).image.orientation == 8);
}

TEST_CASE("image reader: EXIF blocks, crafted") {
  // "II" directory with one SHORT Orientation entry = 6, behind an Exif header.
  std::vector<uint8_t> le = {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0,
                             0x12, 0x01, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0};
  CHECK(exif_orientation_tag(le.data(), le.size()) == 6);
  CHECK(exif_orientation_tag(le.data() + 6, le.size() - 6) == 6);  // no Exif header
  // Cut inside the entry: the directory keeps nothing.
  CHECK_FALSE(exif_orientation_tag(le.data(), 6 + 8 + 2 + 11).has_value());
  // Entry count larger than what is there: entries read so far count.
  std::vector<uint8_t> many = le;
  many[6 + 8] = 200;
  CHECK(exif_orientation_tag(many.data(), many.size()) == 6);
  // "MM" with a LONG value, and a SHORT count of 3 stored at an offset.
  std::vector<uint8_t> be = {'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 4, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 0};
  CHECK(exif_orientation_tag(be.data(), be.size()) == 3);
  std::vector<uint8_t> off = {'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 3, 0, 0, 0, 26,
                              0, 0, 0, 0, 0, 8, 0, 1, 0, 1};
  CHECK(exif_orientation_tag(off.data(), off.size()) == 8);
  off[21] = 200;  // the offset points past the block: skipped
  CHECK_FALSE(exif_orientation_tag(off.data(), off.size()).has_value());
  // A RATIONAL orientation is not an integer: no tag.
  std::vector<uint8_t> rational = be;
  rational[13] = 5;
  CHECK_FALSE(exif_orientation_tag(rational.data(), rational.size()).has_value());
  // Not TIFF, too short, IFD offset outside.
  const std::vector<uint8_t> junk = {'X', 'X', 0, 42, 0, 0, 0, 8, 0, 0};
  CHECK_FALSE(exif_orientation_tag(junk.data(), junk.size()).has_value());
  CHECK_FALSE(exif_orientation_tag(le.data(), 9).has_value());
  std::vector<uint8_t> far = be;
  far[7] = 250;
  CHECK_FALSE(exif_orientation_tag(far.data(), far.size()).has_value());
  CHECK_FALSE(exif_orientation_tag(nullptr, 0).has_value());

  CHECK(xmp_orientation("<x tiff:Orientation=\"6\"/>") == 6);
  CHECK(xmp_orientation("<tiff:Orientation>3</tiff:Orientation>") == 3);
  CHECK(xmp_orientation("tiff:Orientation='6' tiff:Orientation>7") == 7);  // the first that matches the pattern
  CHECK_FALSE(xmp_orientation("tiff:Orientation=\"x\"").has_value());
  CHECK_FALSE(xmp_orientation("tiff:Orientation").has_value());
}

TEST_CASE("image reader: missing, unreadable, empty and foreign files") {
  testing::TempDir dir("ditgen_test_image_reader");
  CHECK(has(read_error(dir.file("absent.png")), "cannot read the image (No such file or directory)"));
  try {
    read_input_image(dir.file("absent.png"));
  } catch (const std::exception& e) {
    CHECK(exit_code_for(e) == kExitBadConfig);  // the process would exit 2
  }
  CHECK(has(read_error(dir.path.string()), "is a directory"));
  CHECK(has(read_error("/dev/null"), "is not a regular file"));
  CHECK(has(read_error(dir.write("empty.png", "")), "the file is empty"));
  CHECK(has(read_error(dir.write("text.png", "hello world")), "not a PNG or JPEG file (it starts with bytes 68 65 6c 6c)"));
  CHECK(has(read_error(dir.write("gif.jpg", "GIF89a....")), "not a PNG or JPEG file"));
  CHECK(has(read_error(dir.write("short.png", "\x89PNG")), "not a PNG or JPEG file"));
}

TEST_CASE("image reader: truncated and corrupt PNGs") {
  testing::TempDir dir("ditgen_test_image_reader");
  const std::vector<uint8_t> good = testing::read_file(image_fixture("inputs/rgb_97x61.png"));
  auto write = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
    testing::write_file(dir.file(name), bytes);
    return dir.file(name);
  };
  const std::vector<uint8_t> half(good.begin(), good.begin() + long(good.size() / 2));
  CHECK(has(read_error(write("half.png", half)), "truncated PNG (a chunk runs past the end of the file)"));
  const std::vector<uint8_t> no_end(good.begin(), good.end() - 12);
  CHECK(has(read_error(write("no_end.png", no_end)), "truncated PNG (no IEND chunk)"));
  const std::vector<uint8_t> cut_header(good.begin(), good.begin() + 8 + 6);
  CHECK(has(read_error(write("cut.png", cut_header)), "truncated PNG (a chunk header cut off)"));

  const size_t idat = find_chunk(good, "IDAT");
  std::vector<uint8_t> flipped = good;
  flipped[idat + 8 + 20] ^= 0x55;
  CHECK(has(read_error(write("crc.png", flipped)), "corrupt PNG (CRC mismatch in chunk 'IDAT')"));
  std::vector<uint8_t> bad_zlib = good;
  bad_zlib[idat + 8] = 0;  // the zlib header's method, with a valid CRC: the data cannot be inflated
  fix_crc(bad_zlib, idat);
  CHECK(has(read_error(write("zlib.png", bad_zlib)), "corrupt PNG image data (stb_image: bad zlib header)"));

  std::vector<uint8_t> no_ihdr = good;
  std::copy_n("tEXt", 4, no_ihdr.begin() + 12);
  fix_crc(no_ihdr, 8);
  CHECK(has(read_error(write("no_ihdr.png", no_ihdr)), "corrupt PNG (does not start with an IHDR chunk)"));

  std::vector<uint8_t> bad_depth = good;
  bad_depth[8 + 8 + 8] = 7;  // bit depth 7
  fix_crc(bad_depth, 8);
  CHECK(has(read_error(write("depth.png", bad_depth)), "corrupt PNG (invalid IHDR: colour type 2, bit depth 7)"));
}

TEST_CASE("image reader: zero and oversized dimensions") {
  testing::TempDir dir("ditgen_test_image_reader");
  const std::vector<uint8_t> good = testing::read_file(image_fixture("inputs/rgb_97x61.png"));
  auto with_size = [&](uint32_t w, uint32_t h) {
    std::vector<uint8_t> png = good;
    put_be32(&png[16], w);
    put_be32(&png[20], h);
    fix_crc(png, 8);
    const std::string path = dir.file(std::to_string(w) + "x" + std::to_string(h) + ".png");
    testing::write_file(path, png);
    return path;
  };
  CHECK(has(read_error(with_size(0, 61)), "the image has zero width or height (0 x 61)"));
  CHECK(has(read_error(with_size(97, 0)), "the image has zero width or height (97 x 0)"));
  CHECK(has(read_error(with_size(16385, 2)), "the image is 16385 x 2, beyond the limit of 16384 pixels a side"));
  CHECK(has(read_error(with_size(16384, 16384)), "beyond the limit of 16384 pixels a side and 178956970 pixels in all"));

  // Smaller limits, and the same for JPEG.
  const ImageLimits small{64, 4096};
  for (const std::string name : {"inputs/rgb_97x61.png", "inputs/jpeg420_97x61.jpg"}) {
    const std::vector<uint8_t> bytes = testing::read_file(image_fixture(name));
    const std::string msg = testing::config_error_of([&] { decode_image(bytes.data(), bytes.size(), "img", small); });
    CHECK_MESSAGE(has(msg, "img: the image is 97 x 61, beyond the limit of 64 pixels a side"), msg);
  }
  // A JPEG whose frame header says 0 lines.
  std::vector<uint8_t> jpeg = testing::read_file(image_fixture("inputs/jpeg420_97x61.jpg"));
  size_t sof = 2;
  while (!(jpeg[sof] == 0xff && jpeg[sof + 1] == 0xc0)) sof += 2 + ((size_t(jpeg[sof + 2]) << 8) | jpeg[sof + 3]);
  jpeg[sof + 5] = jpeg[sof + 6] = 0;  // height
  testing::write_file(dir.file("zero.jpg"), jpeg);
  CHECK(has(read_error(dir.file("zero.jpg")), "corrupt JPEG (libjpeg: Empty JPEG image"));
}

TEST_CASE("image reader: truncated and corrupt JPEGs") {
  testing::TempDir dir("ditgen_test_image_reader");
  for (const std::string name : {"inputs/jpeg420_97x61.jpg", "inputs/jpeg444_progressive_97x61.jpg"}) {
    CAPTURE(name);
    const std::vector<uint8_t> good = testing::read_file(image_fixture(name));
    testing::write_file(dir.file("cut.jpg"), std::vector<uint8_t>(good.begin(), good.begin() + long(good.size() * 3 / 5)));
    CHECK(has(read_error(dir.file("cut.jpg")), "truncated JPEG (the file ends before the image does)"));
    testing::write_file(dir.file("header.jpg"), std::vector<uint8_t>(good.begin(), good.begin() + 40));
    CHECK(has(read_error(dir.file("header.jpg")), "truncated JPEG"));
  }
  // A quantisation table numbered 7 (0-3 exist), then the end.
  std::vector<uint8_t> bad_table(2 + 4 + 65 + 2, 0);
  const uint8_t head[] = {0xff, 0xd8, 0xff, 0xdb, 0x00, 0x43, 0x07};
  std::copy_n(head, sizeof(head), bad_table.begin());
  bad_table[bad_table.size() - 2] = 0xff;
  bad_table[bad_table.size() - 1] = 0xd9;
  testing::write_file(dir.file("table.jpg"), bad_table);
  CHECK(has(read_error(dir.file("table.jpg")), "corrupt JPEG (libjpeg: Bogus DQT index 7)"));
}

TEST_CASE("image reader: kinds refused, with the reason") {
  CHECK(has(read_error(image_fixture("bad/grey16_23x9.png")), "16-bit greyscale PNG is not supported"));
  CHECK(has(read_error(image_fixture("bad/cmyk_16x8.jpg")), "CMYK JPEG is not supported"));
  CHECK(has(read_error(image_fixture("bad/animated_16x8.png")), "animated PNG (APNG) is not supported"));
  CHECK(has(read_error(image_fixture("bad/cgbi_8x4.png")), "Apple's CgBI PNG variant is not supported"));
  // 16 KB whose image data inflates to 16 MiB for a 1 x 1 image: stb's
  // allocations are capped at what the header's size needs.
  CHECK(has(read_error(image_fixture("bad/zlib_bomb_1x1.png")),
            "corrupt PNG image data (it inflates to more than a 1 x 1 image holds)"));
}
