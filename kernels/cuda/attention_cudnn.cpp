// cuDNN's fused flash attention (SDPA) through its graph API, via NVIDIA's
// header-only cudnn-frontend (scripts/install_cudnn_frontend.sh, CMake's
// DITGEN_WITH_CUDNN_SDPA). attention.cu calls it where attention_path.h's
// rule picks kCudnn and falls back to the own flash kernel where this
// returns false (no libcudnn, or no plan for the shape).
//
// - libcudnn.so.9 is loaded at run time (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING:
//   nothing links cuDNN), on first use; where it is missing the process runs
//   the own kernels. DITGEN_CUDNN_ATTENTION=0 switches cuDNN attention off
//   (for A/B timings). The frontend's own CUDA runtime calls go to the
//   libcudart of the major ditgen was built with.
// - Operands are read where they lie (AttentionArgs): dims [b, h, s, d] with
//   strides {batch_stride, head_dim, row_stride, 1}, so q/k/v are read
//   straight out of the fused projection output; bf16 or f16 in and out,
//   float32 softmax and accumulation; scale as given; per-sample key counts
//   (kv_lens) as cuDNN's padding mask (seq_len_kv, with seq_len_q = q_len),
//   their device copy cached per content; AttentionArgs::lse as cuDNN's
//   Stats (natural-log log-sum-exp, float32 [b, h, s_q, 1]).
// - One graph per SdpaKey (sdpa_key.h), built on first use and cached with
//   PlanCache; a key cuDNN has no plan for is remembered as such.
// - Workspace from the caching allocator (a DeviceBuffer per call: the
//   allocator's free lists make that a list operation).
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "util/error.h"

#ifdef DITGEN_WITH_CUDNN_SDPA
#include <dlfcn.h>

// Every cuDNN call of the frontend through dlsym on cudnn_dlhandle (below).
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING 1
#include <cudnn_frontend.h>

#include "kernels/cuda/sdpa_key.h"

// The frontend's handle to the dynamically loaded libcudnn (declared extern
// in cudnn_frontend_shim.h; the library user defines it).
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace ditgen::cuda {

namespace fe = cudnn_frontend;

namespace {

// Tensor uids in a graph's variant pack.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kSeqQ, kSeqKv };

struct CudnnState {
  std::mutex mutex;
  bool tried = false, loaded = false;
  std::string why;  // why it is not available
  cudnnHandle_t handle = nullptr;
  int device = -1;
};

CudnnState& state() {
  static CudnnState* const s = new CudnnState;  // never destroyed (device.cpp's rule)
  return *s;
}

// Loads libcudnn once; false (and why) when it cannot.
bool load_cudnn() {
  CudnnState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.tried) return s.loaded;
  s.tried = true;
  if (env_switched_off("DITGEN_CUDNN_ATTENTION")) {
    s.why = "DITGEN_CUDNN_ATTENTION=0";
    return false;
  }
  // The frontend would otherwise take the first of libcudart.so.12 / .13 it
  // finds; ditgen's own runtime is the major it was built with.
  const std::string cudart = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
  setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", cudart.c_str(), 0);
  for (const char* name : {"libcudnn.so.9", "libcudnn.so"}) {
    fe::cudnn_dlhandle = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (fe::cudnn_dlhandle) break;
  }
  if (!fe::cudnn_dlhandle) {
    const char* e = dlerror();
    s.why = std::string("cannot load libcudnn.so.9: ") + (e ? e : "not found");
    return false;
  }
  try {
    const size_t version = fe::detail::get_backend_version();
    if (version < 90000) {
      s.why = "libcudnn " + std::to_string(version) + " is older than 9.0";
      return false;
    }
  } catch (const std::exception& e) {
    s.why = std::string("libcudnn: ") + e.what();
    return false;
  }
  s.loaded = true;
  return true;
}

// The cuDNN handle of the bound device, on stream().
cudnnHandle_t handle() {
  CudnnState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const int dev = current_device();
  if (!s.handle || s.device != dev) {
    if (fe::detail::create_handle(&s.handle) != CUDNN_STATUS_SUCCESS)
      throw RuntimeFailure("cuDNN: cudnnCreate failed");
    s.device = dev;
  }
  if (fe::detail::set_stream(s.handle, stream()) != CUDNN_STATUS_SUCCESS)
    throw RuntimeFailure("cuDNN: cudnnSetStream failed");
  return s.handle;
}

struct SdpaPlan {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
};

PlanCache<SdpaKey, SdpaPlan>& plans() {
  static auto* const cache = new PlanCache<SdpaKey, SdpaPlan>;
  return *cache;
}

std::vector<int64_t> bhsd_strides(int64_t batch_stride, int64_t row_stride, int64_t head_dim) {
  return {batch_stride, head_dim, row_stride, 1};
}

std::shared_ptr<SdpaPlan> build_plan(const SdpaKey& k, cudnnHandle_t h) {
  auto g = std::make_shared<fe::graph::Graph>();
  const fe::DataType_t io = k.dtype == DType::kBF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
  g->set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(
      fe::DataType_t::FLOAT);
  auto tensor = [&](const char* name, int64_t uid, int64_t s, int64_t batch_stride, int64_t row_stride) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim({k.batch, k.heads, s, k.head_dim})
                         .set_stride(bhsd_strides(batch_stride, row_stride, k.head_dim)));
  };
  auto q = tensor("Q", kQ, k.q_len, k.q_batch_stride, k.q_row_stride);
  auto kt = tensor("K", kK, k.kv_len, k.k_batch_stride, k.k_row_stride);
  auto v = tensor("V", kV, k.kv_len, k.v_batch_stride, k.v_row_stride);
  float scale;
  std::memcpy(&scale, &k.scale_bits, sizeof scale);
  auto options = fe::graph::SDPA_attributes().set_name("ditgen_sdpa").set_generate_stats(k.stats).set_attn_scale(
      scale);
  if (k.padding_mask) {
    auto seq = [&](const char* name, int64_t uid) {
      return g->tensor(fe::graph::Tensor_attributes()
                           .set_name(name)
                           .set_uid(uid)
                           .set_dim({k.batch, 1, 1, 1})
                           .set_stride({1, 1, 1, 1})
                           .set_data_type(fe::DataType_t::INT32));
    };
    options.set_padding_mask(true).set_seq_len_q(seq("seq_q", kSeqQ)).set_seq_len_kv(seq("seq_kv", kSeqKv));
  }
  auto [o, stats] = g->sdpa(q, kt, v, options);
  o->set_output(true)
      .set_uid(kO)
      .set_dim({k.batch, k.heads, k.q_len, k.head_dim})
      .set_stride(bhsd_strides(k.out_batch_stride, k.out_row_stride, k.head_dim));
  if (k.stats) {
    // AttentionArgs::lse: float32 (batch, heads, q_len).
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim({k.batch, k.heads, k.q_len, 1})
        .set_stride({k.heads * k.q_len, k.q_len, 1, 1});
  }
  if (!g->validate().is_good() || !g->build_operation_graph(h).is_good() ||
      !g->create_execution_plans({fe::HeurMode_t::A}).is_good() || !g->check_support(h).is_good() ||
      !g->build_plans(h).is_good())
    return nullptr;
  auto plan = std::make_shared<SdpaPlan>();
  plan->graph = std::move(g);
  if (!plan->graph->get_workspace_size(plan->workspace).is_good()) return nullptr;
  return plan;
}

