// Cycle space (cycle_space.hpp): compute-bound benchmarks whose sides ran at different SM clocks are judged
// on time x clock. Synthetic results with known clocks and times.
#include "perfgate/cycle_space.hpp"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "perfgate/compare.hpp"
#include "perfgate/errors.hpp"
#include "perfgate/report.hpp"
#include "test_support.hpp"

using namespace perfgate;
using namespace perfgate::test_support;

namespace {

constexpr const char* kGemm = "expert_gemm/ffn/bucketed/shape:deepseek-v3/tokens:4096/routing:zipf/mode:cold";
constexpr const char* kCopy = "transfers/d2d/gpu:0/bytes:268435456";
constexpr int kReps = 20;

// A GPU-style benchmark: time in ns per repetition around `time_ns` (0.5% noise) and its SM clock.
BenchmarkResult gpu_bench(const std::string& name, double time_ns, double clock_mhz, std::uint64_t seed) {
  BenchmarkResult b = bench(name, noisy(time_ns, 0.005, kReps, seed));
  b.counters.push_back(metric(kClockCounter, MetricKind::info, noisy(clock_mhz, 0.001, kReps, seed + 100)));
  return b;
}

ResultSet side(std::vector<BenchmarkResult> benches, const std::string& compute_bound = "expert_gemm/ffn/.*") {
  return marked_run(std::move(benches), kComputeBoundKey, compute_bound);
}

// One GPU benchmark `name` compared within run: the baseline at `base_ns` per iteration and `base_mhz`, the
// current side at `cur_ns` and `cur_mhz`.
ComparisonReport compare_clocks(const std::string& name, double base_ns, double base_mhz, double cur_ns,
                                double cur_mhz) {
  return compare(side({gpu_bench(name, base_ns, base_mhz, 1)}), side({gpu_bench(name, cur_ns, cur_mhz, 2)}),
                 within_run_options());
}

const BenchmarkComparison& only(const ComparisonReport& r) {
  EXPECT_EQ(r.benchmarks.size(), 1u);
  return r.benchmarks.front();
}

// `b` was rejudged in cycle space, and time decided its verdict.
void expect_time_decided(const BenchmarkComparison& b, Verdict verdict) {
  ASSERT_TRUE(b.cycle_space.has_value());
  EXPECT_EQ(b.verdict, verdict) << b.reason;
  EXPECT_EQ(b.driver, "time");
  EXPECT_FALSE(b.cycle_space->cycles_decided);
}

}  // namespace

TEST(CycleSpace, EqualClocksLeaveTheVerdictToTime) {
  // +10% in time at the same clock is +10% in cycles: a regression, judged in time space alone.
  const auto r = compare_clocks(kGemm, 10e6, 1980, 11e6, 1980);
  const auto& b = only(r);
  EXPECT_EQ(b.verdict, Verdict::regression) << b.reason;
  EXPECT_EQ(b.driver, "time");
  EXPECT_FALSE(b.cycle_space.has_value());
  EXPECT_EQ(b.metric("cycles"), nullptr);
  EXPECT_EQ(r.exit_code, 1);
}

TEST(CycleSpace, EqualClocksAndNoChangeStayUnchanged) {
  const auto r = compare_clocks(kGemm, 10e6, 1980, 10e6, 1980);
  EXPECT_EQ(only(r).verdict, Verdict::unchanged) << only(r).reason;
  EXPECT_FALSE(only(r).cycle_space.has_value());
  EXPECT_TRUE(r.notes.empty());
}

