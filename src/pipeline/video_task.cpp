// See video_task.h.
#include "pipeline/video_task.h"

#include <filesystem>

#include "io/model_dir.h"
#include "util/error.h"

namespace ditgen::pipeline {
namespace {

// A key present with a value other than null.
bool set(const nlohmann::json* config, const char* key) {
  return config && config->is_object() && config->contains(key) && !(*config)[key].is_null();
}

}  // namespace

const char* task_name(VideoTask task) {
  switch (task) {
    case VideoTask::kNoImage: return "a model without input images";
    case VideoTask::kTextToVideo: return "text-to-video";
    case VideoTask::kImageToVideoClip: return "image-to-video (CLIP image encoder)";
    case VideoTask::kImageToVideo: return "image-to-video";
    case VideoTask::kFirstLastFrame: return "first-last-frame-to-video";
    case VideoTask::kTextImageToVideo: return "text-and-image-to-video (TI2V)";
  }
  return "?";
}

VideoKind video_kind(const nlohmann::json& model_index, const std::string& model_index_path,
                     const nlohmann::json* transformer_config, const std::string& transformer_config_path) {
  VideoKind kind;
  kind.pipeline_class = io::get_string_or(model_index, "_class_name", "", model_index_path);
  // null is what save_pretrained writes for "not set"
  kind.expand_timesteps = set(&model_index, "expand_timesteps") &&
                          io::get_bool_or(model_index, "expand_timesteps", false, model_index_path);
  if (kind.pipeline_class != "WanPipeline" && kind.pipeline_class != "WanImageToVideoPipeline") return kind;
  if (set(transformer_config, "patch_size")) {
    const nlohmann::json& patch = (*transformer_config)["patch_size"];
    if (!patch.is_array() || patch.size() != 3 || !patch[1].is_number_integer() || patch[1].get<int64_t>() < 1)
      throw ModelError(transformer_config_path + ": patch_size: expected [t, h, w] positive integers, got " +
                       patch.dump());
    kind.patch = patch[1].get<int64_t>();
  }
  if (kind.expand_timesteps) {
    kind.task = VideoTask::kTextImageToVideo;
  } else if (kind.pipeline_class == "WanPipeline") {
    kind.task = VideoTask::kTextToVideo;
  } else if (!set(transformer_config, "image_dim")) {
    kind.task = VideoTask::kImageToVideo;
  } else {
    // Typed reads, so a string where a number belongs names the file.
    io::get_int(*transformer_config, "image_dim", transformer_config_path);
    kind.task = set(transformer_config, "pos_embed_seq_len") &&
                        io::get_int(*transformer_config, "pos_embed_seq_len", transformer_config_path) > 0
                    ? VideoTask::kFirstLastFrame
                    : VideoTask::kImageToVideoClip;
  }
  return kind;
}

VideoKind read_video_kind(const std::string& model_dir) {
  const std::string index_path = (std::filesystem::path(model_dir) / "model_index.json").string();
  const nlohmann::json index = io::read_json_file(index_path);
  const std::string config_path = (std::filesystem::path(model_dir) / "transformer" / "config.json").string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(config_path, ec)) return video_kind(index, index_path, nullptr, config_path);
  const nlohmann::json config = io::read_json_file(config_path);
  return video_kind(index, index_path, &config, config_path);
}

void check_image_fields(const VideoKind& kind, bool image, bool last_image, const std::string& where,
                        const std::string& image_field, const std::string& last_field, const std::string& model) {
  const std::string name = task_name(kind.task);
  const bool vowel = std::string("aeiou").find(name[0]) != std::string::npos;
  const char* article = kind.task == VideoTask::kNoImage ? "" : vowel ? "an " : "a ";
  const std::string what = model + " is " + article + name + (kind.task == VideoTask::kNoImage ? "" : " model") +
                           (kind.pipeline_class.empty() ? "" : " (model_index.json: " + kind.pipeline_class + ")");
  if (image && !kind.takes_image())
    throw ConfigError(where + ": " + image_field + ": " + what +
                      "; it takes no input image (image-to-video models' model_index.json names "
                      "WanImageToVideoPipeline)");
  if (last_image && !kind.takes_last_image())
    throw ConfigError(where + ": " + last_field + ": " + what +
                      "; only first-last-frame models (Wan 2.1 FLF2V) take a last image");
  if (!image && kind.requires_image())
    throw ConfigError(where + ": " + image_field + ": required: " + what +
                      "; give the input image (generate.image, --image FILE, or \"image\" on each line of a JSONL "
                      "prompt file)");
  if (image && !last_image && kind.takes_last_image())
    throw ConfigError(where + ": " + last_field + ": required: " + what +
                      " and needs the last frame's image too (generate.last_image, --last-image FILE, or "
                      "\"last_image\" in a JSONL prompt file)");
}

void refuse_until_models_join(const VideoKind& kind, const std::string& model) {
  if (!kind.takes_image()) return;
  not_supported(std::string("running ") + task_name(kind.task) + " models (" + model + ", model_index.json: " +
                kind.pipeline_class + "; its inputs were checked, the image conditioning is built, the models are "
                "being built)");
}

}  // namespace ditgen::pipeline
