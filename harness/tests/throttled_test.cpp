// Throttled repetitions (throttled.hpp): a GPU repetition taken while thermally throttled, or at a clock below 70%
// of its benchmark's fastest repetition, is discarded from every metric. Synthetic results with known counters.
#include "perfgate/throttled.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "perfgate/compare.hpp"
#include "perfgate/report.hpp"
#include "test_support.hpp"

using namespace perfgate;
using namespace perfgate::test_support;

namespace {

constexpr const char* kGemm = "expert_gemm/ffn/bucketed/shape:deepseek-v3/tokens:4096/routing:uniform/mode:cold";

std::vector<double> sequence(double first, int n) {
  std::vector<double> v;
  v.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

// Counters sorted by name, as the loader leaves them (BenchmarkResult::counter searches them).
BenchmarkResult sorted_counters(BenchmarkResult b) {
  std::sort(b.counters.begin(), b.counters.end(), [](const Metric& x, const Metric& y) { return x.name < y.name; });
  return b;
}

// The first note that contains `text` ("" when none does).
std::string note_with(const ComparisonReport& r, const std::string& text) {
  for (const auto& n : r.notes)
    if (n.find(text) != std::string::npos) return n;
  return "";
}

// A GPU benchmark of n repetitions: time i = 1000 + i ns (so a sample names its repetition), CPU time, iterations,
// a rate and a phase counter, and the NVML counters with the given clocks and thermal shares (67 samples each).
BenchmarkResult gpu_bench(const std::vector<double>& clocks, const std::vector<double>& thermal) {
  const int n = static_cast<int>(clocks.size());
  BenchmarkResult b = bench(kGemm, sequence(1000, n));
  b.cpu_time = metric("cpu_time", MetricKind::info, sequence(2000, n));
  for (int i = 0; i < n; ++i) b.iterations.push_back(100 + i);
  b.counters.push_back(metric("bytes_per_second", MetricKind::rate, sequence(3000, n)));
  b.counters.push_back(metric("phase.gemm", MetricKind::phase, sequence(4000, n)));
  b.counters.push_back(metric(kClockCounter, MetricKind::info, clocks));
  b.counters.push_back(metric(kThermalShareCounter, MetricKind::info, thermal));
  b.counters.push_back(metric(kNvmlSamplesCounter, MetricKind::info, std::vector<double>(clocks.size(), 67)));
  return sorted_counters(std::move(b));
}

ResultSet side_of(BenchmarkResult b) { return marked_run({std::move(b)}); }

std::vector<double> without(std::vector<double> v, const std::vector<std::size_t>& drop_descending) {
  for (std::size_t i : drop_descending) v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
  return v;
}

const std::vector<double> kEightAtFullClock(8, 1980);
const std::vector<double> kNoThermal(8, 0);

}  // namespace

TEST(Throttled, ThermalRepetitionIsDroppedFromTimeAndEveryCounter) {
  std::vector<double> thermal = kNoThermal;
  thermal[3] = 0.25;  // a quarter of the NVML samples of repetition 3 carried a thermal reason
  ThrottledSide summary;
  const auto out = discard_throttled(side_of(gpu_bench(kEightAtFullClock, thermal)), ThrottleRule{}, summary);
  ASSERT_TRUE(out.has_value());
  const BenchmarkResult& b = out->benchmarks[0];
  EXPECT_EQ(b.time.samples, without(sequence(1000, 8), {3}));
  EXPECT_EQ(b.time.process_run.size(), 7u);
  EXPECT_EQ(b.cpu_time.samples, without(sequence(2000, 8), {3}));
  EXPECT_EQ(b.iterations, (std::vector<long long>{100, 101, 102, 104, 105, 106, 107}));
  EXPECT_EQ(b.counter("bytes_per_second")->samples, without(sequence(3000, 8), {3}));
  EXPECT_EQ(b.counter("phase.gemm")->samples, without(sequence(4000, 8), {3}));
  EXPECT_EQ(b.counter(kThermalShareCounter)->samples, std::vector<double>(7, 0));
  EXPECT_EQ(b.counter(kClockCounter)->samples.size(), 7u);
  EXPECT_EQ(summary.thermal_repetitions, 1);
  EXPECT_EQ(summary.low_clock_repetitions, 0);
  EXPECT_EQ(summary.discarded_from, std::vector<std::string>{kGemm});
  EXPECT_TRUE(summary.kept_flagged.empty());
}

TEST(Throttled, RepetitionBelowTheClockShareIsDropped) {
  // 70% of 1980 MHz is 1386 MHz: 1300 is below it, 1450 is not (nvbench's 75% would take it).
  std::vector<double> clocks = kEightAtFullClock;
  clocks[1] = 1300;
  clocks[6] = 1450;
  ThrottledSide summary;
  const auto out = discard_throttled(side_of(gpu_bench(clocks, kNoThermal)), ThrottleRule{}, summary);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->benchmarks[0].time.samples, without(sequence(1000, 8), {1}));
  EXPECT_EQ(out->benchmarks[0].counter(kClockCounter)->samples, without(clocks, {1}));
  EXPECT_EQ(summary.low_clock_repetitions, 1);
  EXPECT_EQ(summary.thermal_repetitions, 0);

