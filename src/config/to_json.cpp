// to_json: RunConfig -> the effective config document. Written so that
// load_config reads it back to the same settings (tested), which makes the
// PNG metadata a config that regenerates the image.
#include "config/config.h"

#include <utility>

namespace ditgen {
namespace {

using nlohmann::json;

json pab_kind_json(const PabKindConfig& kind, bool with_blocks) {
  json j = {{"range", kind.range}, {"threshold", {kind.threshold[0], kind.threshold[1]}}};
  if (with_blocks) j["blocks"] = kind.blocks;
  return j;
}

json generate_json(const GenerateConfig& g) {
  json j = json::object();
  if (!g.class_labels.empty()) {
    json labels = json::array();
    for (const auto& label : g.class_labels)
      std::visit([&](const auto& value) { labels.push_back(value); }, label);
    j["class_labels"] = labels;
  }
  if (!g.prompts.empty()) j["prompts"] = g.prompts;
  // As given, even "": a class-label model refuses the key, so it must
  // round-trip (fuzz_run_config holds to_json to that).
  if (g.negative_prompt_given || !g.negative_prompt.empty()) j["negative_prompt"] = g.negative_prompt;
  if (!g.prompt_file.empty()) j["prompt_file"] = g.prompt_file;
  if (!g.image.empty()) j["image"] = g.image;
  if (!g.last_image.empty()) j["last_image"] = g.last_image;
  if (g.max_sequence_length != 0) j["max_sequence_length"] = g.max_sequence_length;
  j["seed"] = g.seed;
  j["steps"] = g.steps;
  j["guidance_scale"] = g.guidance_scale;
  if (g.guidance_scale_2) j["guidance_scale_2"] = *g.guidance_scale_2;
  if (g.scheduler != sched::Sampler::kModelDefault) j["scheduler"] = sched::name_of(g.scheduler);
  if (g.shift) j["shift"] = *g.shift;
  j["batch_size"] = g.batch_size;
  if (g.frames != 0) j["frames"] = g.frames;
  if (g.height != 0) j["height"] = g.height;
  if (g.width != 0) j["width"] = g.width;
  return j;
}

json cache_json(const CacheConfig& c) {
  if (!c.enabled()) return json::object();
  json j = {{"kind", name_of(*c.kind)}, {"threshold", c.threshold}};
  if (!c.coefficients.empty()) j["coefficients"] = c.coefficients;
  return j;
}

}  // namespace

json to_json(const RunConfig& c) {
  json pab = json::object();
  if (c.pab.spatial) pab["spatial"] = pab_kind_json(*c.pab.spatial, false);
  if (c.pab.temporal) pab["temporal"] = pab_kind_json(*c.pab.temporal, false);
  if (c.pab.cross) pab["cross"] = pab_kind_json(*c.pab.cross, false);
  if (c.pab.mlp) pab["mlp"] = pab_kind_json(*c.pab.mlp, true);
  nlohmann::json j = {
      {"model", {{"path", c.model.path}, {"dtype", name_of(c.model.dtype)}, {"vae_dtype", name_of(c.model.vae_dtype)}}},
      {"generate", generate_json(c.generate)},
      {"parallel", {{"sp", c.parallel.sp}, {"cp", c.parallel.cp}, {"tp", c.parallel.tp},
                    {"sp_mode", name_of(c.parallel.sp_mode)}}},
      {"pab", pab},
      {"output", {{"path", c.output.path}, {"format", name_of(c.output.format)}, {"grid", c.output.grid}}},
  };
  if (!c.model.source.empty()) j["model"]["source"] = c.model.source;
  if (!c.model.transformer.empty()) j["model"]["transformer"] = c.model.transformer;
  if (!c.model.transformer_2.empty()) j["model"]["transformer_2"] = c.model.transformer_2;
  if (!c.model.text_encoder.empty()) j["model"]["text_encoder"] = c.model.text_encoder;
  if (!c.model.vae.empty()) j["model"]["vae"] = c.model.vae;
  if (c.model.quantize != Quantize::kNone) j["model"]["quantize"] = name_of(c.model.quantize);
  // The encoder's settings only for mp4 (with png they are an error).
  if (c.output.format == OutputFormat::kMp4) {
    j["output"]["fps"] = c.output.fps;
    j["output"]["crf"] = c.output.crf;
  }
  // A run control, not a setting of the outputs: written only when on, so
  // a resumed run's files carry the same config as an uninterrupted run's.
  if (c.output.skip_existing) j["output"]["skip_existing"] = true;
  // Written only when on, so configs without a cache round-trip (and PNG
  // metadata) as before.
  if (c.cache.enabled()) j["cache"] = cache_json(c.cache);
  // Written only when not the default, so configs without it round-trip
  // (and PNG metadata) as before.
  if (c.vae != VaeConfig{}) {
    json& v = j["vae"];
    v["tiling"] = name_of(c.vae.tiling);
    const std::pair<const char*, int> sizes[] = {{"tile_sample_min_height", c.vae.tile_sample_min_height},
                                                 {"tile_sample_min_width", c.vae.tile_sample_min_width},
                                                 {"tile_sample_stride_height", c.vae.tile_sample_stride_height},
                                                 {"tile_sample_stride_width", c.vae.tile_sample_stride_width}};
    for (const auto& [key, value] : sizes)
      if (value > 0) v[key] = value;
  }
  // PipeFusion's settings only when asked for, so configs without them
  // round-trip (and PNG metadata) as before.
  if (c.parallel.pp != 1 || c.parallel.patches != 0 || c.parallel.warmup_steps != 1) {
    j["parallel"]["pp"] = c.parallel.pp;
    j["parallel"]["patches"] = c.parallel.patches;
    j["parallel"]["warmup_steps"] = c.parallel.warmup_steps;
  }
  if (!c.parallel.sp_weights.empty()) j["parallel"]["sp_weights"] = c.parallel.sp_weights;
  // Only with a LoRA, so configs without one round-trip (and PNG metadata)
  // as before; the files' own digests are the run record's (cli/).
  if (!c.lora.empty()) {
    j["lora"] = json::array();
    for (const LoraConfig& l : c.lora)
      j["lora"].push_back({{"path", l.path}, {"scale", l.scale}, {"target", name_of(l.target)}});
    j["lora_strict"] = c.lora_strict;
    if (c.lora_apply) j["lora_apply"] = name_of(*c.lora_apply);
  }
  return j;
}

}  // namespace ditgen
