// The convolutions of nn/conv.h: declarations of weight and bias, loaded
// as declared (a 2-D kernel optionally held as a one-frame 3-D one).
#include "models/nn/conv.h"

#include "ops/ops.h"

namespace ditgen::models::nn {

namespace {

// weight (out, in, kernel...) and bias (out).
TensorDecls conv_tensors(const std::string& prefix, int64_t out, int64_t in, const Shape& kernel) {
  Shape weight = {out, in};
  weight.insert(weight.end(), kernel.begin(), kernel.end());
  return {{prefix + "weight", weight}, {prefix + "bias", {out}}};
}

// The declared weight read as `shape` (its elements unchanged), placed for
// a convolution, and the bias.
void load_conv(const io::WeightStore& w, const TensorDecls& t, const Shape& shape, const Placement& place,
               Tensor& weight, Tensor& bias) {
  const Tensor source = load_declared(w, t[0]).reshape(shape);
  weight = release_source(w, t[0].name, source, place.conv(source));
  bias = load_as(w, t[1], place, Placed::kPut);
}

}  // namespace

TensorDecls Conv2d::tensors(const std::string& prefix, int64_t out, int64_t in, int64_t kernel) {
  return conv_tensors(prefix, out, in, {kernel, kernel});
}

Conv2d Conv2d::load(const io::WeightStore& w, const std::string& prefix, int64_t out, int64_t in, int64_t kernel,
                    const Placement& place) {
  const TensorDecls t = tensors(prefix, out, in, kernel);
  Conv2d c;
  load_conv(w, t, t[0].shape, place, c.weight, c.bias);
  return c;
}

Tensor Conv2d::operator()(const Tensor& x) const { return ops::conv2d(x, weight, &bias, 1, weight.dim(2) / 2); }

TensorDecls Conv3d::tensors(const std::string& prefix, int64_t out, int64_t in, std::array<int64_t, 3> kernel) {
  return conv_tensors(prefix, out, in, {kernel[0], kernel[1], kernel[2]});
}

Conv3d Conv3d::load(const io::WeightStore& w, const std::string& prefix, int64_t out, int64_t in,
                    std::array<int64_t, 3> kernel, const Placement& place) {
  const TensorDecls t = tensors(prefix, out, in, kernel);
  Conv3d c;
  load_conv(w, t, t[0].shape, place, c.weight, c.bias);
  return c;
}

TensorDecls Conv3d::tensors_2d(const std::string& prefix, int64_t out, int64_t in, int64_t kernel) {
  return conv_tensors(prefix, out, in, {kernel, kernel});
}

Conv3d Conv3d::load_2d(const io::WeightStore& w, const std::string& prefix, int64_t out, int64_t in, int64_t kernel,
                       const Placement& place) {
  Conv3d c;
  load_conv(w, tensors_2d(prefix, out, in, kernel), {out, in, 1, kernel, kernel}, place, c.weight, c.bias);
  return c;
}

Tensor Conv3d::operator()(const Tensor& x, std::array<int64_t, 3> pad) const {
  return ops::conv3d(x, weight, &bias, {1, 1, 1}, pad);
}

}  // namespace ditgen::models::nn
