// The bisection search: the first bad commit of a range for every position, in about log2(n) steps,
// and what skipped steps (a commit that does not build, an unclear A/B) leave.
#include "perfgate/bisect.hpp"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

using perfgate::BisectStep;
using perfgate::StepOutcome;

namespace {

std::vector<std::string> range_of(int n) {
  std::vector<std::string> c;
  for (int i = 1; i <= n; ++i) c.push_back("c" + std::to_string(i));
  return c;
}

int index_of(const std::string& commit) { return std::stoi(commit.substr(1)); }

// Commits from `first_bad` on are bad; those in `skip` cannot be judged.
auto judge(int first_bad, std::set<int> skip = {}) {
  return [first_bad, skip = std::move(skip)](const std::string& commit) {
    BisectStep s;
    const int i = index_of(commit);
    s.outcome = skip.count(i) != 0 ? StepOutcome::skip : (i >= first_bad ? StepOutcome::bad : StepOutcome::good);
    return s;
  };
}

}  // namespace

TEST(Bisect, FindsTheFirstBadCommitAtEveryPositionInLogSteps) {
  const auto commits = range_of(10);
  for (int k = 1; k <= 10; ++k) {
    const auto r = perfgate::bisect_commits(commits, judge(k));
    EXPECT_EQ(r.first_bad, "c" + std::to_string(k));
    EXPECT_LE(r.steps.size(), 4U) << "first bad c" << k;  // ceil(log2(10))
    for (const auto& s : r.steps) EXPECT_NE(s.commit, "c10") << "the bad end is known bad, never tested";
  }
}

TEST(Bisect, ASkippedCommitAwayFromTheAnswerCostsAStep) {
  const auto r = perfgate::bisect_commits(range_of(10), judge(7, {5}));
  EXPECT_EQ(r.first_bad, "c7");
  bool skipped_five = false;
  for (const auto& s : r.steps) skipped_five = skipped_five || (s.commit == "c5" && s.outcome == StepOutcome::skip);
  EXPECT_TRUE(skipped_five);
}

TEST(Bisect, ASkippedCommitNextToTheAnswerLeavesBothCandidates) {
  const auto r = perfgate::bisect_commits(range_of(10), judge(7, {6}));
  EXPECT_TRUE(r.first_bad.empty());
  EXPECT_EQ(r.candidates, (std::vector<std::string>{"c6", "c7"}));
}

TEST(Bisect, OneCommitNeedsNoStep) {
  const auto r = perfgate::bisect_commits({"only"}, judge(1));
  EXPECT_EQ(r.first_bad, "only");
  EXPECT_TRUE(r.steps.empty());
}

namespace {
perfgate::MetricComparison measured(perfgate::MetricKind kind, double lower, double upper) {
  perfgate::MetricComparison m;
  m.name = kind == perfgate::MetricKind::rate ? "bytes_per_second" : "time";
  m.kind = kind;
  m.gated = true;
  m.verdict = perfgate::Verdict::noisy;
  m.change_lower = lower;
  m.change_upper = upper;
  m.change = (lower + upper) / 2;
  m.interval_bounded = true;
  return m;
}
}  // namespace

// A step the rule left noisy is placed by the bad end's change (+98% time): an interval wholly below half of it is
// the good end's side, wholly above the bad end's, across the midpoint unclear; a rate counts its fall.
TEST(Bisect, ANoisyStepIsPlacedByTheBadEndsChange) {
  using perfgate::MetricKind;
  using perfgate::nearer_end;
  const perfgate::EndChange end{"time", 0.98};
  EXPECT_EQ(nearer_end(measured(MetricKind::latency, -0.163, 0.106), end, false), StepOutcome::good);
  EXPECT_EQ(nearer_end(measured(MetricKind::latency, 0.60, 1.30), end, false), StepOutcome::bad);
  EXPECT_EQ(nearer_end(measured(MetricKind::latency, 0.30, 0.70), end, false), StepOutcome::skip);
  const perfgate::EndChange rate_end{"bytes_per_second", perfgate::change_toward(MetricKind::rate, -0.5, false)};
  EXPECT_DOUBLE_EQ(rate_end.toward, 0.5);
  EXPECT_EQ(nearer_end(measured(MetricKind::rate, -0.10, 0.05), rate_end, false), StepOutcome::good);
  EXPECT_EQ(nearer_end(measured(MetricKind::rate, -0.60, -0.40), rate_end, false), StepOutcome::bad);
  // bisecting an improvement: a time that fell by 40% is the change sought
  const perfgate::EndChange faster{"time", perfgate::change_toward(MetricKind::latency, -0.4, true)};
  EXPECT_DOUBLE_EQ(faster.toward, 0.4);
  EXPECT_EQ(nearer_end(measured(MetricKind::latency, -0.05, 0.05), faster, true), StepOutcome::good);
  EXPECT_EQ(nearer_end(measured(MetricKind::latency, -0.45, -0.35), faster, true), StepOutcome::bad);
  perfgate::MetricComparison unbounded = measured(MetricKind::latency, -0.1, 0.1);
  unbounded.interval_bounded = false;
  EXPECT_EQ(nearer_end(unbounded, end, false), StepOutcome::skip);
}
