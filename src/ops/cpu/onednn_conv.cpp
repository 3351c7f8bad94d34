// onednn_conv.h: convolution_forward with format_tag::any for the source,
// weights and destination (the primitive's blocked layouts), reorders from
// and to the caller's NCHW / OIHW (NCDHW / OIDHW) arrays, all cached per
// shape. One implementation for both ranks (Geometry: the spatial axes).
#include "ops/cpu/onednn_conv.h"

#include <dnnl.hpp>

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/cpu/onednn_runtime.h"
#include "tensor/tensor.h"
#include "util/error.h"
#include "util/run_stage.h"
#include "util/strings.h"

namespace ditgen::ops::cpu {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// A convolution of either rank: sizes of the spatial axes, outermost first
// (H, W or T, H, W), symmetric padding.
struct Geometry {
  const char* op = "conv2d";  // for error messages
  int64_t batch = 0, in_channels = 0, out_channels = 0;
  std::vector<int64_t> in, kernel, stride, padding;
  // A slab of frames (3-D only): the caller's input and output arrays hold
  // x_frames / y_frames frames, of which this geometry's in[0] / out(0)
  // are a run (strided views); 0: the arrays are exactly the geometry's.
  int64_t x_frames = 0, y_frames = 0;
  int64_t out(size_t a) const { return (in[a] + 2 * padding[a] - kernel[a]) / stride[a] + 1; }
};

// The dense NC(D)HW strides of `dims`, the time axis (dims[2]) spanning
// `frames` frames when a slab is a view of a longer array.
dnnl::memory::dims strides_of(const dnnl::memory::dims& dims, int64_t frames) {
  dnnl::memory::dims st(dims.size());
  int64_t step = 1;
  for (size_t a = dims.size(); a-- > 0;) {
    st[a] = step;
    step *= a == 2 && frames > 0 ? frames : dims[a];
  }
  return st;
}

struct Prepared {
  dnnl::convolution_forward conv;
  dnnl::memory::desc x_user, w_user, b_user, y_user;  // NC(D)HW / OI(D)HW / x arrays of the caller
  dnnl::memory::desc x_conv, w_conv, y_conv;  // the primitive's layouts
  std::unique_ptr<dnnl::reorder> x_in, w_in, y_out;  // null where the layouts agree
};

Prepared prepare(const Geometry& g, DType w_dtype, bool bias) {
  const dt t = w_dtype == DType::kBF16 ? dt::bf16 : dt::f32;
  const bool three = g.in.size() == 3;
  dnnl::memory::dims x_dims{g.batch, g.in_channels}, w_dims{g.out_channels, g.in_channels},
      y_dims{g.batch, g.out_channels};
  // Right padding so that each output size is exactly out(a).
  dnnl::memory::dims stride, pad_l, pad_r;
  for (size_t a = 0; a < g.in.size(); ++a) {
    x_dims.push_back(g.in[a]);
    w_dims.push_back(g.kernel[a]);
    y_dims.push_back(g.out(a));
    stride.push_back(g.stride[a]);
    pad_l.push_back(g.padding[a]);
    pad_r.push_back((g.out(a) - 1) * g.stride[a] + g.kernel[a] - g.in[a] - g.padding[a]);
  }
  const tag act = three ? tag::ncdhw : tag::nchw, wt = three ? tag::oidhw : tag::oihw;
  Prepared p;
  p.x_user = g.x_frames > 0 ? dnnl::memory::desc(x_dims, dt::f32, strides_of(x_dims, g.x_frames))
                            : dnnl::memory::desc(x_dims, dt::f32, act);
  p.w_user = dnnl::memory::desc(w_dims, t, wt);
  p.y_user = g.y_frames > 0 ? dnnl::memory::desc(y_dims, dt::f32, strides_of(y_dims, g.y_frames))
                            : dnnl::memory::desc(y_dims, dt::f32, act);
  p.b_user = dnnl::memory::desc({g.out_channels}, dt::f32, tag::x);
  const dnnl::memory::desc x_any(x_dims, t, tag::any), w_any(w_dims, t, tag::any), y_any(y_dims, dt::f32, tag::any);
  std::unique_ptr<dnnl::convolution_forward::desc> d;
  if (bias)
    d = std::make_unique<dnnl::convolution_forward::desc>(dnnl::prop_kind::forward_inference,
                                                          dnnl::algorithm::convolution_direct, x_any, w_any, p.b_user,
                                                          y_any, stride, pad_l, pad_r);
  else
    d = std::make_unique<dnnl::convolution_forward::desc>(dnnl::prop_kind::forward_inference,
                                                          dnnl::algorithm::convolution_direct, x_any, w_any, y_any,
                                                          stride, pad_l, pad_r);
  const dnnl::convolution_forward::primitive_desc pd(*d, onednn_engine());
  p.conv = dnnl::convolution_forward(pd);
  p.x_conv = pd.src_desc();
  p.w_conv = pd.weights_desc();
  p.y_conv = pd.dst_desc();
  auto& e = onednn_engine();
  if (p.x_conv != p.x_user)
    p.x_in = std::make_unique<dnnl::reorder>(dnnl::reorder::primitive_desc(e, p.x_user, e, p.x_conv));
  if (p.w_conv != p.w_user)
    p.w_in = std::make_unique<dnnl::reorder>(dnnl::reorder::primitive_desc(e, p.w_user, e, p.w_conv));
  if (p.y_conv != p.y_user)
    p.y_out = std::make_unique<dnnl::reorder>(dnnl::reorder::primitive_desc(e, p.y_conv, e, p.y_user));
  return p;
}

const Prepared& cached(const Geometry& g, DType w_dtype, bool bias) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, Prepared> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  std::vector<int64_t> key{g.batch, g.in_channels, g.out_channels, static_cast<int64_t>(g.in.size()),
                           static_cast<int64_t>(w_dtype), bias, g.x_frames, g.y_frames};
  for (const auto* v : {&g.in, &g.kernel, &g.stride, &g.padding}) key.insert(key.end(), v->begin(), v->end());
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, prepare(g, w_dtype, bias)).first;
  return it->second;
}

