// Op front end: the one place models call for compute. Every op takes
// tensors on one device and dispatches by that device and their dtype
// (src/ops/ops.cpp, the only dispatch point) to its CPU implementation
// (src/ops/cpu/: float32 operands, GEMM weights also bfloat16 / float16,
// float32 arithmetic) or its CUDA one (src/ops/gpu/ over kernels/cuda/,
// float32, bfloat16 or float16 storage with float32 arithmetic). A CPU
// operand of another dtype is std::invalid_argument naming the op and dtype:
// conversion is explicit (convert below), done once where it is needed. Arguments are checked here, once,
// for every device. Model code written against this header runs unchanged
// on either device: the CPU tests exercise the same model code a GPU runs.
// Shapes use the diffusers/PyTorch conventions: Linear weights are [out, in],
// images NCHW, token sequences [B, N, C].
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "vocab/attention_args.h"
#include "tensor/tensor.h"

namespace ditgen::ops {

// Threads used by CPU ops and by BLAS (one OpenMP pool shared by both).
// Also sets flush-to-zero / denormals-are-zero on the pool threads.
void set_num_threads(int n);
int num_threads();
// "openmp" / "pthread" / "serial": OpenBLAS's threading build, for diagnostics.
const char* blas_threading();
// OpenBLAS's kernel family in use ("SkylakeX", "Haswell", ...).
const char* blas_core();

// ---- Conversion -------------------------------------------------------------
// x's elements as `dtype`, on x's device: x itself (shared) when it already
// is, else a converted copy (Tensor::to: round to nearest even between the
// floating types, exact casts to and from the integer ones).
Tensor convert(const Tensor& x, DType dtype);

// ---- GEMM ---------------------------------------------------------------
// c[M, N] = alpha * op(a) * op(b) + beta * c on 2-D tensors (op = transpose
// when asked); M, N, K come from the shapes. On the CPU b (the weight) may
// be bfloat16 or float16, its dtype the arithmetic as for linear.
void gemm(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta, Tensor& c);

// What a linear applies to each output after its bias: on the CPU inside
// the GEMM, on the output tile while it is in cache (one trip through
// memory fewer than a separate activation op).
enum class Activation { kNone, kGeluTanh };

// y[..., N] = act(x[..., K] · w[N, K]^T + bias[N])  (torch.nn.Linear, then
// the activation). On the CPU, the weight's dtype is the GEMM's arithmetic:
// float32; bfloat16 (x rounded to bfloat16, float32 sums); float16 (widened
// exactly: float32). x, bias and y are float32 there.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act = Activation::kNone);
// Same (no activation), into columns [col, col + N) of y, a [rows, W]
// tensor (x's rows), so several projections can fill one wider buffer.
void linear_into(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, int64_t col);

// w (a GEMM weight [N, K], what linear / gemm's b take) in the layout the
// device's GEMM reads fastest, done once at load: on the CPU a bfloat16
// weight packed into oneDNN's blocked layout (Layout::kGemmPacked, same
// bytes; only linear, linear_into and gemm's b under trans_b read it) where
// the CPU runs bfloat16 matmuls natively; otherwise w itself.
Tensor pack_gemm_weight(const Tensor& w);
// w (a GEMM weight [N, K] of any floating dtype) quantized for W8A8 compute
// (model.quantize "int8"): symmetric int8 per output row, packed with its
// scales (Layout::kInt8Packed; ops/cpu/int8_matmul.h). linear and
// linear_into then quantize their input per row and run the int8 GEMM.
// CPU only (a CUDA tensor: std::invalid_argument). A block-quantized w
// (Layout::kBlockQuantized) is dequantized a band of rows at a time first.
Tensor quantize_gemm_weight(const Tensor& w);
// A block-quantized GEMM weight (Layout::kBlockQuantized) dequantized in
// full to a row-major (N, K) tensor of `dtype` on its own device: what a
// device without a block GEMM of its own takes. On CUDA (the blocks
// uploaded by Tensor::blocks_to) the kernel runs the CPU's block
// arithmetic and rounds each float32 value once to dtype; on the CPU the
// float32 result is converted.
Tensor dequantize_gemm_weight(const Tensor& w, DType dtype = DType::kF32);

// ---- Elementwise ----------------------------------------------------------
void silu_(Tensor& x);                       // x * sigmoid(x), in place
Tensor silu(const Tensor& x);
void gelu_tanh_(Tensor& x);                  // GELU, tanh approximation, in place
void gelu_(Tensor& x);                       // exact (erf) GELU, in place
void relu_(Tensor& x);                       // max(x, 0), in place (NaN stays NaN, as torch.relu)
void add_(Tensor& x, const Tensor& y);       // x += y (same shape)
void mul_(Tensor& x, const Tensor& y);       // x *= y (same shape; T5's gated feed-forward)
// x += y repeated: x viewed as [x.numel() / y.numel(), y.numel()] rows
// (a bias over every token, a position table over every sample).
void add_broadcast_(Tensor& x, const Tensor& y);

// ---- Normalisation ----------------------------------------------------------
// LayerNorm over the last dim, optional affine (weight/bias may be null).
Tensor layer_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, float eps);
// RMSNorm over the last dim C (T5LayerNorm): y = weight * (x / sqrt(mean(x^2)
// + eps)), no mean subtraction, no bias; weight [C]; the sum of squares in
// float32.
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps);

