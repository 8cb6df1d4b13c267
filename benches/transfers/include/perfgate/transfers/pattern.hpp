#pragma once
// The data every transfer case moves: 32-bit words whose value depends on a per-buffer seed and the
// word's index, so a copy that is short, shifted, stale or from the wrong buffer fails the check.
// Shared by host code (C++20) and the CUDA kernels (C++17).
#include <cstddef>
#include <cstdint>

#include "perfgate/bench/splitmix64.hpp"

namespace perfgate::transfers {

// splitmix64 of (seed, index), folded to 32 bits.
PERFGATE_BENCH_HOST_DEVICE inline std::uint32_t pattern_word(std::uint32_t seed, std::uint64_t index) {
  const std::uint64_t x = bench::splitmix64((static_cast<std::uint64_t>(seed) << 32) ^ index);
  return static_cast<std::uint32_t>(x ^ (x >> 32));
}

// Seeds of the source buffers (slot 0) of each device and host kind.
inline std::uint32_t device_seed(int device) { return 0xD0000000u + static_cast<std::uint32_t>(device) * 0x101u; }
inline constexpr std::uint32_t kPinnedSeed = 0xA1000001u;
inline constexpr std::uint32_t kPageableSeed = 0xA2000002u;

}  // namespace perfgate::transfers