TEST(CycleSpace, TimeThatFollowsTheClockIsUnchangedInCycleSpace) {
  // The current side's clock is 10% lower (1980 -> 1800 MHz) and the time 10% higher: same cycles.
  const auto r = compare_clocks(kGemm, 10e6, 1980, 11e6, 1800);
  const auto& b = only(r);
  ASSERT_TRUE(b.cycle_space.has_value());
  EXPECT_TRUE(b.cycle_space->compute_bound);
  EXPECT_NEAR(b.cycle_space->baseline_clock_mhz, 1980, 5);
  EXPECT_NEAR(b.cycle_space->current_clock_mhz, 1800, 5);
  EXPECT_EQ(b.cycle_space->time_verdict, Verdict::regression);  // what time space alone said
  EXPECT_EQ(b.cycle_space->time_driver, "time");
  EXPECT_EQ(b.verdict, Verdict::unchanged) << b.reason;
  EXPECT_EQ(b.driver, "cycles");
  const MetricComparison* cycles = b.metric("cycles");
  const MetricComparison* time = b.metric("time");
  ASSERT_NE(cycles, nullptr);
  ASSERT_NE(time, nullptr);
  EXPECT_TRUE(cycles->gated);
  EXPECT_FALSE(time->gated);  // it carries the clock difference
  EXPECT_NEAR(time->change, 0.10, 0.01);
  EXPECT_NEAR(cycles->change, 0.0, 0.01);
  EXPECT_NEAR(cycles->baseline_median, 10e6 * 1980 / 1000, 10e6 * 1980 / 1000 * 0.01);  // ns x MHz / 1000
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.counts.unchanged, 1);
  EXPECT_EQ(r.counts.regression, 0);
  EXPECT_NE(b.reason.find("cycle space decided"), std::string::npos) << b.reason;

  // Every report shows both estimates and says which decided.
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("which decided"), std::string::npos) << r.notes[0];
  const std::string time_estimate = fmt::format("time {:+.1f}% [", 100 * time->change);
  const std::string cycles_estimate = fmt::format("cycles {:+.1f}% [", 100 * cycles->change);
  EXPECT_NE(r.notes[0].find(time_estimate + fmt::format("{:+.1f}%", 100 * time->change_lower)), std::string::npos)
      << r.notes[0];
  EXPECT_NE(r.notes[0].find("] regression, " + cycles_estimate), std::string::npos) << r.notes[0];
  EXPECT_NE(r.notes[0].find("] unchanged -> unchanged"), std::string::npos) << r.notes[0];
  EXPECT_NE(b.reason.find(time_estimate), std::string::npos) << b.reason;
  ReportOptions verbose;
  verbose.verbose = true;  // the analysis's own notes are in the terminal's full form
  const std::string terminal = render_terminal(r, false, verbose);
  EXPECT_NE(terminal.find("cycles"), std::string::npos) << terminal;
  EXPECT_NE(terminal.find("which decided"), std::string::npos) << terminal;
  const std::string md = render_markdown(r);
  EXPECT_NE(md.find("which decided"), std::string::npos) << md;
  const auto json = nlohmann::json::parse(render_json(r));
  const auto& jb = json.at("benchmarks").at(0);
  EXPECT_EQ(jb.at("driver"), "cycles");
  EXPECT_EQ(jb.at("cycle_space").at("decided_by"), "cycles");
  EXPECT_EQ(jb.at("cycle_space").at("time_verdict"), "regression");
  EXPECT_EQ(jb.at("cycle_space").at("time").at("verdict"), "regression");
  EXPECT_EQ(jb.at("cycle_space").at("cycles").at("verdict"), "unchanged");
  EXPECT_NEAR(jb.at("cycle_space").at("time").at("change").get<double>(), 0.10, 0.01);
}

TEST(CycleSpace, WhenCyclesDecideTheClockBoundRatesAndPhasesAreNotGated) {
  // The FFN's TFLOP/s and its GEMM phase follow the clock like its time; in time space the rate alone is a
  // regression, in cycle space nothing changed.
  const auto with_counters = [](double time_ns, double clock_mhz, std::uint64_t seed) {
    BenchmarkResult b = gpu_bench(kGemm, time_ns, clock_mhz, seed);
    std::vector<double> tflops, phase;
    for (double t : b.time.samples) {
      tflops.push_back(2.886e12 / (t * 1e-9) / 1e12);
      phase.push_back(0.6 * t * 1e-6);  // ms per iteration
    }
    std::vector<Metric> sorted = {metric("TFLOP/s", MetricKind::rate, tflops),
                                  metric("phase.gate_up", MetricKind::phase, phase), b.counters.front()};
    b.counters = sorted;
    return b;
  };
  const auto r =
      compare(side({with_counters(10e6, 1980, 1)}), side({with_counters(11e6, 1800, 2)}), within_run_options());
  const auto& b = only(r);
  ASSERT_TRUE(b.cycle_space.has_value());
  EXPECT_EQ(b.cycle_space->time_verdict, Verdict::regression);
  EXPECT_EQ(b.verdict, Verdict::unchanged) << b.reason;
  for (const auto& m : b.metrics) EXPECT_EQ(m.gated, m.name == "cycles") << m.name;
  EXPECT_EQ(b.metric("TFLOP/s")->verdict, Verdict::regression);  // its time-space verdict, reported
  EXPECT_EQ(r.exit_code, 0);
  // The Markdown breakdown gives the time row its time-space verdict and interval, and the cycles row decides.
  const std::string md = render_markdown(r);
  EXPECT_NE(md.find("| not gated: regression in time space [+"), std::string::npos) << md;
  EXPECT_NE(md.find("| cycles | "), std::string::npos) << md;
}

