// Learned noise in the verdict engine (NoiseOptions::learned_noise) and its snapshot file: intervals against
// hand-computed values, the two failures of the class prior it removes, common mode, the detectable change,
// the estimate inside its interval, and the snapshot parser on malformed files.
#include "perfgate/learned_noise.hpp"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "perfgate/compare.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/stats.hpp"
#include "test_support.hpp"

using namespace perfgate;
using perfgate::test_support::bench;
using perfgate::test_support::noisy;
using perfgate::test_support::set_of;

namespace {

// A benchmark whose process runs have exactly these medians (3 repetitions each, constant inside a run).
BenchmarkResult runs_at(const std::string& name, const std::vector<double>& run_medians) {
  BenchmarkResult b = bench(name, {});
  for (std::size_t r = 0; r < run_medians.size(); ++r)
    for (int k = 0; k < 3; ++k) {
      b.time.samples.push_back(run_medians[r]);
      b.time.process_run.push_back(static_cast<int>(r));
    }
  return b;
}

std::shared_ptr<const LearnedNoiseTable> table_with(
    const std::vector<std::tuple<std::string, double, int, std::optional<double>>>& bands) {
  auto t = std::make_shared<LearnedNoiseTable>();
  t->machine_class = "cpu-test-2c";
  t->source = "test";
  for (const auto& [name, sd, sessions, cm] : bands)
    t->bands[{name, "time"}] = LearnedBand{sd, sessions, cm, cm ? sessions : 0};
  return t;
}

// `cur` against `base`, the benchmark s/a judged with a learned band of 1% from 10 sessions.
ComparisonReport judged_with_one_band(const ResultSet& base, const ResultSet& cur) {
  CompareOptions o;
  o.noise.learned_noise = table_with({{"s/a", 0.01, 10, std::nullopt}});
  return compare(base, cur, o);
}

constexpr double kT975Df10 = 2.2281388519649385;  // Student t quantile (0.975, 10 d.f.)

}  // namespace

// d = log(103/100); half-width = t(0.975, 10) x 1% x sqrt 2 = 2.228139 x 0.0141421 (hand-computed).
TEST(LearnedNoise, IntervalOfTwoSessionLevelsWithTheBand) {
  const ResultSet base = set_of({runs_at("s/a", {100, 100, 100})}, 3);
  const ResultSet cur = set_of({runs_at("s/a", {103, 103, 103})}, 3);
  const auto r = judged_with_one_band(base, cur);
  const auto& m = r.benchmarks[0].metrics[0];
  const double d = std::log(1.03), half = kT975Df10 * 0.01 * std::sqrt(2.0);
  EXPECT_TRUE(m.learned_noise);
  EXPECT_NE(m.method.find("between-session"), std::string::npos) << m.method;
  EXPECT_NEAR(m.change, 0.03, 1e-12);
  EXPECT_NEAR(m.change_lower, std::expm1(d - half), 1e-9);
  EXPECT_NEAR(m.change_upper, std::expm1(d + half), 1e-9);
  EXPECT_NEAR(m.p_value, 2 * (1 - stats::student_t_cdf(d / (0.01 * std::sqrt(2.0)), 10)), 1e-9);
  // Detectable: the threshold (5%) plus the half-width below the estimate.
  EXPECT_NEAR(m.detectable_change, std::expm1(std::log1p(0.05) + half), 1e-9);
  EXPECT_EQ(r.learned_metrics, 1);
  EXPECT_EQ(r.prior_metrics, 0);
}