// adaLN modulation: x [B, N, C]; out = LN(x) * (1 + scale[b]) + shift[b]
// where shift and scale are C columns of row b of mod [B, M], starting at
// columns shift_col and scale_col (the chunks of an adaLN linear output).
void layer_norm_modulate(const Tensor& x, const Tensor& mod, int64_t shift_col, int64_t scale_col, float eps,
                         Tensor& out);

// x [B, N, C] += gate[b] * y [B, N, C], gate = C columns of row b of mod
// [B, M] from gate_col (adaLN-Zero gated residual).
void gated_residual_(Tensor& x, const Tensor& y, const Tensor& mod, int64_t gate_col);

// GroupNorm on NCHW-like [B, C, *] with affine weight/bias [C]; optionally
// followed by SiLU (the VAE always pairs them).
Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias, float eps,
                  bool fuse_silu);

// RMS norm over the channels of a channel-first x [B, C, *] (each position's
// C values; 4-D images, 5-D videos): y = x / max(||x||_2, 1e-12) * sqrt(C) *
// gamma[c] + bias[c], i.e. F.normalize(x, dim=1) * sqrt(C) * gamma + bias
// (diffusers' WanRMS_norm), whose arithmetic it keeps: the sum of squares in
// float32, a division by the clamped norm, then the products in that order.
// gamma and bias (optional) hold C values, any shape ([C], [C, 1, 1, 1]);
// then SiLU when fuse_silu.
Tensor rms_norm_channels(const Tensor& x, const Tensor& gamma, const Tensor* bias, bool fuse_silu);

// Wan-style modulation needs no op of its own: with mod = temb [B, 6C] +
// scale_shift_table [6C] (add_broadcast_), layer_norm_modulate(x, mod, 0, C)
// and gated_residual_(x, y, mod, 2C) are Wan 2.1's norm1 / gate_msa; per-token
// modulation (temb [B, S, 6C]) is the same ops on x viewed as [B*S, 1, C]
// with mod [B*S, 6C] (docs/ops-wan.md).

// ---- Attention ----------------------------------------------------------------
// Scaled dot-product attention with O(n) extra memory (CPU: tiled, online
// softmax; CUDA: flash or math path, see set_attention_mode), on operands
// laid out as ditgen::AttentionArgs says (src/vocab/attention_args.h:
// strides, optional lse, per-sample key counts and additive score bias);
// build one from tensors with ops::attention_args (ops/attention_operands.h)
// and set the extras on it. A score bias (T5) takes the CUDA math path: the
// automatic choice goes there, and a forced flash path is an error.
struct AttentionArgs : ditgen::AttentionArgs {
  Device device = Device::kCPU;  // of q, k, v, out and lse
  // false: this call takes the automatic path whatever set_attention_mode
  // says (the VAE's one-head attention over pixels, whose head size is a
  // channel count such as 512: --attention is about the transformer's).
  bool follow_attention_mode = true;
};
void attention(const AttentionArgs& args);

