#pragma once
// Per-repetition counters that the GPU benches write from NVML (docs/writing-a-bench.md, "Counters") and the
// analyses read: cycle space (cycle_space.hpp) and the throttled repetitions (throttled.hpp).

namespace perfgate {

inline constexpr const char* kClockCounter = "sm_clock_mhz";          // mean SM clock over the NVML samples
inline constexpr const char* kThermalShareCounter = "thermal_share";  // samples with a thermal or hw-slowdown reason
inline constexpr const char* kNvmlSamplesCounter = "nvml_samples";    // NVML samples taken in the repetition

}  // namespace perfgate
