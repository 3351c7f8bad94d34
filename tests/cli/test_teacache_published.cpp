// TeaCache with no cache.coefficients takes the model's published row
// (docs/step-caches.md; the rows against their source:
// tests/models/test_teacache_coefficients.cpp). Two views from the command
// line:
//  - on each published model's own config files (configs/models/..., with
//    the tiny fixture's tokenizer beside them: no weights are read before
//    the cache is set up), teacache without coefficients passes every check
//    and goes on to read the weights (exit 3: there are none), where the
//    same files one layer away stop at exit 2 naming cache.coefficients;
//  - a run of a model of Wan2.1-T2V-1.3B's sizes (30 layers of 12 heads x
//    128: what its row is matched by), made here beside wan_tiny's other
//    parts, decides with that row: --cache-stats reports it, every
//    accumulated value is the sum of that polynomial at the steps' metrics
//    (evaluated here from tests/teacache_published.h), a run given the row
//    explicitly decides identically, and one given Wan2.1-T2V-14B's row
//    accumulates otherwise.
// The run's transformer file is 2.4 GB of float32, written sparse: every
// weight a hole (zeros) but the time embedder's, the TeaCache signal on Wan
// (10 MB of pseudo-random values); small in all else (ffn 64, text 32, 6
// channels) on one 16 x 16 frame, a single token. ditgen maps it and reads
// the zeros through the page cache (float32 weights run in float32 are not
// copied); TeaCache skips the blocks at all but the forced first and last
// steps.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../models/fixture.h"
#include "io/safetensors.h"
#include "run_command.h"
#include "teacache_published.h"
#include "temp_dir.h"

using namespace ditgen;
namespace fs = std::filesystem;

namespace {

const testing::PublishedTeaCache& published(const std::string& model) {
  for (const auto& p : testing::kPublishedTeaCache)
    if (model == p.model) return p;
  FAIL("no published row for " << model);
  return testing::kPublishedTeaCache[0];  // not reached: FAIL throws
}

// numpy.poly1d(coefficients)(x), highest power first.
double poly1d(const std::vector<double>& coefficients, double x) {
  double y = 0;
  for (double c : coefficients) y = y * x + c;
  return y;
}

// A run config file in `dir` for ditgen on `model_dir` (one prompt, 2 steps, teacache without coefficients).
std::string published_config_run(const testing::TempDir& dir, const fs::path& model_dir) {
  const nlohmann::json run = {
      {"model", {{"path", model_dir.string()}}},
      {"generate", {{"prompts", {"a cat"}}, {"steps", 2}}},
      {"cache", {{"kind", "teacache"}, {"threshold", 0.1}}},
      {"output", {{"path", dir.file("out/v.png")}}}};
  return dir.write("run.json", run.dump(2));
}

// Writes `file`: a safetensors file of float32 tensors (name, shape), in
// that order; the first `written` of them get `values` (their elements in
// turn), every later one is zeros left as a hole of the sparse file.
void write_sparse_safetensors(const std::string& file, const std::vector<std::pair<std::string, Shape>>& tensors,
                              size_t written, const std::vector<float>& values) {
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  uint64_t at = 0, written_bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    uint64_t n = 1;
    for (int64_t d : tensors[i].second) n *= static_cast<uint64_t>(d);
    header[tensors[i].first] = {{"dtype", "F32"}, {"shape", tensors[i].second}, {"data_offsets", {at, at + 4 * n}}};
    at += 4 * n;
    if (i < written) written_bytes = at;
  }
  REQUIRE(values.size() * 4 == written_bytes);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(file, std::ios::binary);
  const uint64_t length = text.size();
  char length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);  // little endian
  out.write(length_bytes, 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(written_bytes));
  out.close();
  REQUIRE(out.good());
  fs::resize_file(file, 8 + length + at);  // the zeros: a hole, nothing written
}

// wan_tiny with its transformer at Wan2.1-T2V-1.3B's sizes (see the top).
void make_wan_13b_sized(const fs::path& model) {
  const fs::path tiny = testing::fixture_dir("wan_tiny");
  fs::copy(tiny, model, fs::copy_options::recursive);
  fs::remove(model / "transformer" / "diffusion_pytorch_model.safetensors");
  nlohmann::json config = nlohmann::json::parse(std::ifstream(tiny / "transformer" / "config.json"));
  REQUIRE(config["num_attention_heads"].get<int>() * config["attention_head_dim"].get<int>() == 48);
  config["num_layers"] = 30;
  config["num_attention_heads"] = 12;
  config["attention_head_dim"] = 128;
  std::ofstream(model / "transformer" / "config.json") << config.dump(2);

  // wan_tiny's tensors with its width (48, and 6 x 48 for time_proj)
  // widened to 1536, block 0's repeated as blocks 0..29; the time embedder first.
  const auto file = io::SafetensorsFile::open((tiny / "transformer" / "diffusion_pytorch_model.safetensors").string());
  std::vector<std::pair<std::string, Shape>> first, rest;
  for (const std::string& name : file->names()) {
    Shape shape = file->info(name).shape;
    for (int64_t& d : shape) d = d == 48 ? 1536 : d == 6 * 48 ? 6 * 1536 : d;
    if (name.rfind("blocks.1.", 0) == 0) continue;
    if (name.rfind("blocks.0.", 0) == 0) {
      for (int layer = 0; layer < 30; ++layer) rest.push_back({"blocks." + std::to_string(layer) + name.substr(8), shape});
    } else {
      (name.rfind("condition_embedder.time_embedder.", 0) == 0 ? first : rest).push_back({name, shape});
    }
  }
  REQUIRE(first.size() == 4);  // linear_1 and linear_2, weight and bias
  std::vector<float> values;
  uint32_t state = 12345;
  for (const auto& [name, shape] : first) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const double scale = 1.0 / std::sqrt(static_cast<double>(shape.back()));  // ~ 1 / sqrt(fan_in)
    for (int64_t i = 0; i < n; ++i) {
      state = state * 1664525u + 1013904223u;  // a fixed LCG: values in (-scale, scale)
      values.push_back(static_cast<float>(scale * (2.0 * (state >> 8) / 16777216.0 - 1.0)));
    }
  }
  first.insert(first.end(), rest.begin(), rest.end());
  write_sparse_safetensors((model / "transformer" / "diffusion_pytorch_model.safetensors").string(), first, 4, values);
}