// A baseline pooled from 4 sessions (`perfgate baseline update --from` of 4 perfgate runs: 4 distinct seeds among its
// process runs) carries a quarter of one session's variance: half-width = t(0.975, 10) x 1% x sqrt(1 + 1/4).
TEST(LearnedNoise, BaselinePooledFromSeveralSessionsNarrowsTheInterval) {
  ResultSet base = set_of({runs_at("s/a", {100, 100, 100, 100, 100, 100, 100, 100})}, 8);
  for (std::size_t r = 0; r < base.contexts.size(); ++r) {
    base.contexts[r].fields["perfgate.suite"] = "s";
    base.contexts[r].fields["perfgate.run.seed"] = std::to_string(r / 2);  // 4 sessions of 2 process runs
  }
  const ResultSet cur = set_of({runs_at("s/a", {103, 103, 103})}, 3);
  const auto pooled = judged_with_one_band(base, cur);
  const auto& m = pooled.benchmarks[0].metrics[0];
  const double d = std::log(1.03), half = kT975Df10 * 0.01 * std::sqrt(1.25);
  EXPECT_NEAR(m.change_lower, std::expm1(d - half), 1e-9);
  EXPECT_NEAR(m.change_upper, std::expm1(d + half), 1e-9);
  EXPECT_NE(m.method.find("baseline pooled from 4 sessions"), std::string::npos) << m.method;
  // One session's process runs (one seed) are one session: the interval of two session levels, sqrt 2.
  for (auto& c : base.contexts) c.fields["perfgate.run.seed"] = "7";
  const auto single = judged_with_one_band(base, cur);
  const auto& one = single.benchmarks[0].metrics[0];
  EXPECT_NEAR(one.change_upper, std::expm1(d + kT975Df10 * 0.01 * std::sqrt(2.0)), 1e-9);
  EXPECT_EQ(one.method.find("pooled"), std::string::npos) << one.method;
}

// The two failures of one prior per class (issue: history): a quiet benchmark's +8% is only "noisy" under the
// 5% prior, a wild benchmark's +25% drift is a "regression". Learned bands turn both around.
TEST(LearnedNoise, QuietChangeFoundAndWildDriftNotFlagged) {
  const ResultSet base = set_of({runs_at("s/quiet", {1000, 1001, 999}), runs_at("s/wild", {1000, 1010, 990})}, 3);
  const ResultSet cur = set_of({runs_at("s/quiet", {1080, 1081, 1079}), runs_at("s/wild", {1250, 1260, 1240})}, 3);
  CompareOptions prior;
  prior.noise.session_noise = 0.0;
  const auto before = compare(base, cur, prior);
  ASSERT_EQ(before.benchmarks[0].name, "s/quiet");
  EXPECT_EQ(before.benchmarks[0].verdict, Verdict::noisy) << before.benchmarks[0].reason;
  EXPECT_EQ(before.benchmarks[1].verdict, Verdict::regression) << before.benchmarks[1].reason;
  CompareOptions learned = prior;
  learned.noise.learned_noise = table_with({{"s/quiet", 0.003, 20, std::nullopt}, {"s/wild", 0.15, 20, std::nullopt}});
  const auto after = compare(base, cur, learned);
  const auto* quiet = &after.benchmarks[0];
  const auto* wild = &after.benchmarks[1];
  if (quiet->name != "s/quiet") std::swap(quiet, wild);
  EXPECT_EQ(quiet->verdict, Verdict::regression) << quiet->reason;
  EXPECT_NE(wild->verdict, Verdict::regression) << wild->reason;
  EXPECT_LT(quiet->detectable_change(), 0.065);  // 5% + 2.09 x 0.3% x sqrt 2
  EXPECT_GT(wild->detectable_change(), 0.5);     // 5% + 2.09 x 15% x sqrt 2, in logs
}

TEST(LearnedNoise, TooFewSessionsKeepThePriorAndPairedRunsIgnoreBands) {
  const ResultSet base = set_of({runs_at("s/a", {100, 101, 99})}, 3);
  const ResultSet cur = set_of({runs_at("s/a", {120, 121, 119})}, 3);
  CompareOptions o;
  o.noise.learned_noise = table_with({{"s/a", 0.01, 4, std::nullopt}});  // min_sessions is 5
  auto r = compare(base, cur, o);
  EXPECT_FALSE(r.benchmarks[0].metrics[0].learned_noise);
  EXPECT_NE(r.benchmarks[0].metrics[0].method.find("between-run"), std::string::npos);
  EXPECT_EQ(r.prior_metrics, 1);
  o.noise.learned_noise = table_with({{"s/a", 0.01, 12, std::nullopt}});
  o.rule.paired_runs = true;
  r = compare(base, cur, o);
  EXPECT_FALSE(r.benchmarks[0].metrics[0].learned_noise);
  EXPECT_NE(r.benchmarks[0].metrics[0].method.find("paired"), std::string::npos);
}

