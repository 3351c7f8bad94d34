// The Communicator's collectives on tensors, for device-agnostic model code.
// A tensor whose memory and dtype the communicator takes as they are (CPU
// float32 with MPI; CUDA float32 with NCCL) is passed straight through; any
// other is staged through a float32 copy in the memory the communicator
// takes (host for MPI, device for NCCL) and copied back. So CUDA tensors
// work with the MPI communicator too (slower, always correct), and bfloat16
// activations travel as float32, keeping bytes_sent()'s 4 bytes per element.
// Counts are in elements of the tensors, which are used flat (row-major).
#pragma once
#include <cstdint>
#include <vector>

#include "parallel/communicator.h"
#include "tensor/tensor.h"

namespace ditgen::parallel {

// data: every element summed over the ranks, in place.
void all_reduce_sum(Communicator& comm, Tensor& data);
// recv holds size() * send.numel() elements: rank r's at r * send.numel().
void all_gather(Communicator& comm, const Tensor& send, Tensor& recv);
// Uneven: counts[r] elements from rank r (counts[rank()] == send.numel()).
void all_gather_v(Communicator& comm, const Tensor& send, Tensor& recv, const std::vector<int64_t>& counts);
// send_counts[j] elements to rank j, recv_counts[j] from rank j, packed in order.
void all_to_all_v(Communicator& comm, const Tensor& send, const std::vector<int64_t>& send_counts, Tensor& recv,
                  const std::vector<int64_t>& recv_counts);
// The first send_count elements of send go to dest while the first
// recv_count elements of recv arrive from source.
void send_recv(Communicator& comm, const Tensor& send, int64_t send_count, int dest, Tensor& recv,
               int64_t recv_count, int source);

// Point to point (Communicator::send / recv): all of data's elements.
void send(Communicator& comm, const Tensor& data, int dest);
void recv(Communicator& comm, Tensor& data, int source);
// data: root's elements, on every rank.
void broadcast(Communicator& comm, Tensor& data, int root);

}  // namespace ditgen::parallel