  ThrottleRule stricter;
  stricter.min_clock_share = 0.9;  // 1782 MHz: both go
  ThrottledSide strict_summary;
  const auto strict = discard_throttled(side_of(gpu_bench(clocks, kNoThermal)), stricter, strict_summary);
  ASSERT_TRUE(strict.has_value());
  EXPECT_EQ(strict->benchmarks[0].time.samples, without(sequence(1000, 8), {6, 1}));
  EXPECT_EQ(strict_summary.low_clock_repetitions, 2);
}

TEST(Throttled, OneReadingAfterTheLoopIsNoClockOfTheRepetition) {
  // Without NVML samples the clock is one reading after the loop (H200 baselines: 1410-1965 MHz at equal times):
  // never judged, whether nvml_samples is 0 or absent.
  std::vector<double> clocks = kEightAtFullClock;
  clocks[2] = 1000;
  BenchmarkResult zero_samples = gpu_bench(clocks, kNoThermal);
  for (Metric& c : zero_samples.counters)
    if (c.name == kNvmlSamplesCounter) c.samples.assign(8, 0);
  ThrottledSide summary;
  EXPECT_FALSE(discard_throttled(side_of(zero_samples), ThrottleRule{}, summary).has_value());
  BenchmarkResult no_samples = gpu_bench(clocks, kNoThermal);
  std::erase_if(no_samples.counters, [](const Metric& m) { return m.name == kNvmlSamplesCounter; });
  EXPECT_FALSE(discard_throttled(side_of(no_samples), ThrottleRule{}, summary).has_value());
  EXPECT_TRUE(summary.empty());
}

TEST(Throttled, ClockReferenceIgnoresThermalRepetitionsSoTheRuleIsIdempotent) {
  // The only 2000 MHz repetition is thermally throttled: the reference is the fastest clean one (1610 MHz, floor
  // 1127 MHz), so 1300 MHz stays (against 2000 MHz it would go), and a second pass finds nothing.
  const std::vector<double> clocks{2000, 1600, 1550, 1300, 1580, 1600, 1590, 1610};
  std::vector<double> thermal = kNoThermal;
  thermal[0] = 1;
  ThrottledSide first;
  const auto once = discard_throttled(side_of(gpu_bench(clocks, thermal)), ThrottleRule{}, first);
  ASSERT_TRUE(once.has_value());
  EXPECT_EQ(first.thermal_repetitions, 1);
  EXPECT_EQ(first.low_clock_repetitions, 0);
  ThrottledSide second;
  EXPECT_FALSE(discard_throttled(*once, ThrottleRule{}, second).has_value());
  EXPECT_TRUE(second.empty());
}

TEST(Throttled, PowerCapAloneDiscardsNothing) {
  // The power cap holds every repetition at ~1500 MHz (power_capped_share 1, thermal 0): the steady state of a
  // compute-bound kernel, left to cycle space.
  BenchmarkResult b = gpu_bench({1510, 1495, 1520, 1505, 1500, 1515, 1490, 1500}, kNoThermal);
  b.counters.push_back(metric("power_capped_share", MetricKind::info, std::vector<double>(8, 1)));
  b.counters.push_back(metric("throttled_share", MetricKind::info, std::vector<double>(8, 1)));
  ThrottledSide summary;
  EXPECT_FALSE(discard_throttled(side_of(sorted_counters(b)), ThrottleRule{}, summary).has_value());
  EXPECT_TRUE(summary.empty());
}

TEST(Throttled, TooFewLeftKeepsEveryRepetitionAndFlagsTheBenchmark) {
  // 5 repetitions, 2 thermal: 3 would be left, below min_samples = 4.
  const std::vector<double> clocks(5, 1980);
  const std::vector<double> thermal{0, 0.5, 0, 1, 0};
  ThrottledSide summary;
  EXPECT_FALSE(discard_throttled(side_of(gpu_bench(clocks, thermal)), ThrottleRule{}, summary).has_value());
  EXPECT_EQ(summary.kept_flagged, std::vector<std::string>{kGemm});
  EXPECT_EQ(summary.kept_repetitions, 2);
  EXPECT_EQ(summary.discarded_repetitions(), 0);

  const ResultSet baseline = side_of(gpu_bench(clocks, std::vector<double>(5, 0)));
  CompareOptions o;
  o.noise.run_noise_df = 0;
  const ComparisonReport r = compare(baseline, side_of(gpu_bench(clocks, thermal)), o);
  EXPECT_EQ(r.benchmarks[0].metric("time")->n_current, 5u);
  const std::string note = note_with(r, "throttled");
  EXPECT_NE(note.find("current: 2 throttled repetition(s)"), std::string::npos) << note;
  EXPECT_NE(note.find("fewer than 4 repetitions"), std::string::npos) << note;
  EXPECT_EQ(note_with(r, "baseline:"), "");
  const auto json = nlohmann::json::parse(render_json(r, ReportOptions{}));
  EXPECT_EQ(json["throttled"]["current"]["kept_flagged"][0], kGemm);
  EXPECT_EQ(json["throttled"]["current"]["discarded_repetitions"], 0);
}

