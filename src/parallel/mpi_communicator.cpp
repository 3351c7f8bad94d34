// MpiCommunicator: each collective maps to its MPI call when the counts fit
// in an int; beyond max_call_count_ the data moves in pieces (see the header).
// Every MPI return code goes through check_mpi (MPI_ERRORS_RETURN is set on
// the communicator), so a communication failure is a RuntimeFailure.
#include "parallel/mpi_communicator.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>

#include "util/error.h"

namespace ditgen::parallel {

namespace {

// Tags of the point-to-point paths. Each call completes all its requests
// before returning, so the tags only make traces easier to read.
constexpr int kTagSendRecv = 7001;
constexpr int kTagExchange = 7002;
constexpr int kTagPointToPoint = 7003;

std::vector<int64_t> prefix_sums(const std::vector<int64_t>& counts) {
  std::vector<int64_t> displs(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) displs[i] = displs[i - 1] + counts[i - 1];
  return displs;
}

int64_t total(const std::vector<int64_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), int64_t{0});
}

std::vector<int> to_int(const std::vector<int64_t>& v) {
  return std::vector<int>(v.begin(), v.end());
}

// Non-blocking sends / receives of `count` floats in pieces of at most
// `max_piece` elements. Sender and receiver cut identically because both
// know the same count, so the pieces match one to one, in order.
void post_sends(const float* data, int64_t count, int peer, int tag, int64_t max_piece,
                MPI_Comm comm, std::vector<MPI_Request>& requests, const char* what) {
  for (int64_t offset = 0; offset < count; offset += max_piece) {
    const int piece = static_cast<int>(std::min(max_piece, count - offset));
    requests.emplace_back();
    check_mpi(MPI_Isend(data + offset, piece, MPI_FLOAT, peer, tag, comm, &requests.back()), what);
  }
}

void post_recvs(float* data, int64_t count, int peer, int tag, int64_t max_piece, MPI_Comm comm,
                std::vector<MPI_Request>& requests, const char* what) {
  for (int64_t offset = 0; offset < count; offset += max_piece) {
    const int piece = static_cast<int>(std::min(max_piece, count - offset));
    requests.emplace_back();
    check_mpi(MPI_Irecv(data + offset, piece, MPI_FLOAT, peer, tag, comm, &requests.back()), what);
  }
}

// Waits for every request; a failure reports the first failed request's own
// error (MPI_Waitall itself only says MPI_ERR_IN_STATUS).
void wait_all(std::vector<MPI_Request>& requests, const char* what) {
  if (requests.empty()) return;
  std::vector<MPI_Status> statuses(requests.size());
  int rc = MPI_Waitall(static_cast<int>(requests.size()), requests.data(), statuses.data());
  if (rc == MPI_ERR_IN_STATUS) {
    for (const MPI_Status& s : statuses) {
      if (s.MPI_ERROR != MPI_SUCCESS && s.MPI_ERROR != MPI_ERR_PENDING) {
        rc = s.MPI_ERROR;
        break;
      }
    }
  }
  check_mpi(rc, what);
}

bool mpi_active() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

}  // namespace

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) {
    length = std::snprintf(text, sizeof text, "MPI error code %d", rc);
  }
  throw RuntimeFailure(std::string(call) + " failed: " + std::string(text, length));
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm) : comm_(comm) {
  if (!mpi_active()) throw std::logic_error("MpiCommunicator: MPI is not initialised");
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

MpiCommunicator::~MpiCommunicator() {
  // After MPI_Finalize (at exit) a communicator can no longer be freed; the
  // library has released it already.
  if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL && mpi_active()) {
    MPI_Comm_free(&comm_);
  }
}

void MpiCommunicator::set_max_call_count(int64_t n) {
  if (n < 1 || n > INT_MAX) {
    throw std::invalid_argument("set_max_call_count: " + std::to_string(n) +
                                " outside [1, INT_MAX]");
  }
  max_call_count_ = n;
}

void MpiCommunicator::do_all_reduce_sum(float* data, int64_t count) {
  for (int64_t offset = 0; offset < count; offset += max_call_count_) {
    const int piece = static_cast<int>(std::min(max_call_count_, count - offset));
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, data + offset, piece, MPI_FLOAT, MPI_SUM, comm_),
              "MPI_Allreduce");
  }
}

void MpiCommunicator::do_all_gather(const float* send, int64_t count, float* recv) {
  if (count * size_ <= max_call_count_) {
    const int n = static_cast<int>(count);
    check_mpi(MPI_Allgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, comm_), "MPI_Allgather");
    return;
  }
  do_all_gather_v(send, count, recv, std::vector<int64_t>(size_, count));
}

void MpiCommunicator::do_all_gather_v(const float* send, int64_t count, float* recv,
                                      const std::vector<int64_t>& counts) {
  const std::vector<int64_t> displs = prefix_sums(counts);
  if (total(counts) <= max_call_count_) {
    const std::vector<int> c = to_int(counts), d = to_int(displs);
    check_mpi(MPI_Allgatherv(send, static_cast<int>(count), MPI_FLOAT, recv, c.data(), d.data(),
                             MPI_FLOAT, comm_),
              "MPI_Allgatherv");
    return;
  }
  // Large: the own shard goes to every rank, every rank's shard comes here.
  std::vector<int64_t> send_counts(size_, count), send_displs(size_, 0);
  pairwise_exchange(send, send_counts, send_displs, recv, counts, displs, "all_gather_v");
}

