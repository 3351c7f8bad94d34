/* fuzz_weight_index: the input is a part directory's
 * model.safetensors.index.json, written beside two small valid shards made
 * once at start-up in a scratch directory (shard-a: "w" F32 [2, 3] and "b"
 * BF16 [4]; shard-b: "x" F16 [3, 2] and "ids" I64 [2]). Then
 * io::WeightStore::open_dir, and for every tensor the index maps: info,
 * file_of, expect() with its own shape and with a wrong one, load,
 * load_rows, load_cols when 2-D; and expect() of the four names the
 * shards hold.
 *
 * Expected failures: ditgen::Error (ModelError naming the index or shard:
 * invalid JSON, a weight_map that is no object of file names, a shard
 * path outside the directory or missing, a tensor the shard lacks, a wrong
 * shape, an I64 tensor passed to expect()). Anything else is a finding. */
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "io/safetensors.h"
#include "util/error.h"

namespace {

using ditgen::DType;
using ditgen::Tensor;

struct Fixture {
  ditgen::fuzz::ScratchDir dir;
  Fixture() {
    auto filled = [](ditgen::Shape shape, DType dtype) {
      Tensor f = Tensor::empty(shape, ditgen::Device::kCPU, DType::kF32);
      for (int64_t i = 0; i < f.numel(); ++i) f.data()[i] = static_cast<float>(i);
      return f.to(dtype);
    };
    ditgen::io::write_safetensors(dir / "shard-a.safetensors",
                                  {{"w", filled({2, 3}, DType::kF32)}, {"b", filled({4}, DType::kBF16)}});
    ditgen::io::write_safetensors(dir / "shard-b.safetensors",
                                  {{"x", filled({3, 2}, DType::kF16)}, {"ids", filled({2}, DType::kI64)}});
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture;
  ditgen::fuzz::write_bytes(fixture.dir / "model.safetensors.index.json",
                            std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    const ditgen::io::WeightStore store = ditgen::io::WeightStore::open_dir(fixture.dir.path());
    for (const std::string& name : store.names()) {
      const ditgen::io::TensorInfo& info = store.info(name);
      (void)store.file_of(name);
      ditgen::fuzz::allow_reader_errors([&] { store.expect(name, info.shape); });
      ditgen::fuzz::allow_reader_errors([&] { store.expect(name, {7}); });
      ditgen::fuzz::allow_reader_errors([&] { (void)store.load(name).numel(); });
      if (!info.shape.empty()) ditgen::fuzz::allow_reader_errors([&] { store.load_rows(name, 0, info.shape[0]); });
      if (info.shape.size() == 2) ditgen::fuzz::allow_reader_errors([&] { store.load_cols(name, 0, info.shape[1]); });
    }
    ditgen::fuzz::allow_reader_errors([&] { store.expect("w", {2, 3}); });
    ditgen::fuzz::allow_reader_errors([&] { store.expect("b", {4}); });
    ditgen::fuzz::allow_reader_errors([&] { store.expect("x", {3, 2}); });
    ditgen::fuzz::allow_reader_errors([&] { store.expect("ids", {2}); });
    ditgen::fuzz::allow_reader_errors([&] { store.load("missing"); });
  } catch (const ditgen::Error&) {
  }
  return 0;
}
