// The names other tools give ditgen's settings, so that a user who brings
// them gets "did you mean" ditgen's: diffusers' pipeline arguments
// (num_inference_steps, num_frames, guidance_scale), stable-diffusion.cpp's
// options (--cfg-scale, --sampling-method, -p, -n, -o), xDiT's parallel
// degrees (ulysses_degree, ring_degree), ComfyUI's sampler inputs (cfg,
// sampler_name). One table serves the config keys (config/schema.h) and
// the command-line options (config/cli_options.h).
#pragma once
#include <string>

namespace ditgen::config {

// The schema path another tool's `name` means ("num_inference_steps",
// "num-inference-steps" and "NUM_INFERENCE_STEPS" -> "generate.steps"),
// or nullptr.
const char* schema_path_for_foreign_name(const std::string& name);

// What to type instead of another tool's command-line option `option`
// ("--cfg", "-p", "--sampling-method=euler"): ditgen's flag ("--guidance",
// "--prompt") or the --set that does it ("--set generate.scheduler=NAME");
// "" when the name is no other tool's.
std::string ditgen_option_for_foreign_option(const std::string& option);

}  // namespace ditgen::config