TEST(Throttled, NeverEmptiesAProcessRun) {
  // Two process runs of 4; every repetition of run 1 is thermal. 4 would be left, but run 1 would vanish (its
  // median and the pairing of rounds are per run): kept and flagged.
  BenchmarkResult b = gpu_bench(std::vector<double>(8, 1980), {0, 0, 0, 0, 1, 1, 1, 1});
  for (Metric* m : {&b.time, &b.cpu_time}) m->process_run = {0, 0, 0, 0, 1, 1, 1, 1};
  for (Metric& c : b.counters) c.process_run = b.time.process_run;
  ResultSet rs = side_of(b);
  rs.contexts.push_back(rs.contexts[0]);
  ThrottledSide summary;
  EXPECT_FALSE(discard_throttled(rs, ThrottleRule{}, summary).has_value());
  EXPECT_EQ(summary.kept_flagged, std::vector<std::string>{kGemm});
}

TEST(Throttled, ResultsWithoutTheCountersAreUntouched) {
  ResultSet rs = side_of(bench(kGemm, noisy(1e6, 0.01, 10, 7)));
  ThrottledSide summary;
  EXPECT_FALSE(discard_throttled(rs, ThrottleRule{}, summary).has_value());
  EXPECT_TRUE(summary.empty());
  EXPECT_TRUE(throttled_notes("current", summary, ThrottleRule{}).empty());

  const ComparisonReport r = compare(rs, side_of(bench(kGemm, noisy(1e6, 0.01, 10, 8))), CompareOptions{});
  EXPECT_TRUE(r.notes.empty());
  EXPECT_FALSE(nlohmann::json::parse(render_json(r, ReportOptions{})).contains("throttled"));
}

TEST(Throttled, CompareJudgesTheCleanRepetitionsOnly) {
  // Both sides 10 ms at 1980 MHz; 6 of the current side's 12 repetitions ran thermally throttled at 1400 MHz and
  // took 30% longer. Counted, they move the comparison; discarded, it is unchanged.
  std::vector<double> base_time = noisy(10e6, 0.002, 12, 1), cur_time = noisy(10e6, 0.002, 12, 2);
  std::vector<double> cur_clock(12, 1980), cur_thermal(12, 0);
  for (std::size_t i = 0; i < 12; i += 2) {
    cur_time[i] *= 1.3;
    cur_clock[i] = 1400;
    cur_thermal[i] = 1;
  }
  auto with_counters = [](const std::vector<double>& time, const std::vector<double>& clock,
                          const std::vector<double>& thermal) {
    BenchmarkResult b = bench(kGemm, time);
    b.counters.push_back(metric(kClockCounter, MetricKind::info, clock));
    b.counters.push_back(metric(kThermalShareCounter, MetricKind::info, thermal));
    return side_of(sorted_counters(std::move(b)));
  };
  const ResultSet baseline = with_counters(base_time, std::vector<double>(12, 1980), std::vector<double>(12, 0));
  const ResultSet current = with_counters(cur_time, cur_clock, cur_thermal);
  CompareOptions o;
  o.noise.run_noise_df = 0;

  const ComparisonReport kept = [&] {
    CompareOptions off = o;
    off.host.discard_throttled = false;
    return compare(baseline, current, off);
  }();
  EXPECT_NE(kept.benchmarks[0].verdict, Verdict::unchanged) << kept.benchmarks[0].reason;
  EXPECT_EQ(note_with(kept, "throttled"), "");

  const ComparisonReport r = compare(baseline, current, o);
  EXPECT_EQ(r.benchmarks[0].verdict, Verdict::unchanged) << r.benchmarks[0].reason;
  EXPECT_EQ(r.benchmarks[0].metric("time")->n_current, 6u);
  EXPECT_EQ(r.benchmarks[0].metric("time")->n_baseline, 12u);
  EXPECT_EQ(note_with(r, "cycle space"), "");         // the clean repetitions ran at equal clocks
  EXPECT_NE(note_with(r, "only 6 repetitions"), "");  // the sample note counts what was judged
  EXPECT_EQ(note_with(r, "discarded")
                .rfind("current: 6 repetition(s) of 1 benchmark(s) discarded as taken while throttled (6 "
                       "thermal / hardware slowdown, 0 SM clock below 70% of the benchmark's fastest "
                       "repetition)",
                       0),
            0u)
      << note_with(r, "discarded");
  const auto json = nlohmann::json::parse(render_json(r, ReportOptions{}));
  EXPECT_EQ(json["throttled"]["current"]["discarded_repetitions"], 6);
  EXPECT_EQ(json["throttled"]["current"]["thermal"], 6);
  EXPECT_EQ(json["throttled"]["baseline"]["discarded_repetitions"], 0);
  EXPECT_DOUBLE_EQ(json["throttled"]["clock_share"].get<double>(), 0.70);
}