struct CacheRun {
  nlohmann::json stats;  // --cache-stats
};

CacheRun run_wan_13b_sized(const testing::TempDir& dir, const fs::path& model, const std::string& name,
                           const nlohmann::json& cache) {
  const std::string fdir = testing::fixture_dir("wan_tiny"), stats = dir.file(name + "_cache.json");
  const testing::Run r = testing::run_command(
      std::string(DITGEN_EXE) + " --device cpu --threads 2 --quiet --config " + fdir +
      "/reference/run_unipc.json --set model.path=" + model.string() +
      " --set model.dtype=float32 --frames 1 --set generate.height=16 --set generate.width=16 --steps 4 --output " +
      dir.file(name + ".png") + " --cache-stats " + stats + " --set 'cache=" + cache.dump() + "'");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  return {nlohmann::json::parse(std::ifstream(stats))};
}

}  // namespace

TEST_CASE("teacache without coefficients on a published model's config files passes the check, one layer away is exit 2") {
  for (const char* model : {"Wan2.1-T2V-1.3B-Diffusers", "Wan2.1-T2V-14B-Diffusers", "CogVideoX-2b", "CogVideoX-5b"}) {
    CAPTURE(model);
    testing::TempDir dir("teacache_published_configs");
    const fs::path m = dir.path / "model";
    fs::copy(std::string(DITGEN_SOURCE_DIR) + "/configs/models/" + model, m, fs::copy_options::recursive);
    fs::copy(testing::fixture_dir("wan_tiny") + "/tokenizer", m / "tokenizer", fs::copy_options::recursive);
    const std::string config = published_config_run(dir, m);
    const testing::Run r = testing::run_command(std::string(DITGEN_EXE) + " --device cpu --config " + config);
    CHECK(r.code == 3);  // the weights: none here
    CHECK_MESSAGE(r.output.find((m / "transformer").string() + ": ") != std::string::npos, r.output);
    CHECK_MESSAGE(r.output.find("*.safetensors") != std::string::npos, r.output);

    nlohmann::json t = nlohmann::json::parse(std::ifstream(m / "transformer" / "config.json"));
    t["num_layers"] = t["num_layers"].get<int>() - 1;
    std::ofstream(m / "transformer" / "config.json") << t.dump(2);
    const testing::Run off = testing::run_command(std::string(DITGEN_EXE) + " --device cpu --config " + config);
    CHECK(off.code == 2);
    CHECK_MESSAGE(off.output.find("run.json: cache.coefficients: required for teacache") != std::string::npos, off.output);
    CHECK_FALSE(fs::exists(dir.file("out")));
  }
}

TEST_CASE("teacache without coefficients decides with the published row: a run of Wan2.1-T2V-1.3B's sizes") {
  testing::TempDir dir("teacache_published_run");
  const fs::path model = dir.path / "model";
  make_wan_13b_sized(model);
  const std::vector<double>& row = published("Wan2.1-T2V-1.3B").coefficients;
  const std::vector<double>& other = published("Wan2.1-T2V-14B").coefficients;
  // A threshold nothing reaches: steps 1 and 2 accumulate and skip, 0 and 3 are forced.
  const nlohmann::json cache = {{"kind", "teacache"}, {"threshold", 1e9}};
  const CacheRun omitted = run_wan_13b_sized(dir, model, "omitted", cache);
  nlohmann::json given = cache;
  given["coefficients"] = row;
  const CacheRun explicit_row = run_wan_13b_sized(dir, model, "given", given);
  given["coefficients"] = other;
  const CacheRun other_row = run_wan_13b_sized(dir, model, "other", given);

  CHECK(omitted.stats["coefficients"].get<std::vector<double>>() == row);
  const auto& decisions = omitted.stats["decisions"];
  REQUIRE(decisions.size() == 4 * 2 * 2);  // 4 steps x 2 outputs x 2 CFG halves
  REQUIRE(explicit_row.stats["decisions"].size() == decisions.size());
  REQUIRE(other_row.stats["decisions"].size() == decisions.size());
  std::vector<double> sum(4, 0.0);  // per unit (output, half), in the order of a step's decisions
  int accumulated_checked = 0;
  for (size_t i = 0; i < decisions.size(); ++i) {
    const auto& d = decisions[i];
    CAPTURE(d.dump());
    const int step = d["step"].get<int>();
    CHECK(d["computed"] == (step == 0 || step == 3));
    // The explicit row decides identically, value for value.
    CHECK(explicit_row.stats["decisions"][i] == d);
    if (step == 1 || step == 2) {
      const double metric = d["metric"].get<double>();
      double& acc = sum[i % 4];
      acc += poly1d(row, metric);
      CHECK(d["accumulated"].get<double>() == doctest::Approx(acc).epsilon(1e-9));
      const double other_acc = other_row.stats["decisions"][i]["accumulated"].get<double>();
      CHECK(std::fabs(other_acc - d["accumulated"].get<double>()) > 1e-3 * std::fabs(acc));
      ++accumulated_checked;
    }
  }
  CHECK(accumulated_checked == 8);
}
