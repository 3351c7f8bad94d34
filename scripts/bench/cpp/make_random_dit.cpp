// make_random_dit: writes a DiTTransformer2DModel directory (config.json +
// diffusion_pytorch_model.safetensors) with DiT-XL/2 or DiT-B/2 sizes and
// random weights, natively, so bench_forward can time a full-size
// transformer on a machine without Python (a GPU machine, say). The values
// are N(0, 0.02) with a fixed seed: outputs are noise, but the shapes, FLOPs
// and memory are those of the real model. scripts/models/make_random_model.py makes
// the whole pipeline (VAE too) with diffusers where PyTorch is available.
// --dtype bfloat16 / float16 stores the weights in that dtype (the float32
// draws rounded to nearest even, as torch's .to() would), as released
// checkpoints often are.
//
//   make_random_dit --preset dit-xl-2-256 --out /tmp/dit-xl-2-256-transformer [--dtype bfloat16]
//   bench_forward --model /tmp/dit-xl-2-256-transformer --device cuda --dtype bfloat16
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "util/error.h"

using namespace ditgen;

namespace {

struct Preset {
  int64_t sample, layers, heads, head_dim;
};

// The same presets as scripts/models/make_random_model.py (patch 2, 4 -> 8 channels, 1000 classes).
const std::map<std::string, Preset> kPresets = {{"dit-xl-2-256", {32, 28, 16, 72}},
                                                {"dit-xl-2-512", {64, 28, 16, 72}},
                                                {"dit-b-2-256", {32, 12, 12, 64}}};

Tensor random(Shape shape, std::mt19937& rng) {
  Tensor t = Tensor::empty(std::move(shape));
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = dist(rng);
  return t;
}

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: make_random_dit --preset dit-xl-2-256|dit-xl-2-512|dit-b-2-256 --out DIR "
               "[--dtype float32|bfloat16|float16]\n");
  std::exit(code);
}

}  // namespace

int main(int argc, char** argv) try {
  std::string preset = "dit-xl-2-256", out, dtype_arg = "float32";
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if ((k == "--preset" || k == "--out" || k == "--dtype") && i + 1 < argc)
      (k == "--preset" ? preset : k == "--out" ? out : dtype_arg) = argv[++i];
    else
      usage(k == "--help" || k == "-h" ? 0 : 2);
  }
  if (out.empty() || !kPresets.count(preset)) usage(2);
  DType dtype = DType::kF32;
  if (dtype_arg == "bfloat16") dtype = DType::kBF16;
  else if (dtype_arg == "float16") dtype = DType::kF16;
  else if (dtype_arg != "float32") usage(2);
  const Preset p = kPresets.at(preset);
  const int64_t d = p.heads * p.head_dim, f = 4 * d, patch = 2, in = 4, out_ch = 8, classes = 1000;

  std::mt19937 rng(0);
  std::vector<std::pair<std::string, Tensor>> w;
  // Converted as drawn, so only the stored dtype's copy is ever held.
  auto add = [&](const std::string& name, Shape shape) {
    w.emplace_back(name, random(std::move(shape), rng).to(dtype));
  };
  add("pos_embed.proj.weight", {d, in, patch, patch});
  add("pos_embed.proj.bias", {d});
  for (int64_t i = 0; i < p.layers; ++i) {
    const std::string b = "transformer_blocks." + std::to_string(i) + ".";
    add(b + "norm1.emb.timestep_embedder.linear_1.weight", {d, 256});
    add(b + "norm1.emb.timestep_embedder.linear_1.bias", {d});
    add(b + "norm1.emb.timestep_embedder.linear_2.weight", {d, d});
    add(b + "norm1.emb.timestep_embedder.linear_2.bias", {d});
    add(b + "norm1.emb.class_embedder.embedding_table.weight", {classes + 1, d});
    add(b + "norm1.linear.weight", {6 * d, d});
    add(b + "norm1.linear.bias", {6 * d});
    for (const char* proj : {"to_q", "to_k", "to_v", "to_out.0"}) {
      add(b + "attn1." + proj + ".weight", {d, d});
      add(b + "attn1." + proj + ".bias", {d});
    }
    add(b + "ff.net.0.proj.weight", {f, d});
    add(b + "ff.net.0.proj.bias", {f});
    add(b + "ff.net.2.weight", {d, f});
    add(b + "ff.net.2.bias", {d});
  }
  add("proj_out_1.weight", {2 * d, d});
  add("proj_out_1.bias", {2 * d});
  add("proj_out_2.weight", {patch * patch * out_ch, d});
  add("proj_out_2.bias", {patch * patch * out_ch});

  std::filesystem::create_directories(out);
  const nlohmann::json cfg = {{"_class_name", "DiTTransformer2DModel"}, {"num_attention_heads", p.heads},
                              {"attention_head_dim", p.head_dim},       {"in_channels", in},
                              {"out_channels", out_ch},                 {"num_layers", p.layers},
                              {"sample_size", p.sample},                {"patch_size", patch},
                              {"num_embeds_ada_norm", classes},         {"norm_type", "ada_norm_zero"},
                              {"activation_fn", "gelu-approximate"},    {"norm_elementwise_affine", false},
                              {"attention_bias", true},                 {"norm_eps", 1e-5}};
  std::ofstream(out + "/config.json") << cfg.dump(2) << "\n";
  io::write_safetensors(out + "/diffusion_pytorch_model.safetensors", w);
  int64_t params = 0;
  for (const auto& [name, t] : w) params += t.numel();
  std::printf("wrote %s: %s, %lld %s parameters\n", out.c_str(), preset.c_str(), static_cast<long long>(params),
              dtype_name(dtype));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "make_random_dit: %s\n", e.what());
  return 1;
}
