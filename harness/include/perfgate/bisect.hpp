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
#include <string>
#include <vector>

namespace perfgate {

enum class StepOutcome { good, bad, skip };
const char* to_string(StepOutcome outcome);

struct BisectStep {
  std::string commit;
  StepOutcome outcome = StepOutcome::skip;
  std::string detail;                // the verdict and interval, or why it was skipped
  double seconds = 0;                // build + measurement
  std::vector<std::string> changed;  // the benchmarks that showed the change
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
