// Change points (E-Divisive means + permutation test), common mode, and learned noise
// (perfgate/change_points.hpp). The simulations are seeded; the rates they assert are the ones stated in
// docs/history.md.
#include <cmath>
#include <cstdio>
#include <numeric>

#include <gtest/gtest.h>

#include "perfgate/change_points.hpp"
#include "perfgate/stats.hpp"

namespace {

using namespace perfgate;
using namespace perfgate::history;

// log slowness around 0 with relative noise `sd`.
std::vector<double> noise(std::size_t n, double sd, stats::SplitMix64& rng) {
  std::vector<double> x(n);
  for (auto& v : x) v = sd * rng.normal();
  return x;
}

// The textbook O(n^2) E-Divisive statistic of a split at tau (alpha = 1), to check the O(n log n) scan.
double brute_force_q(const std::vector<double>& y, std::size_t tau) {
  const std::size_t n = y.size();
  double across = 0, left = 0, right = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) {
      const double d = std::fabs(y[i] - y[j]);
      if (j < tau) left += d;
      else if (i >= tau) right += d;
      else across += d;
    }
  const double a = static_cast<double>(tau), b = static_cast<double>(n - tau);
  return a * b / static_cast<double>(n) * (2 * across / (a * b) - left / (a * (a - 1) / 2) - right / (b * (b - 1) / 2));
}

TEST(EDivisive, StatisticAndSplitMatchTheQuadraticDefinition) {
  stats::SplitMix64 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    auto y = noise(37, 0.01, rng);
    for (std::size_t i = 17; i < y.size(); ++i) y[i] += 0.05;
    y[5] = y[9];  // a tie, which the ranks must handle
    ChangePointOptions o;
    o.outlier_sigmas = 0;  // compare on the raw values
    const auto cps = e_divisive(y, o);
    ASSERT_FALSE(cps.empty());
    // The first split searched is the whole series: the found change with the largest statistic is it.
    const auto top = *std::max_element(
        cps.begin(), cps.end(), [](const ChangePoint& a, const ChangePoint& b) { return a.statistic < b.statistic; });
    std::size_t best_tau = 0;
    double best_q = -1;
    for (std::size_t tau = 3; tau + 3 <= y.size(); ++tau)
      if (const double q = brute_force_q(y, tau); q > best_q) best_q = q, best_tau = tau;
    EXPECT_EQ(top.index, best_tau);
    EXPECT_NEAR(top.statistic, best_q, 1e-12 * std::fabs(best_q) + 1e-15);
  }
}

TEST(EDivisive, SeededFalseAlarmRateOnStableSeriesIsBelowHalfAPercent) {
  stats::SplitMix64 rng(20261125);
  constexpr int kSeries = 400;
  int alarms = 0;
  for (int i = 0; i < kSeries; ++i) alarms += e_divisive(noise(40, 0.01, rng)).empty() ? 0 : 1;
  std::printf("false alarms: %d of %d stable series (40 sessions, 1%% noise)\n", alarms, kSeries);
  EXPECT_LE(alarms, 2);  // <= 0.5%; the test level is 0.001 per split
}

TEST(EDivisive, OneOutlyingSessionIsNotAChange) {
  stats::SplitMix64 rng(7);
  constexpr int kSeries = 400;
  int alarms = 0;
  for (int i = 0; i < kSeries; ++i) {
    auto y = noise(40, 0.01, rng);
    y[rng.below(y.size())] += std::log(1.3);  // one session 30% slow (30 noise SDs)
    alarms += e_divisive(y).empty() ? 0 : 1;
  }
  std::printf("false alarms with one outlier: %d of %d\n", alarms, kSeries);
  EXPECT_LE(alarms, 2);
}

