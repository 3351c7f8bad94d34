// WanSpec: Wan's sizes as the generic seams want them. The latent shape
// follows WanPipeline (height and width multiples of 16 for Wan 2.1's VAE
// and patch; frames through the VAE's temporal factor), the Workload the
// tensors WanTransformer declares.
#include "models/wan_spec.h"

#include "io/wan_names.h"

#include "util/error.h"

namespace ditgen::models {

Shape WanSpec::latent_shape(int64_t height, int64_t width, int64_t frames, const VaeFactors& vae,
                            const std::string& where) const {
  const auto [lh, lw] = models::latent_size(height, width, kDefaultHeight, kDefaultWidth, vae.spatial,
                                            cfg_.patch_size, where);
  const int64_t unit = vae.spatial * cfg_.patch_size, h = lh * vae.spatial, w = lw * vae.spatial;
  const int64_t f = frames ? frames : kDefaultFrames;
  vae.check_frames(f, where + ".frames");
  const int64_t latent_frames = vae.latent_frames_of(f);
  const int64_t max_side = cfg_.rope_max_seq_len;
  if (latent_frames > max_side || h / unit > max_side || w / unit > max_side)
    throw ConfigError(where + ": " + std::to_string(f) + " frames of " + std::to_string(h) + "x" + std::to_string(w) +
                      ": more than rope_max_seq_len " + std::to_string(max_side) +
                      " positions along an axis (the model's rotary tables end there)");
  return {cfg_.in_channels, latent_frames, h / vae.spatial, w / vae.spatial};
}

parallel::Workload WanSpec::workload(const Shape& latent) const {
  using parallel::AttentionKind;
  // Per layer: self-attention over every frame's tokens, cross-attention to
  // the text, one MLP; the condition embedder is held whole: nothing
  // gathered over tp. The cross-attention's text length is the run's
  // (max_sequence_length), not the config's: `plan` sets it.
  parallel::Workload w = sized(latent, {AttentionKind::kSpatioTemporal, AttentionKind::kCross}, 1);
  w.qk_norms_across_heads = true;  // under tp, a squared sum per row of q and k all-reduced
  // Image-to-video: the cross-attention also attends to the image tokens
  // (context, whole on every rank): one image's, or both of first-last-frame's.
  w.attention[1].added_tokens = image_tokens();
  return w;
}

std::vector<double> WanSpec::teacache_coefficients() const {
  // ali-vilab/TeaCache 7c10efc, TeaCache4Wan2.1/teacache_generate.py:890 (T2V 1.3B) and :892 (T2V 14B),
  // calibrated with use_ret_steps off: the signal is the time embedding.
  if (cfg_.num_layers == 30 && cfg_.inner_dim() == 1536)
    return {2.39676752e+03, -1.31110545e+03, 2.01331979e+02, -8.29855975e+00, 1.37887774e-01};
  if (cfg_.num_layers == 40 && cfg_.inner_dim() == 5120)
    return {-5784.54975374, 5449.50911966, -1811.16591783, 256.27178429, -13.02252404};
  return {};
}

SingleFileNaming wan_single_file_naming() {
  SingleFileNaming naming;
  io::SingleFileOptions& o = naming.read;
  o.architecture = "wan";
  o.prefix = "model.diffusion_model.";
  o.other_naming_probe = "blocks.0.self_attn.q.weight";
  o.rename = [](const std::string& name) -> std::optional<std::string> {
    // ComfyUI's scaled float8 files: a scale beside each weight, and a marker.
    const std::string scale = ".scale_weight";
    if (name == "scaled_fp8") return name;
    if (name.size() > scale.size() && name.compare(name.size() - scale.size(), scale.size(), scale) == 0) {
      const std::string stem = name.substr(0, name.size() - scale.size());
      const std::optional<std::string> weight = io::wan_original_to_diffusers(stem + ".weight");
      if (!weight) return std::nullopt;
      return weight->substr(0, weight->size() - 7) + scale;  // ".weight" -> ".scale_weight"
    }
    return io::wan_original_to_diffusers(name);
  };
  naming.file_name = [](const std::string& name) { return io::wan_diffusers_to_original(name); };
  return naming;
}

SingleFileNaming WanSpec::single_file_naming() const { return wan_single_file_naming(); }

}  // namespace ditgen::models
