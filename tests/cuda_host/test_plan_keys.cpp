// The plan-cache keys of the CUDA backend on the host (no GPU): the cuDNN
// attention graphs' SdpaKey (kernels/cuda/sdpa_key.h), the cuBLASLt GEMMs'
// LtGemmKey and epilogue choice (gemm_lt_key.h), the shared PlanCache
// (built once per key, failures cached) and address_alignment
// (plan_cache.h).
#include <doctest/doctest.h>

#include <functional>
#include <set>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/gemm_lt_key.h"
#include "kernels/cuda/plan_cache.h"
#include "kernels/cuda/sdpa_key.h"

using namespace ditgen::cuda;

namespace {

ditgen::AttentionArgs latte_spatial() {
  ditgen::AttentionArgs a;
  a.dtype = DType::kBF16;
  a.batch = 32;
  a.heads = 16;
  a.q_len = a.kv_len = 1024;
  a.head_dim = 72;
  a.q_row_stride = a.k_row_stride = a.v_row_stride = 3 * 1152;
  a.out_row_stride = 1152;
  a.q_batch_stride = a.k_batch_stride = a.v_batch_stride = 1024 * 3 * 1152;
  a.out_batch_stride = 1024 * 1152;
  a.scale = 1.0f / 8.48528137f;
  return a;
}

// Each variant changes one field of the key.
std::vector<std::function<void(SdpaKey&)>> sdpa_variants() {
  return {[](SdpaKey& k) { k.device = 1; },         [](SdpaKey& k) { k.dtype = DType::kF16; },
          [](SdpaKey& k) { k.batch += 1; },         [](SdpaKey& k) { k.heads += 1; },
          [](SdpaKey& k) { k.q_len += 1; },         [](SdpaKey& k) { k.kv_len += 1; },
          [](SdpaKey& k) { k.head_dim = 64; },      [](SdpaKey& k) { k.q_row_stride += 8; },
          [](SdpaKey& k) { k.k_row_stride += 8; },  [](SdpaKey& k) { k.v_row_stride += 8; },
          [](SdpaKey& k) { k.out_row_stride += 8; }, [](SdpaKey& k) { k.q_batch_stride += 8; },
          [](SdpaKey& k) { k.k_batch_stride += 8; }, [](SdpaKey& k) { k.v_batch_stride += 8; },
          [](SdpaKey& k) { k.out_batch_stride += 8; }, [](SdpaKey& k) { k.scale_bits ^= 1; },
          [](SdpaKey& k) { k.padding_mask = true; }, [](SdpaKey& k) { k.stats = true; }};
}

}  // namespace

TEST_CASE("SdpaKey: the same call gives the same key, whatever its pointers and key lengths") {
  ditgen::AttentionArgs a = latte_spatial();
  const SdpaKey k1 = SdpaKey::of(a, 0);
  int dummy[4];
  a.q = &dummy[0];
  a.k = &dummy[1];
  a.v = &dummy[2];
  a.out = &dummy[3];
  const SdpaKey k2 = SdpaKey::of(a, 0);
  CHECK(k1 == k2);
  CHECK(k1.hash() == k2.hash());
  // Per-sample key lengths: the graph takes them as a tensor, only their
  // presence is in the key.
  const int32_t lens1[2] = {5, 7}, lens2[2] = {7, 7};
  a.batch = 2;
  a.kv_lens = lens1;
  const SdpaKey m1 = SdpaKey::of(a, 0);
  a.kv_lens = lens2;
  const SdpaKey m2 = SdpaKey::of(a, 0);
  CHECK(m1 == m2);
  CHECK(m1.padding_mask);
  CHECK_FALSE(k1.padding_mask);
  CHECK(SdpaKey::of(a, 0).scale_bits == float_bits(a.scale));
}

TEST_CASE("SdpaKey: every field tells keys apart, in equality and in the hash") {
  const SdpaKey base = SdpaKey::of(latte_spatial(), 0);
  std::set<uint64_t> hashes{base.hash()};
  for (const auto& change : sdpa_variants()) {
    SdpaKey k = base;
    change(k);
    CHECK_FALSE(k == base);
    hashes.insert(k.hash());
  }
  CHECK(hashes.size() == sdpa_variants().size() + 1);
}

