#include "perfgate/run_level.hpp"

#include <algorithm>

#include "perfgate/stats.hpp"

namespace perfgate {

double fastest_value(const std::vector<double>& values, MetricKind kind) {
  return higher_is_better(kind) ? *std::max_element(values.begin(), values.end())
                                : *std::min_element(values.begin(), values.end());
}

double run_level(std::vector<double>& values, RunLevel level, MetricKind kind) {
  if (level == RunLevel::median || values.empty()) return stats::median_inplace(values);
  return fastest_value(values, kind);
}

RunLevel run_level_of(const std::string& benchmark_name, const std::optional<ContextPattern>& floor_bound) {
  return names(floor_bound, benchmark_name) ? RunLevel::fastest : RunLevel::median;
}

}  // namespace perfgate
