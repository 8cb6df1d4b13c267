// perfgate/run_level.hpp: a floor-bound benchmark's process runs are levelled by their fastest repetition, in the
// gate and in the history alike.
#include "perfgate/run_level.hpp"

#include <gtest/gtest.h>

#include "perfgate/history.hpp"
#include "test_support.hpp"

using namespace perfgate;
using namespace perfgate::test_support;
using perfgate::history::make_session_record;
using perfgate::history::run_level_range;
using perfgate::history::SessionInfo;
using perfgate::history::SessionRecord;

namespace {

const char* kCopy = "transfers/h2d/pinned/bytes:1";
const char* kFloorPattern = "transfers/(h2d|d2h)/pinned/.*";

// One process run's 5 repetitions of a copy whose floor is `floor` (0.1% noise), the first `bursts` of them
// slowed by `burst` (interference that only adds).
std::vector<double> repetitions(double floor, int bursts, double burst, std::uint64_t seed) {
  std::vector<double> v = noisy(floor, 0.001, 5, seed);
  for (int i = 0; i < bursts; ++i) v[static_cast<std::size_t>(i)] *= 1 + burst;
  return v;
}

struct Burst {
  int count;
  double size;
};

// The copy over three process runs (run r's bursts given), its context marking `floor_pattern` floor-bound.
ResultSet copy_runs(double floor, const std::vector<Burst>& bursts, const std::string& floor_pattern,
                    std::uint64_t seed) {
  ResultSet rs = set_of({}, static_cast<int>(bursts.size()));
  BenchmarkResult b = bench(kCopy, {});
  for (std::size_t r = 0; r < bursts.size(); ++r) {
    for (double v : repetitions(floor, bursts[r].count, bursts[r].size, seed + r)) {
      b.time.samples.push_back(v);
      b.time.process_run.push_back(static_cast<int>(r));
    }
    if (!floor_pattern.empty()) rs.contexts[r].fields[kFloorBoundKey] = floor_pattern;
  }
  rs.index[b.name] = 0;
  rs.benchmarks.push_back(std::move(b));
  return rs;
}

// The baseline: three runs with one burst or none.
ResultSet quiet_baseline(const std::string& floor_pattern) {
  return copy_runs(100, {{1, 0.25}, {0, 0}, {1, 0.10}}, floor_pattern, 1);
}

// A machine whose host interferes more: three of five repetitions slowed in two runs, two in the third.
ResultSet busy_host(double floor, const std::string& floor_pattern) {
  return copy_runs(floor, {{3, 0.30}, {3, 0.15}, {2, 0.40}}, floor_pattern, 11);
}

CompareOptions one_percent_no_prior() {
  CompareOptions o;
  o.rule.threshold = 0.01;
  o.noise.run_noise_df = 0;
  o.noise.common_mode = false;
  return o;
}

}  // namespace

TEST(RunLevel, FastestIsTheBestRepetitionInTheMetricsBetterDirection) {
  std::vector<double> times{5.0, 4.0, 9.0, 4.5};
  EXPECT_DOUBLE_EQ(run_level(times, RunLevel::fastest, MetricKind::latency), 4.0);
  std::vector<double> rates{5.0, 4.0, 9.0, 4.5};
  EXPECT_DOUBLE_EQ(run_level(rates, RunLevel::fastest, MetricKind::rate), 9.0);
  std::vector<double> medians{5.0, 4.0, 9.0, 4.5};
  EXPECT_DOUBLE_EQ(run_level(medians, RunLevel::median, MetricKind::latency), 4.75);
}

TEST(RunLevel, OnlyTheBenchmarksThePatternNamesAreFloorBound) {
  const auto pattern = ContextPattern{kFloorPattern, std::regex(kFloorPattern)};
  EXPECT_EQ(run_level_of(kCopy, pattern), RunLevel::fastest);
  EXPECT_EQ(run_level_of("transfers/h2d/pageable/bytes:1", pattern), RunLevel::median);
  EXPECT_EQ(run_level_of(kCopy, std::nullopt), RunLevel::median);
}

