#include "pipeline/text_pipeline.h"

#include <cstring>

#include "config/prompt_file.h"
#include "pipeline/text_cache.h"
#include "sched/scheduler.h"
#include "util/error.h"
#include "util/profile.h"

namespace ditgen::pipeline {

TextPipeline::TextPipeline(ModelParts parts, bool with_tokenizer)
    : Pipeline(std::move(parts)),
      text_(TextStage::open(parts_.dir.root(), with_tokenizer, parts_.files.text_encoder)),
      experts_(parts_) {
  if (!text_.note().empty()) parts_.notes.push_back(text_.note());
  if (parts_.spec->conditioning() != models::Conditioning::kText)
    throw std::logic_error("TextPipeline for a model that is not text-conditional");
  const int64_t want = parts_.spec->caption_channels(), have = text_.encoder_spec().hidden_size();
  if (want != have)
    throw ModelError(parts_.config_path("transformer") + ": caption_channels " + std::to_string(want) +
                     " does not match the text encoder's d_model " + std::to_string(have) + " (" +
                     text_.encoder_config_path() + ")");
  divide_by_scaling_factor_ = parts_.spec->text_pipeline_rules().divide_by_scaling_factor;
}

Request TextPipeline::prepare(const GenerateConfig& g, const std::string& where) const {
  if (g.prompts.empty())
    throw ConfigError(where + ": generate.prompts: a " + std::string(parts_.spec->family()) +
                      " model is text-conditional: give prompts (not class_labels)");
  Request r;
  r.latent_shape = parts_.spec->latent_shape(g.height, g.width, g.frames, parts_.vae->factors(),
                                             where + ": generate");
  for (size_t i = 0; i < g.prompts.size(); ++i)
    config::check_prompt_text(g.prompts[i], where + ": generate.prompts[" + std::to_string(i) + "]");
  config::check_prompt_text(g.negative_prompt, where + ": generate.negative_prompt");
  r.prompts = g.prompts;
  r.captions = g.prompts;
  r.negative_prompt = g.negative_prompt;
  const models::TextPipelineRules rules = parts_.spec->text_pipeline_rules();
  const int64_t fixed = rules.fixed_max_length;
  // A length the model fixes is named by its transformer/config.json key.
  const std::string fixed_by = rules.fixed_max_length_key
                                   ? parts_.config_path("transformer") + ": " + rules.fixed_max_length_key
                                   : std::string();
  if (fixed > 0 && g.max_sequence_length > 0 && g.max_sequence_length != fixed)
    throw ConfigError(where + ": generate.max_sequence_length: " + std::to_string(g.max_sequence_length) + ": a " +
                      parts_.spec->family() +
                      (fixed_by.empty() ? " model's pipeline always tokenizes to " + std::to_string(fixed) +
                                              " tokens (it has no max_sequence_length)"
                                        : " model takes " + std::to_string(fixed) + " text rows (" + fixed_by + ")") +
                      "; leave it unset or " + std::to_string(fixed));
  r.max_sequence_length = text_tokens(g);
  if (r.max_sequence_length > TextStage::kMaxSequenceLength)
    throw ConfigError((fixed_by.empty() ? where + ": generate.max_sequence_length" : fixed_by) + ": at most " +
                      std::to_string(TextStage::kMaxSequenceLength) + ", got " +
                      std::to_string(r.max_sequence_length));
  set_sampling(r, g, where);
  return r;
}

int64_t TextPipeline::text_tokens(const GenerateConfig& g) const {
  const int64_t fixed = parts_.spec->text_pipeline_rules().fixed_max_length;
  return fixed > 0 ? fixed : g.max_sequence_length > 0 ? g.max_sequence_length : text_.default_max_length();
}

void TextPipeline::load_weights(const ParallelRun& par, const models::Placement& place, DType vae_dtype) {
  StageScope stage("loading weights");
  par_ = par;
  device_ = place.device;
  experts_.load(par.shard, place);
  load_vae(par, place.device, vae_dtype);
}

Conditions TextPipeline::condition(const Request& req) const {
  profile::ScopedTimer timer("text_encoder");
  // The prompts and the distinct negative prompts in one pass of the
  // encoder (each distinct text once), which is released when encode
  // returns; texts found in the embedding cache skip it.
  const int64_t n = static_cast<int64_t>(req.prompts.size());
  std::vector<std::string> texts = req.prompts;
  std::vector<int32_t> negative_row;
  std::vector<std::string> negatives;
  for (int64_t i = 0; i < n; ++i) {
    const std::string& neg = req.negative_of(i);
    size_t row = 0;
    while (row < negatives.size() && negatives[row] != neg) ++row;  // few distinct negatives
    if (row == negatives.size()) negatives.push_back(neg);
    negative_row.push_back(static_cast<int32_t>(row));
  }
  texts.insert(texts.end(), negatives.begin(), negatives.end());
  const models::TextPipelineRules rules = parts_.spec->text_pipeline_rules();
  const int64_t L = rules.fixed_max_length > 0       ? rules.fixed_max_length
                    : req.max_sequence_length > 0 ? req.max_sequence_length
                                                  : text_.default_max_length();
  const models::Placement place = text_encoder_placement(device_, req.text_encoder_dtype);
  const CachedEncoding e = encode_with_cache(text_, texts, L, place, req.text_cache_dir);
  const int64_t k = static_cast<int64_t>(negatives.size());
  Conditions c;
  c.prompt_embeds = e.embeds.slice0(0, n);
  c.negative_embeds = e.embeds.slice0(n, n + k);
  if (k > 1) c.negative_row = negative_row;
  // The prompt's rows: its real tokens (its mask count k). The negative's:
  // its own real tokens (PixArt), or its first k rows (Latte's mask_feature
  // cuts both encodings to the prompt's k rows; the negative's padding rows
  // are seen unmasked). The text stage's rules (the pipeline class's) say
  // how the text is cleaned and padded; the spec's how the denoiser reads it.
  // WanPipeline (zero_padded_unmasked): all L rows, the zero rows past each
  // text's tokens included, for both halves.
  // CogVideoXPipeline (encoder_unmasked): all L rows too, the encoder's own.
  const bool all_rows = text_.rules().zero_padded_unmasked || text_.rules().encoder_unmasked;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t tokens = static_cast<int32_t>(e.num_tokens[static_cast<size_t>(i)]);
    const int32_t negative_tokens =
        static_cast<int32_t>(e.num_tokens[static_cast<size_t>(n + negative_row[static_cast<size_t>(i)])]);
    c.prompt_lengths.push_back(all_rows ? static_cast<int32_t>(L) : tokens);
    c.negative_lengths.push_back(all_rows                         ? static_cast<int32_t>(L)
                                 : rules.negative_cut_to_prompt ? tokens
                                                                : negative_tokens);
  }
  return c;
}

