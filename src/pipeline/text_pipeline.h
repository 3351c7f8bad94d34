// Text-conditional generation, images (PixArt) and videos (Latte), as
// diffusers' PixArtAlphaPipeline / LattePipeline compute it for one prompt
// (docs/design.md §2: each output equals the diffusers batch-of-one result
// whatever the batch). Where the two differ, the transformer's
// TextPipelineRules (models/transformer.h) say which, so no family is named
// here:
//
//   condition: the prompts and the negative prompt through the text stage
//     (pipeline/text_encoding.h: lower().strip(), T5 tokenizer padded to
//     max_sequence_length (Latte: always 120), T5 encoder, released on
//     return). PixArt: the cross-attention sees each prompt's real tokens
//     (its mask) and the negative's real tokens for the unconditional half.
//     Latte (mask_feature): the prompt's k real tokens, and the first k rows
//     of the negative's encoding, padding rows included, unmasked.
//   denoise: the shared loop (Pipeline::denoise_loop) over latents (C, h, w)
//     or (C, F, h, w): CFG on the eps channels, learned sigma dropped, the
//     scheduler stepping the un-doubled latents; PixArt's 1024 models get
//     their resolution / aspect-ratio micro-conditions from the requested
//     size (diffusers' resolution binning, which renders at a binned size
//     and resizes back, is not done: the requested size is rendered, as
//     use_resolution_binning=False).
//   decode: latents divided by the VAE's scaling_factor (PixArt) or
//     multiplied by its reciprocal (Latte), or un-normalised per channel
//     (Wan); videos in chunks (Pipeline::decode).
//
// Wan (WanPipeline) runs here too: its text rules are the pipeline class's
// (text_encoding.h: cleaning, 512 tokens, zero rows seen unmasked), its
// latents 1 + 4k frames through the causal VAE, flow samplers; Wan 2.2
// A14B's two experts switch by timestep (pipeline/experts.h), each with its
// guidance scale.
#pragma once
#include <memory>
#include <string>

#include "pipeline/experts.h"
#include "pipeline/pipeline.h"
#include "pipeline/text_encoding.h"

namespace ditgen::pipeline {

class TextPipeline final : public Pipeline {
 public:
  // Opens the text stage too (configs and tokenizer, no weights) and checks
  // that the encoder's hidden size is the transformer's caption_channels;
  // without the tokenizer (Pipeline::OpenFor::kPlan) it answers questions
  // but cannot condition.
  TextPipeline(ModelParts parts, bool with_tokenizer);
  TextPipeline(TextPipeline&&) = delete;  // experts_ points into parts_

  Request prepare(const GenerateConfig& generate, const std::string& where) const override;
  // The transformer and the VAE; the text encoder is loaded by condition()
  // and released before it returns.
  void load_weights(const ParallelRun& par, const models::Placement& place, DType vae_dtype = DType::kF32) override;
  Conditions condition(const Request& req) const override;
  Tensor denoise(const Request& req, const Conditions& cond, const StepCallback& on_step = {},
                 PabSummary* pab = nullptr) const override;

  const TextStage& text_stage() const { return text_; }
  const char* condition_stage() const override { return "text encoder"; }
  const models::TextEncoderSpec* text_encoder() const override { return &text_.encoder_spec(); }
  int64_t text_tokens(const GenerateConfig& generate) const override;

 private:
  TextStage text_;
  Device device_ = Device::kCPU;
  Experts experts_;  // the transformer, or Wan 2.2 A14B's two experts (one held at a time)
};

}  // namespace ditgen::pipeline