// --attention (ditgen::AttentionMode, vocab/attention_args.h).
void set_attention_mode(AttentionMode mode);
AttentionMode attention_mode();

// Merges a partial attention result (out2, lse2) over another key block into
// the running one (out, lse), in place: the softmax over the union of keys.
// out, out2: [B, N, heads * head_dim]; lse, lse2: float32 [B, heads, N].
void attention_merge_(Tensor& out, Tensor& lse, const Tensor& out2, const Tensor& lse2, int64_t heads);

// ---- Convolution and resampling (VAE) --------------------------------------------
// 2-D convolution, NCHW: x [B, Cin, H, W], w [Cout, Cin, kh, kw], bias [Cout];
// stride and zero padding in both directions. On the CPU w may be bfloat16:
// its dtype is the arithmetic, as for linear (x rounded, float32 sums).
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding);
// Nearest-neighbour upsampling by an integer factor: [B, C, H, W] -> [B, C, H*f, W*f].
Tensor upsample_nearest(const Tensor& x, int64_t factor);
// 3-D convolution, NCDHW: x [B, Cin, T, H, W], w [Cout, Cin, kt, kh, kw],
// bias [Cout] (may be null); stride and symmetric zero padding per axis, in
// (t, h, w) order: out [B, Cout, To, Ho, Wo], To = (T + 2 pt - kt) / st + 1,
// and so on. A causal convolution in time (diffusers' WanCausalConv3d) is
// padding {0, ph, pw} on an input whose first frames are the cached frames of
// the previous chunk (or zeros), put in front by the caller. On the CPU w may
// be bfloat16, its dtype the arithmetic as for conv2d.
Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, std::array<int64_t, 3> stride,
              std::array<int64_t, 3> padding);

// ---- Embeddings and patches -------------------------------------------------------
// diffusers get_timestep_embedding: out [len(t), dim], a CPU tensor (tiny;
// callers move it with Tensor::to).
Tensor timestep_embedding(const std::vector<float>& timesteps, int64_t dim, bool flip_sin_to_cos,
                          float downscale_freq_shift, float scale = 1.0f, float max_period = 10000.0f);
// diffusers get_2d_sincos_pos_embed for a grid_h x grid_w grid: out
// [grid_h*grid_w, dim], a CPU tensor.
Tensor sincos_pos_embed_2d(int64_t dim, int64_t grid_h, int64_t grid_w, double base_size, double interpolation_scale);
// [B, C, H, W] -> [B, (H/p)*(W/p), C*p*p] with (c, i, j) order inside a patch
// (matching a Conv2d(kernel=stride=p) weight flattened as [out, C*p*p]).
Tensor patchify(const Tensor& x, int64_t p);
// [B, h*w, p*p*C] with (i, j, c) order inside a patch -> [B, C, h*p, w*p]
// (DiT's einsum "nhwpqc->nchpwq").
Tensor unpatchify(const Tensor& x, int64_t h, int64_t w, int64_t p, int64_t channels);
// [B, C, T, H, W] -> [B, (T/pt)*(H/ph)*(W/pw), C*pt*ph*pw]: tokens in (t, h, w)
// grid order, (c, a, i, j) order inside a patch (a Conv3d(kernel = stride =
// patch) weight flattened as [out, C*pt*ph*pw]: the patch embedding is then
// a linear). patch = {pt, ph, pw}, dividing T, H, W.
Tensor patchify3d(const Tensor& x, std::array<int64_t, 3> patch);
// [B, f*h*w, pt*ph*pw*C] with (a, i, j, c) order inside a patch -> [B, C,
// f*pt, h*ph, w*pw], grid = {f, h, w} (diffusers' Wan output: reshape to
// (B, f, h, w, pt, ph, pw, C), permute (0, 7, 1, 4, 2, 5, 3, 6)).
Tensor unpatchify3d(const Tensor& x, std::array<int64_t, 3> grid, std::array<int64_t, 3> patch, int64_t channels);

