#pragma once
// Device side of the transfer suite: pattern fill and check, the blocking (spin-on-flag) kernel that
// holds a stream while the host queues the timed copies (as nvbandwidth and cuda-samples'
// p2pBandwidthLatencyTest do), and the zero-copy kernel for mapped host memory.
// Plain C++17 declarations: included from C++20 host code too. Launchers are asynchronous on
// `stream`, check the launch, and throw perfgate::bench::CudaError.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace perfgate::transfers {

// dst[i] = pattern_word(seed, first_word + i) for the bytes/4 words of dst (bytes % 4 == 0).
void launch_fill_pattern(void* dst, std::size_t bytes, std::uint32_t seed, std::uint64_t first_word,
                         cudaStream_t stream);

// Adds to *d_count the number of words of data that differ from the pattern.
void launch_count_mismatches(const void* data, std::size_t bytes, std::uint32_t seed, std::uint64_t first_word,
                             unsigned long long* d_count, cudaStream_t stream);

// Spins until *flag != 0, or sets *timed_out = 1 and returns after timeout_ns (so a host that is
// itself blocked behind the stream cannot deadlock). flag/timed_out: pinned, mapped host memory.
void launch_spin(const volatile int* flag, volatile int* timed_out, unsigned long long timeout_ns, cudaStream_t stream);

// Copies bytes (% 4 == 0) with SM loads/stores; either pointer may be mapped host memory (zero-copy).
void launch_sm_copy(void* dst, const void* src, std::size_t bytes, int blocks, cudaStream_t stream);

// Grid size for launch_sm_copy on `device`: enough loads in flight to fill PCIe or NVLink.
int sm_copy_blocks(int device);

}  // namespace perfgate::transfers
