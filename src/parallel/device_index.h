// Which CUDA device a rank uses (docs/design.md §4: one GPU per rank, device =
// node-local rank, an error when the node has fewer GPUs than ranks).
//
// Design: a pure function of the environment and two numbers, so every case
// is tested on CPU; the caller passes std::getenv, MpiRuntime::local_rank()
// and cuda::device_count().
#pragma once
#include <functional>

namespace ditgen::parallel {

// Reads an environment variable: nullptr when unset (std::getenv's contract).
using EnvLookup = std::function<const char*(const char*)>;

// The node-local rank named by the launcher — OMPI_COMM_WORLD_LOCAL_RANK
// (Open MPI), else MPI_LOCALRANKID (MPICH / Intel MPI) — or, when neither is
// set to a non-negative integer, `shared_split_rank` (the rank within
// MPI_COMM_TYPE_SHARED; 0 without MPI). Throws RuntimeFailure when that
// device does not exist: no device at all, or more ranks on this node than
// visible devices (the message names CUDA_VISIBLE_DEVICES when it is set).
int local_device_index(const EnvLookup& env, int shared_split_rank, int device_count);

}  // namespace ditgen::parallel
