// See vae_spec.h.
#include "models/vae_spec.h"

#include "util/error.h"

namespace ditgen::models {

void VaeFactors::check_frames(int64_t frames, const std::string& where) const {
  const int64_t t = temporal;
  if (frames >= 1 && (frames - 1) % t == 0) return;
  const int64_t below = frames < 1 ? 1 : 1 + (frames - 1) / t * t, above = below + t;
  throw ConfigError(where + ": " + std::to_string(frames) + " frames: this " + family + " VAE makes 1 + " +
                    std::to_string(t) + "k frames (the nearest: " +
                    (frames > 1 ? std::to_string(below) + " or " : std::string()) + std::to_string(above) + ")");
}

}  // namespace ditgen::models
