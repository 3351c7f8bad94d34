// The parts every pipeline shares: opening a model directory's configs
// through the registry, the VAE decode stage and generate(). Which pipeline
// a family gets is the table in open().
#include "pipeline/pipeline.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <type_traits>

#include "models/registry.h"
#include "models/vae_decode.h"
#include "pipeline/cfg_combiner.h"
#include "pipeline/class_pipeline.h"
#include "pipeline/generation.h"
#include "pipeline/component_files.h"
#include "pipeline/text_pipeline.h"
#include "sched/noise.h"
#include "sched/scheduler.h"
#include "sched/scheduler_config.h"
#include "tensor/device_memory.h"
#include "util/error.h"
#include "util/profile.h"

namespace ditgen::pipeline {

namespace {

template <class T>
std::vector<T> sub(const std::vector<T>& v, int64_t first, int64_t count) {
  if (v.empty()) return v;
  return std::vector<T>(v.begin() + first, v.begin() + first + count);
}

// The config.json of `part`: the model folder's, or the published one
// `file` fits (component_files.h), recorded in p.config_paths and, when
// published, said in p.notes.
template <class MakeSpec>
auto read_part_spec(ModelParts& p, const std::string& part, const std::string& file, const char* field,
                    MakeSpec make_spec) {
  // Without a file the part's folder must be there (ModelDir's message says so).
  const std::string own = file.empty() ? p.dir.part_config_path(part) : p.dir.root() + "/" + part + "/config.json";
  PartConfig c = part_config(own, part, file, field, spec_fits(file, make_spec));
  p.config_paths[part] = c.path;
  if (!c.note.empty()) p.notes.push_back(c.note);
  return make_spec(c.json, c.path);
}

// Wan 2.2 A14B (WanPipeline): model_index.json's boundary_ratio, when not
// null, names transformer_2 as the low-noise expert.
void read_second_expert(ModelParts& p) {
  const nlohmann::json& index = p.dir.model_index();
  const std::string index_path = p.dir.root() + "/model_index.json";
  if (!index.contains("boundary_ratio") || index["boundary_ratio"].is_null()) return;
  const double ratio = io::get_number_or(index, "boundary_ratio", 0, index_path);
  require(ratio > 0 && ratio < 1, index_path,
          "boundary_ratio: expected a number in (0, 1), got " + index["boundary_ratio"].dump());
  const nlohmann::json& second = index.contains("transformer_2") ? index["transformer_2"] : nlohmann::json();
  require(second.is_array() && second.size() == 2 && second[1].is_string(), index_path,
          "boundary_ratio " + index["boundary_ratio"].dump() +
              " needs a second expert, but transformer_2 is not registered (expected [\"diffusers\", class])");
  p.spec_2 = read_part_spec(p, "transformer_2", p.files.transformer_2, "model.transformer_2", models::transformer_spec);
  const std::string& path = p.config_path("transformer_2");
  const models::TransformerSpec& a = *p.spec;
  const models::TransformerSpec& b = *p.spec_2;
  require(std::string(a.family()) == b.family() && a.in_channels() == b.in_channels() &&
              a.out_channels() == b.out_channels() && a.caption_channels() == b.caption_channels(),
          path,
          std::string("the second expert (") + b.family() + ", in/out channels " + std::to_string(b.in_channels()) +
              "/" + std::to_string(b.out_channels()) + ", text width " + std::to_string(b.caption_channels()) +
              ") does not match " + p.config_path("transformer") + " (" + a.family() + ", " + std::to_string(a.in_channels()) +
              "/" + std::to_string(a.out_channels()) + ", " + std::to_string(a.caption_channels()) + ")");
  // diffusers: boundary_ratio * scheduler.config.num_train_timesteps.
  const double train = static_cast<double>(
      io::get_int_or(p.scheduler_config, "num_train_timesteps", 1000, p.dir.part_config_path("scheduler")));
  p.boundary_timestep = ratio * train;
}

}  // namespace

Request Request::slice(int64_t first, int64_t count) const {
  if (first < 0 || count < 0 || first + count > outputs())
    throw std::out_of_range("Request::slice: outputs [" + std::to_string(first) + ", " +
                            std::to_string(first + count) + ") of " + std::to_string(outputs()));
  std::vector<int64_t> range;
  for (int64_t i = first; i < first + count; ++i) range.push_back(i);
  return select(range);
}

Request Request::select(const std::vector<int64_t>& chosen) const {
  auto pick = [&](const auto& v) {
    std::remove_cvref_t<decltype(v)> out;
    if (!v.empty())
      for (const int64_t i : chosen) out.push_back(v.at(static_cast<size_t>(i)));
    return out;
  };
  for (const int64_t i : chosen)
    if (i < 0 || i >= outputs())
      throw std::out_of_range("Request::select: output " + std::to_string(i) + " of " + std::to_string(outputs()));
  Request r = *this;
  r.labels = pick(labels);
  r.prompts = pick(prompts);
  r.captions = pick(captions);
  r.negative_prompts = pick(negative_prompts);
  r.images = pick(images);
  r.seeds.clear();
  for (const int64_t i : chosen) r.seeds.push_back(seed_of(i));
  if (init_noise) {
    Shape shape = init_noise->shape();
    shape[0] = static_cast<int64_t>(chosen.size());
    r.init_noise = Tensor::empty(shape);
    for (size_t j = 0; j < chosen.size(); ++j)
      r.init_noise->slice0(static_cast<int64_t>(j), static_cast<int64_t>(j) + 1)
          .copy_from(init_noise->slice0(chosen[j], chosen[j] + 1));
  }
  return r;
}

Conditions Conditions::slice(int64_t first, int64_t count) const {
  Conditions c;
  c.class_labels = sub(class_labels, first, count);
  if (prompt_embeds.defined()) c.prompt_embeds = prompt_embeds.slice0(first, first + count);
  c.prompt_lengths = sub(prompt_lengths, first, count);
  c.negative_embeds = negative_embeds;
  c.negative_row = sub(negative_row, first, count);
  c.negative_lengths = sub(negative_lengths, first, count);
  c.images = sub(images, first, count);
  return c;
}

models::Placement vae_placement(Device device, DType vae_dtype, const models::VaeSpec& vae) {
  // As diffusers' pipelines: a float16 VAE with force_upcast decodes in
  // float32 (a VAE spec answers false where its pipeline ignores the key).
  if (vae_dtype == DType::kF16 && vae.force_upcast()) return {device, DType::kF32};
  return {device, vae_dtype};
}

namespace {

io::WeightStore open_part(const ModelParts& p, const std::string& part) {
  if (part == "transformer" && !p.files.transformer.empty())
    return io::WeightStore::open_file(p.files.transformer, p.spec->single_file_options());
  if (part == "transformer_2" && !p.files.transformer_2.empty())
    return io::WeightStore::open_file(p.files.transformer_2, (p.spec_2 ? *p.spec_2 : *p.spec).single_file_options());
  if (part == "vae" && !p.files.vae.empty()) return io::WeightStore::open_file(p.files.vae, p.vae->single_file_options());
  return io::WeightStore::open_dir(p.dir.part_dir(part));
}

}  // namespace

io::WeightStore ModelParts::weights(const std::string& part) const {
  io::WeightStore store = open_part(*this, part);
  if (part == "transformer") store.set_edits(lora_transformer);
  if (part == "transformer_2") store.set_edits(lora_transformer_2);
  return store;
}

std::unique_ptr<models::Transformer> ModelParts::load_transformer(const std::string& part,
                                                                  const models::ShardGroups& shard,
                                                                  const models::Placement& place) const {
  const models::TransformerSpec& s = part == "transformer_2" ? *spec_2 : *spec;
  const io::WeightStore store = weights(part);
  profile::ScopedTimer timer("load_transformer");
  auto model = s.load(store, shard, place);
  check_runtime_lora_taken(store.edits(), part);
  return model;
}

LoraSetup Pipeline::use_lora(const std::vector<LoraConfig>& loras, const LoraRules& rules, const std::string& where) {
  LoraSetup setup = setup_lora(loras, rules, parts_, where);
  parts_.lora_transformer = setup.transformer;
  parts_.lora_transformer_2 = setup.transformer_2;
  return setup;
}

ModelParts ModelParts::read(const std::string& model_dir, const ComponentFiles& files) {
  check_component_file(files.transformer, "model.transformer");
  check_component_file(files.transformer_2, "model.transformer_2");
  check_component_file(files.text_encoder, "model.text_encoder");
  check_component_file(files.vae, "model.vae");
  ModelParts p{io::ModelDir::open(model_dir), nullptr, nullptr, {}, {}, nullptr, 0, files, {}, {}, nullptr, nullptr};
  p.spec = read_part_spec(p, "transformer", files.transformer, "model.transformer", models::transformer_spec);
  p.vae = read_part_spec(p, "vae", files.vae, "model.vae", models::vae_spec);
  const std::string& v_path = p.config_path("vae");
  if (p.vae->latent_channels() != p.spec->in_channels())
    throw ModelError(v_path + ": latent_channels " + std::to_string(p.vae->latent_channels()) +
                     " does not match the transformer's in_channels " + std::to_string(p.spec->in_channels()));
  // diffusers writes -Infinity into some scheduler configs: its own parser.
  const std::string s_path = p.dir.part_config_path("scheduler");
  p.scheduler_config = sched::load_scheduler_config(s_path);
  // Check the scheduler config now rather than after the weights are loaded.
  p.default_scheduler = sched::make_scheduler(sched::Sampler::kModelDefault, p.scheduler_config, s_path)->sampler();
  read_second_expert(p);
  if (!files.transformer_2.empty() && !p.spec_2)
    throw ModelError(files.transformer_2 + ": model.transformer_2: this model has one transformer (" + model_dir +
                     "/model_index.json: no boundary_ratio)");
  // Each file opens and holds what its part reads (its header and tensor
  // table checked) before any weight is read.
  if (!files.transformer.empty())
    check_component(files.transformer, "model.transformer", [&] { p.spec->check_weights(p.weights("transformer")); });
  if (!files.transformer_2.empty())
    check_component(files.transformer_2, "model.transformer_2",
                    [&] { p.spec_2->check_weights(p.weights("transformer_2")); });
  if (!files.vae.empty()) check_component(files.vae, "model.vae", [&] { p.vae->check_weights(p.weights("vae")); });
  return p;
}

// One pipeline per conditioning kind.
std::unique_ptr<Pipeline> Pipeline::open(const std::string& model_dir, OpenFor purpose, const ComponentFiles& files) {
  ModelParts parts = ModelParts::read(model_dir, files);
  switch (parts.spec->conditioning()) {
    case models::Conditioning::kClassLabels:
      if (!files.text_encoder.empty())
        throw ModelError(files.text_encoder + ": model.text_encoder: this model has no text encoder (a " +
                         parts.spec->family() + " model is conditioned on class labels)");
      return std::make_unique<ClassPipeline>(std::move(parts));
    case models::Conditioning::kText:
      return std::make_unique<TextPipeline>(std::move(parts), /*with_tokenizer=*/purpose == OpenFor::kRun);
  }
  throw std::logic_error("Pipeline::open: unknown conditioning");
}

Tensor Pipeline::denoise_loop(const DenoiserForStep& denoiser, const Request& req, const Shape& one,
                              int64_t outputs, const ConditionBatch& condition_batch, const StepCallback& on_step,
                              PabSummary* pab_summary, const std::vector<ImageCondition>* images) const {
  Shape all = one;
  all.insert(all.begin(), outputs);
  if (req.init_noise && req.init_noise->shape() != all)
    throw ConfigError("--init-noise: tensor 'noise' has shape " + shape_str(req.init_noise->shape()) +
                      ", expected " + shape_str(all) + (one.size() == 4 ? " (outputs, C, F, h, w)" : " (outputs, C, h, w)"));
  const CfgCombiner cfg(req.guidance_scale > 1.0f, par_.cp);
  if (images && static_cast<int64_t>(images->size()) != outputs)
    throw std::invalid_argument("Pipeline::denoise_loop: " + std::to_string(images->size()) +
                                " image conditions for " + std::to_string(outputs) + " outputs");
  const GenerationSetup setup{&parts_, &req, &par_, &cfg, &denoiser, &condition_batch, one, images};
  const int64_t batch_size = std::max(1, req.batch_size);
  const int batches = static_cast<int>((outputs + batch_size - 1) / batch_size);
  Tensor result = Tensor::empty(all);
  for (int bi = 0; bi < batches; ++bi) {
    const int64_t first = bi * batch_size, count = std::min(batch_size, outputs - first);
    Generation generation(setup, first, count);
    for (int s = 0; s < generation.steps(); ++s) {
      generation.step(s);
      if (on_step) on_step(s, generation.steps(), bi, batches);
    }
    generation.finish(pab_summary);
    result.slice0(first, first + count).copy_from(generation.latents());
  }
  return result;
}

void Pipeline::set_sampling(Request& r, const GenerateConfig& g, const std::string& where) const {
  if (g.guidance_scale_2 && !parts_.spec_2)
    throw ConfigError(where + ": generate.guidance_scale_2: this model has one transformer (" + parts_.dir.root() +
                      "/model_index.json: no boundary_ratio); only a two-expert model (Wan 2.2 A14B) takes a "
                      "second guidance scale");
  r.seed = g.seed;
  r.steps = g.steps;
  r.guidance_scale = static_cast<float>(g.guidance_scale);
  r.guidance_scale_2 = static_cast<float>(g.guidance_scale_2.value_or(g.guidance_scale));
  r.scheduler = g.scheduler;
  r.shift = g.shift;
  r.batch_size = g.batch_size;
  sched::make_scheduler(r.scheduler, parts_.scheduler_config, parts_.dir.part_config_path("scheduler"), r.shift)
      ->set_timesteps(r.steps);
}

RunConfig with_model_defaults(RunConfig config, const models::TransformerSpec& model) {
  const models::RunDefaults d = model.run_defaults();
  if (d.steps && !given_key(config, "generate", "steps")) config.generate.steps = *d.steps;
  if (d.guidance_scale && !given_key(config, "generate", "guidance_scale"))
    config.generate.guidance_scale = *d.guidance_scale;
  if (d.fps && !given_key(config, "output", "fps")) config.output.fps = *d.fps;
  return config;
}

void Pipeline::load_vae(const ParallelRun& par, Device device, DType vae_dtype) {
  if (!par.output_rank) return;
  vae_decoder_ = parts_.vae->load(parts_.weights("vae"),
                                  vae_placement(device, vae_dtype, *parts_.vae));
}

parallel::Workload Pipeline::workload(const GenerateConfig& generate, const Shape& latent) const {
  parallel::Workload work = parts_.spec->workload(latent);
  work.set_text_tokens(text_tokens(generate));
  return work;
}

Tensor Pipeline::decode(const Tensor& latents, const StageCallback& on_stage) const {
  if (!vae_decoder_) throw std::logic_error("Pipeline::decode on a rank that is not the output rank");
  if (latents.ndim() != 4 && latents.ndim() != 5)
    throw std::invalid_argument("Pipeline::decode: latents " + shape_str(latents.shape()) +
                                " are neither (N, C, h, w) nor (N, C, F, h, w)");
  profile::ScopedTimer timer("vae_decode");
  // The host blocks cached for the denoising loop's tensors go before the
  // VAE's (of other sizes) are made, and the VAE's when it is done.
  device_memory::release_cached_host();
  struct ReleaseAfter {
    ~ReleaseAfter() { device_memory::release_cached_host(); }
  } release_after;
  const models::VaeSpec& vae = *parts_.vae;
  const models::LatentNormalization norm = vae.normalization();
  const bool video = latents.ndim() == 5;
  const int64_t n = latents.dim(0), channels = latents.dim(1), latent_frames = video ? latents.dim(2) : 1;
  const int64_t h = latents.dim(latents.ndim() - 2), w = latents.dim(latents.ndim() - 1);
  const int64_t per_output = channels * latent_frames * h * w, f = vae.spatial_factor();
  const std::optional<models::nn::TileGrid>& tiles = vae_tiles_;
  Tensor out = Tensor::empty({n, vae.frames_of(latent_frames), vae.out_channels(), h * f, w * f});  // (n, F, 3, H, W)
  if (on_stage) on_stage("decode", 0, static_cast<int>(n));
  for (int64_t i = 0; i < n; ++i) {
    // One output at a time (the decoder's activations dominate memory): its
    // latents (C, F', h, w) un-normalised, then through the VAE's stream a
    // chunk at a time, whole or in tiles (models/vae_decode.h).
    Tensor z = Tensor::empty({channels, latent_frames, h, w});
    std::memcpy(z.data(), latents.data() + i * per_output, static_cast<size_t>(per_output) * sizeof(float));
    if (norm.per_channel()) {
      // As WanPipeline writes it: latents / (1 / std) + mean.
      for (int64_t c = 0; c < channels; ++c) {
        const float inv_std = 1.0f / norm.std[static_cast<size_t>(c)], mean = norm.mean[static_cast<size_t>(c)];
        float* zc = z.data() + c * latent_frames * h * w;
        for (int64_t j = 0; j < latent_frames * h * w; ++j) zc[j] = zc[j] / inv_std + mean;
      }
    } else if (divide_by_scaling_factor_) {
      // DiT's and Latte's pipelines multiply by 1/scaling_factor, PixArt's
      // divides: the last bit differs, so each does as its reference does.
      for (int64_t j = 0; j < z.numel(); ++j) z[j] /= norm.scaling_factor;
    } else {
      const float inv_sf = 1.0f / norm.scaling_factor;
      for (int64_t j = 0; j < z.numel(); ++j) z[j] *= inv_sf;
    }
    Tensor frames = out.slice0(i, i + 1).reshape({out.dim(1), out.dim(2), out.dim(3), out.dim(4)});
    models::decode_latents(*vae_decoder_, vae, z, frames, tiles);  // raw, about [-1, 1]
    float* dst = frames.data();
    for (int64_t j = 0; j < frames.numel(); ++j) dst[j] = std::clamp(dst[j] / 2.0f + 0.5f, 0.0f, 1.0f);
    if (on_stage) on_stage("decode", static_cast<int>(i + 1), static_cast<int>(n));
  }
  return out;
}

Result Pipeline::generate(const Request& req, const StepCallback& on_step, const StageCallback& on_stage) const {
  Result r;
  const char* cond_stage = on_stage ? condition_stage() : nullptr;
  if (cond_stage) on_stage(cond_stage, 0, 1);
  Conditions cond;
  {
    StageScope stage(condition_stage() ? condition_stage() : "conditioning");
    cond = condition(req);
  }
  if (cond_stage) on_stage(cond_stage, 1, 1);
  if (on_stage) on_stage("denoise", 0, 0);
  {
    StageScope stage("denoise");
    r.latents = denoise(req, cond, on_step, &r.pab);
  }
  StageScope stage("decode");
  if (par_.output_rank) r.frames = decode(r.latents, on_stage);
  r.scheduler = sampler_of(req);
  return r;
}

}  // namespace ditgen::pipeline