TEST(CycleSpace, ARealChangeInCyclesIsARegressionAtAnyClock) {
  // Clock 10% lower and time 21% higher: +10% in cycles. Both spaces see the regression, so time decides and
  // cycles are reported beside it.
  const auto r = compare_clocks(kGemm, 10e6, 1980, 12.1e6, 1800);
  const auto& b = only(r);
  expect_time_decided(b, Verdict::regression);
  EXPECT_NEAR(b.metric("cycles")->change, 0.10, 0.01);
  EXPECT_EQ(r.exit_code, 1);
}

TEST(CycleSpace, AnAlarmOnlyCyclesSeeIsNeverRaised) {
  // Same time, clock 10% higher on the current side: +10% in cycles. Under a power cap the sampled clock moves
  // without the time, so cycles alone must not raise an alarm: time decides, unchanged.
  const auto r = compare_clocks(kGemm, 10e6, 1800, 10e6, 1980);
  const auto& b = only(r);
  expect_time_decided(b, Verdict::unchanged);
  EXPECT_EQ(b.metric("cycles")->verdict, Verdict::regression);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(b.reason.find("no time-space alarm for the clocks to explain"), std::string::npos) << b.reason;
}

TEST(CycleSpace, AClockThatDoesNotTrackTheTimeCannotClearAnAlarm) {
  // As on the H100s under the power cap: the time is steady (0.5% noise) and 10% slower, while the sampled clock
  // of single repetitions scatters by 15% around a median 10% lower. Cycles would call it unchanged, but they are
  // far noisier than the time, so the samples do not explain it: time decides, a regression.
  const auto scattered = [](double time_ns, double clock_mhz, std::uint64_t seed) {
    BenchmarkResult b = bench(kGemm, noisy(time_ns, 0.005, kReps, seed));
    b.counters.push_back(metric(kClockCounter, MetricKind::info, noisy(clock_mhz, 0.15, kReps, seed + 100)));
    return b;
  };
  const auto r = compare(side({scattered(10e6, 1980, 1)}), side({scattered(11e6, 1800, 2)}), within_run_options());
  const auto& b = only(r);
  expect_time_decided(b, Verdict::regression);
  ASSERT_NE(b.metric("cycles"), nullptr);
  EXPECT_GT(b.metric("cycles")->dispersion, 2 * b.metric("time")->dispersion);
  EXPECT_NE(b.reason.find("does not track the time"), std::string::npos) << b.reason;
  EXPECT_EQ(r.exit_code, 1);
  // The same clock scatter with a steady clock instead: cycles track the time and clear the alarm.
  const auto steady = compare_clocks(kGemm, 10e6, 1980, 11e6, 1800);
  EXPECT_EQ(only(steady).driver, "cycles") << only(steady).reason;
  EXPECT_EQ(steady.exit_code, 0);
}

TEST(CycleSpace, NotComputeBoundTimeDecides) {
  // A copy whose time rose 10% while the SM clock fell 10%: time decides (copies do not follow the SM
  // clock), cycles are reported beside it.
  const auto r = compare_clocks(kCopy, 10e6, 1980, 11e6, 1800);
  const auto& b = only(r);
  ASSERT_TRUE(b.cycle_space.has_value());
  EXPECT_FALSE(b.cycle_space->compute_bound);
  EXPECT_EQ(b.verdict, Verdict::regression) << b.reason;
  EXPECT_EQ(b.driver, "time");
  ASSERT_NE(b.metric("cycles"), nullptr);
  EXPECT_FALSE(b.metric("cycles")->gated);
  EXPECT_TRUE(b.metric("time")->gated);
  EXPECT_NE(b.reason.find("time decided"), std::string::npos) << b.reason;
  EXPECT_EQ(r.exit_code, 1);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("not named compute-bound"), std::string::npos) << r.notes[0];
  const auto json = nlohmann::json::parse(render_json(r));
  EXPECT_EQ(json.at("benchmarks").at(0).at("cycle_space").at("decided_by"), "time");
}

