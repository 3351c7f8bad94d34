// Every form of the fixture adapters (tests/fixtures/lora/, made with peft on
// the tiny DiT, PixArt, Latte, Wan 2.1, Wan 2.2 (both experts) and CogVideoX
// transformers by scripts/fixtures/make_lora_fixtures.py) read and
// normalized: the targets and kinds its manifest.json lists, the skipped
// keys, no unknown one, peft's own scalings; every change, applied to the
// fixture's weights at the manifest's scale, against the rows of diffusers'
// fused weights (fuse_lora / peft's merge, or for the deltas diffusers drops,
// W + s * delta as ComfyUI applies it); and every form's change of each
// tensor against the diffusers form's, element by element.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/lora_coverage.h"
#include "io/lora_file.h"
#include "io/model_dir.h"
#include "io/safetensors.h"

using namespace ditgen;
using namespace ditgen::io;

namespace {

const std::string kFixtures = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/";

// The change a target makes at strength `scale`, every element, by plain
// loops in double: scale * scaling * (b · a) or scale * scaling * delta.
std::vector<double> dense_change(const LoraTarget& t, double scale) {
  std::vector<double> out;
  const double f = scale * t.scaling;
  if (t.kind == LoraKind::kLowRank) {
    const int64_t rows = t.b.dim(0), cols = t.a.dim(1), rank = t.rank;
    out.assign(static_cast<size_t>(rows * cols), 0.0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < rank; ++k) sum += double(t.b.data()[i * rank + k]) * t.a.data()[k * cols + j];
        out[i * cols + j] = f * sum;
      }
  } else {
    for (int64_t i = 0; i < t.delta.numel(); ++i) out.push_back(f * t.delta.data()[i]);
  }
  return out;
}

// The rows of a tensor's leading dimension the references keep (the
// script's rule): first, middle, last; all of a 1-D tensor or of one with
// at most 3 rows.
std::vector<int64_t> reference_rows(const Shape& shape) {
  if (shape.size() <= 1 || shape[0] <= 3) {
    std::vector<int64_t> all(shape.empty() ? 1 : shape[0]);
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    return all;
  }
  std::set<int64_t> rows{0, shape[0] / 2, shape[0] - 1};
  return {rows.begin(), rows.end()};
}

double max_rel(const std::vector<double>& got, const std::vector<double>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / std::max(scale, 1e-30);
}

// The target's tensor at `scale` (base + change), on the reference's rows,
// against the reference: max|Δ| / max|ref|.
double fused_error(const LoraTarget& t, double scale, const WeightStore& base, const SafetensorsFile& reference) {
  REQUIRE_MESSAGE(reference.contains(t.tensor), "no reference rows for " << t.tensor);
  const Tensor w = base.load(t.tensor).to(DType::kF32);
  const Tensor ref = reference.load(t.tensor).to(DType::kF32);
  const std::vector<double> change = dense_change(t, scale);
  REQUIRE(static_cast<int64_t>(change.size()) == w.numel());
  const int64_t row = w.numel() / (w.ndim() <= 1 ? w.numel() : w.dim(0));
  const std::vector<int64_t> rows = w.ndim() <= 1 ? std::vector<int64_t>{0} : reference_rows(w.shape());
  std::vector<double> got, want;
  const int64_t width = w.ndim() <= 1 ? w.numel() : row;
  for (int64_t r : rows)
    for (int64_t j = 0; j < width; ++j) got.push_back(w.data()[r * width + j] + change[r * width + j]);
  for (int64_t i = 0; i < ref.numel(); ++i) want.push_back(ref.data()[i]);
  REQUIRE(got.size() == want.size());
  return max_rel(got, want);
}

std::optional<Shape> shape_in(const WeightStore& w, const std::string& name) {
  if (!w.contains(name)) return std::nullopt;
  return w.info(name).shape;
}

struct Family {
  std::string name;
  nlohmann::json manifest;
};

std::vector<Family> families() {
  const nlohmann::json m = read_json_file(kFixtures + "lora/manifest.json");
  std::vector<Family> out;
  for (const auto& f : m["families"]) out.push_back({f["family"].get<std::string>(), f});
  return out;
}

std::map<std::string, const LoraTarget*> by_tensor(const LoraFile& f, LoraExpert expert = LoraExpert::kAny) {
  std::map<std::string, const LoraTarget*> out;
  for (const LoraTarget& t : f.targets)
    if (t.expert == expert) out[t.tensor] = &t;
  return out;
}

}  // namespace

