// The cycle-space pass of compare() (perfgate/cycle_space.hpp, docs/statistics.md "Cycle space").
#include "analysis/compare_cycle_space.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "perfgate/cycle_space.hpp"

namespace perfgate {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::size_t kNamedInNote = 5;  // benchmarks a note names before "and N more"

std::string pct(double v) { return fmt::format("{:+.1f}%", 100 * v); }

// A benchmark compared on both sides (not missing, new, failed or skipped).
bool was_compared(const BenchmarkComparison& b) { return !b.metrics.empty() && is_compared(b.verdict); }

struct ClockPick {
  std::size_t index = 0;  // in report.benchmarks
  double baseline_mhz = 0, current_mhz = 0;
  bool compute_bound = false;
};

// Every compared benchmark's time (counters dropped), in cycles for the picked ones.
ResultSet times_for_cycle_space(const ResultSet& side, const ComparisonReport& report,
                                const std::vector<ClockPick>& picks, bool baseline_side) {
  ResultSet out;
  out.contexts = side.contexts;
  std::vector<const ClockPick*> pick_of(report.benchmarks.size(), nullptr);
  for (const auto& p : picks) pick_of[p.index] = &p;
  for (std::size_t i = 0; i < report.benchmarks.size(); ++i) {
    const BenchmarkComparison& bc = report.benchmarks[i];
    if (!was_compared(bc)) continue;
    const BenchmarkResult* b = side.find(bc.name);
    if (b == nullptr) continue;
    BenchmarkResult copy;
    if (const ClockPick* p = pick_of[i]) {
      copy = timed_in_cycles(*b, baseline_side ? p->baseline_mhz : p->current_mhz);
    } else {
      copy = *b;
      copy.counters.clear();
    }
    out.index[copy.name] = out.benchmarks.size();
    out.benchmarks.push_back(std::move(copy));
  }
  return out;
}

std::string clocks_text(const ClockPick& p) {
  return fmt::format("SM clock {:.0f} -> {:.0f} MHz ({})", p.baseline_mhz, p.current_mhz,
                     pct(p.current_mhz / p.baseline_mhz - 1));
}

std::string estimate_text(const MetricComparison& m) {
  return fmt::format("{} {} [{}, {}] {}", m.name, pct(m.change), pct(m.change_lower), pct(m.change_upper),
                     to_string(m.verdict));
}

// Cycles decide: every other gated metric carries the clock difference, so it is reported, not gated.
void let_cycles_decide(BenchmarkComparison& bc, MetricComparison cycles, const ClockPick& p) {
  const MetricComparison* time = bc.metric("time");
  const std::string time_estimate = time != nullptr ? estimate_text(*time) : std::string("time n/a");
  for (auto& m : bc.metrics) {
    if (!m.gated) continue;
    m.gated = false;
    m.detectable_change = kNaN;
  }
  cycles.gated = true;
  bc.verdict = cycles.verdict;
  bc.driver = kCyclesMetric;
  bc.reason = fmt::format(
      "{} (latency x clock): {}; cycle space decided ({}, compute-bound: the clock difference is "
      "the machine's), in time space: {}",
      kCyclesMetric, cycles.reason, clocks_text(p), time_estimate);
  bc.metrics.push_back(std::move(cycles));
}

// Time decides: cycles are reported beside it, with why they did not decide.
void report_cycles(BenchmarkComparison& bc, MetricComparison cycles, const ClockPick& p, const std::string& why) {
  cycles.gated = false;
  cycles.detectable_change = kNaN;
  bc.reason += fmt::format("; {}, {}: time decided, in cycle space: {}", clocks_text(p), why, estimate_text(cycles));
  bc.metrics.push_back(std::move(cycles));
}

// Cycle space only clears a time-space alarm that the clock difference explains; it never raises one. Under a
// power cap the mean sampled SM clock of a repetition can differ by 20% or more at equal times (the H100
// expert_gemm baseline, docs/statistics.md "Cycle space"), so time x clock is noisier than time, and an alarm
// that only cycles saw would be the clock's noise.
bool cycles_explain_time_alarm(Verdict time_verdict, Verdict cycles_verdict) {
  return is_alarm(time_verdict) && cycles_verdict != time_verdict;
}

// The sampled clock can explain a time change only where it tracks the time: if multiplying by it makes the
// repetitions far noisier than the time alone, the samples do not describe the clock the kernel ran at. Under the
// power cap the H100 expert GEMM's sampled clock scatters while its time holds still (docs/statistics.md "Cycle
// space"), and there cycles would clear real slowdowns.
constexpr double kClockTrackingFactor = 2.0;
constexpr double kClockTrackingFloor = 0.005;  // time dispersions below 0.5% count as 0.5%

bool clock_tracks_time(const MetricComparison* time, const MetricComparison& cycles) {
  return time != nullptr && cycles.dispersion <= kClockTrackingFactor * std::max(time->dispersion, kClockTrackingFloor);
}

std::string untracked_clock_text(const MetricComparison* time, const MetricComparison& cycles) {
  return fmt::format(
      "compute-bound, but the sampled SM clock does not track the time (within-run dispersion: cycles {:.1f}%, "
      "time {:.1f}%)",
      100 * cycles.dispersion, time != nullptr ? 100 * time->dispersion : kNaN);
}

std::string listed(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < kNamedInNote; ++i) out += (i ? "; " : "") + items[i];
  if (items.size() > kNamedInNote) out += fmt::format("; and {} more", items.size() - kNamedInNote);
  return out;
}

