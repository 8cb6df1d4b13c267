#pragma once
// Whether a stored baseline describes this host, not only this host's key (machine class + CPU generation).
//
// Two hosts of one class can differ by tens of percent (a larger cache, another memory speed, a neighbour on a
// shared VM). Gating against such a baseline judges the host, not the code: every benchmark reads as slower or
// faster, and the noise that was learned between hosts of the class is far too small to cover it. So before a
// stored-baseline verdict is trusted, the suite's calibration benchmarks (names holding "/calibration/": a plain
// matmul, a memory stream, a copy — work no code change of the suite touches) are compared in the same run. Where a
// suite has none, its common mode (the median time change over at least kMinCommonModeBenchmarks gated
// benchmarks) stands in. When that shift is beyond what the class's hosts show among themselves, the suite is
// gated against a reference build instead (perfgate run, docs/running.md).
#include <string>

#include "perfgate/compare.hpp"

namespace perfgate {

// Six, so that a suite as small as synthetic's gets a check. A common mode that a real change of the code moved sends
// the suite to the reference gate, which measures that change itself: a wrong move costs time, never a verdict.
inline constexpr int kMinCommonModeBenchmarks = 6;

// A calibration benchmark: its name holds "/calibration/".
bool is_calibration_benchmark(const std::string& name);

struct HostFit {
  bool fits = true;
  bool checked = false;         // false: the suite has neither calibration benchmarks nor enough benchmarks to check
  double shift = 0;             // relative time change of this host against the baseline's host (+0.3: 30% slower)
  double limit = 0;             // the largest shift the class's hosts show among themselves
  std::string basis;            // "calibration (2 benchmarks)" or "common mode (23 benchmarks)"
  std::string explain() const;  // one line for the report
};

// The host fit of one suite's comparison against a stored baseline. The limit is, per benchmark, three times the
// learned between-session spread of a difference of two sessions (3 x sqrt 2 x band) where a band was learned,
// else twice its threshold; never below its threshold.
HostFit host_fit(const ComparisonReport& report);

}  // namespace perfgate