// Device copies of per-sample sequence lengths, cached by content (a few
// distinct prompt-length sets per run), so a call uploads nothing after
// the first and a captured graph reads a stable address.
struct SeqLens {
  DeviceBuffer q, kv;
};

const SeqLens& seq_lens(const AttentionArgs& a) {
  static auto* const mutex = new std::mutex;
  static auto* const cache = new std::map<std::vector<int32_t>, std::unique_ptr<SeqLens>>;
  std::vector<int32_t> key(a.kv_lens, a.kv_lens + a.batch);
  key.push_back(static_cast<int32_t>(a.q_len));
  key.push_back(current_device());
  std::lock_guard<std::mutex> lock(*mutex);
  auto it = cache->find(key);
  if (it != cache->end()) return *it->second;
  if (cache->size() >= 256) cache->clear();  // a bound; entries are rebuilt on demand
  auto s = std::make_unique<SeqLens>();
  const size_t bytes = static_cast<size_t>(a.batch) * sizeof(int32_t);
  s->q = DeviceBuffer(bytes);
  s->kv = DeviceBuffer(bytes);
  const std::vector<int32_t> q(static_cast<size_t>(a.batch), static_cast<int32_t>(a.q_len));
  copy_to_device(s->q.get(), q.data(), bytes);
  copy_to_device(s->kv.get(), a.kv_lens, bytes);
  return *cache->emplace(std::move(key), std::move(s)).first->second;
}

}  // namespace

bool cudnn_attention_available() { return load_cudnn(); }

std::string cudnn_attention_status() {
  if (load_cudnn()) return "cuDNN " + std::to_string(fe::detail::get_backend_version());
  return state().why;
}

bool attention_cudnn(const AttentionArgs& a) {
  if (!load_cudnn()) return false;
  if (a.bias || (a.dtype != DType::kBF16 && a.dtype != DType::kF16) || !cudnn_sdpa_operands_aligned(a)) return false;
  if (a.batch == 0 || a.q_len == 0) return true;
  cudnnHandle_t h = handle();
  const SdpaKey key = SdpaKey::of(a, current_device());
  std::shared_ptr<SdpaPlan> plan = plans().get(key, [&] { return build_plan(key, h); });
  if (!plan) return false;
  std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<void*>(a.q)},
                                             {kK, const_cast<void*>(a.k)},
                                             {kV, const_cast<void*>(a.v)},
                                             {kO, a.out}};
  if (a.lse) pack[kStats] = a.lse;
  if (a.kv_lens) {
    const SeqLens& lens = seq_lens(a);
    pack[kSeqQ] = lens.q.get();
    pack[kSeqKv] = lens.kv.get();
  }
  DeviceBuffer workspace(static_cast<size_t>(plan->workspace));
  auto status = plan->graph->execute(h, pack, workspace.get());
  if (!status.is_good()) throw RuntimeFailure("cuDNN attention: " + status.get_message());
  return true;
}

CudnnAttentionStats cudnn_attention_stats() { return {plans().size(), plans().builds(), plans().hits()}; }

}  // namespace ditgen::cuda

#else  // a build without cudnn-frontend: the own kernels only

namespace ditgen::cuda {

bool cudnn_attention_available() { return false; }
std::string cudnn_attention_status() {
  return "not built (cudnn-frontend headers not found: scripts/install_cudnn_frontend.sh)";
}
bool attention_cudnn(const AttentionArgs&) { return false; }
CudnnAttentionStats cudnn_attention_stats() { return {}; }

}  // namespace ditgen::cuda

#endif
