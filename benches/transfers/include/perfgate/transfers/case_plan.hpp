#pragma once
// The list of transfer cases for a machine with a given number of GPUs: every benchmark name the
// suite registers, and what it measures. Kept apart from the benchmark bodies so the unit test can
// check how the suite sizes itself for 1, 2, 4 and 8 GPUs without any GPU.
#include <cstddef>
#include <string>
#include <vector>

namespace perfgate::transfers {

enum class CaseKind { host_device, d2d, peer, peer_bidir, all_to_one, one_to_all, nccl_sendrecv, nccl_alltoall };
enum class Dir { h2d, d2h };
enum class HostMem { pinned, pageable, mapped };

struct CaseDesc {
  std::string name;
  CaseKind kind = CaseKind::host_device;
  Dir dir = Dir::h2d;
  HostMem mem = HostMem::pinned;
  int a = 0;               // source GPU / first GPU of a pair / root
  int b = 0;               // destination GPU / second GPU of a pair
  int gpus = 1;            // GPUs the case needs
  std::size_t bytes = 0;   // per copy
  std::size_t tokens = 0;  // NCCL all-to-all
  bool peer_on = true;
  bool latency = false;
  bool registered = false;  // NCCL send/recv between ncclMemAlloc buffers registered with the communicators
};

const char* dir_name(Dir d);
const char* mem_name(HostMem m);

// GPUs the suite registers cases for: the visible count, but at least 2, so that a 0- or 1-GPU
// machine lists the 2-GPU cases (and skips them with the reason) under the names a 2-GPU run uses.
int gpus_to_register(int visible_gpus);

// Every case for `gpus` registered GPUs (use gpus_to_register); NCCL cases only when with_nccl.
std::vector<CaseDesc> plan_cases(int gpus, bool with_nccl);

// Planted slowdown (PERFGATE_GPU_SLOWDOWN, docs/transfers.md) of a case that queues `copies` copies of
// `bytes` per timed round. Bandwidth cases: after each copy, a second real copy of fraction x bytes
// (rounded to whole 4-byte words) of the same direction and memory kind, into a scratch buffer. Latency
// cases (a copy's time is its latency, not its bytes): round(fraction x copies) more whole copies per
// round. `share` is the extra work actually planted: extra bytes over counted bytes, or extra copies
// over counted copies. fraction 0 plants nothing.
struct PlantedCopies {
  std::size_t extra_bytes = 0;  // per copy (bandwidth cases)
  int extra_copies = 0;         // per round (latency cases)
  double share = 0.0;
};
PlantedCopies plan_planted_copies(std::size_t bytes, int copies, bool latency, double fraction);

std::vector<std::size_t> sweep_sizes();    // 4 KiB .. 1 GiB, x4
std::vector<std::size_t> subset_sizes();   // 64 KiB, 1 MiB, 16 MiB, 256 MiB
std::vector<std::size_t> latency_sizes();  // 4 B .. 64 KiB, x4

}  // namespace perfgate::transfers
