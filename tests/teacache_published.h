// TeaCache's published rescaling polynomials, copied by hand from
// ali-vilab/TeaCache at commit 7c10efc4702c6b619f47805f7abe4a7a08085aa0
// (file and line per row): an independent copy, not read from ditgen's
// code, so a typo in a spec fails the tests that compare with it
// (tests/models/test_teacache_coefficients.cpp, and a run deciding with
// Wan2.1-T2V-1.3B's row in tests/cli/test_teacache_published.cpp).
#pragma once
#include <vector>

namespace ditgen::testing {

struct PublishedTeaCache {
  const char* model;
  const char* config;  // the model's transformer config, in this repository
  const char* source;  // where TeaCache publishes the row (use_ret_steps off for Wan)
  std::vector<double> coefficients;  // highest power first, as numpy.poly1d
};

inline const PublishedTeaCache kPublishedTeaCache[] = {
    {"Wan2.1-T2V-1.3B", "configs/models/Wan2.1-T2V-1.3B-Diffusers/transformer/config.json",
     "TeaCache4Wan2.1/teacache_generate.py:890",
     {2.39676752e+03, -1.31110545e+03, 2.01331979e+02, -8.29855975e+00, 1.37887774e-01}},
    {"Wan2.1-T2V-14B", "configs/models/Wan2.1-T2V-14B-Diffusers/transformer/config.json",
     "TeaCache4Wan2.1/teacache_generate.py:892",
     {-5784.54975374, 5449.50911966, -1811.16591783, 256.27178429, -13.02252404}},
    {"Latte-1", "scripts/gpu/models/latte-1/config.json", "eval/teacache/experiments/latte.py:180",
     {-2.46434137e+03, 3.08044764e+02, 8.07447667e+01, -4.11385132e+00, 1.11001402e-01}},
    {"CogVideoX-2B", "configs/models/CogVideoX-2b/transformer/config.json",
     "eval/teacache/experiments/cogvideox.py:75",
     {-3.10658903e+01, 2.54732368e+01, -5.92380459e+00, 1.75769064e+00, -3.61568434e-03}},
    {"CogVideoX-5B", "configs/models/CogVideoX-5b/transformer/config.json",
     "eval/teacache/experiments/cogvideox.py:78",
     {-1.53880483e+03, 8.43202495e+02, -1.34363087e+02, 7.97131516e+00, -5.23162339e-02}},
};

}  // namespace ditgen::testing
