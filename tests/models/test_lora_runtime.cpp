// LoRA applied at run time by the shared linear layers (models/nn/
// lora_terms.h, nn/linear.h), against plain loops in double:
//   y = act(x Wᵀ + b + Σ f_i (x A_iᵀ) B_iᵀ),
// the LoRA's terms landing before the layer's GELU. The weight loads as
// stored (still a view of the file), whole for Linear, a band of rows and
// a tp rank's share of them for ColumnParallelLinear (B's rows, also
// through into()), a tp rank's input columns for RowParallelLinear (A's
// columns: the two ranks' partial sums add up to the whole, the bias
// counted once); under model.quantize "int8" beside the int8 weight. A
// tensor loaded whose run-time change no layer took is reported (one not
// loaded, another pipeline stage's, is not).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

#include "../parallel/fake_communicator.h"
#include "../temp_dir.h"
#include "lora_targets.h"
#include "io/lora_file.h"
#include "io/safetensors.h"
#include "models/lora_merge.h"
#include "models/nn/linear.h"
#include "ops/lora_delta.h"

using namespace ditgen;
using models::nn::ColumnParallelLinear;
using models::nn::Linear;
using models::nn::RowParallelLinear;

namespace {

using Changes = std::vector<std::tuple<Tensor, Tensor, double>>;  // A (r, in), B (out, r), factor

// y (rows, out) = act(x wᵀ + b + Σ f (x Aᵀ) Bᵀ), in double.
std::vector<double> reference(const Tensor& x, const Tensor& w, const Tensor& b, const Changes& changes, bool gelu) {
  const int64_t rows = x.dim(0), in = x.dim(1), out = w.dim(0);
  std::vector<double> y(static_cast<size_t>(rows * out));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double s = b.data()[o];
      for (int64_t k = 0; k < in; ++k) s += double(x.data()[i * in + k]) * w.data()[o * in + k];
      for (const auto& [a, bb, f] : changes) {
        const int64_t r = a.dim(0);
        for (int64_t j = 0; j < r; ++j) {
          double xa = 0;
          for (int64_t k = 0; k < in; ++k) xa += double(x.data()[i * in + k]) * a.data()[j * in + k];
          s += f * xa * bb.data()[o * r + j];
        }
      }
      if (gelu) s = 0.5 * s * (1 + std::tanh(std::sqrt(2 / M_PI) * (s + 0.044715 * s * s * s)));
      y[static_cast<size_t>(i * out + o)] = s;
    }
  return y;
}

// max |got - want[:, col0 : col0 + got.dim(1)]| / max |want|.
double error(const Tensor& got, const std::vector<double>& want, int64_t width, int64_t col0 = 0) {
  double worst = 0, top = 0;
  for (double v : want) top = std::max(top, std::abs(v));
  const int64_t rows = got.dim(0), cols = got.dim(1);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < cols; ++c)
      worst = std::max(worst, std::abs(got.data()[i * cols + c] - want[static_cast<size_t>(i * width + col0 + c)]));
  return worst / top;
}

}  // namespace