TEST_CASE("gemm_epilogue: bias and GELU-tanh map to cuBLASLt's four epilogues") {
  static_assert(gemm_epilogue(false, false) == GemmEpilogue::kNone);
  static_assert(gemm_epilogue(true, false) == GemmEpilogue::kBias);
  static_assert(gemm_epilogue(false, true) == GemmEpilogue::kGeluTanh);
  static_assert(gemm_epilogue(true, true) == GemmEpilogue::kGeluTanhBias);
  CHECK(epilogue_has_bias(GemmEpilogue::kBias));
  CHECK(epilogue_has_bias(GemmEpilogue::kGeluTanhBias));
  CHECK_FALSE(epilogue_has_bias(GemmEpilogue::kNone));
  CHECK_FALSE(epilogue_has_bias(GemmEpilogue::kGeluTanh));
}

TEST_CASE("LtGemmKey: every field tells keys apart") {
  LtGemmKey base;
  base.dtype = DType::kBF16;
  base.m = 32768;
  base.n = 4608;
  base.k = 1152;
  base.ldx = 1152;
  base.ldw = 1152;
  base.ldy = 4608;
  base.epilogue = GemmEpilogue::kGeluTanhBias;
  base.align_x = base.align_w = base.align_y = base.align_bias = 256;
  const std::vector<std::function<void(LtGemmKey&)>> variants = {
      [](LtGemmKey& k) { k.device = 1; },        [](LtGemmKey& k) { k.dtype = DType::kF32; },
      [](LtGemmKey& k) { k.m += 1; },            [](LtGemmKey& k) { k.n += 1; },
      [](LtGemmKey& k) { k.k += 1; },            [](LtGemmKey& k) { k.ldx += 1; },
      [](LtGemmKey& k) { k.ldw += 1; },          [](LtGemmKey& k) { k.ldy += 1; },
      [](LtGemmKey& k) { k.epilogue = GemmEpilogue::kBias; }, [](LtGemmKey& k) { k.align_x = 16; },
      [](LtGemmKey& k) { k.align_w = 16; },      [](LtGemmKey& k) { k.align_y = 16; },
      [](LtGemmKey& k) { k.align_bias = 0; },    [](LtGemmKey& k) { k.tf32 = true; }};
  std::set<uint64_t> hashes{base.hash()};
  for (const auto& change : variants) {
    LtGemmKey k = base;
    change(k);
    CHECK_FALSE(k == base);
    hashes.insert(k.hash());
  }
  CHECK(hashes.size() == variants.size() + 1);
  LtGemmKey same = base;
  CHECK(same == base);
  CHECK(same.hash() == base.hash());
}

TEST_CASE("address_alignment: the largest power of two dividing an address, capped") {
  CHECK(address_alignment(0x1000) == 256);
  CHECK(address_alignment(0x1000, 16) == 16);
  CHECK(address_alignment(0x1002) == 2);
  CHECK(address_alignment(0x1008) == 8);
  CHECK(address_alignment(0x1010) == 16);
  CHECK(address_alignment(0x1001) == 1);
  CHECK(address_alignment(0x1080) == 128);
  // A column offset into a bf16 row: 1152 columns of 2 bytes = 2304 = 256 * 9.
  CHECK(address_alignment(0x10000 + 1152 * 2) == 256);
  CHECK(address_alignment(0x10000 + 72 * 2) == 16);
}

TEST_CASE("PlanCache: one build per key, failures remembered as no plan") {
  PlanCache<SdpaKey, int> cache;
  int builds = 0;
  const SdpaKey a = SdpaKey::of(latte_spatial(), 0);
  SdpaKey b = a;
  b.kv_len = 120;
  auto build_ok = [&] { ++builds; return std::make_shared<int>(builds); };
  auto p1 = cache.get(a, build_ok);
  auto p2 = cache.get(a, build_ok);
  REQUIRE(p1);
  CHECK(p1 == p2);
  CHECK(builds == 1);
  // A key with no plan: the builder fails (null or an exception) once.
  int failing = 0;
  auto build_null = [&] { ++failing; return std::shared_ptr<int>(); };
  CHECK_FALSE(cache.get(b, build_null));
  CHECK_FALSE(cache.get(b, build_null));
  CHECK(failing == 1);
  SdpaKey c = a;
  c.stats = true;
  auto build_throw = [&]() -> std::shared_ptr<int> { ++failing; throw std::runtime_error("no engine"); };
  CHECK_FALSE(cache.get(c, build_throw));
  CHECK_FALSE(cache.get(c, build_throw));
  CHECK(failing == 2);
  CHECK(cache.size() == 3);
  CHECK(cache.builds() == 3);
  CHECK(cache.hits() == 3);
  cache.clear();
  CHECK(cache.size() == 0);
  cache.get(a, build_ok);
  CHECK(builds == 2);
}