// A reused thread-local buffer of at least `bytes` (grown, never shrunk),
// 64-byte aligned; `slot` keeps the three intermediates apart. Running out
// of memory names the op and the array (`what`, e.g. "the input", and the
// shape of `user`, the caller's array) like a failed tensor allocation does.
void* scratch(int slot, size_t bytes, const char* op, const char* what, const dnnl::memory::desc& user) {
  struct Buffer {
    std::unique_ptr<char[]> data;
    size_t size = 0;
  };
  thread_local Buffer buffers[3];
  Buffer& b = buffers[slot];
  if (bytes + 64 > b.size) {
    b.data.reset();
    b.size = 0;
    b.data.reset(new (std::nothrow) char[bytes + 64]);
    if (!b.data)
      throw RuntimeFailure("out of memory: cannot allocate " + std::string(op) + "'s copy of " + std::string(what) +
                           " " + shape_str(user.dims()) + " in oneDNN's layout (" +
                           format_bytes(static_cast<double>(bytes)) + ")" + during_stage());
    b.size = bytes + 64;
  }
  const auto at = reinterpret_cast<uintptr_t>(b.data.get());
  return b.data.get() + ((64 - at % 64) % 64);
}

// The weight in the primitive's layout, reordered once per call and reused
// by every slab whose primitive takes the same layout.
struct ReorderedWeight {
  dnnl::memory::desc desc;
  dnnl::memory memory;
  bool valid = false;
};

// One primitive over the caller's arrays (or a slab of them: g.x_frames).
void run_once(const Geometry& g, const float* x, const void* w, DType w_dtype, const float* bias, float* y,
              ReorderedWeight& rw) {
  const Prepared& p = cached(g, w_dtype, bias != nullptr);
  auto& e = onednn_engine();
  auto& st = onednn_stream();
  dnnl::memory x_user(p.x_user, e, const_cast<float*>(x)), w_user(p.w_user, e, const_cast<void*>(w));
  dnnl::memory y_user(p.y_user, e, y);
  dnnl::memory x_conv = x_user, w_conv = w_user, y_conv = y_user;
  if (p.x_in) {
    x_conv = dnnl::memory(p.x_conv, e, scratch(0, p.x_conv.get_size(), g.op, "the input", p.x_user));
    p.x_in->execute(st, x_user, x_conv);
  }
  if (p.w_in) {
    if (!rw.valid || rw.desc != p.w_conv) {
      rw.memory = dnnl::memory(p.w_conv, e, scratch(1, p.w_conv.get_size(), g.op, "the weight", p.w_user));
      p.w_in->execute(st, w_user, rw.memory);
      rw.desc = p.w_conv;
      rw.valid = true;
    }
    w_conv = rw.memory;
  }
  if (p.y_out) y_conv = dnnl::memory(p.y_conv, e, scratch(2, p.y_conv.get_size(), g.op, "the output", p.y_user));
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, x_conv}, {DNNL_ARG_WEIGHTS, w_conv}, {DNNL_ARG_DST, y_conv}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(p.b_user, e, const_cast<float*>(bias)));
  p.conv.execute(st, args);
  if (p.y_out) p.y_out->execute(st, y_conv, y_user);
  st.wait();
}

