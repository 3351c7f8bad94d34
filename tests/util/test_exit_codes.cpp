// exit_code_for (util/error.h), the one rule from an exception to the exit
// code of docs/design.md §1, on errors thrown by the real code paths: an op's
// argument check (an internal bug: 1), a tensor shape at weight load (bad
// model files: 3) and a parallel layout check (bad config: 2).
#include <doctest/doctest.h>

#include <functional>
#include <new>
#include <stdexcept>
#include <string>

#include "io/safetensors.h"
#include "ops/ops.h"
#include "parallel/layout.h"
#include "util/error.h"
#include "util/run_stage.h"

using namespace ditgen;

namespace {

// The exit code main() would give for what `f` throws; -1 if it throws nothing.
int exit_code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return exit_code_for(e);
  }
  return -1;
}

}  // namespace

TEST_CASE("an op's argument error is an internal bug: exit 1") {
  Tensor src = Tensor::zeros({4, 3});
  Tensor dst = Tensor::zeros({2, 3});
  CHECK_THROWS_AS(ops::copy_rows(src, 0, 3, dst, 0, 3, 4, 3), std::invalid_argument);
  CHECK(exit_code_of([&] { ops::copy_rows(src, 0, 3, dst, 0, 3, 4, 3); }) == kExitOther);
  CHECK(exit_code_of([] { throw std::out_of_range("x"); }) == kExitOther);
  CHECK(exit_code_of([] { throw std::logic_error("x"); }) == kExitOther);
  CHECK(exit_code_of([] { throw std::runtime_error("x"); }) == kExitOther);
}

TEST_CASE("a tensor of the wrong shape at weight load is a bad model: exit 3") {
  const std::string dir = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/dit_odd/vae";
  const io::WeightStore store = io::WeightStore::open_dir(dir);
  Shape wrong = store.info("decoder.conv_out.weight").shape;
  wrong[0] += 1;
  CHECK_THROWS_AS(store.expect("decoder.conv_out.weight", wrong), ModelError);
  CHECK(exit_code_of([&] { store.expect("decoder.conv_out.weight", wrong); }) == kExitBadModel);
  CHECK(exit_code_of([&] { store.expect("no.such.tensor", {1}); }) == kExitBadModel);
}

TEST_CASE("a parallel layout the model cannot split is a bad config: exit 2") {
  parallel::Workload dims;
  dims.heads = 16;
  dims.head_dim = 4;
  dims.layers = 2;
  dims.tokens = 256;
  dims.mlp_hidden = 64;
  const parallel::Layout layout{3, 1, 1, parallel::SpMode::kUlysses};  // 16 heads are not divisible by sp 3
  CHECK_THROWS_AS(parallel::validate_layout(layout, 3, dims, 4.0, "run.json"), ConfigError);
  CHECK(exit_code_of([&] { parallel::validate_layout(layout, 3, dims, 4.0, "run.json"); }) == kExitBadConfig);
  CHECK(exit_code_of([&] { parallel::validate_layout(layout, 4, dims, 4.0, "run.json"); }) == kExitBadConfig);
}

TEST_CASE("the other error classes and out of memory") {
  CHECK(exit_code_of([] { throw ConfigError("x"); }) == kExitBadConfig);
  CHECK(exit_code_of([] { throw ModelError("x"); }) == kExitBadModel);
  CHECK(exit_code_of([] { throw RuntimeFailure("x"); }) == kExitRuntime);
  CHECK(exit_code_of([] { throw std::bad_alloc(); }) == kExitRuntime);
  CHECK(exit_code_of([] { not_supported("x"); }) == kExitBadConfig);
  CHECK(error_text(std::bad_alloc()) == "out of memory");
  CHECK(error_text(ModelError("m.safetensors: bad")) == "m.safetensors: bad");
}

TEST_CASE("a std::bad_alloc caught after its stages unwound is reported with the innermost stage") {
  // main catches it outside every StageScope: the stage it was thrown in is kept.
  std::string text;
  try {
    const StageScope run("generate");
    {
      const StageScope ok("text encoder");  // ended normally: not the one named
    }
    const StageScope decode("decode and write");
    throw std::bad_alloc();
  } catch (const std::exception& e) {
    text = error_text(e);
  }
  CHECK(text == "out of memory during decode and write");
  {
    const StageScope next("denoise");  // a new stage forgets the old failure
    CHECK(error_text(std::bad_alloc()) == "out of memory during denoise");
  }
  CHECK(error_text(std::bad_alloc()) == "out of memory");
}

TEST_CASE("require throws the given error class naming the file") {
  CHECK_NOTHROW(require(true, "f.json", "never"));
  CHECK_THROWS_WITH_AS(require(false, "f.json", "key: bad"), "f.json: key: bad", ModelError);
  CHECK_THROWS_WITH_AS(require<ConfigError>(false, "run.json", "x: bad"), "run.json: x: bad", ConfigError);
}
