#pragma once
// One NCCL communicator per GPU of this process (ncclCommInitAll), created on first use and kept
// for the whole run, so repetitions do not pay the initialisation. NVLink multicast (NVLS) is
// forced off before the first init: NCCL_NVLS_ENABLE=0 (device notes: multicast can take a shared
// host's GPUs out of service).
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

namespace perfgate::transfers::nccl {

class NcclError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string version();  // "2.28.9"
// Sets the environment NCCL reads at init (idempotent; called before the first communicator):
// NCCL_NVLS_ENABLE=0 always (never NVLink multicast, whatever the environment says). Other NCCL
// variables are left to the user: 32 p2p channels and 1-2 MiB NVLink chunks were tried on
// nvidia-h200-x2 and changed nothing (docs/transfers.md). Returns a description for the context.
std::string configure_environment();
int world_size();      // communicators created (== GPUs), initialising on first call
void destroy_world();  // before peer access is switched off; recreated on next use

// Both queue work asynchronously on the given streams (one per GPU rank) as one NCCL group.
void send_recv(int src, int dst, const void* send, void* recv, std::size_t bytes, cudaStream_t src_stream,
               cudaStream_t dst_stream);
// A buffer from ncclMemAlloc on `device`, registered with that rank's communicator
// (ncclCommRegister): NCCL then moves point-to-point data straight between user buffers over NVLink
// instead of through its internal FIFO (user buffer registration, NCCL >= 2.23 for P2P). Kept per
// (device, slot) and grown on demand; freed and deregistered by destroy_world(). Source slots (0)
// hold the suite's pattern of pattern_seed.
void* registered_buffer(int device, int slot, std::size_t bytes, std::uint32_t pattern_seed);

// Uniform all-to-all over ranks 0..gpus-1: rank r sends chunk_bytes from send[r] + p*chunk to rank p,
// which receives it at recv[p] + r*chunk. Pointers are device pointers, one per rank.
void all_to_all(int gpus, const void* const* send, void* const* recv, std::size_t chunk_bytes,
                const cudaStream_t* streams);

// All-to-all-v over ranks 0..gpus-1 as one NCCL group: rank s sends bytes[s * gpus + d] from send[s] +
// send_offset[s * gpus + d] to rank d, which receives them at recv[d] + recv_offset[d * gpus + s]. Pairs
// with no bytes are left out on both sides. Used by the expert_parallel suite (its routing's counts).
void all_to_all_v(int gpus, const void* const* send, void* const* recv, const std::size_t* bytes,
                  const std::size_t* send_offset, const std::size_t* recv_offset, const cudaStream_t* streams);

// One all-to-all-v of all_to_all_v's arguments.
struct AllToAllV {
  const void* const* send;
  void* const* recv;
  const std::size_t* bytes;
  const std::size_t* send_offset;
  const std::size_t* recv_offset;
};
// Several all-to-all-v in one NCCL group (one launch per rank, not one per part): for every (rank, peer), each
// part's send and receive, in part order. One part issues exactly all_to_all_v's calls.
void all_to_all_v(int gpus, std::span<const AllToAllV> parts, const cudaStream_t* streams);

}  // namespace perfgate::transfers::nccl