// Detection rate of a step of `step` (relative) after session 20 of 40, at 1% session noise; a hit is a
// change point within 2 sessions of the true one.
double detection_rate(double step, int series, std::uint64_t seed, double* mean_error = nullptr) {
  stats::SplitMix64 rng(seed);
  int hits = 0;
  double error_sum = 0;
  for (int i = 0; i < series; ++i) {
    auto y = noise(40, 0.01, rng);
    for (std::size_t k = 20; k < y.size(); ++k) y[k] += std::log1p(step);
    for (const auto& cp : e_divisive(y))
      if (cp.index + 2 >= 20 && cp.index <= 22) {
        ++hits;
        error_sum += std::expm1(cp.level_after - cp.level_before) - step;
        break;
      }
  }
  if (mean_error) *mean_error = hits ? error_sum / hits : 0;
  return static_cast<double>(hits) / series;
}

TEST(EDivisive, SeededDetectionRatesOfSteps) {
  double error = 0;
  const double three = detection_rate(0.03, 200, 1, &error);
  const double two = detection_rate(0.02, 200, 2);
  const double one = detection_rate(0.01, 200, 3);
  std::printf(
      "detection at 1%% noise, 20+20 sessions: +3%% %.3f (mean error of the step %+.4f), +2%% %.3f, +1%% %.3f\n", three,
      error, two, one);
  EXPECT_GE(three, 0.98);
  EXPECT_LT(std::fabs(error), 0.003);
  EXPECT_GE(two, 0.75);
  EXPECT_LT(one, two);  // a step of one noise SD is found less often: the rates are honest, not all 1
}

// A permutation test of n sessions cannot go much below 2 / C(n, n/2): at the default 0.001 a 2x step in 6 sessions
// is never a change point, and the sessions it takes are about where that bound crosses max_p (C(12, 6) = 924).
TEST(EDivisive, TheSessionsAChangePointNeedsFollowThePermutationBound) {
  ChangePointOptions o;
  const std::size_t needed = sessions_for_a_change_point(o);
  EXPECT_GE(needed, 10U);
  EXPECT_LE(needed, 14U);
  std::vector<double> six = {0.001, -0.001, 0.002, 0.693, 0.692, 0.694};  // log 2: twice as slow
  EXPECT_TRUE(e_divisive(six, o).empty());
  std::vector<double> long_enough(needed + 2);
  for (std::size_t i = 0; i < long_enough.size(); ++i)
    long_enough[i] = (i < long_enough.size() / 2 ? 0.0 : 0.693) + 1e-3 * static_cast<double>(i % 3);
  EXPECT_EQ(e_divisive(long_enough, o).size(), 1U);
  o.max_p = 0.05;  // C(8, 4) = 70: 2 / 70 < 0.05 < 2 / 35
  EXPECT_EQ(sessions_for_a_change_point(o), 8U);
}

TEST(EDivisive, FindsSlowCreepAndReportsItsCumulativeSize) {
  // Four steps of +1.5%, each 10 sessions long, at 0.5% noise: each step alone passes a 2% gate.
  stats::SplitMix64 rng(5);
  constexpr int kSeries = 100;
  int found = 0;
  double cumulative_sum = 0;
  for (int i = 0; i < kSeries; ++i) {
    auto y = noise(50, 0.005, rng);
    for (std::size_t k = 0; k < y.size(); ++k)
      y[k] += std::log1p(0.015) * static_cast<double>(std::min<std::size_t>(k / 10, 4));
    const auto cps = e_divisive(y);
    if (cps.empty()) continue;
    ++found;
    cumulative_sum += std::expm1(cps.back().level_after - cps.front().level_before);
  }
  const double mean_cumulative = found ? cumulative_sum / found : 0;
  std::printf("creep of 4 x 1.5%%: found in %d of %d, mean cumulative %.4f (true %.4f)\n", found, kSeries,
              mean_cumulative, std::pow(1.015, 4) - 1);
  EXPECT_GE(found, 98);
  EXPECT_NEAR(mean_cumulative, std::pow(1.015, 4) - 1, 0.01);
}