Tensor TextPipeline::denoise(const Request& req, const Conditions& cond, const StepCallback& on_step,
                             PabSummary* pab_summary) const {
  if (!experts_.loaded()) throw std::logic_error("TextPipeline::denoise before load_weights");
  const Shape one = req.latent_shape;
  const int64_t L = cond.prompt_embeds.dim(1), D = cond.prompt_embeds.dim(2);
  const int64_t vae_factor = parts_.vae->spatial_factor();
  const float height = static_cast<float>(one.at(one.size() - 2) * vae_factor);
  const float width = static_cast<float>(one.at(one.size() - 1) * vae_factor);
  const bool micro = parts_.spec->micro_conditions();
  // Each half's text: the prompt's rows, or the negative's (CFG's
  // unconditional half), with the rows the cross-attention sees.
  auto condition_batch = [&](models::ForwardArgs& args, Tensor& keep, int64_t first, int64_t count,
                             const std::vector<bool>& halves) {
    keep = Tensor::empty({static_cast<int64_t>(halves.size()) * count, L, D});
    args.text_lengths.clear();
    args.resolution.clear();
    args.aspect_ratio.clear();
    int64_t row = 0;
    for (const bool uncond : halves)
      for (int64_t i = first; i < first + count; ++i, ++row) {
        const int64_t neg = cond.negative_row.empty() ? 0 : cond.negative_row[static_cast<size_t>(i)];
        const Tensor src = uncond ? cond.negative_embeds.slice0(neg, neg + 1) : cond.prompt_embeds.slice0(i, i + 1);
        std::memcpy(keep.data() + row * L * D, src.data(), static_cast<size_t>(L * D) * sizeof(float));
        args.text_lengths.push_back(uncond ? cond.negative_lengths[static_cast<size_t>(i)]
                                           : cond.prompt_lengths[static_cast<size_t>(i)]);
        if (micro) {
          args.resolution.push_back({height, width});
          args.aspect_ratio.push_back(height / width);
        }
      }
    args.text = &keep;
  };
  // Each step's expert (the high-noise one above the boundary) and its guidance.
  const DenoiserForStep denoiser = [&](double timestep) {
    const int expert = experts_.expert_for(timestep);
    return StepDenoiser{&experts_.get(expert),
                        expert == Experts::kLowNoise ? req.guidance_scale_2 : req.guidance_scale, expert};
  };
  return denoise_loop(denoiser, req, one, cond.outputs(), condition_batch, on_step, pab_summary,
                      cond.images.empty() ? nullptr : &cond.images);
}

}  // namespace ditgen::pipeline