TEST_CASE("lora at run time: Linear, column- and row-parallel layers against loops, before the GELU") {
  testing::TempDir dir("lora_runtime");
  const int64_t out = 12, in = 10, rows = 5;
  // A stored (12, 10) weight: a band of rows [6, 12) is the adaLN-style
  // layer below; "blocks.0.l" is int8-eligible.
  const Tensor w = testing::random_normal({out, in}, 1), bias = testing::random_normal({out}, 2), x = testing::random_normal({rows, in}, 3);
  const std::string path = dir.file("w.safetensors");
  io::write_safetensors(path, {{"blocks.0.l.weight", w}, {"blocks.0.l.bias", bias}});

  auto file = std::make_shared<io::LoraFile>();
  const Tensor a1 = testing::random_normal({3, in}, 5, 0.5f), b1 = testing::random_normal({out, 3}, 6, 0.5f);
  const Tensor a2 = testing::random_normal({2, in}, 7, 0.5f), b2 = testing::random_normal({out, 2}, 8, 0.5f);
  file->targets = {testing::low_rank_target("blocks.0.l.weight", a1, b1, 5.0 / 3), testing::low_rank_target("blocks.0.l.weight", a2, b2, 1.0)};
  auto edits = std::make_shared<models::LoraMerge>();
  for (const io::LoraTarget& t : file->targets) edits->add(file, t, 0.7, /*at_runtime=*/true);
  io::WeightStore store = io::WeightStore::open_file(path);
  store.set_edits(edits);
  CHECK(edits->runtime_untaken().empty());  // not loaded yet (another pipeline stage's, say)
  // The weight itself loads as stored, borrowed from the file.
  CHECK(store.points_into_file("blocks.0.l.weight", store.load("blocks.0.l.weight")));
  CHECK(edits->runtime_untaken() == std::vector<std::string>{"blocks.0.l.weight"});  // loaded, nothing took it

  const Changes changes = {{a1, b1, 0.7 * 5.0 / 3}, {a2, b2, 0.7}};
  const std::vector<double> plain = reference(x, w, bias, changes, false), gelu = reference(x, w, bias, changes, true);
  const std::vector<double> without = reference(x, w, bias, {}, false);
  const models::Placement place;
  const double tol = 1e-5;

  SUBCASE("Linear, with and without the fused GELU") {
    const Linear layer = Linear::load(store, "blocks.0.l.", place);
    CHECK(edits->runtime_untaken().empty());
    CHECK(error(layer(x), plain, out) < tol);
    CHECK(error(layer(x, ops::Activation::kGeluTanh), gelu, out) < tol);
    CHECK(error(layer(x), without, out) > 0.05);  // the LoRA is there to see
  }
  SUBCASE("ColumnParallelLinear: a band of rows, each tp rank its rows of B, also into()") {
    for (int r = 0; r < 2; ++r) {
      CAPTURE(r);
      testing::FakeCommunicator tp(r, 2);
      const auto layer = ColumnParallelLinear::load(store, "blocks.0.l.", 6, &tp, place, /*first_row=*/6);
      const int64_t first = 6 + 3 * r;  // rows [first, first + 3) of the stored weight
      CHECK(error(layer(x), plain, out, first) < tol);
      CHECK(error(layer(x, ops::Activation::kGeluTanh), gelu, out, first) < tol);
      Tensor wide = Tensor::zeros({rows, 7});  // the layer's 3 outputs into columns [2, 5)
      layer.into(x, wide, 2);
      Tensor cols = Tensor::empty({rows, 3});
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t c = 0; c < 3; ++c) cols.data()[i * 3 + c] = wide.data()[i * 7 + 2 + c];
      CHECK(error(cols, plain, out, first) < tol);
      for (int64_t i = 0; i < rows; ++i) CHECK(wide.data()[i * 7] == 0.0f);  // nothing outside them
    }
  }
  SUBCASE("RowParallelLinear: each tp rank A's columns, partial sums adding up, the bias once") {
    Tensor sum = Tensor::zeros({rows, out});
    for (int r = 0; r < 2; ++r) {
      testing::FakeCommunicator tp(r, 2);  // all-reduce moves nothing: this rank's partial sum + bias
      const auto layer = RowParallelLinear::load(store, "blocks.0.l.", in, &tp, place);
      const Tensor mine = ops::lora_columns(x, 5 * r, 5).clone();  // this rank's input columns
      const Tensor y = layer(mine);
      for (int64_t i = 0; i < sum.numel(); ++i) sum.data()[i] += y.data()[i] - (r == 0 ? 0.0f : bias.data()[i % out]);
    }
    CHECK(error(sum, plain, out) < tol);
  }
  SUBCASE("model.quantize int8: the LoRA beside the int8 weight") {
    models::Placement int8 = place;
    int8.int8 = true;
    const Linear layer = Linear::load(store, "blocks.0.l.", int8);
    CHECK(layer.weight.layout() == Layout::kInt8Packed);
    // int8 rounds the base product (x and w per row, about 1%); the LoRA's
    // float32 terms add exactly: the difference to the float32 layer
    // without the LoRA is the LoRA's own.
    const double err = error(layer(x), plain, out);
    MESSAGE("int8 weight + run-time LoRA against loops in double: " << err);
    CHECK(err < 0.03);
    const Tensor fp32 = Linear::load(store, "blocks.0.l.", place)(x);
    CHECK(error(fp32, plain, out) < tol);
  }
}

TEST_CASE("lora at run time: a change no linear layer took is reported") {
  auto file = std::make_shared<io::LoraFile>();
  file->targets = {testing::low_rank_target("table", Tensor::zeros({1, 4}), Tensor::zeros({3, 1}), 1.0)};
  models::LoraMerge edits;
  edits.add(file, file->targets[0], 1.0, true);
  CHECK(edits.runtime_terms("other").empty());
  CHECK(edits.runtime_untaken().empty());
  CHECK_FALSE(edits.changes("table"));  // what the store asks as it loads it: not merged
  CHECK(edits.runtime_untaken() == std::vector<std::string>{"table"});
  CHECK(edits.runtime_terms("table").size() == 1);
  CHECK(edits.runtime_untaken().empty());
  // only a low-rank pair applies at run time
  io::LoraTarget delta;
  delta.tensor = "bias";
  delta.kind = io::LoraKind::kBias;
  delta.delta = Tensor::zeros({3});
  CHECK_THROWS_AS(edits.add(file, delta, 1.0, true), std::logic_error);
}
