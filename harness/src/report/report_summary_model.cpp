// The summary's model: what regressed, what was not judged and why, counts per suite, and notes in plain
// words that name their benchmarks. Built once from a ComparisonReport; the Markdown summary, the top of the
// full report and the terminal output all render it, so the three never disagree.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "perfgate/report.hpp"
#include "report/report_internal.hpp"

namespace perfgate::report_detail {
namespace {

// Reasons that differ only in numbers ("22.5 GiB available" vs "22.6") are one reason.
std::string numbers_blanked(const std::string& reason) {
  std::string key;
  for (char c : reason) {
    const bool digit = (c >= '0' && c <= '9') || c == '.';
    if (!digit) key += c;
    else if (key.empty() || key.back() != '#') key += '#';
  }
  return key;
}

// Adds `b` to the line of its reason (in order of first appearance), creating the line when new.
void add_to_group(std::vector<NotJudgedLine>& lines, std::map<std::string, std::size_t>& index, const std::string& what,
                  const std::string& reason, const BenchmarkComparison* b) {
  const std::string key = what + '\0' + numbers_blanked(reason);
  auto [it, fresh] = index.emplace(key, lines.size());
  if (fresh) lines.push_back(NotJudgedLine{what, reason, {}, {}, ""});
  NotJudgedLine& line = lines[it->second];
  line.members.push_back(b);
  if (std::find(line.suites.begin(), line.suites.end(), b->suite) == line.suites.end()) line.suites.push_back(b->suite);
}

// A compared benchmark whose deciding metric is reported but not gated (host-dependent on a stored baseline, ...).
bool reported_not_gated(const BenchmarkComparison& b) {
  if (!is_compared(b.verdict)) return false;
  const MetricComparison* m = b.driving_metric();
  return m != nullptr && !m->gated &&
         std::none_of(b.metrics.begin(), b.metrics.end(), [](const MetricComparison& x) { return x.gated; });
}

std::vector<NotJudgedLine> not_judged_lines(const std::vector<const BenchmarkComparison*>& rows) {
  std::vector<NotJudgedLine> skips, others;
  std::map<std::string, std::size_t> skip_index, other_index;
  NotJudgedLine noisy{"too noisy to judge",
                      "the interval of the change reaches beyond the threshold on both sides",
                      {},
                      {},
                      "more process runs decide: perfgate ab, or more --rounds"};
  NotJudgedLine missing{"in the baseline but did not run", "", {}, {}, "renamed or removed? update the baseline"};
  NotJudgedLine fresh{"new, no baseline to compare with", "", {}, {}, "perfgate baseline update records one"};
  for (const auto* b : rows) {
    switch (b->verdict) {
      case Verdict::skipped: add_to_group(skips, skip_index, "skipped", b->message.value_or(b->reason), b); break;
      case Verdict::noisy: noisy.members.push_back(b); break;
      case Verdict::missing: missing.members.push_back(b); break;
      case Verdict::new_benchmark: fresh.members.push_back(b); break;
      default:
        if (reported_not_gated(*b)) add_to_group(others, other_index, "reported, not gated", b->reason, b);
    }
  }
  std::vector<NotJudgedLine> out;
  for (auto* line : {&noisy, &missing, &fresh})
    if (!line->members.empty()) out.push_back(std::move(*line));
  for (auto& line : others) out.push_back(std::move(line));
  for (auto& line : skips) out.push_back(std::move(line));
  return out;
}

std::vector<SuiteCount> suite_counts(const std::vector<const BenchmarkComparison*>& rows) {
  std::vector<SuiteCount> out;
  std::map<std::string, std::size_t> index;
  for (const auto* b : rows) {
    auto [it, fresh] = index.emplace(b->suite, out.size());
    if (fresh) out.push_back(SuiteCount{b->suite, {}});
    out[it->second].counts.add(b->verdict);
  }
  return out;
}

std::vector<std::string> names_where(const std::vector<const BenchmarkComparison*>& rows,
                                     bool (*pick)(const BenchmarkComparison&)) {
  std::vector<std::string> out;
  for (const auto* b : rows)
    if (pick(*b)) out.push_back(b->name);
  return out;
}

bool cpu_time_decided(const BenchmarkComparison& b) {
  const MetricComparison* m = b.metric("cpu_time");
  return m != nullptr && m->gated;
}
bool cycles_decided(const BenchmarkComparison& b) { return b.cycle_space && b.cycle_space->cycles_decided; }
bool clocks_differed_time_decided(const BenchmarkComparison& b) {
  return b.cycle_space && !b.cycle_space->cycles_decided && is_alarm(b.cycle_space->time_verdict);
}

void add_machine_notes(std::vector<PlainNote>& notes, const ComparisonReport& r) {
  if (r.machine_mismatch_allowed && r.baseline.machine_class != r.current.machine_class)
    notes.push_back({{},
                     fmt::format("the baseline ran on machine class {}, this run on {}: compared anyway "
                                 "(--allow-machine-mismatch), so a difference may be the machine's, not the code's",
                                 r.baseline.machine_class.empty() ? "unknown" : r.baseline.machine_class,
                                 r.current.machine_class.empty() ? "unknown" : r.current.machine_class),
                     "gate against a baseline of this machine class",
                     "machine class"});
  if (r.repetitions > 0 && r.repetitions < 9)
    notes.push_back({{},
                     fmt::format("only {} repetitions per benchmark: the rule needs {} per side and is weak below 9",
                                 r.repetitions, r.options.min_samples),
                     "run with --benchmark_repetitions=20",
                     "repetitions"});
}

void add_benchmark_notes(std::vector<PlainNote>& notes, const ComparisonReport& r,
                         const std::vector<const BenchmarkComparison*>& rows) {
  if (auto names = names_where(rows, cpu_time_decided); !names.empty())
    notes.push_back({std::move(names),
                     "other processes took the CPU on one side but not the other, so wall time cannot tell the "
                     "code's change from theirs; CPU time decided instead",
                     "re-run on a quiet machine to judge wall time", "contention"});
  if (auto names = names_where(rows, cycles_decided); !names.empty())
    notes.push_back({std::move(names),
                     "the GPU ran at different SM clocks on the two sides; these kernels' time follows the clock, "
                     "so they were judged in cycles (time x clock), which takes the clock difference out",
                     "", "cycle space"});
  if (auto names = names_where(rows, clocks_differed_time_decided); !names.empty())
    notes.push_back({std::move(names),
                     "the GPU ran at different SM clocks on the two sides and time decided (the benchmark is not "
                     "marked compute-bound, or the clocks do not explain the change); part of the change may be "
                     "the clock's",
                     "pin the clocks, or mark the benchmark perfgate.compute_bound if its time follows the clock",
                     "cycle space"});
  for (const auto* side : {&r.throttled_baseline, &r.throttled_current})
    if (!side->discarded_from.empty())
      notes.push_back({side->discarded_from,
                       fmt::format("repetitions measured while the GPU throttled were left out ({} side)",
                                   side == &r.throttled_baseline ? "baseline" : "current"),
                       "", "throttled"});
  for (const auto* side : {&r.throttled_baseline, &r.throttled_current})
    if (!side->kept_flagged.empty())
      notes.push_back({side->kept_flagged,
                       fmt::format("some repetitions ran while the GPU throttled and were kept ({} side: leaving "
                                   "them out would leave too few); these results may be slowed by the machine",
                                   side == &r.throttled_baseline ? "baseline" : "current"),
                       "re-run on a cool, unthrottled GPU", "throttled"});
}

void add_suite_notes(std::vector<PlainNote>& notes, const ComparisonReport& r) {
  for (const auto& [suite, d] : r.suite_drift)
    notes.push_back({{},
                     fmt::format("suite {} moved by {} as a whole between the two runs; every benchmark was judged "
                                 "relative to that, so a change of the whole suite cannot show here",
                                 suite, percent(d.shift)),
                     "confirm a suite-wide change with interleaved runs (perfgate ab)",
                     "common mode"});
  for (const auto& [suite, d] : r.learned_common_mode)
    notes.push_back({{},
                     fmt::format("suite {} moved by {} as a whole in this session; that is treated as the "
                                 "machine's drift and taken out before judging each benchmark",
                                 suite, percent(d.shift)),
                     "",
                     "common mode"});
}

}  // namespace

SummaryModel summarise(const ComparisonReport& r) {
  SummaryModel s;
  s.rows = r.sorted();
  for (const auto* b : s.rows)
    if (b->verdict == Verdict::failed || b->verdict == Verdict::regression) s.regressions.push_back(b);
  s.not_judged = not_judged_lines(s.rows);
  s.suites = suite_counts(s.rows);
  add_machine_notes(s.notes, r);
  add_benchmark_notes(s.notes, r, s.rows);
  add_suite_notes(s.notes, r);
  return s;
}

}  // namespace perfgate::report_detail