TEST(CycleSpace, NoComputeBoundKeyMeansTimeDecides) {
  const auto r = compare(side({gpu_bench(kGemm, 10e6, 1980, 1)}, ""), side({gpu_bench(kGemm, 11e6, 1800, 2)}, ""),
                         within_run_options());
  EXPECT_EQ(only(r).verdict, Verdict::regression);
  ASSERT_TRUE(only(r).cycle_space.has_value());
  EXPECT_FALSE(only(r).cycle_space->compute_bound);
}

TEST(CycleSpace, ClocksWithinToleranceOrMissingChangeNothing) {
  // 0.5% apart (tolerance 1%): time alone, no cycles metric.
  auto r = compare_clocks(kGemm, 10e6, 1980, 11e6, 1970);
  EXPECT_EQ(only(r).verdict, Verdict::regression);
  EXPECT_FALSE(only(r).cycle_space.has_value());
  // No clock counter on the baseline side.
  r = compare(side({bench(kGemm, noisy(10e6, 0.005, kReps, 1))}), side({gpu_bench(kGemm, 11e6, 1800, 2)}),
              within_run_options());
  EXPECT_EQ(only(r).verdict, Verdict::regression);
  EXPECT_FALSE(only(r).cycle_space.has_value());
  // Switched off.
  CompareOptions off = within_run_options();
  off.host.cycle_space = false;
  r = compare(side({gpu_bench(kGemm, 10e6, 1980, 1)}), side({gpu_bench(kGemm, 11e6, 1800, 2)}), off);
  EXPECT_EQ(only(r).verdict, Verdict::regression);
  EXPECT_FALSE(only(r).cycle_space.has_value());
}

TEST(CycleSpace, OnlyTheBenchmarksWhoseClocksDifferAreRejudged) {
  // Two benchmarks: one at equal clocks (+10%: a regression), one that followed its clock (unchanged).
  const auto r = compare(side({gpu_bench(kGemm, 10e6, 1980, 1), gpu_bench("expert_gemm/ffn/other", 5e6, 1980, 3)}),
                         side({gpu_bench(kGemm, 11e6, 1800, 2), gpu_bench("expert_gemm/ffn/other", 5.5e6, 1980, 4)}),
                         within_run_options());
  ASSERT_EQ(r.benchmarks.size(), 2u);
  EXPECT_EQ(r.benchmarks[0].verdict, Verdict::unchanged) << r.benchmarks[0].reason;
  EXPECT_EQ(r.benchmarks[1].verdict, Verdict::regression) << r.benchmarks[1].reason;
  EXPECT_FALSE(r.benchmarks[1].cycle_space.has_value());
  EXPECT_EQ(r.counts.regression, 1);
  EXPECT_EQ(r.counts.unchanged, 1);
}

TEST(CycleSpace, CyclesArePerRepetitionTimeTimesClock) {
  BenchmarkResult b = bench(kGemm, {1000, 2000, 3000});
  b.counters.push_back(metric("TFLOP/s", MetricKind::rate, {1, 2, 3}));  // counters are sorted by name
  b.counters.push_back(metric(kClockCounter, MetricKind::info, {1000, 1500, 2000}));
  ASSERT_TRUE(median_clock_mhz(b).has_value());
  EXPECT_DOUBLE_EQ(*median_clock_mhz(b), 1500);
  const BenchmarkResult c = timed_in_cycles(b, 1500);
  EXPECT_EQ(c.time.samples, (std::vector<double>{1000, 3000, 6000}));  // ns x MHz / 1000
  EXPECT_TRUE(c.counters.empty());
  // Clock samples that do not pair with the time's: the median clock for every repetition.
  BenchmarkResult d = bench(kGemm, {1000, 2000, 3000});
  d.counters.push_back(metric(kClockCounter, MetricKind::info, {1000, 3000}));
  EXPECT_EQ(timed_in_cycles(d, 2000).time.samples, (std::vector<double>{2000, 4000, 6000}));
  // No usable clock.
  BenchmarkResult e = bench(kGemm, {1000});
  e.counters.push_back(metric(kClockCounter, MetricKind::info, {0.0}));
  EXPECT_FALSE(median_clock_mhz(e).has_value());
  EXPECT_FALSE(median_clock_mhz(bench(kGemm, {1000})).has_value());
}

TEST(CycleSpace, BadComputeBoundRegexIsAnInputError) {
  EXPECT_THROW(compare(side({gpu_bench(kGemm, 10e6, 1980, 1)}, "expert_gemm/("),
                       side({gpu_bench(kGemm, 11e6, 1800, 2)}, "expert_gemm/("), within_run_options()),
               InputError);
}