// Ten benchmarks of a suite all 20% slower in this session (machine drift) and one 10% slower on top of it:
// with bands learned with the common mode removed (tighter than without), only that one is a regression.
TEST(LearnedNoise, CommonModeRemovedWhereItSharpens) {
  std::vector<BenchmarkResult> b, c;
  std::vector<std::tuple<std::string, double, int, std::optional<double>>> bands;
  for (int i = 0; i < 10; ++i) {
    const std::string name = "s/b" + std::to_string(i);
    const double level = 100.0 * (i + 1);
    const double extra = i == 3 ? 1.10 : 1.0;
    b.push_back(runs_at(name, {level, level, level}));
    c.push_back(runs_at(name, {level * 1.2 * extra, level * 1.2 * extra, level * 1.2 * extra}));
    bands.emplace_back(name, 0.10, 15, 0.01);
  }
  CompareOptions o;
  o.noise.learned_noise = table_with(bands);
  const auto r = compare(set_of(b, 3), set_of(c, 3), o);
  ASSERT_EQ(r.learned_common_mode.count("s"), 1u);
  EXPECT_NEAR(r.learned_common_mode.at("s").shift, 0.2, 1e-9);
  for (const auto& bc : r.benchmarks) {
    const auto& m = bc.metrics[0];
    EXPECT_NEAR(m.common_shift, 0.2, 1e-9);
    if (bc.name == "s/b3") {
      EXPECT_EQ(bc.verdict, Verdict::regression) << bc.reason;
      EXPECT_NEAR(m.change, 0.10, 1e-9);
    } else {
      EXPECT_EQ(bc.verdict, Verdict::unchanged) << bc.reason;
    }
  }
  bool noted = false;
  for (const auto& n : r.notes) noted = noted || n.find("common mode") != std::string::npos;
  EXPECT_TRUE(noted);
  // Without the common-mode bands the same data is judged on the plain 10% bands: nothing is a regression
  // (the 20% drift is inside 5% + 2.13 x 10% x sqrt 2).
  for (auto& band : bands) std::get<3>(band) = std::nullopt;
  o.noise.learned_noise = table_with(bands);
  const auto plain = compare(set_of(b, 3), set_of(c, 3), o);
  EXPECT_TRUE(plain.learned_common_mode.empty());
  EXPECT_EQ(plain.counts.regression, 0);
}

// Host-dependent benchmarks (the suite's perfgate.host_dependent) neither set nor receive the suite's common mode:
// nine host copies 10% slower on this host leave the eight device benchmarks' verdicts alone.
TEST(LearnedNoise, HostDependentBenchmarksStayOutOfTheCommonMode) {
  std::vector<BenchmarkResult> b, c;
  std::vector<std::tuple<std::string, double, int, std::optional<double>>> bands;
  for (int i = 0; i < 17; ++i) {
    const bool host = i < 9;
    const std::string name = (host ? "s/host/b" : "s/dev/b") + std::to_string(i);
    const double level = 100.0 * (i + 1), slow = host ? 1.10 : 1.0;
    b.push_back(runs_at(name, {level, level, level}));
    c.push_back(runs_at(name, {level * slow, level * slow, level * slow}));
    bands.emplace_back(name, 0.10, 15, 0.01);
  }
  CompareOptions o;
  o.noise.learned_noise = table_with(bands);
  const auto marked = [](std::vector<BenchmarkResult> v) {
    ResultSet r = set_of(std::move(v), 3);
    for (auto& ctx : r.contexts) ctx.fields["perfgate.host_dependent"] = "s/host/.*";
    return r;
  };
  const auto r = compare(marked(b), marked(c), o);
  ASSERT_EQ(r.learned_common_mode.count("s"), 1u);
  EXPECT_NEAR(r.learned_common_mode.at("s").shift, 0.0, 1e-9);  // from the 8 device benchmarks only
  for (const auto& bc : r.benchmarks) {
    if (bc.name.rfind("s/dev/", 0) == 0) {
      EXPECT_EQ(bc.verdict, Verdict::unchanged) << bc.reason;
    } else {
      EXPECT_NEAR(bc.metrics[0].common_shift, 0.0, 1e-12) << bc.name;
    }
  }
  // Unmarked, the host copies set a +10% common mode and the unchanged device benchmarks read 10% faster.
  const auto unmarked = compare(set_of(b, 3), set_of(c, 3), o);
  EXPECT_NEAR(unmarked.learned_common_mode.at("s").shift, 0.1, 1e-9);
  EXPECT_EQ(unmarked.counts.improvement, 8);
}

