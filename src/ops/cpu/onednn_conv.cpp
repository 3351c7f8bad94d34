// onednn_conv.h: convolution_forward with format_tag::any for the source,
// weights and destination (the primitive's blocked layouts), reorders from
// and to the caller's NCHW / OIHW arrays, all cached per shape.
#include "ops/cpu/onednn_conv.h"

#include <dnnl.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

#include "ops/cpu/onednn_runtime.h"
#include "tensor/tensor.h"
#include "util/error.h"
#include "util/run_stage.h"
#include "util/strings.h"

namespace ditgen::ops::cpu {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

struct Prepared {
  dnnl::convolution_forward conv;
  dnnl::memory::desc x_user, w_user, b_user, y_user;  // NCHW / OIHW / x arrays of the caller
  dnnl::memory::desc x_conv, w_conv, y_conv;  // the primitive's layouts
  std::unique_ptr<dnnl::reorder> x_in, w_in, y_out;  // null where the layouts agree
};

Prepared prepare(const ConvShape& s, DType w_dtype, bool bias) {
  const dt t = w_dtype == DType::kBF16 ? dt::bf16 : dt::f32;
  const dnnl::memory::dims x_dims{s.batch, s.in_channels, s.height, s.width};
  const dnnl::memory::dims w_dims{s.out_channels, s.in_channels, s.kernel_h, s.kernel_w};
  const dnnl::memory::dims y_dims{s.batch, s.out_channels, s.out_height(), s.out_width()};
  Prepared p;
  p.x_user = dnnl::memory::desc(x_dims, dt::f32, tag::nchw);
  p.w_user = dnnl::memory::desc(w_dims, t, tag::oihw);
  p.y_user = dnnl::memory::desc(y_dims, dt::f32, tag::nchw);
  p.b_user = dnnl::memory::desc({s.out_channels}, dt::f32, tag::x);
  // Right padding so that the output size is exactly out_height / out_width.
  const dnnl::memory::dims stride{s.stride, s.stride}, pad_l{s.padding, s.padding};
  const dnnl::memory::dims pad_r{(s.out_height() - 1) * s.stride + s.kernel_h - s.height - s.padding,
                                 (s.out_width() - 1) * s.stride + s.kernel_w - s.width - s.padding};
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

const Prepared& cached(const ConvShape& s, DType w_dtype, bool bias) {
  static std::mutex mutex;
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, bool>;
  static std::map<Key, Prepared> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  // clang-format off
  Key key{s.batch, s.in_channels, s.height, s.width, s.out_channels, s.kernel_h, s.kernel_w, s.stride, s.padding,
          static_cast<int>(w_dtype), bias};
  // clang-format on
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, prepare(s, w_dtype, bias)).first;
  return it->second;
}

// A reused thread-local buffer of at least `bytes` (grown, never shrunk),
// 64-byte aligned; `slot` keeps the three intermediates apart. Running out
// of memory names the array (`what`, e.g. "the input", and the shape of
// `user`, the caller's array) like a failed tensor allocation does.
void* scratch(int slot, size_t bytes, const char* what, const dnnl::memory::desc& user) {
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
      throw RuntimeFailure("out of memory: cannot allocate conv2d's copy of " + std::string(what) + " " +
                           shape_str(user.dims()) + " in oneDNN's layout (" + format_bytes(static_cast<double>(bytes)) +
                           ")" + during_stage());
    b.size = bytes + 64;
  }
  const auto at = reinterpret_cast<uintptr_t>(b.data.get());
  return b.data.get() + ((64 - at % 64) % 64);
}

}  // namespace

void onednn_conv2d(const ConvShape& s, const float* x, const void* w, DType w_dtype, const float* bias, float* y) {
  if (w_dtype != DType::kF32 && w_dtype != DType::kBF16)
    throw std::invalid_argument(std::string("conv2d: a ") + dtype_name(w_dtype) + " weight (float32 or bfloat16)");
  with_onednn_errors([&] {
    const Prepared& p = cached(s, w_dtype, bias != nullptr);
    auto& e = onednn_engine();
    auto& st = onednn_stream();
    dnnl::memory x_user(p.x_user, e, const_cast<float*>(x)), w_user(p.w_user, e, const_cast<void*>(w));
    dnnl::memory y_user(p.y_user, e, y);
    dnnl::memory x_conv = x_user, w_conv = w_user, y_conv = y_user;
    if (p.x_in) {
      x_conv = dnnl::memory(p.x_conv, e, scratch(0, p.x_conv.get_size(), "the input", p.x_user));
      p.x_in->execute(st, x_user, x_conv);
    }
    if (p.w_in) {
      w_conv = dnnl::memory(p.w_conv, e, scratch(1, p.w_conv.get_size(), "the weight", p.w_user));
      p.w_in->execute(st, w_user, w_conv);
    }
    if (p.y_out) y_conv = dnnl::memory(p.y_conv, e, scratch(2, p.y_conv.get_size(), "the output", p.y_user));
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, x_conv}, {DNNL_ARG_WEIGHTS, w_conv}, {DNNL_ARG_DST, y_conv}};
    if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(p.b_user, e, const_cast<float*>(bias)));
    p.conv.execute(st, args);
    if (p.y_out) p.y_out->execute(st, y_conv, y_user);
    st.wait();
  });
}

}  // namespace ditgen::ops::cpu
