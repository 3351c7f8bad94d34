// What the two oneDNN wrappers (onednn_matmul.cpp, onednn_conv.cpp) share:
// one CPU engine and one stream for the process, and the translation of
// oneDNN's out-of-memory status (its scratchpads, a primitive's creation:
// a dnnl::error with dnnl_out_of_memory) into the std::bad_alloc ditgen's
// callers expect (exit 4, "out of memory during <stage>").
#pragma once
#include <dnnl.hpp>

#include <new>

namespace ditgen::ops::cpu {

inline dnnl::engine& onednn_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

inline dnnl::stream& onednn_stream() {
  static dnnl::stream s(onednn_engine());
  return s;
}

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
