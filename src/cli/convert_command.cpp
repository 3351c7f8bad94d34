#include "cli/convert_command.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "cli/preflight.h"
#include "io/ggml_quants.h"
#include "io/weight_convert.h"
#include "models/weight_conversion.h"
#include "ops/ops.h"
#include "util/error.h"
#include "util/progress.h"

namespace ditgen::cli {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool is_float_type(io::GgmlType t) {
  return t == io::GgmlType::kF32 || t == io::GgmlType::kF16 || t == io::GgmlType::kBF16;
}

// --type: a ggml type ditgen has a quantizer for.
io::GgmlType parse_type(const std::string& text) {
  io::GgmlType type = io::GgmlType::kF32;
  if (io::parse_ggml_type(text, type) && io::can_quantize(type)) return type;
  std::string known;
  for (const math::GgmlTypeTraits& t : math::kGgmlTypes)
    if (io::can_quantize(t.type)) known += (known.empty() ? "" : ", ") + lower(t.name);
  throw ConfigError("--type " + text + ": not a type convert writes (" + known + ")");
}

// The summary's "20 Q8_0, 46 F32".
std::string type_counts(const std::vector<io::ConvertedTensor>& plan) {
  std::map<std::string, int> counts;
  for (const io::ConvertedTensor& t : plan) ++counts[math::ggml_traits(t.type).name];
  std::string out;
  for (const auto& [name, n] : counts) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  return out;
}

}  // namespace

void run_convert(const CliOptions& opts) {
  const ConvertOptions& conv = opts.convert;
  const auto start = std::chrono::steady_clock::now();
  // The arguments first, then the input's headers, then the output folder.
  const io::GgmlType type = parse_type(conv.type);
  const std::vector<std::string>& components = models::conversion_components();
  if (std::find(components.begin(), components.end(), conv.component) == components.end()) {
    std::string known;
    for (const std::string& c : components) known += (known.empty() ? "" : ", ") + c;
    throw ConfigError("--component " + conv.component + ": not a part convert knows (" + known + ")");
  }
  const std::string extension = lower(std::filesystem::path(conv.output).extension().string());
  if (extension != ".gguf" && extension != ".safetensors")
    throw ConfigError("--output " + conv.output + ": expected a .gguf or .safetensors file name (its extension "
                      "picks the format)");
  const bool gguf = extension == ".gguf";
  if (!gguf && !is_float_type(type))
    throw ConfigError("--type " + conv.type + ": a .safetensors file holds f32, f16 or bf16; block types need a "
                      ".gguf --output");

  const models::ConversionInput input = models::open_conversion_input(conv.input, conv.component);
  const std::vector<io::ConvertedTensor> plan = models::conversion_plan(input, type, gguf);
  probe_writable_file(conv.output, "--output");
  ops::set_num_threads(opts.threads > 0 ? opts.threads : default_threads(1));

  Progress progress(static_cast<int>(plan.size()), !opts.quiet, "convert");
  const io::WriteProgress on_tensor = [&](size_t index, size_t, const std::string&) {
    if (index > 0) progress.step_done(static_cast<int>(index) - 1);
  };
  if (gguf)
    io::write_converted_gguf(input.weights, plan, input.architecture, type, conv.output, on_tensor);
  else
    io::write_converted_safetensors(input.weights, plan, {{"format", "pt"}}, conv.output, on_tensor);
  if (!plan.empty()) progress.step_done(static_cast<int>(plan.size()) - 1);
  progress.finish();

  if (!opts.quiet) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(conv.output, ec);
    std::fprintf(stderr, "ditgen convert: %s (%s%s%s) -> %s: %zu tensors (%s), %.1f MiB, %.2f s\n",
                 conv.input.c_str(), input.family.empty() ? "" : input.family.c_str(),
                 input.family.empty() ? "" : " ", conv.component.c_str(), conv.output.c_str(), plan.size(),
                 type_counts(plan).c_str(), ec ? 0.0 : static_cast<double>(bytes) / (1 << 20), seconds);
  }
}

}  // namespace ditgen::cli
