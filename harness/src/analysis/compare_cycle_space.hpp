#pragma once
// The cycle-space pass of compare() (perfgate/cycle_space.hpp): part of the compare component, so that
// compare() can run it while the pass compares the benchmarks again in cycles.
#include "perfgate/compare.hpp"
#include "perfgate/model.hpp"

namespace perfgate {

// Runs once in compare(), after every benchmark's verdict and before the counts: judges the benchmarks
// whose median SM clocks differ by more than options.clock_tolerance in cycle space, sets their
// cycle_space, reason and (compute-bound) verdict and driver, and adds one note per kind. Does nothing
// when options.cycle_space is off.
void apply_cycle_space(ComparisonReport& report, const ResultSet& baseline, const ResultSet& current,
                       const CompareOptions& options);

}  // namespace perfgate
