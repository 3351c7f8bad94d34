// The flash / math choice of the CUDA attention (kernels/cuda/attention_path.h)
// over the table of docs/design.md §3: flash on every compute capability >= 8.0
// for head sizes 64, 72 and 128, math below 8.0 or for other head sizes,
// whatever the storage type, and math for every call with a score bias
// (T5's relative position bias). Pure host code: runs without a GPU.
#include <doctest/doctest.h>

#include <initializer_list>
#include <string>

#include "kernels/cuda/attention_path.h"

using namespace ditgen::cuda;

// Evaluated at compile time too: the choice must stay a constexpr function.
static_assert(choose_attention_path(8, 0, 64, DType::kBF16) == AttentionPath::kFlash);
static_assert(choose_attention_path(7, 5, 64, DType::kBF16) == AttentionPath::kMath);
static_assert(choose_attention_path(12, 0, 72, DType::kF32) == AttentionPath::kFlash);
static_assert(choose_attention_path(9, 0, 64, DType::kBF16, true) == AttentionPath::kMath);

TEST_CASE("choose_attention_path: flash from compute capability 8.0 up, for head sizes 64/72/128") {
  struct Cc { int major, minor; bool ampere_or_later; };
  const Cc ccs[] = {{7, 0, false}, {7, 5, false}, {8, 0, true}, {8, 6, true},
                    {8, 9, true},  {9, 0, true},  {10, 0, true}, {12, 0, true}};
  struct Hd { int head_dim; bool flash_kernel; };
  const Hd hds[] = {{64, true}, {72, true}, {128, true}, {80, false}, {40, false}};
  for (const Cc& cc : ccs)
    for (const Hd& hd : hds)
      for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
        CAPTURE(cc.major);
        CAPTURE(cc.minor);
        CAPTURE(hd.head_dim);
        CAPTURE(dtype_name(t));
        const AttentionPath want = cc.ampere_or_later && hd.flash_kernel ? AttentionPath::kFlash : AttentionPath::kMath;
        CHECK(choose_attention_path(cc.major, cc.minor, hd.head_dim, t) == want);
        CHECK(flash_supported(cc.major, cc.minor, hd.head_dim, t) == (want == AttentionPath::kFlash));
      }
}

TEST_CASE("choose_attention_path: later minor and major versions stay on flash") {
  // Parts not in the table (8.7 Orin, 10.3, 11.0, 12.1, a future 13.0) follow
  // the same ordered comparison, never an equality test.
  struct Cc { int major, minor; };
  for (Cc cc : {Cc{8, 7}, Cc{10, 3}, Cc{11, 0}, Cc{12, 1}, Cc{13, 0}})
    CHECK(choose_attention_path(cc.major, cc.minor, 128, DType::kBF16) == AttentionPath::kFlash);
  // And anything below 8.0 stays on math, including 7.9 and 6.x.
  for (Cc cc : {Cc{7, 9}, Cc{6, 1}, Cc{5, 2}})
    CHECK(choose_attention_path(cc.major, cc.minor, 64, DType::kF16) == AttentionPath::kMath);
}

TEST_CASE("choose_attention_path: a score bias always takes the math path") {
  // The flash kernel adds no bias: wherever it would run, a biased call goes
  // to math; where it would not, nothing changes.
  struct Cc { int major, minor; };
  for (Cc cc : {Cc{7, 5}, Cc{8, 0}, Cc{8, 9}, Cc{9, 0}, Cc{12, 0}})
    for (int head_dim : {64, 72, 128, 80, 8})
      for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
        CAPTURE(cc.major);
        CAPTURE(cc.minor);
        CAPTURE(head_dim);
        CAPTURE(dtype_name(t));
        CHECK(choose_attention_path(cc.major, cc.minor, head_dim, t, true) == AttentionPath::kMath);
        CHECK(choose_attention_path(cc.major, cc.minor, head_dim, t, false) ==
              choose_attention_path(cc.major, cc.minor, head_dim, t));
      }
  CHECK(choose_attention_path(9, 0, 64, DType::kBF16, false) == AttentionPath::kFlash);
}

static_assert(choose_attention_path(8, 0, 64, DType::kBF16, false, true) == AttentionPath::kCudnn);
static_assert(choose_attention_path(7, 5, 64, DType::kBF16, false, true) == AttentionPath::kMath);
static_assert(choose_attention_path(9, 0, 72, DType::kF32, false, true) == AttentionPath::kFlash);

