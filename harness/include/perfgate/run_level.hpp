#pragma once
// How one process run's repetitions make that run's level, the number the gate and the history compare
// (docs/statistics.md, "A run's level").
#include <optional>
#include <string>
#include <vector>

#include "perfgate/context_pattern.hpp"
#include "perfgate/model.hpp"

namespace perfgate {

enum class RunLevel {
  median,   // the run's median repetition: noise that may go either way
  fastest,  // its best repetition: a floor-bound benchmark, which interference can only slow
};

// The best of a run's values in the metric's better direction: the lowest time, the highest rate (not empty).
double fastest_value(const std::vector<double>& values, MetricKind kind);

// The level of one process run's values (reordered): the median, or fastest_value.
double run_level(std::vector<double>& values, RunLevel level, MetricKind kind);

// The run level of a benchmark: fastest where `floor_bound` (the suite's perfgate.floor_bound) names it.
RunLevel run_level_of(const std::string& benchmark_name, const std::optional<ContextPattern>& floor_bound);

}  // namespace perfgate