// Output frames per slab of a 3-D convolution: as many as keep the
// primitive's copies of a slab's input (its frames, in the arithmetic's
// dtype) and output (float32) within slab_bytes, at least one; all of them
// for a 2-D one or a padded time axis (a slab would need its own padding).
int64_t slab_frames(const Geometry& g, DType w_dtype, int64_t slab_bytes) {
  if (g.in.size() != 3 || g.padding[0] != 0) return std::numeric_limits<int64_t>::max();
  const int64_t in_frame = g.batch * g.in_channels * g.in[1] * g.in[2] * (w_dtype == DType::kBF16 ? 2 : 4);
  const int64_t out_frame = g.batch * g.out_channels * g.out(1) * g.out(2) * 4;
  const int64_t halo = std::max<int64_t>(g.kernel[0] - g.stride[0], 0) * in_frame;
  return std::max<int64_t>(1, (slab_bytes - halo) / (g.stride[0] * in_frame + out_frame));
}

void run(const Geometry& g, const float* x, const void* w, DType w_dtype, const float* bias, float* y,
         int64_t slab_bytes) {
  if (w_dtype != DType::kF32 && w_dtype != DType::kBF16)
    throw std::invalid_argument(std::string(g.op) + ": a " + dtype_name(w_dtype) +
                                " weight (float32 or bfloat16)");
  with_onednn_errors([&] {
    ReorderedWeight rw;
    const int64_t frames = g.in.size() == 3 ? g.out(0) : 0, slab = slab_frames(g, w_dtype, slab_bytes);
    if (slab >= frames) return run_once(g, x, w, w_dtype, bias, y, rw);
    // Time slabs: each a run of output frames and the input frames they
    // read, viewed in place in the caller's arrays.
    const int64_t plane = g.in[1] * g.in[2], out_plane = g.out(1) * g.out(2);
    for (int64_t o0 = 0; o0 < frames; o0 += slab) {
      Geometry s = g;
      s.in[0] = (std::min(slab, frames - o0) - 1) * g.stride[0] + g.kernel[0];
      s.x_frames = g.in[0];
      s.y_frames = frames;
      run_once(s, x + o0 * g.stride[0] * plane, w, w_dtype, bias, y + o0 * out_plane, rw);
    }
  });
}

}  // namespace

void onednn_conv2d(const ConvShape& s, const float* x, const void* w, DType w_dtype, const float* bias, float* y) {
  Geometry g;
  g.op = "conv2d";
  g.batch = s.batch, g.in_channels = s.in_channels, g.out_channels = s.out_channels;
  g.in = {s.height, s.width};
  g.kernel = {s.kernel_h, s.kernel_w};
  g.stride = {s.stride, s.stride};
  g.padding = {s.padding, s.padding};
  run(g, x, w, w_dtype, bias, y, 0);
}

void onednn_conv3d(const Conv3dShape& s, const float* x, const void* w, DType w_dtype, const float* bias,
                   float* y, int64_t slab_bytes) {
  Geometry g;
  g.op = "conv3d";
  g.batch = s.batch, g.in_channels = s.in_channels, g.out_channels = s.out_channels;
  g.in.assign(s.in.begin(), s.in.end());
  g.kernel.assign(s.kernel.begin(), s.kernel.end());
  g.stride.assign(s.stride.begin(), s.stride.end());
  g.padding.assign(s.padding.begin(), s.padding.end());
  run(g, x, w, w_dtype, bias, y, slab_bytes);
}

}  // namespace ditgen::ops::cpu