// The compared benchmarks whose median SM clocks differ by more than the tolerance.
std::vector<ClockPick> clock_differences(const ComparisonReport& report, const ResultSet& baseline,
                                         const ResultSet& current, const CompareOptions& options) {
  const auto compute_bound = compute_bound_pattern(baseline, current);
  std::vector<ClockPick> picks;
  for (std::size_t i = 0; i < report.benchmarks.size(); ++i) {
    const BenchmarkComparison& bc = report.benchmarks[i];
    if (!was_compared(bc)) continue;
    const BenchmarkResult* b = baseline.find(bc.name);
    const BenchmarkResult* c = current.find(bc.name);
    if (b == nullptr || c == nullptr) continue;
    const auto base_mhz = median_clock_mhz(*b);
    const auto cur_mhz = median_clock_mhz(*c);
    if (!base_mhz || !cur_mhz || std::fabs(*cur_mhz / *base_mhz - 1) <= options.host.clock_tolerance) continue;
    picks.push_back({i, *base_mhz, *cur_mhz, names(compute_bound, bc.name)});
  }
  return picks;
}

// Re-judges one benchmark with its time in cycles (`in_cycles`, from the cycle-space comparison); returns
// the note's line for it.
std::string rejudge(BenchmarkComparison& bc, const MetricComparison& in_cycles, const ClockPick& p) {
  MetricComparison m = in_cycles;
  m.name = kCyclesMetric;
  m.method += ", in cycles (time x SM clock)";
  CycleSpaceJudgement judgement;
  judgement.baseline_clock_mhz = p.baseline_mhz;
  judgement.current_clock_mhz = p.current_mhz;
  judgement.compute_bound = p.compute_bound;
  judgement.time_verdict = bc.verdict;
  judgement.time_driver = bc.driver;
  const MetricComparison* time = bc.metric("time");
  std::string line = fmt::format("{}: {}, {}, {}", bc.name, clocks_text(p),
                                 time != nullptr ? estimate_text(*time) : "time n/a", estimate_text(m));
  const bool alarm_to_explain = p.compute_bound && cycles_explain_time_alarm(bc.verdict, m.verdict);
  const bool cycles_decide = alarm_to_explain && clock_tracks_time(time, m);
  if (cycles_decide) {
    let_cycles_decide(bc, std::move(m), p);
    line += std::string(" -> ") + to_string(bc.verdict);
  } else if (alarm_to_explain) {
    const std::string why = untracked_clock_text(time, m);
    report_cycles(bc, std::move(m), p, why);
  } else if (p.compute_bound) {
    report_cycles(bc, std::move(m), p, "compute-bound, but no time-space alarm for the clocks to explain");
  } else {
    report_cycles(bc, std::move(m), p, fmt::format("not compute-bound ({})", kComputeBoundKey));
  }
  judgement.cycles_decided = cycles_decide;
  bc.cycle_space = judgement;
  return line;
}

void add_notes(ComparisonReport& report, const std::vector<std::string>& decided,
               const std::vector<std::string>& reported, const CompareOptions& options) {
  const std::string tolerance = fmt::format("{:.3g}%", 100 * options.host.clock_tolerance);
  if (!decided.empty())
    report.notes.push_back(fmt::format(
        "{} compute-bound benchmark{} ran at SM clocks more than {} apart on the two sides: judged in cycle space "
        "(time x clock), which decided (the clock difference is the machine's, not the code's): {}",
        decided.size(), decided.size() == 1 ? "" : "s", tolerance, listed(decided)));
  if (!reported.empty())
    report.notes.push_back(fmt::format(
        "{} benchmark{} ran at SM clocks more than {} apart, and time decided (not named compute-bound ({}), or no "
        "time-space alarm for the clock difference to explain); cycles are reported: {}",
        reported.size(), reported.size() == 1 ? "" : "s", tolerance, kComputeBoundKey, listed(reported)));
}

}  // namespace

void apply_cycle_space(ComparisonReport& report, const ResultSet& baseline, const ResultSet& current,
                       const CompareOptions& options) {
  if (!options.host.cycle_space) return;
  const std::vector<ClockPick> picks = clock_differences(report, baseline, current, options);
  if (picks.empty()) return;
  CompareOptions inner = options;
  inner.host.cycle_space = false;
  inner.host.discard_throttled = false;  // both sides were filtered already, before the time-space analyses
  const ComparisonReport cycles = compare(times_for_cycle_space(baseline, report, picks, true),
                                          times_for_cycle_space(current, report, picks, false), inner);
  std::vector<std::string> decided, reported;
  for (const ClockPick& p : picks) {
    BenchmarkComparison& bc = report.benchmarks[p.index];
    const auto it = std::find_if(cycles.benchmarks.begin(), cycles.benchmarks.end(),
                                 [&](const BenchmarkComparison& x) { return x.name == bc.name; });
    const MetricComparison* in_cycles = it != cycles.benchmarks.end() ? it->metric("time") : nullptr;
    if (in_cycles == nullptr) continue;
    std::string line = rejudge(bc, *in_cycles, p);
    (bc.cycle_space->cycles_decided ? decided : reported).push_back(std::move(line));
  }
  add_notes(report, decided, reported, options);
}

}  // namespace perfgate