// Issue "one shape", item 1: a between-run comparison (3 vs 6 runs) printed +7.3% [-10.0%, +6.9%], a ratio of
// pooled medians beside an interval of the mean of run medians. Every analysis now reports the estimate its
// interval is built around; over many skewed configurations the estimate lies inside its interval.
TEST(Compare, EstimateLiesInsideItsInterval) {
  stats::SplitMix64 rng(42);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<double> base_runs, cur_runs;
    for (int r = 0; r < 3; ++r) base_runs.push_back(100 * std::exp(0.08 * rng.normal()));
    for (int r = 0; r < 6; ++r) cur_runs.push_back(100 * std::exp(0.08 * rng.normal() + (r == 0 ? 0.4 : 0.0)));
    BenchmarkResult b = bench("s/a", {}), c = bench("s/a", {});
    for (std::size_t r = 0; r < base_runs.size(); ++r)
      for (double v : noisy(base_runs[r], 0.03, 5, rng.next())) {
        b.time.samples.push_back(v);
        b.time.process_run.push_back(static_cast<int>(r));
      }
    for (std::size_t r = 0; r < cur_runs.size(); ++r)
      for (double v : noisy(cur_runs[r], 0.03, 5, rng.next())) {
        c.time.samples.push_back(v);
        c.time.process_run.push_back(static_cast<int>(r));
      }
    for (const bool paired : {false, true}) {
      CompareOptions o;
      o.rule.paired_runs = paired;
      const auto r = compare(set_of({b}, 3), set_of({c}, 6), o);
      const auto& m = r.benchmarks[0].metrics[0];
      ASSERT_TRUE(m.interval_bounded);
      EXPECT_LE(m.change_lower, m.change + 1e-12) << m.method;
      EXPECT_GE(m.change_upper, m.change - 1e-12) << m.method;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 600);
}

// The detectable change is what it claims: a gated time metric is a regression exactly when its estimate is
// at least the detectable change (and the adjusted p-value is significant), over random comparisons.
TEST(Compare, DetectableChangeMatchesTheVerdict) {
  stats::SplitMix64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const double shift = 0.2 * rng.uniform();
    const ResultSet base = set_of({bench("s/a", noisy(100, 0.03, 20, rng.next()))}, 1);
    const ResultSet cur = set_of({bench("s/a", noisy(100 * (1 + shift), 0.03, 20, rng.next()))}, 1);
    const auto r = compare(base, cur, CompareOptions{});
    const auto& m = r.benchmarks[0].metrics[0];
    ASSERT_TRUE(std::isfinite(m.detectable_change));
    EXPECT_GE(m.detectable_change, m.threshold);
    if (m.verdict == Verdict::regression) { EXPECT_GE(m.change, m.detectable_change - 1e-12); }
    if (m.change > m.detectable_change + 1e-9 && m.p_adjusted <= 0.05) { EXPECT_EQ(m.verdict, Verdict::regression); }
  }
}

