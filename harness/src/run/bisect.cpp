#include "perfgate/bisect.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>

namespace perfgate {

const char* to_string(StepOutcome outcome) {
  switch (outcome) {
    case StepOutcome::good: return "good";
    case StepOutcome::bad: return "bad";
    case StepOutcome::skip: return "skip";
  }
  return "?";
}

double change_toward(MetricKind kind, double change, bool improvement) {
  const bool up_is_sought = higher_is_better(kind) == improvement;
  return up_is_sought ? change : -change;
}

StepOutcome nearer_end(const MetricComparison& step, const EndChange& end, bool improvement) {
  if (!step.interval_bounded || !(end.toward > 0)) return StepOutcome::skip;
  const double a = change_toward(step.kind, step.change_lower, improvement);
  const double b = change_toward(step.kind, step.change_upper, improvement);
  const double midpoint = end.toward / 2;
  if (std::max(a, b) < midpoint) return StepOutcome::good;
  if (std::min(a, b) > midpoint) return StepOutcome::bad;
  return StepOutcome::skip;
}

namespace {

// The untested index in (lo, hi) nearest the middle; -1 when every one was skipped.
int next_candidate(int lo, int hi, const std::set<int>& skipped) {
  const int middle = lo + (hi - lo) / 2;
  for (int d = 0; d < hi - lo; ++d) {
    for (int i : {middle - d, middle + d}) {
      if (i > lo && i < hi && skipped.count(i) == 0) return i;
    }
  }
  return -1;
}

}  // namespace

BisectResult bisect_commits(const std::vector<std::string>& commits,
                            const std::function<BisectStep(const std::string& commit)>& test) {
  BisectResult r;
  if (commits.empty()) return r;
  int lo = -1;                                    // last index known good (-1: the good revision)
  int hi = static_cast<int>(commits.size()) - 1;  // first index known bad
  std::set<int> skipped;
  for (int i = next_candidate(lo, hi, skipped); i >= 0; i = next_candidate(lo, hi, skipped)) {
    BisectStep step = test(commits[static_cast<std::size_t>(i)]);
    step.commit = commits[static_cast<std::size_t>(i)];
    if (step.outcome == StepOutcome::good) lo = i;
    else if (step.outcome == StepOutcome::bad) hi = i;
    else skipped.insert(i);
    r.steps.push_back(std::move(step));
  }
  for (int i = lo + 1; i <= hi; ++i) r.candidates.push_back(commits[static_cast<std::size_t>(i)]);
  if (r.candidates.size() == 1) r.first_bad = r.candidates.front();
  return r;
}

}  // namespace perfgate
