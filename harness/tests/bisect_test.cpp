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