TEST(LearnedNoiseSnapshot, RoundTrip) {
  LearnedNoiseTable t;
  t.machine_class = "cpu-epyc-avx512-2c.amd-family25-model17";
  t.source = "history h.db";
  t.learned_at = "2026-11-25T12:00:00Z";
  t.window = 30;
  t.min_sessions = 5;
  t.history_sessions = 14;
  t.bands[{"synthetic/walk/l1", "time"}] = {0.0123, 14, 0.008, 14};
  t.bands[{"synthetic/walk/l1", "phase.A"}] = {0.02, 3, std::nullopt, 0};
  const std::string text = noise_snapshot_json(t);
  // One band per line, so that a review diff shows which bands moved.
  EXPECT_NE(text.find("\n  {\"benchmark\":\"synthetic/walk/l1\",\"metric\":\"phase.A\""), std::string::npos) << text;
  const LearnedNoiseTable back = parse_noise_snapshot(text, "noise.json");
  EXPECT_EQ(back.machine_class, t.machine_class);
  EXPECT_EQ(back.history_sessions, 14);
  ASSERT_EQ(back.bands.size(), 2u);
  const LearnedBand& b = back.bands.at({"synthetic/walk/l1", "time"});
  EXPECT_DOUBLE_EQ(b.relative_sd, 0.0123);
  EXPECT_EQ(b.sessions, 14);
  ASSERT_TRUE(b.relative_sd_common_mode.has_value());
  EXPECT_DOUBLE_EQ(*b.relative_sd_common_mode, 0.008);
  EXPECT_NE(back.usable("synthetic/walk/l1", "time"), nullptr);
  EXPECT_EQ(back.usable("synthetic/walk/l1", "phase.A"), nullptr);  // 3 sessions < 5
  EXPECT_EQ(back.usable_count(), 1u);
  // An empty table is valid too.
  LearnedNoiseTable empty;
  empty.machine_class = "gpu-h100-x1";
  EXPECT_TRUE(parse_noise_snapshot(noise_snapshot_json(empty), "e.json").bands.empty());
}

TEST(LearnedNoiseSnapshot, MalformedFilesNameTheFileAndField) {
  const std::string head = R"({"perfgate_noise": 1, "machine_class": "c", )";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "malformed JSON"},
      {"[]", "top level must be an object"},
      {R"({"perfgate_noise": 1, "bands": []})", "field 'machine_class': missing"},
      {R"({"perfgate_noise": 2, "machine_class": "c", "bands": []})", "newer than this perfgate"},
      {head + R"("bands": [], "extra": 1})", "field 'extra': unknown key"},
      {head + R"("bands": {}})", "field 'bands': must be an array"},
      {head + R"("bands": [{"benchmark": "a", "metric": "time", "relative_sd": -0.1, "sessions": 3}]})",
       "field 'bands[0].relative_sd': must be in [0, 1)"},
      {head + R"("bands": [{"benchmark": "a", "metric": "time", "relative_sd": "x", "sessions": 3}]})",
       "field 'bands[0].relative_sd': must be a number"},
      {head + R"("bands": [{"benchmark": "a", "metric": "time", "relative_sd": 0.1, "sessions": 2.5}]})",
       "field 'bands[0].sessions': must be an integer"},
      {head + R"("bands": [{"benchmark": "a", "relative_sd": 0.1, "sessions": 3}]})",
       "field 'bands[0].metric': missing"},
      {head +
           R"("bands": [{"benchmark": "a", "metric": "time", "relative_sd": 0.1, "sessions": 3, "relative_sd_common_mode": 0.1}]})",
       "field 'bands[0].sessions_common_mode': missing"},
      {head + R"("bands": [{"benchmark": "a", "metric": "time", "relative_sd": 0.1, "sessions": 3},)"
              R"({"benchmark": "a", "metric": "time", "relative_sd": 0.2, "sessions": 3}]})",
       "listed twice"},
  };
  for (const auto& [text, expected] : cases) {
    try {
      parse_noise_snapshot(text, "baselines/c/noise.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("baselines/c/noise.json", 0), 0u) << what;
      EXPECT_NE(what.find(expected), std::string::npos) << what << "\n  expected: " << expected;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  EXPECT_THROW(load_noise_snapshot("/nonexistent/noise.json"), InputError);
}
