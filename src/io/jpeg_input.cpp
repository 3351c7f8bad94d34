// JPEG input through libjpeg-turbo, the library Pillow's JPEG decoder is
// built on, with the settings Pillow leaves at their defaults (islow IDCT,
// fancy upsampling) and RGB output, so the pixels are Pillow's byte for
// byte (stb_image's decoder differs by up to 3 levels, and by far more in
// the last columns of 4:2:2 images). The APPn markers before the first scan
// are walked first for what Pillow reads from them: the EXIF block (APP1
// "Exif\0\0"; later ones appended, as Pillow does) and the XMP packet (APP1
// "http://ns.adobe.com/xap/1.0/\0"; the last one).
//
// libjpeg reports a fatal error through error_exit, which must not return:
// it longjmps back into decode_pixels, whose only C++ objects were made
// before setjmp, and the caller turns the saved message into a ConfigError.
// Warnings about corrupt data are ignored, as Pillow ignores them, except
// the end of the file coming first (Pillow: "image file is truncated").
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

// jpeglib.h uses size_t and FILE without including their headers.
#include <jpeglib.h>
#include <jerror.h>

#include "io/image_decoders.h"
#include "util/error.h"

namespace ditgen::io {
namespace {

// A progressive JPEG with more scans than any encoder writes is refused
// before it costs minutes (each scan passes over all coefficients).
constexpr int kMaxScans = 1000;

struct ErrorManager {
  jpeg_error_mgr pub;  // first: libjpeg's pointer to it is ours
  jpeg_progress_mgr progress;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX + 64];
  bool from_libjpeg = false;  // message is libjpeg's (else ours, naming the format)
};

[[noreturn]] void error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  err->from_libjpeg = true;
  std::longjmp(err->jump, 1);
}

void emit_message(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
    std::snprintf(err->message, sizeof(err->message), "truncated JPEG (the file ends before the image does)");
    std::longjmp(err->jump, 1);
  }
}

void progress_monitor(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxScans) {
    auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
    std::snprintf(err->message, sizeof(err->message), "corrupt JPEG (more than %d scans)", kMaxScans);
    std::longjmp(err->jump, 1);
  }
}

struct Markers {
  std::optional<std::string> exif, xmp;
};

// The APP1 markers between SOI and the first SOS. Stops quietly at anything
// malformed: libjpeg then gives the verdict on the file.
Markers app_markers(std::string_view jpeg) {
  constexpr std::string_view kExif("Exif\0\0", 6);
  constexpr std::string_view kXmp("http://ns.adobe.com/xap/1.0/\0", 29);
  Markers m;
  size_t at = 2;  // after SOI
  while (at < jpeg.size()) {
    if (uint8_t(jpeg[at]) != 0xff) {  // not a marker: skipped, as Pillow's parser does
      ++at;
      continue;
    }
    while (at < jpeg.size() && uint8_t(jpeg[at]) == 0xff) ++at;  // fill bytes
    if (at >= jpeg.size()) break;
    const uint8_t marker = uint8_t(jpeg[at++]);
    if (marker == 0xda || marker == 0xd9) break;                       // SOS, EOI
    if (marker == 0x01 || (marker >= 0xd0 && marker <= 0xd8)) continue;  // no length
    if (jpeg.size() - at < 2) break;
    const size_t length = (size_t(uint8_t(jpeg[at])) << 8) | uint8_t(jpeg[at + 1]);
    if (length < 2 || length > jpeg.size() - at) break;
    const std::string_view body = jpeg.substr(at + 2, length - 2);
    at += length;
    if (marker != 0xe1) continue;
    if (body.substr(0, kExif.size()) == kExif) {
      if (m.exif) {
        m.exif->append(body.substr(kExif.size()));
      } else {
        m.exif = std::string(body);
      }
    } else if (body.substr(0, kXmp.size()) == kXmp) {
      m.xmp = std::string(body.substr(kXmp.size()));
    }
  }
  return m;
}

// Decodes into `out` (left empty until the header passed the checks);
// returns false with err.message set on any libjpeg error.
bool decode_pixels(const uint8_t* data, size_t size, const std::string& name, const ImageLimits& limits,
                   ErrorManager& err, RgbImage& out) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = error_exit;
  err.pub.emit_message = emit_message;
  err.message[0] = '\0';
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  err.progress.progress_monitor = progress_monitor;
  cinfo.progress = &err.progress;
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    std::snprintf(err.message, sizeof(err.message), "CMYK JPEG is not supported (save it as RGB)");
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  if (cinfo.jpeg_color_space != JCS_GRAYSCALE && cinfo.jpeg_color_space != JCS_YCbCr &&
      cinfo.jpeg_color_space != JCS_RGB) {
    std::snprintf(err.message, sizeof(err.message), "JPEG with %d colour components is not supported",
                  cinfo.num_components);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  // Throws ConfigError: nothing of libjpeg's is on the stack between here
  // and the throw, and cinfo is destroyed first.
  try {
    check_image_size(cinfo.image_width, cinfo.image_height, name, limits);
  } catch (...) {
    jpeg_destroy_decompress(&cinfo);
    throw;
  }
  cinfo.out_color_space = JCS_RGB;
  out = RgbImage::blank(cinfo.image_width, cinfo.image_height);
  jpeg_start_decompress(&cinfo);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out.row(cinfo.output_scanline);
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_destroy_decompress(&cinfo);
  return true;
}

}  // namespace

StoredImage decode_jpeg(const uint8_t* data, size_t size, const std::string& name, const ImageLimits& limits) {
  StoredImage out;
  ErrorManager err;
  if (!decode_pixels(data, size, name, limits, err, out.rgb)) {
    const std::string why = err.message;
    throw ConfigError(name + ": " + (err.from_libjpeg ? "corrupt JPEG (libjpeg: " + why + ")" : why));
  }
  Markers markers = app_markers(std::string_view(reinterpret_cast<const char*>(data), size));
  out.exif = std::move(markers.exif);
  out.xmp = std::move(markers.xmp);
  return out;
}

}  // namespace ditgen::io
