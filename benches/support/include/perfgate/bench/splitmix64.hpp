#pragma once
// splitmix64's output function: a fast, well-mixed 64-bit hash of a counter, from which the suites derive
// data that is a pure function of (seed, index) on the host and in CUDA kernels alike (C++17 for nvcc).
#include <cstdint>

#if defined(__CUDACC__)
#define PERFGATE_BENCH_HOST_DEVICE __host__ __device__
#else
#define PERFGATE_BENCH_HOST_DEVICE
#endif

namespace perfgate::bench {

PERFGATE_BENCH_HOST_DEVICE inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace perfgate::bench
