// File names of a run's outputs (docs/design.md §2 output.path): the numbering
// of several outputs, "{i}" patterns, a video's frame files and the contact
// sheet. Plain string work on the last path component rather than
// std::filesystem, so the directory part is returned exactly as the user
// wrote it.
#pragma once
#include <string>

namespace ditgen::io {

// The file of output `index` of `count`: "{i}" in the pattern is replaced by
// the index zero-padded to 4 digits; otherwise, with several outputs,
// "_0000", "_0001", ... goes before the extension ("out/dit.png" ->
// "out/dit_0003.png"; no extension: appended); one output keeps the path.
// `name` (a prompt file's JSONL "name"), when not empty, replaces the
// file's stem: "out/dit.png", name "cat" -> "out/cat.png".
std::string output_path_for(const std::string& pattern, int index, int count, const std::string& name = "");

// The video file of output `index` of `count`: output_path_for with the
// extension ".mp4" ("out/img.png" -> "out/img_0001.mp4"; none: appended), so
// output.format decides the container whatever extension the path was
// written with.
std::string video_path_for(const std::string& pattern, int index, int count, const std::string& name = "");

// Frame `frame` of output `index` of `count` as a PNG: the output's file
// with "_fNNN" (3 digits) after its stem and the extension ".png":
// "out/clip.mp4" -> "out/clip_0001_f007.png" (several outputs),
// "out/clip.png" -> "out/clip_f000.png" (one).
std::string frame_path_for(const std::string& pattern, int index, int count, int frame,
                           const std::string& name = "");

// The contact sheet's file: "out/dit.png" -> "out/dit_grid.png" (always .png;
// "{i}" in the pattern becomes "grid").
std::string grid_path_for(const std::string& pattern);

// The run's manifest (docs/design.md §2): "out/dit.png" -> "out/dit_manifest.jsonl"
// ("{i}" in the pattern becomes "manifest").
std::string manifest_path_for(const std::string& pattern);

}  // namespace ditgen::io