// ---- Rotary position embedding ----------------------------------------------------
// Rotary tables, one row per token: cos and sin, float32 [tokens, head_dim],
// each angle repeated for its pair of channels (diffusers'
// get_1d_rotary_pos_embed(use_real=True, repeat_interleave_real=True)).
struct RotaryTables {
  Tensor cos, sin;
};
// The channels of each axis (t, h, w) of a 3-D rotary embedding over head_dim
// channels as diffusers' WanRotaryPosEmbed splits them: h = w = 2 *
// (head_dim / 6), t the rest.
std::array<int64_t, 3> rotary_split_3d(int64_t head_dim);
// Tables for a (frames, height, width) grid of tokens in (t, h, w) order:
// a token's row is the t axis's dims[0] channels for its frame index, then
// the h axis's for its row, then the w axis's for its column; on an axis of d
// channels, pair j at position p has angle p * theta^(-2j/d), computed in
// float64 and rounded once (WanRotaryPosEmbed). Each dims[i] even; CPU
// tensors (callers move them with Tensor::to), made once per grid.
RotaryTables rotary_tables_3d(std::array<int64_t, 3> dims, std::array<int64_t, 3> grid, double theta = 10000.0);

// Applies rotary tables to q or k rows with interleaved pairs, as diffusers'
// Wan attention does: each head's pair (x[2i], x[2i+1]) becomes
//   (x[2i] cos[2i] - x[2i+1] sin[2i+1], x[2i] sin[2i+1] + x[2i+1] cos[2i])
// with the row's table entries, in float32, rounded once to x's dtype. x is
// [B, S, heads * head_dim], [B, S, heads, head_dim] or [S, heads * head_dim];
// token s of every sample takes table row first_token + s (a shard or patch
// of the sequence starts at its first token's row). cos and sin: float32
// [rows, head_dim] on x's device, whatever x's dtype; head_dim even.
void rotary_embed_(Tensor& x, const Tensor& cos, const Tensor& sin, int64_t first_token = 0);
Tensor rotary_embed(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t first_token = 0);
// The same in place on rows of a wider buffer (q or k inside packed q|k|v
// rows): `batch` samples of `tokens` rows of `width` (= heads * head_dim)
// elements; sample b's token t starts at element offset + (b * tokens + t) *
// row_stride of x. Every row must lie inside x (checked).
void rotary_embed_rows_(Tensor& x, int64_t offset, int64_t row_stride, int64_t batch, int64_t tokens, int64_t width,
                        const Tensor& cos, const Tensor& sin, int64_t first_token = 0);

// ---- Data movement ------------------------------------------------------------------
// Copies `rows` rows of `row_len` elements from src (row r at src_offset +
// r * src_stride) to dst (row r at dst_offset + r * dst_stride); src and dst
// on one device with one dtype (or, on the CPU, float32 and bfloat16: each
// value converted, rounded to nearest even) and every row inside both tensors (both
// checked: std::invalid_argument). The source and destination ranges must
// not overlap; that is the caller's duty, not checked (cudaMemcpy2D's result
// is undefined for overlapping ranges, and the CPU's row-by-row memmove only
// makes an overlap within one row safe).
// The shuffles of the parallel layouts are built from it.
void copy_rows(const Tensor& src, int64_t src_offset, int64_t src_stride, Tensor& dst, int64_t dst_offset,
               int64_t dst_stride, int64_t rows, int64_t row_len);
// out[i, :] = table[rows[i], :] for a [R, C] table (an embedding lookup).
Tensor gather_rows(const Tensor& table, const std::vector<int64_t>& rows);

}  // namespace ditgen::ops