void MpiCommunicator::do_all_to_all_v(const float* send, const std::vector<int64_t>& send_counts,
                                      float* recv, const std::vector<int64_t>& recv_counts) {
  const std::vector<int64_t> send_displs = prefix_sums(send_counts);
  const std::vector<int64_t> recv_displs = prefix_sums(recv_counts);
  // Every rank must take the same path (a collective on some ranks and
  // point-to-point on others would hang), and with uneven shards the totals
  // differ per rank: agree on the largest.
  int64_t largest = std::max(total(send_counts), total(recv_counts));
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &largest, 1, MPI_INT64_T, MPI_MAX, comm_), "MPI_Allreduce");
  if (largest <= max_call_count_) {
    const std::vector<int> sc = to_int(send_counts), sd = to_int(send_displs);
    const std::vector<int> rc = to_int(recv_counts), rd = to_int(recv_displs);
    check_mpi(MPI_Alltoallv(send, sc.data(), sd.data(), MPI_FLOAT, recv, rc.data(), rd.data(),
                            MPI_FLOAT, comm_),
              "MPI_Alltoallv");
    return;
  }
  pairwise_exchange(send, send_counts, send_displs, recv, recv_counts, recv_displs,
                    "all_to_all_v");
}

void MpiCommunicator::pairwise_exchange(const float* send, const std::vector<int64_t>& send_counts,
                                        const std::vector<int64_t>& send_displs, float* recv,
                                        const std::vector<int64_t>& recv_counts,
                                        const std::vector<int64_t>& recv_displs,
                                        const char* what) {
  if (send_counts[rank_] != recv_counts[rank_]) {
    throw std::invalid_argument(std::string(what) + ": rank " + std::to_string(rank_) +
                                " sends " + std::to_string(send_counts[rank_]) +
                                " floats to itself but expects " +
                                std::to_string(recv_counts[rank_]));
  }
  const std::string call = std::string("MPI_Isend/MPI_Irecv (") + what + ")";
  std::vector<MPI_Request> requests;
  // Receives first, so every send finds its receive posted.
  for (int j = 0; j < size_; ++j) {
    if (j != rank_) {
      post_recvs(recv + recv_displs[j], recv_counts[j], j, kTagExchange, max_call_count_, comm_,
                 requests, call.c_str());
    }
  }
  for (int j = 0; j < size_; ++j) {
    if (j != rank_) {
      post_sends(send + send_displs[j], send_counts[j], j, kTagExchange, max_call_count_, comm_,
                 requests, call.c_str());
    }
  }
  if (send_counts[rank_] > 0) {
    std::memcpy(recv + recv_displs[rank_], send + send_displs[rank_],
                static_cast<size_t>(send_counts[rank_]) * sizeof(float));
  }
  wait_all(requests, ("MPI_Waitall (" + std::string(what) + ")").c_str());
}

void MpiCommunicator::do_send_recv(const float* send, int64_t send_count, int dest, float* recv,
                                   int64_t recv_count, int source) {
  if (send_count <= max_call_count_ && recv_count <= max_call_count_) {
    check_mpi(MPI_Sendrecv(send, static_cast<int>(send_count), MPI_FLOAT, dest, kTagSendRecv,
                           recv, static_cast<int>(recv_count), MPI_FLOAT, source, kTagSendRecv,
                           comm_, MPI_STATUS_IGNORE),
              "MPI_Sendrecv");
    return;
  }
  std::vector<MPI_Request> requests;
  post_recvs(recv, recv_count, source, kTagSendRecv, max_call_count_, comm_, requests,
             "MPI_Irecv (send_recv)");
  post_sends(send, send_count, dest, kTagSendRecv, max_call_count_, comm_, requests,
             "MPI_Isend (send_recv)");
  wait_all(requests, "MPI_Waitall (send_recv)");
}

void MpiCommunicator::do_send(const float* data, int64_t count, int dest) {
  std::vector<MPI_Request> requests;
  post_sends(data, count, dest, kTagPointToPoint, max_call_count_, comm_, requests, "MPI_Isend (send)");
  wait_all(requests, "MPI_Waitall (send)");
}

void MpiCommunicator::do_recv(float* data, int64_t count, int source) {
  std::vector<MPI_Request> requests;
  post_recvs(data, count, source, kTagPointToPoint, max_call_count_, comm_, requests, "MPI_Irecv (recv)");
  wait_all(requests, "MPI_Waitall (recv)");
}

void MpiCommunicator::do_broadcast_bytes(void* data, size_t nbytes, int root) {
  char* bytes = static_cast<char*>(data);
  const size_t max_piece = static_cast<size_t>(max_call_count_);
  for (size_t offset = 0; offset < nbytes; offset += max_piece) {
    const int piece = static_cast<int>(std::min(max_piece, nbytes - offset));
    check_mpi(MPI_Bcast(bytes + offset, piece, MPI_BYTE, root, comm_), "MPI_Bcast");
  }
}

void MpiCommunicator::do_barrier() { check_mpi(MPI_Barrier(comm_), "MPI_Barrier"); }

}  // namespace ditgen::parallel
