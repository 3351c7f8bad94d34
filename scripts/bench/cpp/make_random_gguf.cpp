// make_random_gguf: a transformer's weights as one GGUF file of a block
// type, with random values, written tensor by tensor without ever holding
// the float model: for benchmarks of a model too large to write in float32
// first (Wan2.1-T2V-14B: 57 GB in float32, 15 GB in Q8_0). The file is laid
// out as `ditgen convert` lays out a real model's (models/weight_conversion.h:
// the family's single-file names, general.architecture, city96's keys, the
// block type on the matrices inside the blocks and F32 elsewhere, tensors
// sorted by name), so ditgen reads it as it reads a downloaded file.
//
// The tensors (the model's names, diffusers', and their shapes) come from a
// JSON list [[name, [dims...]], ...]; scripts/bench/bench_quantized.py
// writes it from diffusers' class built on the meta device, so no weight
// is ever allocated. Values, per tensor from its own seed: a matrix or
// convolution weight U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (torch.nn.Linear's
// default initialisation), a 1-D norm weight 1, anything else (biases,
// modulation tables) U(-0.02, 0.02). A tensor is drawn a band of rows at a
// time and converted into the writer's buffer, so the program holds one
// output tensor and one float32 band.
//
//   make_random_gguf --config DIR/transformer/config.json --tensors tensors.json --type q8_0
//                    --output FILE.gguf [--seed 0]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_common.h"
#include "io/ggml_quants.h"
#include "io/model_dir.h"
#include "io/weight_convert.h"
#include "models/registry.h"
#include "models/weight_conversion.h"
#include "util/error.h"

using namespace ditgen;

namespace {

constexpr int64_t kBandElements = int64_t{1} << 22;  // 16 MiB of float32 a band

struct Planned {
  std::string name, file_name;  // the model's name, the file's
  Shape shape;
  io::GgmlType type;
  uint64_t seed;
};

// splitmix64: fast, and good enough for weights nobody reads.
struct Draw {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform(float bound) {  // U(-bound, bound)
    return bound * (static_cast<float>(next() >> 40) * 0x1.0p-23f - 1.0f);
  }
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The values of one tensor (see the top comment), `count` of them from `draw`.
void draw_values(const Planned& t, Draw& draw, float* out, int64_t count) {
  const bool weight = ends_with(t.name, "weight");
  if (weight && t.shape.size() == 1 && t.name.find("norm") != std::string::npos) {
    std::fill(out, out + count, 1.0f);
    return;
  }
  float bound = 0.02f;
  if (weight && t.shape.size() >= 2) bound = 1.0f / std::sqrt(static_cast<float>(shape_numel(t.shape) / t.shape[0]));
  for (int64_t i = 0; i < count; ++i) out[i] = draw.uniform(bound);
}

// Fills a tensor's `bytes` in its type, a band of rows at a time.
void fill(const Planned& t, uint8_t* out, uint64_t bytes) {
  const int64_t numel = shape_numel(t.shape);
  const int64_t rows = t.shape.empty() ? 1 : t.shape[0], row = numel / rows;
  uint64_t row_bytes = 0, all = 0;
  if (!io::ggml_bytes(t.type, static_cast<uint64_t>(row), row_bytes) ||
      !io::ggml_bytes(t.type, static_cast<uint64_t>(numel), all) || all != bytes)
    throw std::logic_error("make_random_gguf: '" + t.name + "' is no whole number of blocks a row");
  Draw draw{t.seed};
  const int64_t band = std::max<int64_t>(1, kBandElements / std::max<int64_t>(1, row));
  Tensor values = Tensor::empty({std::min(rows, band) * row});
  for (int64_t r0 = 0; r0 < rows; r0 += band) {
    const int64_t r1 = std::min(rows, r0 + band), n = (r1 - r0) * row;
    draw_values(t, draw, values.data(), n);
    uint8_t* dst = out + static_cast<uint64_t>(r0) * row_bytes;
    switch (t.type) {
      case io::GgmlType::kF32: std::memcpy(dst, values.data(), static_cast<size_t>(n) * 4); break;
      case io::GgmlType::kF16:
      case io::GgmlType::kBF16: {
        const Tensor part = values.slice0(0, n).to(t.type == io::GgmlType::kF16 ? DType::kF16 : DType::kBF16);
        std::memcpy(dst, part.raw(), part.nbytes());
        break;
      }
      default: io::quantize(t.type, values.data(), n, dst);
    }
  }
}

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: make_random_gguf --config CONFIG.json --tensors TENSORS.json --type q8_0|q4_k|... "
               "--output FILE.gguf [--seed 0]\n");
  std::exit(code);
}

}  // namespace

int main(int argc, char** argv) try {
  std::string config, tensors_path, type_name, output;
  uint64_t seed = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&] { return bench::option_value(argc, argv, i, usage); };
    if (k == "--config") config = value();
    else if (k == "--tensors") tensors_path = value();
    else if (k == "--type") type_name = value();
    else if (k == "--output") output = value();
    else if (k == "--seed") seed = std::stoull(value());
    else if (k == "--help" || k == "-h") usage(0);
    else usage(2);
  }
  io::GgmlType type{};
  if (config.empty() || tensors_path.empty() || output.empty() || !io::parse_ggml_type(type_name, type) ||
      !io::can_quantize(type))
    usage(2);
  const auto spec = models::transformer_spec(io::read_json_file(config), config);
  const models::SingleFileNaming naming = spec->single_file_naming();
  const std::string architecture = naming.read.architecture.empty() ? spec->family() : naming.read.architecture;

  std::vector<Planned> plan;
  uint64_t total = 0;
  for (const auto& item : io::read_json_file(tensors_path)) {
    Planned t;
    t.name = item.at(0).get<std::string>();
    t.shape = item.at(1).get<Shape>();
    const auto renamed = naming.file_name ? naming.file_name(t.name) : std::optional<std::string>(t.name);
    if (!renamed) throw ModelError(tensors_path + ": tensor '" + t.name + "' has no name in the " + spec->family() +
                                   " single-file naming");
    t.file_name = *renamed;
    t.type = models::gguf_tensor_type(models::Part::kTransformer, t.name, t.file_name, t.shape, type);
    t.seed = seed * 0x100000001B3ull + plan.size() + 1;
    uint64_t bytes = 0;
    io::ggml_bytes(t.type, static_cast<uint64_t>(shape_numel(t.shape)), bytes);
    total += bytes;
    plan.push_back(std::move(t));
  }
  std::sort(plan.begin(), plan.end(), [](const Planned& a, const Planned& b) { return a.file_name < b.file_name; });
  std::fprintf(stderr, "make_random_gguf: %zu tensors, %.2f GB of %s (%s), to %s\n", plan.size(), total * 1e-9,
               type_name.c_str(), architecture.c_str(), output.c_str());
  io::GgufWriter writer = io::converted_gguf_writer(architecture, type);
  for (const Planned& t : plan)
    writer.add_tensor(t.file_name, t.type, t.shape, [&t](uint8_t* out, uint64_t bytes) { fill(t, out, bytes); });
  writer.write(output, [](size_t index, size_t count, const std::string& name) {
    if (index % 50 == 0 || index + 1 == count)
      std::fprintf(stderr, "  [%zu/%zu] %s\n", index + 1, count, name.c_str());
  });
  return 0;
} catch (const Error& e) {
  std::fprintf(stderr, "make_random_gguf: %s\n", e.what());
  return e.exit_code();
} catch (const std::exception& e) {
  std::fprintf(stderr, "make_random_gguf: %s\n", e.what());
  return 1;
}
