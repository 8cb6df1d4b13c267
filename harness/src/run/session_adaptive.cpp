// Adaptive extra rounds (session.hpp, AdaptiveSummary): the looks of an interleaved session at
// alpha / looks, until every benchmark is decided or the budget is spent.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "perfgate/loader.hpp"
#include "perfgate/report.hpp"
#include "perfgate/session.hpp"
#include "run/session_internal.hpp"

namespace perfgate {
namespace session_detail {

void replace_entry(ComparisonReport& report, const BenchmarkComparison& entry) {
  for (auto& b : report.benchmarks) {
    if (b.name == entry.name) {
      b = entry;
      return;
    }
  }
  report.benchmarks.push_back(entry);
}

const BenchmarkComparison* find_entry(const ComparisonReport& report, const std::string& name) {
  for (const auto& b : report.benchmarks)
    if (b.name == name) return &b;
  return nullptr;
}

std::vector<BenchBinary> binaries_for(const std::vector<BenchBinary>& all, const std::set<std::string>& suites) {
  std::vector<BenchBinary> out;
  for (const auto& b : all)
    if (suites.count(b.suite) != 0) out.push_back(b);
  return out;
}

}  // namespace session_detail

using namespace session_detail;

namespace {

// The undecided benchmarks of a look: suite -> normalised names, and their raw names for the filter.
struct Pending {
  std::map<std::string, std::vector<std::string>> by_suite;
  std::vector<std::string> raw_names;
};

Pending pending_undecided(const AdaptiveRun& run) {
  Pending p;
  for (const SuiteReport* sr : run.reports) {
    if (run.suite_options.count(sr->suite) == 0) continue;
    if (!run.data0.suites.count(sr->suite) || !run.data1.suites.count(sr->suite)) continue;
    for (const auto& b : sr->report.benchmarks) {
      if (run.eligible != nullptr && run.eligible->count(b.name) == 0) continue;
      if (!undecided(b)) continue;
      p.by_suite[sr->suite].push_back(b.name);
      p.raw_names.push_back(b.raw_name.empty() ? b.name : b.raw_name);
    }
  }
  return p;
}

// The extra rounds of the next look: `n` rounds of the pending benchmarks, both sides interleaved.
MeasureResult measure_look(const AdaptiveRun& run, const Pending& p, int n, int look) {
  MeasureOptions mo = run.base;
  mo.rounds = n;
  mo.filter = exact_filter(p.raw_names);
  mo.phase_label = run.label + " extra";
  mo.work_dir = run.base.work_dir / fmt::format("extra-{}", look);
  mo.seed = run.base.seed + 7919u * static_cast<std::uint64_t>(look);
  std::set<std::string> suites;
  for (const auto& [suite, names] : p.by_suite) suites.insert(suite);
  std::vector<Side> ms;
  for (const auto& side : run.sides) ms.push_back(Side{side.label, binaries_for(side.benches, suites), side.env});
  return measure(ms, mo);
}

// Adds a look's runs of a suite to data0 / data1; false when a side produced nothing usable.
bool merge_look(AdaptiveRun& run, MeasureResult& m, const std::string& suite) {
  bool merged = true;
  for (std::size_t i = 0; i < 2; ++i) {
    SideResult& into = i == 0 ? run.data0 : run.data1;
    auto it = m.sides.at(i).suites.find(suite);
    if (it == m.sides.at(i).suites.end() || it->second.contexts.empty()) {
      merged = false;
      continue;
    }
    try {
      merge_results(into.suites.at(suite), std::move(it->second));
    } catch (const std::exception&) { merged = false; }
  }
  return merged;
}

// The suite's sides as the re-judge saw them: every process run and file so far, the extra rounds' counted apart
// (they ran only the re-measured benchmarks), so that the report names every file behind its verdicts; and the
// next step from all those runs, not from the first look's.
void take_rejudged_sides(ComparisonReport& report, const ComparisonReport& again) {
  const auto take = [](SideInfo& side, const SideInfo& judged) {
    const int initial = side.process_runs - side.extra_process_runs;
    side.process_runs = judged.process_runs;
    side.extra_process_runs = judged.process_runs - initial;
    side.files = judged.files;
  };
  take(report.baseline, again.baseline);
  take(report.current, again.current);
  report.next_step = again.next_step;
  report.next_step_runs = again.next_step_runs;
  report.next_step_repetitions = again.next_step_repetitions;
}

// Re-judges one suite on all its rounds so far; the re-measured benchmarks get the new verdicts.
void rejudge_suite(AdaptiveRun& run, SuiteReport& sr, const std::vector<std::string>& names,
                   const AdaptiveSummary& summary, int rounds_so_far) {
  const ComparisonReport again =
      compare(run.data0.suites.at(sr.suite), run.data1.suites.at(sr.suite), run.suite_options.at(sr.suite));
  for (const auto& name : names) {
    const BenchmarkComparison* re = find_entry(again, name);
    if (re == nullptr) continue;
    BenchmarkComparison entry = *re;
    entry.reason = fmt::format("look {}/{} ({} extra round(s)): {}", summary.looks_used, summary.looks_planned,
                               rounds_so_far, re->reason);
    replace_entry(sr.report, entry);
  }
  take_rejudged_sides(sr.report, again);
  recount(sr.report);
}

void tell_note(const MeasureOptions& o, const std::string& line) {
  if (o.observer) o.observer->on_note(line);
}

// Is the next look (n rounds) past the extra-time budget? Says so to the observer when it is.
bool over_budget(const AdaptiveRun& run, AdaptiveSummary& summary, const Pending& p, int n, double spent,
                 double seconds_per_round) {
  if (summary.budget_seconds <= 0 || spent + n * seconds_per_round <= summary.budget_seconds) return false;
  summary.stopped_by_budget = true;
  tell_note(run.base,
            fmt::format("{}: {} benchmark(s) still undecided; the next look ({} round(s), ~{:.0f} s) would "
                        "pass the extra-time budget ({:.0f} s of {:.0f} s spent): stopping",
                        run.label, p.raw_names.size(), n, n * seconds_per_round, spent, summary.budget_seconds));
  return true;
}

// One look: measure, merge, re-judge. Returns the seconds per round it took.
double run_look(AdaptiveRun& run, const Pending& p, int n, int rounds_so_far, AdaptiveSummary& summary,
                std::vector<std::string>& notes) {
  const auto look_start = std::chrono::steady_clock::now();
  MeasureResult m = measure_look(run, p, n, summary.looks_used);
  const double seconds_per_round = seconds_since(look_start) / n;
  for (const auto& sres : m.sides) {
    summary.processes += sres.processes;
    summary.repetitions += sres.repetitions;
  }
  summary.extra_rounds += n;
  for (SuiteReport* sr : run.reports) {
    const auto pit = p.by_suite.find(sr->suite);
    if (pit == p.by_suite.end()) continue;
    if (merge_look(run, m, sr->suite)) {
      rejudge_suite(run, *sr, pit->second, summary, rounds_so_far);
    } else {
      sr->report.notes.push_back(
          fmt::format("extra rounds (look {}): a side produced no usable results; the "
                      "earlier verdicts stand",
                      summary.looks_used));
    }
  }
  for (const auto& sres : m.sides)
    for (const auto& f : sres.failures)
      notes.push_back(
          fmt::format("extra rounds: {} [{}] round {}: {}: {}", f.suite, f.side, f.round, f.what, f.message));
  return seconds_per_round;
}

int count_decided(const AdaptiveRun& run, const std::set<std::string>& extended) {
  int decided = 0;
  for (const SuiteReport* sr : run.reports)
    for (const auto& b : sr->report.benchmarks)
      if (extended.count(b.name) != 0 && (is_alarm(b.verdict) || (b.verdict == Verdict::unchanged && !undecided(b))))
        ++decided;
  return decided;
}

}  // namespace

namespace session_detail {

void extend_undecided(AdaptiveRun& run, double initial_seconds, AdaptiveSummary& summary,
                      std::vector<std::string>& notes) {
  summary.enabled = run.gate.max_extra_rounds > 0;
  if (!summary.enabled) return;
  const auto t0 = std::chrono::steady_clock::now();
  summary.budget_seconds = extra_time_budget(run.gate, initial_seconds);
  double seconds_per_round = initial_seconds / std::max(1, run.base.rounds);  // of every benchmark: an overestimate
  std::set<std::string> extended;
  int done = 0;
  while (done < run.gate.max_extra_rounds) {
    const Pending p = pending_undecided(run);
    if (p.by_suite.empty()) break;
    if (summary.looks_used - 1 >= static_cast<int>(summary.schedule.size())) break;
    const int n = summary.schedule[static_cast<std::size_t>(summary.looks_used - 1)];
    if (over_budget(run, summary, p, n, seconds_since(t0), seconds_per_round)) break;
    ++summary.looks_used;
    tell_note(run.base, fmt::format("{}: {} benchmark(s) undecided after look {}/{}: {} extra round(s) of them "
                                    "(alpha per look {:.3g})",
                                    run.label, p.raw_names.size(), summary.looks_used - 1, summary.looks_planned, n,
                                    summary.alpha_per_look));
    for (const auto& [suite, names] : p.by_suite) extended.insert(names.begin(), names.end());
    done += n;
    seconds_per_round = run_look(run, p, n, done, summary, notes);
  }
  summary.extended.assign(extended.begin(), extended.end());
  summary.decided = count_decided(run, extended);
  summary.seconds = seconds_since(t0);
}

// The plan of an adaptive session that starts with `initial_rounds` (the extra rounds of each later look);
// returns the planned looks, which every look's alpha is divided by (the first included).
int plan_adaptive(AdaptiveSummary& summary, int initial_rounds, const GateOptions& gate) {
  summary.schedule = look_schedule(initial_rounds, gate.max_extra_rounds, gate.extra_rounds_step);
  summary.looks_planned = 1 + static_cast<int>(summary.schedule.size());
  return summary.looks_planned;
}

}  // namespace session_detail

bool undecided(const BenchmarkComparison& b) {
  if (b.verdict == Verdict::noisy) return true;
  if (b.verdict != Verdict::unchanged) return false;
  for (const auto& m : b.metrics) {
    if (!m.gated || m.verdict != Verdict::unchanged || !m.interval_bounded) continue;
    const double worse_bound = higher_is_better(m.kind) ? -m.change_lower : m.change_upper;
    if (std::isfinite(worse_bound) && worse_bound > m.threshold) return true;
  }
  return false;
}

std::vector<int> look_schedule(int initial_rounds, int max_extra_rounds, int step) {
  std::vector<int> out;
  int total = std::max(0, initial_rounds), left = max_extra_rounds;
  while (left > 0) {
    const int n = std::min(left, step > 0 ? step : std::max(1, total));
    out.push_back(n);
    total += n;
    left -= n;
  }
  return out;
}

double extra_time_budget(const GateOptions& gate, double initial_seconds) {
  double budget = gate.max_extra_time_factor > 0 ? gate.max_extra_time_factor * initial_seconds : 0;
  if (gate.time_budget_s <= 0) return budget;
  // A run with a hard limit must end with its report, not be killed in the middle of a look.
  const double left = std::max(1e-3, gate.time_budget_s - seconds_since(gate.started));
  return budget > 0 ? std::min(budget, left) : left;
}

std::string adaptive_note(const AdaptiveSummary& a, const std::string& what) {
  if (!a.enabled) return fmt::format("{}: adaptive extra rounds off (--max-extra-rounds 0)", what);
  const std::string budget = fmt::format(
      "the extra-time budget ({:.0f} s: --max-extra-time-factor x the initial measurement, within what was "
      "left of --time-budget)",
      a.budget_seconds);
  if (a.extended.empty() && a.stopped_by_budget)
    return fmt::format(
        "{}: no extra rounds: the first look left benchmarks undecided, and the next look would have "
        "passed {}",
        what, budget);
  if (a.extended.empty())
    return fmt::format(
        "{}: every benchmark decided at the first look (alpha per look {:.3g}, {} planned looks): no "
        "extra rounds",
        what, a.alpha_per_look, a.looks_planned);
  return fmt::format(
             "{}: {} undecided benchmark(s) re-measured in {} extra round(s) ({} look(s) of {} planned, alpha "
             "per look {:.3g}, Bonferroni); {} decided; cost {} extra process run(s), {} extra repetitions, "
             "{:.1f} s",
             what, a.extended.size(), a.extra_rounds, a.looks_used, a.looks_planned, a.alpha_per_look, a.decided,
             a.processes, a.repetitions, a.seconds) +
         (a.stopped_by_budget ? "; stopped by " + budget : std::string());
}

int planned_looks(int initial_rounds, int max_extra_rounds, int step) {
  return 1 + static_cast<int>(look_schedule(initial_rounds, max_extra_rounds, step).size());
}

}  // namespace perfgate
