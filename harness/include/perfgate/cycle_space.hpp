#pragma once
// Cycle space (issue 28, "Clocks and power"; docs/statistics.md, "Cycle space"). A GPU's SM clock differs
// between machines of one class and between sessions (power cap, temperature, firmware), and the time of a
// compute-bound kernel follows it: at a 10% lower clock the same code takes ~11% longer. When the two sides
// of a comparison ran at different clocks, the time of such a benchmark says as much about the machine as
// about the code. So, after the verdicts are decided, every benchmark whose median `sm_clock_mhz` (the GPU
// benches write it per repetition, benches/support cuda.hpp) differs between the sides by more than
// HostOptions::clock_tolerance is judged a second time on cycles = time x clock, by the same rule
// (one extra comparison of every compared benchmark's time, in cycles where the clocks differ, so that the
// multiple-comparison family keeps its size). The result is added as the metric "cycles".
//
// Which judgement decides: a suite names its compute-bound benchmarks in its context, perfgate.compute_bound
// = an ECMAScript regex matched against the whole normalised name. For those, cycles decide (the clock
// difference is the machine's, not the code's): every other gated metric of the benchmark (time, rates,
// phases, all of which carry the clock difference) is reported, not gated, and the benchmark's verdict is
// the cycles metric's. For the others (copies follow memory and link clocks, not the SM clock), time decides
// and cycles are reported. Clocks within the tolerance, or missing on a side: nothing changes.
//
// This header holds what the pass needs from the results (clocks, cycles, the suite's pattern); the pass
// itself runs inside compare() (src/analysis/compare_cycle_space.cpp), once, after every benchmark's verdict and
// before the counts.
#include <optional>
#include <string>

#include "perfgate/context_keys.hpp"
#include "perfgate/context_pattern.hpp"
#include "perfgate/gpu_counters.hpp"
#include "perfgate/model.hpp"

namespace perfgate {

inline constexpr const char* kComputeBoundKey = context_keys::kComputeBound;
inline constexpr const char* kCyclesMetric = "cycles";

using ComputeBoundPattern = ContextPattern;

// The first perfgate.compute_bound of the current side's contexts, else of the baseline's; nullopt when
// neither side names one. Throws InputError (file = the context's source file) when it is no valid regex.
std::optional<ComputeBoundPattern> compute_bound_pattern(const ResultSet& baseline, const ResultSet& current);

// Median of a benchmark's sm_clock_mhz samples; nullopt without a positive, finite one.
std::optional<double> median_clock_mhz(const BenchmarkResult& b);

// The benchmark with its time samples in cycles: time (ns) x clock (MHz) / 1000 per repetition (the side's
// median clock for every repetition when the counter's samples do not pair with the time's), counters
// dropped. `median_clock` is median_clock_mhz(b).
BenchmarkResult timed_in_cycles(const BenchmarkResult& b, double median_clock);

}  // namespace perfgate