TEST(HampelFilter, ReplacesOneOutlierAndKeepsASteps) {
  std::vector<double> y = {0, 0.001, -0.001, 0.002, 0.5, 0.0, -0.002, 0.1, 0.101, 0.099, 0.1, 0.102};
  const auto f = hampel_filter(y, 4);
  EXPECT_LT(std::fabs(f[4]), 0.01);                                              // the outlier is gone
  for (std::size_t i = 7; i < y.size(); ++i) EXPECT_DOUBLE_EQ(f[i], y[i]) << i;  // the new level stays
}

// ---- over a class's history -----------------------------------------------------------------------

// A class of `benchmarks` benchmarks over `sessions` sessions; `level(b, s)` gives the relative level.
template <class Level>
ClassHistory synthetic_class(int benchmarks, int sessions, Level level, std::uint64_t seed) {
  stats::SplitMix64 rng(seed);
  ClassHistory h;
  h.machine_class = "cpu-test-2c";
  for (int s = 0; s < sessions; ++s) {
    SessionSummary summary;
    summary.id = s + 1;
    summary.info.commit = "c" + std::to_string(s);
    summary.info.time = "2026-11-01T00:00:" + std::to_string(10 + s) + "Z";
    h.sessions.push_back(summary);
  }
  for (int b = 0; b < benchmarks; ++b) {
    Series series;
    series.key = {"cpu-test-2c", "suite/b" + std::to_string(10 + b), "time", MetricKind::latency};
    series.suite = "suite";
    for (int s = 0; s < sessions; ++s)
      series.points.push_back({s + 1, 1000.0 * level(b, s) * std::exp(0.01 * rng.normal()), 3});
    h.series.push_back(series);
  }
  return h;
}

TEST(FindChanges, CommonModeIsMachineDriftNotAChangeOfEachBenchmark) {
  // Every benchmark 8% slower from session 20 (the machines changed), benchmark 3 another 10% from 30.
  const auto h = synthetic_class(
      12, 40, [](int b, int s) { return (s >= 20 ? 1.08 : 1.0) * (b == 3 && s >= 30 ? 1.10 : 1.0); }, 9);
  const auto with = find_changes(h);
  ASSERT_EQ(with.size(), 2u);
  EXPECT_EQ(with[0].key.benchmark, "suite/*");
  EXPECT_EQ(with[0].key.metric, "common_mode");
  EXPECT_EQ(with[0].commit, "c20");
  EXPECT_NEAR(with[0].step, 0.08, 0.01);
  EXPECT_EQ(with[1].key.benchmark, "suite/b13");
  EXPECT_EQ(with[1].commit, "c30");
  EXPECT_EQ(with[1].previous_commit, "c29");
  EXPECT_NEAR(with[1].step, 0.10, 0.01);
  EXPECT_TRUE(with[1].common_mode_removed);
  EXPECT_GT(with[1].confidence, 0.99);

  ChangeOptions off;
  off.remove_common_mode = false;
  const auto without = find_changes(h, off);
  EXPECT_EQ(without.size(), 13u);  // each benchmark at c20, and b13 again at c30
  for (const auto& c : without) {
    if (c.key.benchmark == "suite/b13" && c.commit == "c30") { EXPECT_NEAR(c.cumulative, 1.08 * 1.10 - 1, 0.015); }
  }
}

TEST(FindChanges, RatesAreSlowerWhenTheyDrop) {
  auto h = synthetic_class(
      1, 30, [](int, int s) { return s >= 15 ? 1.0 / 0.8 : 1.0; }, 4);  // time +25%
  h.series[0].key.metric = "items_per_second";
  h.series[0].key.kind = MetricKind::rate;
  for (auto& p : h.series[0].points) p.median = 1e9 / p.median;  // the rate falls by 20%: 25% slower
  const auto changes = find_changes(h);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_NEAR(changes[0].step, 0.25, 0.02);
}

