// numpy's linspace / arange / round, as in numpy 1.x-2.x
// (numpy/_core/function_base.py linspace; multiarray ctors.c PyArray_ArangeObj
// and the DOUBLE_fill loop; round = rint, half to even).
#include "sched/numpy_compat.h"

#include <cmath>

namespace ditgen::sched::np {

std::vector<double> linspace(double start, double stop, int64_t num) {
  std::vector<double> y(num > 0 ? static_cast<size_t>(num) : 0);
  if (num <= 0) return y;
  const int64_t div = num - 1;
  const double delta = stop - start;
  const double step = div > 0 ? delta / static_cast<double>(div) : 0.0;
  for (int64_t i = 0; i < num; ++i) {
    if (div > 0 && step != 0.0) {
      y[i] = static_cast<double>(i) * step + start;
    } else {  // numpy's step == 0 branch: (i / div) * delta
      y[i] = (div > 0 ? static_cast<double>(i) / static_cast<double>(div) * delta : 0.0) + start;
    }
  }
  if (num > 1) y[num - 1] = stop;
  return y;
}

std::vector<double> arange(double start, double stop, double step) {
  const double len = std::ceil((stop - start) / step);
  std::vector<double> y(len > 0 ? static_cast<size_t>(len) : 0);
  if (y.empty()) return y;
  y[0] = start;
  if (y.size() > 1) y[1] = start + step;
  const double delta = (start + step) - start;
  for (size_t i = 2; i < y.size(); ++i) y[i] = start + static_cast<double>(i) * delta;
  return y;
}

std::vector<int64_t> round_to_int(const std::vector<double>& x) {
  std::vector<int64_t> out(x.size());
  // nearbyint in the default rounding mode is round-half-to-even, like np.round.
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<int64_t>(std::nearbyint(x[i]));
  return out;
}

}  // namespace ditgen::sched::np
