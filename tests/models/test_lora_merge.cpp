// LoRA merged at load through the weight store (models/lora_merge.h,
// io/weight_edits.h), against plain loops: a whole weight, a column-parallel
// rank's rows and a row-parallel rank's columns each get W + s·scaling·B A
// of their own part (float32 and bfloat16 stored weights, several LoRAs
// adding), a bias and a table their full deltas; tensors no LoRA changes
// load as before (borrowed from the file), and the file is never written.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

#include "../temp_dir.h"
#include "lora_targets.h"
#include "io/lora_file.h"
#include "io/safetensors.h"
#include "models/lora_merge.h"

using namespace ditgen;

namespace {

io::LoraTarget full(const std::string& tensor, io::LoraKind kind, const Tensor& delta) {
  io::LoraTarget t;
  t.tensor = tensor;
  t.kind = kind;
  t.delta = delta;
  return t;
}

// w (out, in) + sum of factor · b a, by loops in double.
std::vector<double> merged(const Tensor& w, const std::vector<std::tuple<Tensor, Tensor, double>>& changes) {
  const int64_t out = w.dim(0), in = w.dim(1);
  std::vector<double> m(static_cast<size_t>(out * in));
  for (int64_t i = 0; i < out * in; ++i) m[static_cast<size_t>(i)] = w.data()[i];
  for (const auto& [a, b, f] : changes)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = 0; k < in; ++k) {
        double s = 0;
        for (int64_t r = 0; r < a.dim(0); ++r) s += double(b.data()[o * a.dim(0) + r]) * a.data()[r * in + k];
        m[static_cast<size_t>(o * in + k)] += f * s;
      }
  return m;
}

double max_error(const Tensor& got, const std::vector<double>& want, int64_t row0, int64_t rows, int64_t col0,
                 int64_t cols, int64_t in) {
  double worst = 0;
  const Tensor g = got.to(DType::kF32);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      worst = std::max(worst, std::abs(g.data()[r * cols + c] - want[static_cast<size_t>((row0 + r) * in + col0 + c)]));
  return worst;
}

}  // namespace

TEST_CASE("lora merge at load: whole weights, tp rows and columns, biases and tables, against loops") {
  testing::TempDir dir("lora_merge");
  const int64_t out = 12, in = 10;
  const Tensor w = testing::random_normal({out, in}, 1), bias = testing::random_normal({out}, 2), table = testing::random_normal({1, 6, 4}, 3);
  const Tensor other = testing::random_normal({out, in}, 4);
  for (const DType stored : {DType::kF32, DType::kBF16}) {
    CAPTURE(dtype_name(stored));
    const std::string path = dir.file(std::string("w_") + dtype_name(stored) + ".safetensors");
    io::write_safetensors(path, {{"l.weight", w.to(stored)},
                                 {"l.bias", bias},
                                 {"table", table},
                                 {"untouched.weight", other}});
    const io::WeightStore plain = io::WeightStore::open_file(path);
    const Tensor w_stored = plain.load("l.weight").to(DType::kF32).clone();  // bfloat16-rounded when so stored

    auto file = std::make_shared<io::LoraFile>();
    const Tensor a1 = testing::random_normal({3, in}, 5), b1 = testing::random_normal({out, 3}, 6), a2 = testing::random_normal({2, in}, 7), b2 = testing::random_normal({out, 2}, 8);
    const Tensor dbias = testing::random_normal({out}, 9), dtable = testing::random_normal({1, 6, 4}, 10);
    file->targets = {testing::low_rank_target("l.weight", a1, b1, 5.0 / 3), testing::low_rank_target("l.weight", a2, b2, 1.0),
                     full("l.bias", io::LoraKind::kBias, dbias), full("table", io::LoraKind::kTable, dtable)};
    auto merge = std::make_shared<models::LoraMerge>();
    for (const io::LoraTarget& t : file->targets) merge->add(file, t, 0.7);
    io::WeightStore store = io::WeightStore::open_file(path);
    store.set_edits(merge);

    const std::vector<double> want = merged(w_stored, {{a1, b1, 0.7 * 5.0 / 3}, {a2, b2, 0.7}});
    const double tol = 1e-5;
    CHECK(max_error(store.load("l.weight"), want, 0, out, 0, in, in) < tol);
    CHECK(store.load("l.weight").dtype() == DType::kF32);
    // tp = 2: a column-parallel rank's rows, a row-parallel rank's columns
    CHECK(max_error(store.load_rows("l.weight", 6, 12), want, 6, 6, 0, in, in) < tol);
    CHECK(max_error(store.load_cols("l.weight", 5, 10), want, 0, out, 5, 5, in) < tol);
    CHECK(max_error(store.load_rows_f32("l.weight", 3, 7), want, 3, 4, 0, in, in) < tol);
    // the bias's rows and the whole table: + 0.7 · delta
    const Tensor b = store.load_rows("l.bias", 6, 12);
    for (int64_t i = 0; i < 6; ++i) CHECK(b.data()[i] == doctest::Approx(bias.data()[6 + i] + 0.7 * dbias.data()[6 + i]));
    const Tensor t = store.load("table");
    for (int64_t i = 0; i < t.numel(); ++i) CHECK(t.data()[i] == doctest::Approx(table.data()[i] + 0.7 * dtable.data()[i]));
    // a tensor no LoRA changes: as stored, borrowed from the file
    CHECK(store.points_into_file("untouched.weight", store.load("untouched.weight")));
    CHECK_FALSE(merge->changes("untouched.weight"));
    // the file itself is unchanged
    CHECK(max_error(io::WeightStore::open_file(path).load("l.weight"), merged(w_stored, {}), 0, out, 0, in, in) == 0);
  }
}
