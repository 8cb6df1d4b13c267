#include "perfgate/throttled.hpp"

#include <algorithm>
#include <cstddef>
#include <set>

#include <fmt/format.h>

#include "perfgate/text.hpp"  // first_and_more

namespace perfgate {
namespace {

enum class Cause { none, thermal, low_clock };

// A counter whose samples pair one-to-one with the time samples (the loader keeps them so; a counter that does
// not cannot say which repetition it belongs to, and is neither read nor cut).
bool aligned_with_time(const BenchmarkResult& b, const Metric& m) {
  return m.samples.size() == b.time.samples.size() && m.process_run == b.time.process_run;
}

const Metric* aligned_counter(const BenchmarkResult& b, const char* name) {
  const Metric* m = b.counter(name);
  return m != nullptr && aligned_with_time(b, *m) ? m : nullptr;
}

// Whether repetition i's clock is a mean over NVML samples taken during it. The fallback of add_clock_counters is
// one reading after the loop, which says nothing of the repetition: in the stored H200 baselines such readings
// of one benchmark range 1410-1965 MHz at times within 0.3% of each other.
bool sampled_clock(const Metric& clock, const Metric& samples, std::size_t i) {
  return samples.samples[i] > 0 && clock.samples[i] > 0;
}

// The reference clock: the highest sampled mean clock among the repetitions not thermally throttled (a discarded
// repetition is no reference, and so applying the rule twice discards nothing more).
double highest_clock(const Metric& clock, const Metric& samples, const std::vector<Cause>& causes) {
  double top = 0;
  for (std::size_t i = 0; i < causes.size(); ++i)
    if (causes[i] == Cause::none && sampled_clock(clock, samples, i)) top = std::max(top, clock.samples[i]);
  return top;
}

// Why each repetition of `b` counts as throttled (Cause::none: it does not).
std::vector<Cause> classify_repetitions(const BenchmarkResult& b, const ThrottleRule& rule) {
  std::vector<Cause> causes(b.time.samples.size(), Cause::none);
  if (const Metric* thermal = aligned_counter(b, kThermalShareCounter))
    for (std::size_t i = 0; i < causes.size(); ++i)
      if (thermal->samples[i] > 0) causes[i] = Cause::thermal;
  const Metric* clock = aligned_counter(b, kClockCounter);
  const Metric* samples = aligned_counter(b, kNvmlSamplesCounter);
  if (clock == nullptr || samples == nullptr) return causes;
  const double floor = rule.min_clock_share * highest_clock(*clock, *samples, causes);
  for (std::size_t i = 0; i < causes.size(); ++i)
    if (causes[i] == Cause::none && sampled_clock(*clock, *samples, i) && clock->samples[i] < floor)
      causes[i] = Cause::low_clock;
  return causes;
}

// Dropping the throttled repetitions must leave min_samples and at least one repetition of every process run.
bool enough_left(const BenchmarkResult& b, const std::vector<Cause>& causes, const ThrottleRule& rule) {
  const auto left = std::count(causes.begin(), causes.end(), Cause::none);
  if (left < rule.min_samples) return false;
  std::set<int> runs_before, runs_after;
  for (std::size_t i = 0; i < causes.size(); ++i) {
    const int run = i < b.time.process_run.size() ? b.time.process_run[i] : 0;
    runs_before.insert(run);
    if (causes[i] == Cause::none) runs_after.insert(run);
  }
  return runs_before == runs_after;
}

template <typename T>
void keep_unthrottled(std::vector<T>& values, const std::vector<Cause>& causes) {
  if (values.size() != causes.size()) return;
  std::size_t out = 0;
  for (std::size_t i = 0; i < values.size(); ++i)
    if (causes[i] == Cause::none) values[out++] = values[i];
  values.resize(out);
}

void keep_unthrottled(Metric& m, const std::vector<Cause>& causes) {
  keep_unthrottled(m.samples, causes);
  keep_unthrottled(m.process_run, causes);
}

// Cuts the repetitions from the time, the CPU time, the iteration counts and every aligned counter.
void drop_repetitions(BenchmarkResult& b, const std::vector<Cause>& causes) {
  for (Metric& c : b.counters)
    if (aligned_with_time(b, c)) keep_unthrottled(c, causes);
  if (b.cpu_time.samples.size() == causes.size() && b.cpu_time.process_run == b.time.process_run)
    keep_unthrottled(b.cpu_time, causes);
  keep_unthrottled(b.iterations, causes);
  keep_unthrottled(b.time, causes);  // last: the others compare their alignment with it
}

std::string listed(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 5;
  return first_and_more(names, kShown);
}

}  // namespace

std::optional<ResultSet> discard_throttled(const ResultSet& side, const ThrottleRule& rule, ThrottledSide& summary) {
  std::optional<ResultSet> out;
  for (std::size_t bi = 0; bi < side.benchmarks.size(); ++bi) {
    const BenchmarkResult& b = side.benchmarks[bi];
    if (b.error || b.skip_reason) continue;  // judged by their failure, not their samples
    const std::vector<Cause> causes = classify_repetitions(b, rule);
    const auto thermal = std::count(causes.begin(), causes.end(), Cause::thermal);
    const auto low_clock = std::count(causes.begin(), causes.end(), Cause::low_clock);
    if (thermal + low_clock == 0) continue;
    if (!enough_left(b, causes, rule)) {
      summary.kept_flagged.push_back(b.name);
      summary.kept_repetitions += static_cast<int>(thermal + low_clock);
      continue;
    }
    if (!out) out = side;  // copied once, on the first benchmark that changes
    drop_repetitions(out->benchmarks[bi], causes);
    summary.thermal_repetitions += static_cast<int>(thermal);
    summary.low_clock_repetitions += static_cast<int>(low_clock);
    summary.discarded_from.push_back(b.name);
  }
  return out;
}

std::vector<std::string> throttled_notes(const std::string& side_label, const ThrottledSide& summary,
                                         const ThrottleRule& rule) {
  std::vector<std::string> notes;
  const std::string clock_rule =
      fmt::format("SM clock below {:.0f}% of the benchmark's fastest repetition", 100 * rule.min_clock_share);
  if (!summary.discarded_from.empty()) {
    notes.push_back(fmt::format(
        "{}: {} repetition(s) of {} benchmark(s) discarded as taken while throttled ({} thermal / hardware "
        "slowdown, {} {}): {}",
        side_label, summary.discarded_repetitions(), summary.discarded_from.size(), summary.thermal_repetitions,
        summary.low_clock_repetitions, clock_rule, listed(summary.discarded_from)));
  }
  if (!summary.kept_flagged.empty()) {
    notes.push_back(fmt::format(
        "{}: {} throttled repetition(s) (thermal / hardware slowdown or {}) kept in {} benchmark(s): discarding "
        "them would leave fewer than {} repetitions or empty a process run; their results may be slowed by the "
        "machine: {}",
        side_label, summary.kept_repetitions, clock_rule, summary.kept_flagged.size(), rule.min_samples,
        listed(summary.kept_flagged)));
  }
  return notes;
}

UnthrottledSides::UnthrottledSides(const ResultSet& baseline, const ResultSet& current,
                                   const std::optional<ThrottleRule>& rule, ThrottledSide& baseline_summary,
                                   ThrottledSide& current_summary, std::vector<std::string>& notes,
                                   const std::string& baseline_label, const std::string& current_label)
    : loaded_baseline_(baseline), loaded_current_(current) {
  if (!rule) return;
  baseline_ = discard_throttled(baseline, *rule, baseline_summary);
  current_ = discard_throttled(current, *rule, current_summary);
  for (auto& note : throttled_notes(baseline_label, baseline_summary, *rule)) notes.push_back(note);
  for (auto& note : throttled_notes(current_label, current_summary, *rule)) notes.push_back(note);
}

}  // namespace perfgate
