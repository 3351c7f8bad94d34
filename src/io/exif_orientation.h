// The EXIF orientation of an input image, found and applied as diffusers'
// load_image does it (PIL.ImageOps.exif_transpose, Pillow 13): the
// Orientation tag (274) of the EXIF block's first image directory (IFD0);
// when the block has no such tag, the first `tiff:Orientation="N"` or
// `<tiff:Orientation>N` in the XMP packet. Values 2-8 flip and/or rotate the
// pixels; 1, a value outside 1-8, or no tag at all leave them as stored.
//
// Every read is bounds-checked against the block; a block that is not a
// TIFF structure, or an entry whose value lies outside it, counts as no tag
// (Pillow warns and skips such an entry too; on a block whose TIFF header is
// not "II*\0" / "MM\0*" Pillow fails to open the image, where ditgen ignores
// the block).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "io/rgb_image.h"

namespace ditgen::io {

// The Orientation tag of an EXIF block (the bytes Pillow keeps as
// info["exif"]: a TIFF header and directories, after any one or two leading
// "Exif\0\0"), or nothing when the block has no readable one.
std::optional<int64_t> exif_orientation_tag(const uint8_t* data, size_t size);

// The digit after the first "tiff:Orientation=\"" or "tiff:Orientation>" in
// an XMP packet, or nothing.
std::optional<int64_t> xmp_orientation(std::string_view xmp);

// The image as Pillow's Image.transpose shows it for an EXIF orientation:
// 2 mirror left-right, 3 rotate 180°, 4 mirror top-bottom, 5 transpose,
// 6 rotate 90° clockwise, 7 transverse, 8 rotate 90° anticlockwise; any other
// value returns the image unchanged.
RgbImage apply_exif_orientation(const RgbImage& image, int64_t orientation);

}  // namespace ditgen::io
