#pragma once
// What a run in which no gated benchmark was judged should do next (ComparisonReport::next_step).
#include <string>

#include "perfgate/compare.hpp"

namespace perfgate::analysis {

// The process runs per side at which a between-run comparison's interval, for a metric whose runs spread by
// `run_sd` (relative), is expected to fit well inside +-threshold under the rule's prior; 0 when none up to
// kMaxAdvisedRuns would.
int process_runs_to_judge(double run_sd, double threshold, const CompareOptions& o);
inline constexpr int kMaxAdvisedRuns = 60;

struct NextStep {
  std::string text;        // one line: why nothing was judged and the cheapest step that would judge it
  int runs = 0;            // when that step is more process runs: how many a side (0: another step)
  int repetitions = 0;     // and how many repetitions each
  std::string commands{};  // the part of `text` that names the commands that take them
};

// Empty when something was judged.
NextStep next_step_advice(const ComparisonReport& report, const CompareOptions& o);

}  // namespace perfgate::analysis