TEST(FindChanges, SessionsWithAZeroMedianAreLeftOutNotInfinite) {
  auto h = synthetic_class(
      1, 30, [](int, int s) { return s >= 15 ? 1.2 : 1.0; }, 8);
  h.series[0].key.metric = "phase.idle";
  h.series[0].key.kind = MetricKind::phase;
  h.series[0].points[3].median = 0;  // the phase did not run in that session
  h.series[0].points[20].median = 0;
  const auto changes = find_changes(h);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].commit, "c15");
  EXPECT_TRUE(std::isfinite(changes[0].step));
  EXPECT_NEAR(changes[0].step, 0.2, 0.02);
  const auto noise = learned_noise(h);
  ASSERT_EQ(noise.size(), 1u);
  EXPECT_TRUE(std::isfinite(noise.begin()->second.relative_sd));
  EXPECT_EQ(noise.begin()->second.sessions_used, 14u);  // 15..29 without the zero at 20
}

// ---- learned noise --------------------------------------------------------------------------------

// 100 x exp(pattern) where the pattern {0, d, -d, 2d, -2d} repeats: median 0 and MAD exactly d.
std::vector<double> patterned(std::size_t n, double level, double d) {
  const double pattern[] = {0, d, -d, 2 * d, -2 * d};
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = level * std::exp(pattern[i % 5]);
  return v;
}

TEST(LearnedNoise, IsTheMadOfLogSessionMediansWithOneDegreeOfFreedomPerSession) {
  const auto n = learned_noise(patterned(5, 100, 0.01), MetricKind::latency);
  EXPECT_NEAR(n.relative_sd, 1.4826 * 0.01, 1e-12);
  EXPECT_EQ(n.degrees_of_freedom, 5);
  EXPECT_TRUE(n.sufficient);
  const auto rate = learned_noise(patterned(5, 100, 0.01), MetricKind::rate);
  EXPECT_NEAR(rate.relative_sd, 1.4826 * 0.01, 1e-12);
  const auto few = learned_noise(patterned(3, 100, 0.01), MetricKind::latency);
  EXPECT_EQ(few.degrees_of_freedom, 3);
  EXPECT_FALSE(few.sufficient);
}

TEST(LearnedNoise, CountsOnlySessionsSinceTheLastChangePoint) {
  auto v = patterned(15, 100, 0.01);
  const auto after = patterned(12, 150, 0.02);
  v.insert(v.end(), after.begin(), after.end());
  const auto n = learned_noise(v, MetricKind::latency);
  EXPECT_EQ(n.since_index, 15u);
  EXPECT_EQ(n.degrees_of_freedom, 12);
  EXPECT_NEAR(n.relative_sd, 1.4826 * 0.02, 1e-12);
}

TEST(LearnedNoise, UsesTheRecentWindowAndIgnoresAnOutlier) {
  auto v = patterned(50, 100, 0.01);
  NoiseOptions o;
  o.window = 30;
  const auto windowed = learned_noise(v, MetricKind::latency, o);
  EXPECT_EQ(windowed.sessions_used, 30u);
  EXPECT_EQ(windowed.since_index, 20u);
  EXPECT_NEAR(windowed.relative_sd, 1.4826 * 0.01, 1e-12);
  v = patterned(15, 100, 0.01);
  v[5] = 200;  // one session twice as slow
  const auto robust = learned_noise(v, MetricKind::latency);
  EXPECT_EQ(robust.sessions_used, 15u);
  EXPECT_NEAR(robust.relative_sd, 1.4826 * 0.01, 1e-12);
}

TEST(LearnedNoise, PerSeriesOfAClass) {
  const auto h = synthetic_class(
      3, 20, [](int, int) { return 1.0; }, 12);
  const auto noise_by_series = learned_noise(h);
  ASSERT_EQ(noise_by_series.size(), 3u);
  for (const auto& [key, n] : noise_by_series) {
    EXPECT_EQ(n.degrees_of_freedom, 20) << key.benchmark;
    EXPECT_GT(n.relative_sd, 0.004);  // true 0.01; 20 sessions estimate it within a factor of ~2
    EXPECT_LT(n.relative_sd, 0.02);
  }
}

}  // namespace
