#pragma once
// The context keys a bench binary writes (benchmark::AddCustomContext) and the harness reads: the contract
// between benches/ and harness/, defined once. Both include it (the interface library perfgate::contract);
// docs/architecture.md, "Conventions the pieces agree on", says what each means.
namespace perfgate::context_keys {

inline constexpr const char* kSuite = "perfgate.suite";                   // the suite a binary measures
inline constexpr const char* kNvtxRanges = "perfgate.nvtx_ranges";        // its NVTX ranges, comma-separated
inline constexpr const char* kHostDependent = "perfgate.host_dependent";  // regex: time follows the host
inline constexpr const char* kFloorBound = "perfgate.floor_bound";        // regex: interference only slows them
inline constexpr const char* kComputeBound = "perfgate.compute_bound";    // regex: time follows the SM clock

}  // namespace perfgate::context_keys
