// MP4 output (docs/design.md §2, output.format "mp4"): one H.264 video per
// output, encoded with FFmpeg's libraries (libx264 through libavcodec,
// libswscale for the colour conversion, libavformat for the container), so
// the file plays everywhere and is tagged so that players reproduce the
// colours. Everything libav stays in mp4_writer.cpp: this header is all the
// rest of ditgen sees.
//
// Per output: frames (F, 3, H, W) float -> 8-bit RGB by float_image_to_rgb8
// (the PNG writer's rounding, so a frame's pixels are the PNG's before
// encoding) -> odd W / H padded to even by repeating the last column / row
// (4:2:0 needs even sizes; an edge copy rather than black keeps the last
// real column's chroma clean) -> yuv420p with the BT.709 matrix, limited
// (TV) range -> libx264 (crf, preset medium) -> MP4 with faststart (the
// index first, so a browser can start playing before the download ends),
// frame rate and time base 1/fps, colour tags BT.709. Metadata, in MP4's
// iTunes-style tags (the ones players and ffprobe show): `title` = the
// caption, `comment` = the webui "parameters" text, `description` = the
// "ditgen_config" JSON, `synopsis` = the "ditgen_run" JSON (what ran:
// device, dtypes, threads, layout). A tag named ditgen_config would need the muxer's
// mdta mode (movflags use_metadata_tags), which then writes every tag that
// way and drops the iTunes ones players read; so the config goes into the
// standard free-text tag instead.
//
// Written to a temporary name and renamed (util/atomic_file.h). Any libav
// failure is a RuntimeFailure naming the output file, the step that failed
// and libav's error text (plus libav's last logged error line, which often
// says more than the error code), and leaves no file behind.
#pragma once
#include <memory>
#include <string>

#include "io/output_writer.h"

namespace ditgen::io {

// One MP4 per output at video_path_for(plan.pattern, index, plan.outputs)
// (the pattern's extension becomes .mp4). Images (F = 1) become one-frame
// videos. `fps` > 0 (a non-integer rate is kept as the nearest fraction,
// e.g. 23.976 -> 2997/125), `crf` 0..51 (x264's constant rate factor: 0
// lossless, 18 visually lossless, 51 worst); std::invalid_argument
// otherwise. `encoder`: the libavcodec encoder's name, libx264 unless a
// test says otherwise; when libavcodec has no such encoder this throws
// RuntimeFailure here, before any generation work is done.
std::unique_ptr<OutputWriter> make_mp4_writer(const OutputPlan& plan, double fps, int crf,
                                              const std::string& encoder = "libx264");

}  // namespace ditgen::io