// The median of runs whose repetitions a busy host slowed reads a false regression; the fastest repetition does not.
TEST(RunLevel, BurstsOnABusyHostMoveTheMedianButNotTheFloor) {
  const auto by_median = compare(quiet_baseline(""), busy_host(100, ""), one_percent_no_prior());
  ASSERT_EQ(by_median.benchmarks.size(), 1u);
  EXPECT_NE(by_median.benchmarks[0].verdict, Verdict::unchanged);
  EXPECT_GT(by_median.benchmarks[0].metrics[0].change, 0.10);
  EXPECT_EQ(by_median.benchmarks[0].metrics[0].method.find("fastest"), std::string::npos);

  const auto by_floor = compare(quiet_baseline(kFloorPattern), busy_host(100, kFloorPattern), one_percent_no_prior());
  const auto& m = by_floor.benchmarks[0].metrics[0];
  EXPECT_EQ(by_floor.benchmarks[0].verdict, Verdict::unchanged) << m.reason;
  EXPECT_NEAR(m.change, 0.0, 0.005);
  EXPECT_NE(m.method.find("each run's fastest repetition (floor-bound)"), std::string::npos) << m.method;
  EXPECT_EQ(by_floor.exit_code, 0);
}

TEST(RunLevel, AFloorTwoPercentHigherIsARegressionThroughTheBursts) {
  const auto r = compare(quiet_baseline(kFloorPattern), busy_host(102, kFloorPattern), one_percent_no_prior());
  const auto& m = r.benchmarks[0].metrics[0];
  EXPECT_EQ(r.benchmarks[0].verdict, Verdict::regression) << m.reason;
  EXPECT_NEAR(m.change, 0.02, 0.004);
  EXPECT_GT(m.change_lower, 0.01);
}

// Runs recorded before the suite named its floor-bound benchmarks: the other side's mark applies to both sides.
TEST(RunLevel, EitherSidesMarkLevelsBothSides) {
  const auto old_baseline = compare(quiet_baseline(""), busy_host(100, kFloorPattern), one_percent_no_prior());
  EXPECT_EQ(old_baseline.benchmarks[0].verdict, Verdict::unchanged) << old_baseline.benchmarks[0].reason;
  const auto old_current = compare(quiet_baseline(kFloorPattern), busy_host(100, ""), one_percent_no_prior());
  EXPECT_EQ(old_current.benchmarks[0].verdict, Verdict::unchanged) << old_current.benchmarks[0].reason;
}

TEST(RunLevel, AMalformedMarkNamesTheFileAndTheKey) {
  try {
    compare(quiet_baseline(""), busy_host(100, "transfers/(h2d"), one_percent_no_prior());
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("context.perfgate.floor_bound"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("run0.json"), std::string::npos) << e.what();
  }
}

// The history levels a session as the gate does, so that learned noise is the noise of what the gate judges.
TEST(RunLevel, TheHistoryLevelsAFloorBoundSessionByItsRunsFastestRepetitions) {
  SessionInfo info;
  info.machine_class = "gpu-h100-x1";
  info.commit = "abc";
  const ResultSet busy = busy_host(100, kFloorPattern);
  const SessionRecord by_floor = make_session_record(busy, info);
  ASSERT_EQ(by_floor.series.size(), 1u);
  EXPECT_EQ(by_floor.series[0].level, RunLevel::fastest);
  std::vector<double> run_minima;
  for (int r = 0; r < 3; ++r) {
    double lowest = 1e300;
    for (std::size_t i = 0; i < busy.benchmarks[0].time.samples.size(); ++i)
      if (busy.benchmarks[0].time.process_run[i] == r) lowest = std::min(lowest, busy.benchmarks[0].time.samples[i]);
    run_minima.push_back(lowest);
  }
  EXPECT_DOUBLE_EQ(by_floor.series[0].median, stats::median(run_minima));
  const auto [low, high] = run_level_range(by_floor.series[0]);
  EXPECT_DOUBLE_EQ(low, *std::min_element(run_minima.begin(), run_minima.end()));
  EXPECT_DOUBLE_EQ(high, *std::max_element(run_minima.begin(), run_minima.end()));

  const SessionRecord plain = make_session_record(busy_host(100, ""), info);
  EXPECT_EQ(plain.series[0].level, RunLevel::median);
  EXPECT_GT(plain.series[0].median, 1.10 * by_floor.series[0].median);  // two of three run medians are burst
}
