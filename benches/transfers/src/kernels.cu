#include "perfgate/bench/cuda.hpp"
#include "perfgate/transfers/kernels.cuh"
#include "perfgate/transfers/pattern.hpp"

namespace perfgate::transfers {
namespace {

constexpr int kThreads = 256;

__global__ void fill_pattern_kernel(std::uint32_t* dst, std::size_t words, std::uint32_t seed,
                                    std::uint64_t first_word) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride) {
    dst[i] = pattern_word(seed, first_word + i);
  }
}

__global__ void count_mismatches_kernel(const std::uint32_t* data, std::size_t words, std::uint32_t seed,
                                        std::uint64_t first_word, unsigned long long* count) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride) {
    if (data[i] != pattern_word(seed, first_word + i)) ++local;
  }
  if (local != 0) atomicAdd(count, local);
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(const volatile int* flag, volatile int* timed_out, unsigned long long timeout_ns) {
  const unsigned long long start = global_ns();
  while (*flag == 0) {
    if (global_ns() - start > timeout_ns) {
      *timed_out = 1;
      break;
    }
  }
}

__global__ void copy16_kernel(uint4* __restrict__ dst, const uint4* __restrict__ src, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // Four independent 16-byte loads in flight per thread before the stores.
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = src[i];
    const uint4 b = src[i + stride];
    const uint4 c = src[i + 2 * stride];
    const uint4 d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

__global__ void copy4_kernel(std::uint32_t* __restrict__ dst, const std::uint32_t* __restrict__ src, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] = src[i];
  }
}

unsigned grid_for(std::size_t items, unsigned cap) {
  const std::size_t blocks = (items + kThreads - 1) / kThreads;
  if (blocks == 0) return 1;
  return blocks < cap ? static_cast<unsigned>(blocks) : cap;
}

void check_launch() { PERFGATE_CUDA_CHECK(cudaGetLastError()); }

}  // namespace

void launch_fill_pattern(void* dst, std::size_t bytes, std::uint32_t seed, std::uint64_t first_word,
                         cudaStream_t stream) {
  const std::size_t words = bytes / 4;
  if (words == 0) return;
  fill_pattern_kernel<<<grid_for(words, 4096), kThreads, 0, stream>>>(static_cast<std::uint32_t*>(dst), words, seed,
                                                                      first_word);
  check_launch();
}

void launch_count_mismatches(const void* data, std::size_t bytes, std::uint32_t seed, std::uint64_t first_word,
                             unsigned long long* d_count, cudaStream_t stream) {
  const std::size_t words = bytes / 4;
  if (words == 0) return;
  count_mismatches_kernel<<<grid_for(words, 4096), kThreads, 0, stream>>>(static_cast<const std::uint32_t*>(data),
                                                                          words, seed, first_word, d_count);
  check_launch();
}

void launch_spin(const volatile int* flag, volatile int* timed_out, unsigned long long timeout_ns,
                 cudaStream_t stream) {
  spin_kernel<<<1, 1, 0, stream>>>(flag, timed_out, timeout_ns);
  check_launch();
}

void launch_sm_copy(void* dst, const void* src, std::size_t bytes, int blocks, cudaStream_t stream) {
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  const unsigned cap = blocks > 0 ? static_cast<unsigned>(blocks) : 1u;
  if (bytes % 16 == 0 && d % 16 == 0 && s % 16 == 0) {
    const std::size_t n = bytes / 16;
    copy16_kernel<<<grid_for(n, cap), kThreads, 0, stream>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src),
                                                             n);
  } else {
    const std::size_t n = bytes / 4;
    copy4_kernel<<<grid_for(n, cap), kThreads, 0, stream>>>(static_cast<std::uint32_t*>(dst),
                                                            static_cast<const std::uint32_t*>(src), n);
  }
  check_launch();
}

int sm_copy_blocks(int device) {
  int sms = 0;
  PERFGATE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms * 4;
}

}  // namespace perfgate::transfers