TEST_CASE("lora fixtures: every form of each adapter gives diffusers' fused weights") {
  const double scale = read_json_file(kFixtures + "lora/manifest.json")["scale"].get<double>();
  for (const Family& fam : families()) {
    CAPTURE(fam.name);
    std::map<std::string, std::vector<double>> diffusers_changes;  // per base dir + tensor
    for (const auto& entry : fam.manifest["files"]) {
      if (!entry.contains("targets")) continue;  // both_experts: its own case
      const std::string file = entry["file"].get<std::string>();
      CAPTURE(file);
      const std::string base_dir =
          kFixtures + (entry["base"].is_null() ? fam.manifest["base"] : entry["base"]).get<std::string>();
      const WeightStore base = WeightStore::open_dir(base_dir);
      const LoraFile lora = read_lora_file(kFixtures + "lora/" + fam.name + "/" + file, {base.names()});

      // the form, targets and kinds, skipped and unknown keys
      const std::string format = entry["format"].get<std::string>();
      REQUIRE(lora.formats.size() == 1);
      CHECK(lora_format_name(lora.formats[0]) == format);
      std::map<std::string, std::string> kinds;
      for (const LoraTarget& t : lora.targets) {
        CHECK(t.expert == LoraExpert::kAny);
        kinds[t.tensor] = lora_kind_name(t.kind);
      }
      std::map<std::string, std::string> want;
      for (const auto& [tensor, kind] : entry["targets"].items())
        want[tensor] = kind == "low_rank" ? "low-rank" : kind.get<std::string>();
      CHECK(kinds == want);
      CHECK(lora.skipped.size() == entry["skipped"].get<size_t>());
      for (const LoraKeyNote& s : lora.skipped) CHECK(s.reason == "text encoder");
      CHECK(lora.unknown.empty());
      size_t accounted = lora.skipped.size() + lora.unknown.size();
      for (const LoraTarget& t : lora.targets) accounted += t.keys.size();
      CHECK(static_cast<int64_t>(accounted) == lora.keys);

      // peft's scalings, where the file carries peft's config
      if (format == "diffusers" || format == "peft") {
        const nlohmann::json& scalings =
            fam.name == "wan22" ? fam.manifest["scalings"][file.find("transformer_2") != std::string::npos ? "transformer_2"
                                                                                                            : "transformer"]
                                : fam.manifest["scalings"];
        for (const LoraTarget& t : lora.targets) {
          if (t.kind != LoraKind::kLowRank) continue;
          const std::string module = t.tensor.substr(0, t.tensor.size() - 7);
          CAPTURE(module);
          CHECK(t.rank == scalings[module]["rank"].get<int64_t>());
          CHECK(t.scaling == doctest::Approx(scalings[module]["scaling"].get<double>()).epsilon(1e-12));
        }
      }

      // the fused weights' rows
      const auto reference = SafetensorsFile::open(kFixtures + "lora/" + fam.name + "/" +
                                                   entry["reference"].get<std::string>());
      for (const LoraTarget& t : lora.targets) {
        CAPTURE(t.tensor);
        CHECK(fused_error(t, scale, base, *reference) <= 2e-6);
      }

      // every element of each change against the diffusers form's
      for (const LoraTarget& t : lora.targets) {
        const std::string key = base_dir + ":" + t.tensor;
        std::vector<double> change = dense_change(t, scale);
        if (format == "diffusers" && file.rfind("bare", 0) != 0) {
          diffusers_changes[key] = std::move(change);
          continue;
        }
        auto it = diffusers_changes.find(key);
        if (it == diffusers_changes.end()) continue;  // a delta the adapter itself does not make
        CAPTURE(t.tensor);
        // a float16 full delta (the non-Wan diff forms) is rounded
        const double tol = t.kind == LoraKind::kWeight ? 1e-3 : 2e-6;
        CHECK(max_rel(change, it->second) <= tol);
      }

      // coverage: every target is a tensor of the model, of its shape
      const LoraMatch match = match_lora(lora, LoraExpert::kAny, [&](const std::string& n) { return shape_in(base, n); });
      CHECK(match.applied.size() == lora.targets.size());
      CHECK(match.unmatched.empty());
      CHECK(check_lora_coverage(lora, match, true).empty());
    }
  }
}

TEST_CASE("lora fixtures: one file for both Wan 2.2 experts, each key's expert from its prefix") {
  const std::string dir = kFixtures + "lora/wan22/";
  const LoraFile both = read_lora_file(dir + "both_experts.safetensors");
  REQUIRE(both.formats == std::vector<LoraFormat>{LoraFormat::kDiffusers});
  CHECK(both.unknown.empty());
  for (auto [expert, name] : {std::pair{LoraExpert::kTransformer, "transformer"},
                              std::pair{LoraExpert::kTransformer2, "transformer_2"}}) {
    CAPTURE(name);
    const LoraFile one = read_lora_file(dir + "diffusers_" + name + ".safetensors");
    const auto want = by_tensor(one);
    const auto got = by_tensor(both, expert);
    REQUIRE(got.size() == want.size());
    for (const auto& [tensor, t] : want) {
      CAPTURE(tensor);
      REQUIRE(got.count(tensor));
      CHECK(got.at(tensor)->scaling == t->scaling);
      CHECK(max_rel(dense_change(*got.at(tensor), 1), dense_change(*t, 1)) == 0);
    }
    // applied to that expert, the other's targets are counted apart
    const WeightStore base = WeightStore::open_dir(kFixtures + "wan22_tiny/" + name);
    const LoraMatch match = match_lora(both, expert, [&](const std::string& n) { return shape_in(base, n); });
    CHECK(match.applied.size() == want.size());
    CHECK(match.other_expert.size() == want.size());
    CHECK(match.unmatched.empty());
    CHECK(lora_report_line(both, match) ==
          "lora both_experts.safetensors (diffusers): 8 keys applied to 4 tensors (4 low-rank), 0 skipped, "
          "0 unmatched, 8 for the other expert");
  }
}