TEST_CASE("choose_attention_path: cuDNN's flash attention first on 8.0 and later, bf16/f16, where it is usable") {
  // The generations from Turing to Blackwell (consumer 12.x included), and
  // parts not in the table: an ordered comparison, never == 8.0.
  struct Cc { int major, minor; bool ampere_or_later; };
  const Cc ccs[] = {{7, 5, false}, {7, 9, false}, {8, 0, true},  {8, 6, true},  {8, 7, true}, {8, 9, true},
                    {9, 0, true},  {10, 0, true}, {10, 3, true}, {11, 0, true}, {12, 0, true}, {12, 1, true}};
  for (const Cc& cc : ccs)
    for (int head_dim : {64, 72, 128, 80, 40, 96, 256, 100})
      for (DType t : {DType::kF32, DType::kBF16, DType::kF16})
        for (bool cudnn : {false, true})
          for (bool bias : {false, true}) {
            CAPTURE(cc.major);
            CAPTURE(cc.minor);
            CAPTURE(head_dim);
            CAPTURE(dtype_name(t));
            CAPTURE(cudnn);
            CAPTURE(bias);
            const bool cudnn_kind = cc.ampere_or_later && t != DType::kF32 && head_dim % 8 == 0 && head_dim <= 128;
            const bool own_flash = cc.ampere_or_later && (head_dim == 64 || head_dim == 72 || head_dim == 128);
            CHECK(cudnn_sdpa_supported(cc.major, cc.minor, head_dim, t) == cudnn_kind);
            AttentionPath want = AttentionPath::kMath;
            if (!bias && cudnn && cudnn_kind)
              want = AttentionPath::kCudnn;
            else if (!bias && own_flash)
              want = AttentionPath::kFlash;
            CHECK(choose_attention_path(cc.major, cc.minor, head_dim, t, bias, cudnn) == want);
            // Without cuDNN the rule is the one of the tests above.
            if (!cudnn) CHECK(choose_attention_path(cc.major, cc.minor, head_dim, t, bias) == want);
          }
}

TEST_CASE("choose_attention_path: every family's head size takes cuDNN on Ampere and later") {
  // DiT / PixArt / Latte 72, Wan 128, the toy models 64: in bf16 and f16.
  for (int head_dim : {64, 72, 128})
    for (DType t : {DType::kBF16, DType::kF16}) {
      CHECK(choose_attention_path(8, 0, head_dim, t, false, true) == AttentionPath::kCudnn);
      CHECK(choose_attention_path(9, 0, head_dim, t, false, true) == AttentionPath::kCudnn);
      CHECK(choose_attention_path(12, 0, head_dim, t, false, true) == AttentionPath::kCudnn);
      // T5's biased attention stays on the math path.
      CHECK(choose_attention_path(9, 0, head_dim, t, true, true) == AttentionPath::kMath);
    }
  CHECK(std::string(attention_path_name(AttentionPath::kCudnn)) == "cudnn");
  CHECK(std::string(attention_path_name(AttentionPath::kFlash)) == "flash");
  CHECK(std::string(attention_path_name(AttentionPath::kMath)) == "math");
}

TEST_CASE("cudnn_sdpa_operands_aligned: 16-byte pointers and strides") {
  alignas(256) static unsigned char buf[8192];  // q, k, v 2304 bytes apart: inside the buffer
  ditgen::AttentionArgs a;
  a.dtype = DType::kBF16;
  a.head_dim = 72;
  a.heads = 16;
  a.q = buf;
  a.k = buf + 2304;
  a.v = buf + 2 * 2304;
  a.out = buf + 256;
  a.q_row_stride = a.k_row_stride = a.v_row_stride = 3 * 1152;
  a.out_row_stride = 1152;
  a.q_batch_stride = a.k_batch_stride = a.v_batch_stride = 1024 * 3 * 1152;
  a.out_batch_stride = 1024 * 1152;
  CHECK(cudnn_sdpa_operands_aligned(a));
  ditgen::AttentionArgs b = a;
  b.k = buf + 2;  // a bf16 element off
  CHECK_FALSE(cudnn_sdpa_operands_aligned(b));
  b = a;
  b.out_row_stride = 1152 + 4;  // 8 bytes
  CHECK_FALSE(cudnn_sdpa_operands_aligned(b));
  b = a;
  b.v_batch_stride += 8;  // 16 bytes: fine
  CHECK(cudnn_sdpa_operands_aligned(b));
  b = a;
  b.dtype = DType::kF32;
  b.q_row_stride = 3 * 1152 + 4;  // 16 bytes of float32
  CHECK(cudnn_sdpa_operands_aligned(b));
}
