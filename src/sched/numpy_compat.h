// The few numpy operations diffusers' set_timesteps uses, reproduced to the
// last bit: timesteps come from float64 arithmetic followed by round-half-
// to-even, so a value landing on .5 (e.g. 937.5 for 16 trailing steps) must
// round the way numpy rounds, and numpy's arange/linspace formulas decide on
// which side of .5 a value falls.
#pragma once
#include <cstdint>
#include <vector>

namespace ditgen::sched::np {

// np.linspace(start, stop, num) (endpoint=True): start + i * ((stop - start) /
// (num - 1)), the last element set to stop exactly.
std::vector<double> linspace(double start, double stop, int64_t num);

// np.arange(start, stop, step) for float64: ceil((stop - start) / step)
// elements, element i = start + i * ((start + step) - start), as numpy's fill
// computes it.
std::vector<double> arange(double start, double stop, double step);

// np.round (half to even) of each element, then .astype(int64).
std::vector<int64_t> round_to_int(const std::vector<double>& x);

}  // namespace ditgen::sched::np
