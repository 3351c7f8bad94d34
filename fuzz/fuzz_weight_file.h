// What the fuzz targets of the weight readers (fuzz_safetensors, fuzz_gguf)
// do with a file that opened: every tensor loaded whole, by a leading and a
// trailing band of rows, an out-of-range band, and two column ranges when
// 2-D, through the WeightFile interface both readers implement, every
// element read as float32 into a volatile sink (so ASan sees every byte).
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fuzz_support.h"
#include "io/weight_file.h"

namespace ditgen::fuzz {

inline volatile float g_tensor_sink;

// std::invalid_argument from the float32 conversion is accepted: by
// contract (tensor/convert.h) it refuses an integer value float32 cannot
// hold exactly; the readers themselves throw only ditgen::Error.
inline void read_as_float32(const Tensor& t) {
  Tensor f;
  try {
    f = t.to(DType::kF32);
  } catch (const std::invalid_argument&) {
    return;
  }
  const float* p = f.numel() ? f.data() : nullptr;
  float sum = 0;
  for (int64_t i = 0; i < f.numel(); ++i) sum += p[i];
  g_tensor_sink = sum;
}

inline void read_every_tensor(const io::WeightFile& file) {
  for (const std::string& name : file.names()) {
    const Shape& shape = file.info(name).shape;
    allow_reader_errors([&] { read_as_float32(file.load(name)); });
    const int64_t rows = shape.empty() ? 0 : shape[0];
    allow_reader_errors([&] { read_as_float32(file.load_rows(name, 0, std::min<int64_t>(rows, 2))); });
    allow_reader_errors([&] { read_as_float32(file.load_rows(name, rows / 2, rows)); });
    allow_reader_errors([&] { file.load_rows(name, rows, rows + 1); });  // out of range: ModelError
    if (shape.size() == 2) {
      const int64_t cols = shape[1];
      allow_reader_errors([&] { read_as_float32(file.load_cols(name, 0, std::min<int64_t>(cols, 3))); });
      allow_reader_errors([&] { read_as_float32(file.load_cols(name, cols / 2, cols)); });
    }
  }
}

}  // namespace ditgen::fuzz
