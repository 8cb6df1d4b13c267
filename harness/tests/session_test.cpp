// Session logic of `perfgate run` / `perfgate ab` that needs no process: which benchmarks the confirm
// step re-measures, how per-suite reports combine, and the exit code over suites with and without
// baselines (the exit-code order of docs/architecture.md).
#include "perfgate/session.hpp"

#include <gtest/gtest.h>

using perfgate::BenchmarkComparison;
using perfgate::MetricComparison;
using perfgate::MetricKind;
using perfgate::SuiteReport;
using perfgate::Verdict;

namespace {

MetricComparison metric(const std::string& name, MetricKind kind, Verdict v, double change, double threshold = 0.05) {
  MetricComparison m;
  m.name = name;
  m.kind = kind;
  m.gated = kind != MetricKind::info;
  m.verdict = v;
  m.change = change;
  m.threshold = threshold;
  return m;
}

BenchmarkComparison bench(const std::string& name, Verdict v, std::vector<MetricComparison> metrics = {}) {
  BenchmarkComparison b;
  b.name = name;
  b.suite = name.substr(0, name.find('/'));
  b.verdict = v;
  b.metrics = std::move(metrics);
  if (b.metrics.empty() && is_compared(v)) {  // a compared benchmark is decided by its gated time
    MetricComparison time;
    time.name = "time";
    time.gated = true;
    time.verdict = v;
    b.metrics.push_back(time);
    b.driver = "time";
  }
  return b;
}

SuiteReport suite(const std::string& name, bool baseline_found, std::vector<BenchmarkComparison> benchmarks) {
  SuiteReport s;
  s.suite = name;
  s.baseline_found = baseline_found;
  s.report.benchmarks = std::move(benchmarks);
  s.report.counts = perfgate::count_verdicts(s.report.benchmarks);
  return s;
}

}  // namespace

TEST(LooksRegressed, RegressionAndNoisyBeyondThresholdOnly) {
  EXPECT_TRUE(perfgate::looks_regressed(bench("s/a", Verdict::regression)));
  EXPECT_FALSE(perfgate::looks_regressed(bench("s/a", Verdict::unchanged)));
  EXPECT_FALSE(perfgate::looks_regressed(bench("s/a", Verdict::improvement)));
  EXPECT_FALSE(perfgate::looks_regressed(bench("s/a", Verdict::failed)));
  // Noisy, latency +12% with a 5% threshold: worth re-measuring.
  EXPECT_TRUE(perfgate::looks_regressed(
      bench("s/a", Verdict::noisy, {metric("time", MetricKind::latency, Verdict::noisy, 0.12)})));
  // Noisy but only +3%: not.
  EXPECT_FALSE(perfgate::looks_regressed(
      bench("s/a", Verdict::noisy, {metric("time", MetricKind::latency, Verdict::noisy, 0.03)})));
  // A rate that dropped 20% is worse; one that rose 20% is not.
  EXPECT_TRUE(perfgate::looks_regressed(
      bench("s/a", Verdict::noisy, {metric("GB/s", MetricKind::rate, Verdict::noisy, -0.20)})));
  EXPECT_FALSE(perfgate::looks_regressed(
      bench("s/a", Verdict::noisy, {metric("GB/s", MetricKind::rate, Verdict::noisy, 0.20)})));
  // Informational counters never trigger it.
  EXPECT_FALSE(perfgate::looks_regressed(
      bench("s/a", Verdict::noisy, {metric("units", MetricKind::info, Verdict::noisy, 0.5)})));
}

TEST(SessionExitCode, DesignOrder) {
  using perfgate::session_exit_code;
  // No baseline anywhere: skipped, never a pass.
  EXPECT_EQ(session_exit_code({suite("a", false, {bench("a/x", Verdict::new_benchmark)})}), 77);
  // ... unless something failed.
  EXPECT_EQ(session_exit_code({suite("a", false, {bench("a/x", Verdict::failed)})}), 3);
  // One suite compared, one without baseline: the compared one decides.
  EXPECT_EQ(session_exit_code({suite("a", true, {bench("a/x", Verdict::unchanged)}),
                               suite("b", false, {bench("b/y", Verdict::new_benchmark)})}),
            0);
  EXPECT_EQ(session_exit_code({suite("a", true, {bench("a/x", Verdict::regression)}),
                               suite("b", false, {bench("b/y", Verdict::new_benchmark)})}),
            1);
  // Failed beats regression, wherever it is.
  EXPECT_EQ(session_exit_code({suite("a", true, {bench("a/x", Verdict::regression)}),
                               suite("b", false, {bench("b/y", Verdict::failed)})}),
            3);
  // Noisy alone is not a regression, and not a pass either: nothing was judged.
  EXPECT_EQ(session_exit_code({suite("a", true, {bench("a/x", Verdict::noisy)})}), 77);
  EXPECT_EQ(session_exit_code({suite("a", true, {bench("a/x", Verdict::noisy), bench("a/y", Verdict::unchanged)})}), 0);
}

TEST(CombineReports, ConcatenatesAndRecounts) {
  auto combined = perfgate::combine_reports(
      {suite("a", true, {bench("a/x", Verdict::regression), bench("a/y", Verdict::unchanged)}),
       suite("b", false, {bench("b/z", Verdict::new_benchmark)})});
  ASSERT_EQ(combined.benchmarks.size(), 3U);
  EXPECT_EQ(combined.counts.regression, 1);
  EXPECT_EQ(combined.counts.unchanged, 1);
  EXPECT_EQ(combined.counts.new_benchmark, 1);
  EXPECT_EQ(combined.exit_code, 1);
}

// The whole run's side table lists the result files of every compared suite, on both sides: a reference gate's
// suites each bring their reference runs and their current runs.
TEST(CombineReports, BothSidesKeepEverySuitesFiles) {
  SuiteReport a = suite("a", true, {bench("a/x", Verdict::unchanged)});
  SuiteReport b = suite("b", true, {bench("b/y", Verdict::unchanged)});
  a.report.baseline.files = {"ref.a.r1.json", "ref.a.r2.json"};
  a.report.current.files = {"cur.a.r1.json", "cur.a.r2.json"};
  b.report.baseline.files = {"ref.b.r1.json", "ref.a.r2.json"};  // one shared with a: listed once
  b.report.current.files = {"cur.b.r1.json"};
  a.report.baseline.machine_class = a.report.current.machine_class = "cpu-epyc-avx512-2c";
  b.report.baseline.machine_class = b.report.current.machine_class = "cpu-epyc-avx512-2c";
  const auto combined = perfgate::combine_reports({a, b});
  EXPECT_EQ(combined.baseline.files, (std::vector<std::string>{"ref.a.r1.json", "ref.a.r2.json", "ref.b.r1.json"}));
  EXPECT_EQ(combined.current.files, (std::vector<std::string>{"cur.a.r1.json", "cur.a.r2.json", "cur.b.r1.json"}));
}
