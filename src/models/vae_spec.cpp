// See vae_spec.h.
#include "models/vae_spec.h"

#include <algorithm>

#include "util/error.h"

namespace ditgen::models {

void VaeFactors::check_frames(int64_t frames, const std::string& where) const {
  const int64_t t = frame_step > 0 ? frame_step : temporal;
  if (frames >= 1 && (frames - 1) % t == 0) return;
  const int64_t below = frames < 1 ? 1 : 1 + (frames - 1) / t * t, above = below + t;
  throw ConfigError(where + ": " + std::to_string(frames) + " frames: this " + family + " VAE makes 1 + " +
                    std::to_string(t) + "k frames (the nearest: " +
                    (frames > 1 ? std::to_string(below) + " or " : std::string()) + std::to_string(above) + ")");
}

std::vector<int64_t> VaeSpec::latent_chunks(int64_t latent_frames) const {
  const int64_t step = std::max<int64_t>(1, chunk_latent_frames());
  std::vector<int64_t> chunks;
  for (int64_t f0 = 0; f0 < latent_frames; f0 += step) chunks.push_back(std::min(step, latent_frames - f0));
  return chunks;
}

std::unique_ptr<VaeEncoder> VaeSpec::load_encoder(const io::WeightStore&, const Placement&) const {
  not_supported(std::string("encoding with the ") + family() + " VAE");
}

int64_t declared_elements(const nn::TensorDecls& decls) {
  int64_t n = 0;
  for (const nn::TensorDecl& d : decls) n += shape_numel(d.shape);
  return n;
}

double full_resolution_bytes(int64_t pixels, int64_t frames, int64_t upsampled_channels, int64_t channels,
                             int64_t causal_convs) {
  constexpr double kWorkingCopies = 4;
  const double upsample = static_cast<double>(frames) * static_cast<double>(upsampled_channels + channels);
  const double level = kWorkingCopies * static_cast<double>(frames + (causal_convs > 0 ? 2 : 0)) *
                       static_cast<double>(channels);
  const double cache = 2.0 * static_cast<double>(causal_convs) * static_cast<double>(channels);
  return 4.0 * static_cast<double>(pixels) * std::max(upsample, level + cache);
}

}  // namespace ditgen::models
