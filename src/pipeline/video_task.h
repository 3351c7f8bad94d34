// What a model folder does with input images, told by its config files
// alone (nothing loaded), as diffusers 0.42.1 tells it:
//
//   model_index.json _class_name        transformer/config.json        task
//   WanPipeline                         (expand_timesteps false)       text-to-video
//   WanPipeline, expand_timesteps true  (Wan 2.2 TI2V-5B)               text-(image-)to-video: image optional
//   WanImageToVideoPipeline             image_dim set                  image-to-video with a CLIP image encoder
//                                       image_dim and pos_embed_seq_len first-last-frame (Wan 2.1 FLF2V)
//                                       image_dim null                  image-to-video without an image encoder
//                                                                       (Wan 2.2 I2V-A14B, two experts)
//   WanImageToVideoPipeline, expand_timesteps true                     text-(image-)to-video (TI2V-5B loaded so)
//   anything else (PixArt, DiT, Latte, CogVideoX)                      no input image
//
// and the rules of the bad input on it (check_image_fields): an
// image for a model that takes none, a last image for a model without
// first-last-frame, no image for an image-to-video model (a first-last-
// frame model needs both): ConfigError (exit 2) naming the field, before
// anything loads.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace ditgen::pipeline {

enum class VideoTask {
  kNoImage,                // not a Wan video pipeline: images and class- or text-conditioned videos
  kTextToVideo,            // WanPipeline
  kImageToVideoClip,       // Wan 2.1 I2V: CLIP image embeddings as extra context
  kImageToVideo,           // Wan 2.2 I2V-A14B: the image latents only
  kFirstLastFrame,         // Wan 2.1 FLF2V: two images, both through CLIP
  kTextImageToVideo,       // Wan 2.2 TI2V-5B: expand_timesteps, the image (if any) as latent frame 0
};

struct VideoKind {
  VideoTask task = VideoTask::kNoImage;
  std::string pipeline_class;  // model_index.json's _class_name
  bool expand_timesteps = false;
  // The transformer's patch_size[1] (Wan: (1, 2, 2)): the default frame
  // size is a multiple of it times the VAE's spatial factor.
  int64_t patch = 2;
  bool takes_image() const { return task != VideoTask::kNoImage && task != VideoTask::kTextToVideo; }
  bool requires_image() const { return takes_image() && task != VideoTask::kTextImageToVideo; }
  bool takes_last_image() const { return task == VideoTask::kFirstLastFrame; }
  bool image_encoder() const { return task == VideoTask::kImageToVideoClip || task == VideoTask::kFirstLastFrame; }
};

// "text-to-video", "image-to-video (CLIP image encoder)", ...
const char* task_name(VideoTask task);

// From the parsed files (`transformer_config` null when the folder has
// none: a component file's run; then image_dim / pos_embed_seq_len are
// unknown and taken as absent). ModelError naming the file for a key of
// the wrong type.
VideoKind video_kind(const nlohmann::json& model_index, const std::string& model_index_path,
                     const nlohmann::json* transformer_config, const std::string& transformer_config_path);

// The same from `model_dir`'s model_index.json and transformer/config.json.
VideoKind read_video_kind(const std::string& model_dir);

// The images one output asks for against the model. `where`: the file to
// name ("run.json" or "prompts.jsonl:3"), `image_field` / `last_field` the
// fields as the user wrote them there ("generate.image", "image"). `model`
// names the model folder in messages.
void check_image_fields(const VideoKind& kind, bool image, bool last_image, const std::string& where,
                        const std::string& image_field, const std::string& last_field, const std::string& model);

// Until the image-to-video models join (the CLIP image encoder, the
// image-to-video transformer, the Wan 2.2 VAE: built apart): a model that
// takes images is ConfigError "not supported yet" (exit 2), after its
// inputs were checked. The join removes this call.
void refuse_until_models_join(const VideoKind& kind, const std::string& model);

}  // namespace ditgen::pipeline
