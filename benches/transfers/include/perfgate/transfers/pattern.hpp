#pragma once
// The data every transfer case moves: 32-bit words whose value depends on a per-buffer seed and the
// word's index, so a copy that is short, shifted, stale or from the wrong buffer fails the check.
// Shared by host code (C++20) and the CUDA kernels (C++17).
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define PERFGATE_TRANSFERS_HD __host__ __device__
#else
#define PERFGATE_TRANSFERS_HD
#endif

namespace perfgate::transfers {

// splitmix64 of (seed, index), folded to 32 bits.
PERFGATE_TRANSFERS_HD inline std::uint32_t pattern_word(std::uint32_t seed, std::uint64_t index) {
  std::uint64_t x = (static_cast<std::uint64_t>(seed) << 32) ^ index;
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<std::uint32_t>(x ^ (x >> 32));
}

// Seeds of the source buffers (slot 0) of each device and host kind.
inline std::uint32_t device_seed(int device) { return 0xD0000000u + static_cast<std::uint32_t>(device) * 0x101u; }
inline constexpr std::uint32_t kPinnedSeed = 0xA1000001u;
inline constexpr std::uint32_t kPageableSeed = 0xA2000002u;

}  // namespace perfgate::transfers
