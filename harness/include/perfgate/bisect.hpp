#pragma once
// Bisection: which commit between a good and a bad revision made a benchmark slower (or faster, with
// --improvement). `perfgate bisect` builds candidates with the reference builder (reference_build.hpp)
// and judges each one against the good revision with an interleaved A/B session (the rule and adaptive
// rounds of `perfgate ab`); this header holds the search, which knows nothing of builds or timing.
//
// The search is git bisect's: the first bad commit of an ordered range, halving the range each step.
// A step that cannot be judged (the commit does not build, or the A/B stays unclear after its adaptive
// rounds) is skipped, as `git bisect skip` does: the next candidate is the untested commit nearest the
// middle. When skips leave more than one commit possible, the result names them all.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "perfgate/compare.hpp"

namespace perfgate {

enum class StepOutcome { good, bad, skip };
const char* to_string(StepOutcome outcome);

// A benchmark's change at the bad end: its deciding metric, and the change in the direction bisected (+0.98: 98%
// slower for a regression, 98% faster for an improvement).
struct EndChange {
  std::string metric;
  double toward = 0;
};

// The change of one metric in the direction bisected (a regression: slower; an improvement: faster), relative.
double change_toward(MetricKind kind, double change, bool improvement);

// Which end a step that the rule left noisy is nearer, measured against the good end as the bad end was: its
// whole interval below half of the bad end's change `end` is the good end's side, above half the bad end's, across
// the midpoint unclear (skip). A step with no interval is unclear.
StepOutcome nearer_end(const MetricComparison& step, const EndChange& end, bool improvement);

struct BisectStep {
  std::string commit;
  StepOutcome outcome = StepOutcome::skip;
  std::string detail;                        // the verdict and interval, or why it was skipped
  double seconds = 0;                        // build + measurement
  std::map<std::string, EndChange> changed;  // the benchmarks that showed the change, and how much
};

struct BisectResult {
  std::string first_bad;                // empty when skips left several candidates
  std::vector<std::string> candidates;  // the commits that may be the first bad one (1 when found)
  std::vector<BisectStep> steps;        // in the order they were tested
};

// `commits`: the range after the good revision up to and including the bad one, oldest first (the bad
// revision last: it is known bad and never tested). `test` judges one commit.
BisectResult bisect_commits(const std::vector<std::string>& commits,
                            const std::function<BisectStep(const std::string& commit)>& test);

}  // namespace perfgate
