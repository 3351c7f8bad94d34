#include "cli/encode_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/model_presence.h"
#include "config/device_choice.h"
#include "config/prompt_file.h"
#include "io/safetensors.h"
#include "ops/backend.h"
#include "ops/ops.h"
#include "pipeline/text_encoding.h"
#include "util/error.h"

namespace ditgen::cli {

namespace {

std::vector<std::string> read_prompts(const EncodeOptions& enc) {
  if (!enc.prompt_file.empty()) {
    std::vector<std::string> prompts;
    for (const config::PromptEntry& e : config::read_prompt_file(enc.prompt_file)) prompts.push_back(e.prompt);
    return prompts;
  }
  for (size_t i = 0; i < enc.prompts.size(); ++i)
    config::check_prompt_text(enc.prompts[i], "--prompt #" + std::to_string(i + 1));
  return enc.prompts;
}

Tensor int64_row(const std::vector<int64_t>& values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, Device::kCPU, DType::kI64);
  std::copy(values.begin(), values.end(), t.data_as<int64_t>());
  return t;
}

const char* dtype_label(const models::Placement& place) { return dtype_name(place.dtype); }

}  // namespace

void run_encode(const CliOptions& opts) {
  const EncodeOptions& enc = opts.encode;
  const auto start = std::chrono::steady_clock::now();
  // Everything that needs no weights first: prompts, output name, device,
  // the model's configs and tokenizer.
  const std::vector<std::string> prompts = read_prompts(enc);
  if (enc.output.empty()) throw ConfigError("--output: expected a .safetensors file name");
  require_model_folder(enc.model_dir, "--model");
  const pipeline::TextStage stage = pipeline::TextStage::open(enc.model_dir);
  const int64_t L = enc.max_sequence_length > 0 ? enc.max_sequence_length : stage.default_max_length();

  const DeviceChoice device =
      choose_device(opts.device, DTypeChoice::kFloat32, "auto", ops::cuda_built(), ops::cuda_device_count(), false);
  if (device.device == Device::kCUDA) ops::bind_cuda_device(0);
  ops::set_num_threads(opts.threads > 0 ? opts.threads : default_threads(1));
  const models::Placement place = pipeline::text_encoder_placement(device.device, enc.dtype);

  const pipeline::PromptEmbeddings result =
      enc.ids_only ? stage.tokenize(prompts, L) : stage.encode(prompts, L, place);

  std::vector<std::pair<std::string, Tensor>> tensors;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string n = std::to_string(i);
    tensors.emplace_back("ids_" + n, int64_row(result.tokens.ids[i]));
    tensors.emplace_back("mask_" + n, int64_row(result.tokens.mask[i]));
    if (!enc.ids_only) {
      const int64_t k = static_cast<int64_t>(i);
      tensors.emplace_back("embeds_" + n, result.embeds.slice0(k, k + 1).reshape({L, result.embeds.dim(2)}));
    }
  }
  const models::TextEncoderSpec& spec = stage.encoder_spec();
  const std::map<std::string, std::string> metadata = {
      {"format", "ditgen encode"},
      {"prompts", nlohmann::json(prompts).dump()},
      {"texts", nlohmann::json(result.texts).dump()},
      {"num_tokens", nlohmann::json(result.tokens.num_tokens).dump()},
      {"max_sequence_length", std::to_string(L)},
      {"dtype", enc.ids_only ? "none" : dtype_label(place)},
      {"text_encoder", std::string(spec.variant()) + " (" + stage.encoder_dir() + ")"},
      {"tokenizer", std::string(io::t5_tokenizer_kind_name(stage.tokenizer().kind())) + " (" +
                        stage.tokenizer().source() + ")"},
      {"pipeline", stage.pipeline_class()},
      {"zero_padded", stage.rules().zero_padded_unmasked ? "true" : "false"}};
  io::write_safetensors(enc.output, tensors, metadata);

  if (!opts.quiet) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "ditgen encode: %zu prompt(s), %lld tokens each, %s%s -> %s (%.2f s)\n", prompts.size(),
                 static_cast<long long>(L), enc.ids_only ? "ids only" : spec.variant(),
                 enc.ids_only ? "" : (std::string(" in ") + dtype_label(place) + " on " +
                                      (device.device == Device::kCUDA ? "cuda" : "cpu")).c_str(),
                 enc.output.c_str(), seconds);
  }
}

}  // namespace ditgen::cli
