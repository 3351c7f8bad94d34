// oneDNN reports running out of memory (its scratchpads, a primitive's
// creation) as a dnnl::error with status dnnl_out_of_memory; ditgen's
// callers expect std::bad_alloc for that (exit 4, "out of memory during
// <stage>"), so the two oneDNN wrappers run their work through this.
#pragma once
#include <dnnl.hpp>

#include <new>

namespace ditgen::ops::cpu {

template <class F>
void with_onednn_errors(F&& work) {
  try {
    work();
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_out_of_memory) throw std::bad_alloc();
    throw;
  }
}

}  // namespace ditgen::ops::cpu
