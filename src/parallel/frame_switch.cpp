#include "parallel/frame_switch.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "parallel/shard.h"
#include "parallel/tensor_collectives.h"
#include "parallel/token_shard.h"

namespace ditgen::parallel {

namespace {

Tensor flat(const Tensor& like, int64_t count) {
  return Tensor::empty({std::max<int64_t>(count, 1)}, like.device(), like.dtype());
}

void check(const char* who, const Tensor& x, int64_t dim, int64_t total, int parts, int rank, const Sharding& split) {
  if (x.ndim() != 4 || x.dim(dim) != split.size(total, parts, rank))
    throw std::invalid_argument(std::string(who) + ": " + shape_str(x.shape()) + " is not rank " +
                                std::to_string(rank) + "'s shard of " + std::to_string(total) + " along dim " +
                                std::to_string(dim));
}

// One all-to-all over sp of pieces of `like`'s device and dtype: send[j]
// elements go to rank j, which pack(j, buffer, at) copies into the send
// buffer at `at`; recv[r] come from rank r, which unpack(r, buffer, at)
// copies out of the receive buffer at `at`.
void exchange(Communicator& sp, const Tensor& like, const std::vector<int64_t>& send, const std::vector<int64_t>& recv,
              const std::function<void(int, Tensor&, int64_t)>& pack,
              const std::function<void(int, const Tensor&, int64_t)>& unpack) {
  const int parts = static_cast<int>(send.size());
  Tensor sendbuf = flat(like, std::accumulate(send.begin(), send.end(), int64_t{0}));
  Tensor recvbuf = flat(like, std::accumulate(recv.begin(), recv.end(), int64_t{0}));
  int64_t at = 0;
  for (int j = 0; j < parts; ++j) {
    pack(j, sendbuf, at);
    at += send[j];
  }
  all_to_all_v(sp, sendbuf, send, recvbuf, recv);
  at = 0;
  for (int r = 0; r < parts; ++r) {
    unpack(r, recvbuf, at);
    at += recv[r];
  }
}

}  // namespace

Tensor frames_to_tokens(Communicator* sp, const Tensor& x, int64_t frames, const Sharding& split) {
  const int parts = sp ? sp->size() : 1, me = sp ? sp->rank() : 0;
  check("frames_to_tokens", x, 1, frames, parts, me, split);
  if (parts == 1) return x;
  const int64_t bsz = x.dim(0), fl = x.dim(1), n = x.dim(2), c = x.dim(3);
  const int64_t nl = split.size(n, parts, me);
  std::vector<int64_t> send(parts), recv(parts);
  for (int j = 0; j < parts; ++j) {
    send[j] = bsz * fl * split.size(n, parts, j) * c;
    recv[j] = bsz * split.size(frames, parts, j) * nl * c;
  }
  Tensor out = Tensor::empty({bsz, frames, nl, c}, x.device(), x.dtype());
  exchange(
      *sp, x, send, recv,
      [&](int j, Tensor& buffer, int64_t at) {
        // To rank j: [b][my frames][j's tokens][C] (b and frame together are x's B*F_me rows).
        const Range t = split.range(n, parts, j);
        ops::copy_rows(x, t.begin * c, n * c, buffer, at, t.size() * c, bsz * fl, t.size() * c);
      },
      [&](int r, const Tensor& buffer, int64_t at) {
        // From rank r: [b][r's frames][my tokens][C], frames r's range of each sample.
        const Range f = split.range(frames, parts, r);
        const int64_t len = f.size() * nl * c;
        ops::copy_rows(buffer, at, len, out, f.begin * nl * c, frames * nl * c, bsz, len);
      });
  return out;
}

Tensor tokens_to_frames(Communicator* sp, const Tensor& x, int64_t tokens, const Sharding& split) {
  const int parts = sp ? sp->size() : 1, me = sp ? sp->rank() : 0;
  check("tokens_to_frames", x, 2, tokens, parts, me, split);
  if (parts == 1) return x;
  const int64_t bsz = x.dim(0), frames = x.dim(1), nl = x.dim(2), c = x.dim(3), n = tokens;
  const int64_t fl = split.size(frames, parts, me);
  std::vector<int64_t> send(parts), recv(parts);
  for (int j = 0; j < parts; ++j) {
    send[j] = bsz * split.size(frames, parts, j) * nl * c;
    recv[j] = bsz * fl * split.size(n, parts, j) * c;
  }
  Tensor out = Tensor::empty({bsz, fl, n, c}, x.device(), x.dtype());
  exchange(
      *sp, x, send, recv,
      [&](int j, Tensor& buffer, int64_t at) {
        // To rank j: [b][j's frames][my tokens][C].
        const Range f = split.range(frames, parts, j);
        const int64_t len = f.size() * nl * c;
        ops::copy_rows(x, f.begin * nl * c, frames * nl * c, buffer, at, len, bsz, len);
      },
      [&](int r, const Tensor& buffer, int64_t at) {
        // From rank r: [b][my frames][r's tokens][C].
        const Range t = split.range(n, parts, r);
        ops::copy_rows(buffer, at, t.size() * c, out, t.begin * c, n * c, bsz * fl, t.size() * c);
      });
  return out;
}

VideoFrameShard::VideoFrameShard(Communicator* sp, const Sharding& split, int64_t frames, int64_t tokens)
    : sp_(sp),
      split_(split),
      frames_(frames),
      tokens_(tokens),
      mine_(sp && sp->size() > 1 ? split.range(frames, sp->size(), sp->rank()) : Range{0, frames}) {}

Tensor VideoFrameShard::to_tokens(const Tensor& x) const {
  const int64_t width = x.dim(2), local = mine_.size(), videos = x.dim(0) / local;
  const Tensor by_tokens = frames_to_tokens(sp_, x.reshape({videos, local, tokens_, width}), frames_, split_);
  return by_tokens.reshape({videos * frames_, by_tokens.dim(2), width});
}

Tensor VideoFrameShard::to_frames(const Tensor& x) const {
  const int64_t width = x.dim(2), videos = x.dim(0) / frames_;
  const Tensor by_frames = tokens_to_frames(sp_, x.reshape({videos, frames_, x.dim(1), width}), tokens_, split_);
  return by_frames.reshape({videos * mine_.size(), tokens_, width});
}

Tensor VideoFrameShard::gather(const Tensor& rows) const {
  const int64_t local = mine_.size(), videos = rows.dim(0) / local, width = tokens_ * rows.dim(2);
  return gather_tokens(sp_, rows.reshape({videos, local, width}), frames_, split_)
      .reshape({videos * frames_, tokens_, rows.dim(2)});
}

}  // namespace ditgen::parallel
