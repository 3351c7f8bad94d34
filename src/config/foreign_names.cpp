// See foreign_names.h. Names are compared lower-case with '-' as '_'.
#include "config/foreign_names.h"

#include <algorithm>
#include <cctype>

namespace ditgen::config {
namespace {

struct ForeignName {
  const char* name;
  const char* schema_path;
};

// clang-format off
constexpr ForeignName kForeignNames[] = {
    {"cfg", "generate.guidance_scale"},            {"cfg_scale", "generate.guidance_scale"},
    {"guidance", "generate.guidance_scale"},       {"true_cfg_scale", "generate.guidance_scale"},
    {"num_inference_steps", "generate.steps"},     {"sampling_steps", "generate.steps"},
    {"sample_steps", "generate.steps"},            {"num_steps", "generate.steps"},
    {"num_frames", "generate.frames"},             {"video_frames", "generate.frames"},
    {"video_length", "generate.frames"},           {"frame_num", "generate.frames"},
    {"prompt", "generate.prompts"},                {"negative", "generate.negative_prompt"},
    {"sampler", "generate.scheduler"},             {"sampler_name", "generate.scheduler"},
    {"sampling_method", "generate.scheduler"},     {"sample_method", "generate.scheduler"},
    {"flow_shift", "generate.shift"},              {"sample_shift", "generate.shift"},
    {"num_images_per_prompt", "generate.batch_size"}, {"batch_count", "generate.batch_size"},
    {"pretrained_model_name_or_path", "model.path"}, {"model_path", "model.path"},
    {"model_id", "model.path"},                    {"checkpoint", "model.path"},
    {"model", "model.path"},                       {"diffusion_model", "model.path"},
    {"torch_dtype", "model.dtype"},
    {"output_path", "output.path"},                {"output_dir", "output.path"},
    {"output_type", "output.format"},              {"frame_rate", "output.fps"},
    {"ulysses_degree", "parallel.sp"},             {"ring_degree", "parallel.sp"},
    {"sp_degree", "parallel.sp"},                  {"cfg_parallel", "parallel.cp"},
    {"use_cfg_parallel", "parallel.cp"},           {"tensor_parallel_degree", "parallel.tp"},
    {"tp_size", "parallel.tp"},                    {"pipefusion_parallel_degree", "parallel.pp"},
    {"num_pipeline_patch", "parallel.patches"},
};

// The settings with a flag of their own (config/cli_options.h).
constexpr ForeignName kFlags[] = {
    {"--guidance", "generate.guidance_scale"}, {"--steps", "generate.steps"},   {"--frames", "generate.frames"},
    {"--prompt", "generate.prompts"},          {"--negative-prompt", "generate.negative_prompt"},
    {"--seed", "generate.seed"},               {"--output", "output.path"},     {"-H/--height", "generate.height"},
    {"-W/--width", "generate.width"},
};

// Other tools' one-letter options (stable-diffusion.cpp's).
constexpr ForeignName kShortOptions[] = {
    {"p", "--prompt"}, {"n", "--negative-prompt"}, {"o", "--output"}, {"s", "--seed"}, {"t", "--threads"},
    {"m", "--set model.path=DIR"}, {"b", "--set generate.batch_size=N"},
};
// clang-format on

std::string normalised(const std::string& name) {
  std::string out = name;
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return c == '-' ? '_' : static_cast<char>(std::tolower(c)); });
  return out;
}

// What a --set of `path` is written as, with a placeholder for the value.
std::string set_form(const std::string& path) {
  const std::string key = path.substr(path.rfind('.') + 1);
  const char* value = key == "path" ? "DIR" : key == "scheduler" || key == "dtype" || key == "format" ? "NAME" : "N";
  return "--set " + path + "=" + value;
}

}  // namespace

const char* schema_path_for_foreign_name(const std::string& name) {
  const std::string key = normalised(name);
  for (const ForeignName& f : kForeignNames)
    if (key == f.name) return f.schema_path;
  return nullptr;
}

std::string ditgen_option_for_foreign_option(const std::string& option) {
  std::string name = option.substr(0, option.find('='));
  const bool short_form = name.size() == 2 && name[0] == '-' && name[1] != '-';
  name.erase(0, name.find_first_not_of('-'));
  if (short_form)
    for (const ForeignName& f : kShortOptions)
      if (name == f.name) return f.schema_path;
  const std::string key = normalised(name);
  const char* path = nullptr;
  // "--cfg-scale" is ditgen's own alias; "--guidance-scale" and others are not.
  if (key == "guidance_scale" || key == "scale") path = "generate.guidance_scale";
  if (!path) path = schema_path_for_foreign_name(name);
  if (!path) return "";
  for (const ForeignName& f : kFlags)
    if (std::string(f.schema_path) == path) return f.name;
  return set_form(path);
}

}  // namespace ditgen::config
