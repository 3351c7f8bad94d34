// Placement: where a weight goes and in what dtype (models/placement.h), and
// place_matrix's release of the file pages a converted weight was read
// from, measured as this process's resident bytes of the file's mapping
// (/proc/self/smaps: Rss of the mapping that holds the tensor).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "../ops/test_helpers.h"
#include "io/safetensors.h"
#include "mapping.h"
#include "models/placement.h"
#include "temp_dir.h"

using namespace ditgen;

TEST_CASE("placement: the compute dtype of GEMM weights, float32 storage for the rest on the CPU") {
  const Tensor w32 = testing::random_tensor({4, 6}, 1);
  // Row-major bf16 (no packing), so the placed weight can be read back below.
  const models::Placement f32, bf16(Device::kCPU, DType::kBF16, /*pack=*/false);
  CHECK(f32.matrix(w32).raw() == w32.raw());  // as stored: no copy
  CHECK(bf16.matrix(w32).dtype() == DType::kBF16);
  CHECK(bf16.put(w32).raw() == w32.raw());  // biases, norms, tables: float32
  CHECK(bf16.storage() == DType::kF32);
  CHECK(bf16.empty({2}).dtype() == DType::kF32);
  const Tensor w16 = w32.to(DType::kF16), wb = w32.to(DType::kBF16);
  CHECK(f32.matrix(w16).raw() == w16.raw());  // float16 stays, widened exactly inside the GEMM
  CHECK(f32.matrix(wb).dtype() == DType::kF32);  // float32 compute means float32 weights
  CHECK(bf16.matrix(wb).raw() == wb.raw());
}

TEST_CASE("place_matrix releases the file pages under a weight it converted") {
  testing::TempDir tmp("placement");
  const std::string file = tmp.file("w.safetensors");
  const int64_t rows = 1024, cols = 1024;  // 4 MiB of float32
  io::write_safetensors(file,
                        {{"w", testing::random_tensor({rows, cols}, 2)}, {"b", testing::random_tensor({cols}, 3)}}, {});
  const auto store = io::WeightStore::open_dir(tmp.path.string());
  const Tensor view = store.load("w");
  const int64_t size = static_cast<int64_t>(view.nbytes());
  // Row-major bf16 (no packing), so the placed weight can be read back below.
  const models::Placement f32, bf16(Device::kCPU, DType::kBF16, /*pack=*/false);

  testing::touch_pages(view.raw(), view.nbytes());
  REQUIRE(testing::mapping_rss(view.raw()) >= size);
  // Borrowed (float32 compute): nothing to release.
  CHECK(models::place_matrix(store, "w", view, f32).raw() == view.raw());
  CHECK(testing::mapping_rss(view.raw()) >= size);

  // Half the rows converted: at least their pages go. (The other half's
  // may go too: a file mapped with transparent huge pages loses the whole
  // huge page under a partial release; they fault back in when read.)
  const Tensor half = models::place_matrix(store, "w", store.load_rows("w", 0, rows / 2), bf16);
  CHECK(half.dtype() == DType::kBF16);
  CHECK(testing::mapping_rss(view.raw()) <= size / 2 + 64 * 1024);
  // The whole tensor converted: the mapping holds (almost) nothing.
  const Tensor whole = models::load_matrix(store, "w", bf16);
  CHECK(testing::mapping_rss(view.raw()) <= 64 * 1024);
  // The view stays valid: its pages fault back in from the file.
  CHECK(testing::rel_l2(whole.to(DType::kF32), view.to(DType::kF32).to(DType::kBF16).to(DType::kF32)) == 0.0);
  CHECK_THROWS_AS(store.release_pages("b", view), std::invalid_argument);  // not a view of "b"
}
