// Each output's input images (image-to-video, docs/image-to-video.md),
// settled before anything loads:
//
//   - per output, its JSONL line's "image" / "last_image" (relative to the
//     prompt file, config/prompt_file.h), else the run's generate.image /
//     generate.last_image (relative to the config file, or to the current
//     folder from --image / --last-image);
//   - checked against what the model takes (pipeline/video_task.h): exit 2
//     naming the line or the config field;
//   - every file read once and decoded (io/image_reader.h: exit 2 naming
//     the field and the file for one missing, undecodable, empty or not
//     RGB-convertible), its SHA-256 kept for the output's metadata;
//   - the frame size when the run gives no height / width: the image's
//     aspect ratio at the model's default area (io/i2v_frame_size.h).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "config/prompt_file.h"
#include "io/i2v_frame_size.h"
#include "io/image_reader.h"
#include "pipeline/video_task.h"

namespace ditgen::pipeline {

// One output's images, decoded (outputs naming one file share it).
struct OutputImages {
  std::shared_ptr<const io::InputImage> image;       // null: none
  std::shared_ptr<const io::InputImage> last_image;  // null: none
  int line = 0;  // the prompt file's line that named them (0: the config did)
};

// For the output's metadata (PNG text, MP4 comment, manifest line):
// {"image": path, "image_sha256": hex[, "last_image": ..., "last_image_sha256": ...]};
// an empty object for an output without images.
nlohmann::json image_metadata(const OutputImages& images);

struct RunImages {
  std::vector<OutputImages> outputs;  // one per output; empty when no output has an image
  bool any() const { return !outputs.empty(); }
};

// `outputs` outputs; `entries` the prompt file's (empty without one, else
// one per output). `where` names the config file, `model` the model folder.
RunImages read_run_images(const RunConfig& cfg, const std::vector<config::PromptEntry>& entries, int64_t outputs,
                          const VideoKind& kind, const std::string& where);

// The frame size of a run given no height and / or width (a side given is
// kept): every output's first image at `default_area` pixels in multiples
// of `multiple` (the VAE's spatial factor times the patch size). nullopt
// without images or with both sides given. ConfigError when outputs'
// images give different sizes (a batch shares one size).
std::optional<io::FrameSize> image_frame_size(const RunImages& images, std::optional<int64_t> height,
                                              std::optional<int64_t> width, int64_t default_area, int64_t multiple,
                                              const std::string& where);

}  // namespace ditgen::pipeline
