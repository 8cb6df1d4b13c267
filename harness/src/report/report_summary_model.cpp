// The summary's model: what regressed, what was not judged and why, counts per suite, and notes in plain
// words that name their benchmarks. Built once from a ComparisonReport; the Markdown summary, the top of the
// full report and the terminal output all render it, so the three never disagree.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "perfgate/model.hpp"  // threads_of_name
#include "perfgate/process.hpp"
#include "perfgate/report.hpp"
#include "report/report_internal.hpp"

namespace perfgate::report_detail {

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

namespace {

// Adds `b` to the line of its reason (in order of first appearance), creating the line when new.
void add_to_group(std::vector<NotJudgedLine>& lines, std::map<std::string, std::size_t>& index,
                  const NotJudgedLine& kind, const std::string& reason, const BenchmarkComparison* b) {
  const std::string key = kind.what + '\0' + numbers_blanked(reason);
  auto [it, fresh] = index.emplace(key, lines.size());
  if (fresh) lines.push_back(NotJudgedLine{kind.what, reason, {}, {}, kind.advice});
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

// What a "not judged" line says for each kind, and what to do about it.
const NotJudgedLine kNoisy{"too noisy to judge",
                           "the interval of the change reaches beyond the threshold on both sides",
                           {},
                           {},
                           "more process runs per side decide (--rounds, or more files to compare)"};
// Too noisy for another cause than the interval's width (NoisyCause), each with its remedy.
const NotJudgedLine kDispersed{
    "too noisy to judge",
    "the spread within a process run is above the --max-dispersion limit, so only a change beyond the threshold "
    "plus that spread is believed",
    {},
    {},
    "quiet the machine or pin the benchmark to CPUs of its own (--pin-cpus): more runs do not narrow a spread "
    "within runs"};
const NotJudgedLine kContended{"too noisy to judge",
                               "the machine's load differed between the sides (real / CPU time moved), so the wall "
                               "time cannot decide and the CPU time did not",
                               {},
                               {},
                               "run the two sides on a quiet machine"};
const NotJudgedLine kMissing{"missing", "", {}, {}, "renamed or removed? update the baseline"};
const NotJudgedLine kNew{
    "new",
    "",
    {},
    {},
    "perfgate baseline update --suite SUITE --from RUN.json records a baseline (perfgate run: --update-baseline)"};
const NotJudgedLine kNotGated{"reported, not gated", "", {}, {}, ""};
const NotJudgedLine kSkipped{"skipped", "", {}, {}, ""};

// `word` as a shell reads it: bare when it holds no character the shell treats specially, else quoted.
std::string shell_word(const std::string& word) {
  const bool plain = std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.' || c == '/' || c == ',';
  });
  return plain ? word : shell_quote(word);
}

// The advice of a line of new or missing benchmarks of one suite, run as printed: the suite, and the runs that store
// it where the report knows them (`current_runs`: perfgate run's run file, compare's current files; new benchmarks
// get RUN.json where it does not). Several suites keep the kind's words.
void name_the_suite(NotJudgedLine& line, const std::map<std::string, std::string>& current_runs) {
  const bool is_new = line.what == kNew.what, is_missing = line.what == kMissing.what;
  if (!(is_new || is_missing) || line.advice.empty() || line.suites.size() != 1) return;
  const std::string& suite = line.suites.front();
  const auto runs = current_runs.find(suite);
  if (is_missing && runs == current_runs.end()) return;
  const std::string update = fmt::format("perfgate baseline update --suite {} --from {}", shell_word(suite),
                                         runs == current_runs.end() ? "RUN.json" : shell_word(runs->second));
  line.advice = is_new ? update + " records a baseline (perfgate run: --update-baseline)"
                       : "renamed or removed? " + update + " records the baseline again from this run";
}

// The kind of "not judged" line a benchmark belongs on, or nullptr when it was judged.
const NotJudgedLine* not_judged_kind(const BenchmarkComparison& b) {
  switch (b.verdict) {
    case Verdict::noisy: return &kNoisy;
    case Verdict::missing: return &kMissing;
    case Verdict::new_benchmark: return &kNew;
    case Verdict::skipped: return &kSkipped;
    default: return reported_not_gated(b) ? &kNotGated : nullptr;
  }
}

// The line of a spread within runs: where the processes already ran pinned, pinning is no remedy.
NotJudgedLine dispersed_line(const std::string& pinned_cpus) {
  NotJudgedLine line = kDispersed;
  if (!pinned_cpus.empty())
    line.advice = fmt::format(
        "the bench processes already ran pinned (CPUs {}): quiet what else runs on those CPUs (or on the machine's "
        "host) or use a quieter machine; more runs do not narrow a spread within runs",
        pinned_cpus);
  return line;
}

// A too-noisy benchmark's line by the cause of its deciding metric (with the interval's advice where more process runs
// are the remedy), or by its own reason when no metric was noisy (a host-dependent alarm, an unconfirmed candidate).
NotJudgedLine noisy_line(const BenchmarkComparison& b, const NotJudgedLine& interval, const ComparisonReport& r) {
  const MetricComparison* m = b.driving_metric();
  NotJudgedLine line = interval;
  switch (m != nullptr && m->verdict == Verdict::noisy ? m->noisy_cause : NoisyCause::none) {
    case NoisyCause::interval: break;
    case NoisyCause::few_samples:  // more process runs add samples, whatever the files hold
      line.reason = fmt::format("fewer samples a side than the {} the rule needs", r.options.min_samples);
      break;
    case NoisyCause::dispersion: line = dispersed_line(r.current.pinned_cpus); break;
    case NoisyCause::contention: line = kContended; break;
    case NoisyCause::none:
      line.reason = b.reason;
      line.advice.clear();
      break;
  }
  return line;
}

// One line per kind and reason: too noisy first (by cause), then missing, new and not gated by their reasons, then
// the skips by theirs. Between two builds of one session (ab, the reference gate) a benchmark on one side only is a
// difference of the builds, with no baseline to update; the report's own advice for a too-noisy benchmark
// (ComparisonReport::noisy_advice) replaces the general one.
std::vector<NotJudgedLine> not_judged_lines(const std::vector<const BenchmarkComparison*>& rows,
                                            const ComparisonReport& r) {
  const bool two_builds = r.options.sides.builds;
  std::vector<NotJudgedLine> lines, skips;
  std::map<std::string, std::size_t> index, skip_index;
  for (const NotJudgedLine* kind : {&kNoisy, &kMissing, &kNew, &kNotGated}) {
    NotJudgedLine as_said = *kind;
    if (two_builds && (kind == &kMissing || kind == &kNew)) as_said.advice.clear();
    if (two_builds && kind == &kNoisy) as_said.advice = "more rounds decide (--rounds)";  // already interleaved
    if (kind == &kNoisy && !r.noisy_advice.empty()) as_said.advice = r.noisy_advice;
    for (const auto* b : rows) {
      if (not_judged_kind(*b) != kind) continue;
      if (kind != &kNoisy) {
        add_to_group(lines, index, as_said, b->reason, b);
        continue;
      }
      const NotJudgedLine line = noisy_line(*b, as_said, r);
      add_to_group(lines, index, line, line.reason, b);
    }
  }
  for (NotJudgedLine& line : lines) name_the_suite(line, r.current_runs);
  for (const auto* b : rows)
    if (b->verdict == Verdict::skipped) add_to_group(skips, skip_index, kSkipped, b->message.value_or(b->reason), b);
  lines.insert(lines.end(), std::make_move_iterator(skips.begin()), std::make_move_iterator(skips.end()));
  return lines;
}

std::vector<SuiteCount> suite_counts(const std::vector<const BenchmarkComparison*>& rows) {
  std::vector<SuiteCount> out;
  std::map<std::string, std::size_t> index;
  for (const auto* b : rows) {
    auto [it, fresh] = index.emplace(b->suite, out.size());
    if (fresh) out.push_back(SuiteCount{b->suite, {}});
    out[it->second].counts.add(*b);
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
// A counter that one side has and the other lacks (compare.cpp's note_one_sided_counters says why that matters).
bool has_one_sided_counter(const BenchmarkComparison& b) {
  return std::any_of(b.metrics.begin(), b.metrics.end(), [](const MetricComparison& m) { return m.one_sided(); });
}
bool cycles_decided(const BenchmarkComparison& b) { return b.cycle_space && b.cycle_space->cycles_decided; }
bool far_slow_repetition(const BenchmarkComparison& b) { return b.far_slow_repetition(); }
// The largest slowest-over-median of the benchmarks with a far slow repetition (for the note's "at the most").
double slowest_far_repetition(const std::vector<const BenchmarkComparison*>& rows) {
  double most = 0;
  for (const auto* b : rows)
    if (b->far_slow_repetition()) most = std::max(most, b->slowest_over_median_current);
  return most;
}
bool clocks_differed_time_decided(const BenchmarkComparison& b) {
  return b.cycle_space && !b.cycle_space->cycles_decided && is_alarm(b.cycle_space->time_verdict);
}

// The fewest CPUs a process of the side was pinned to ("0", "0-1; 2-3" for lanes); 0 when not pinned or unreadable.
int fewest_pinned_cpus(const std::string& pinned) {
  int fewest = 0;
  std::size_t from = 0;
  try {
    while (from < pinned.size()) {
      const std::size_t end = std::min(pinned.find("; ", from), pinned.size());
      const int n = static_cast<int>(parse_cpu_list(pinned.substr(from, end - from)).size());
      fewest = fewest == 0 ? n : std::min(fewest, n);
      from = end + 2;
    }
  } catch (const std::invalid_argument&) { return 0; }
  return fewest;
}

// A benchmark of more threads than the CPUs its processes were pinned to: its threads take turns on them.
void add_threads_beyond_pinned_note(std::vector<PlainNote>& notes, const ComparisonReport& r,
                                    const std::vector<const BenchmarkComparison*>& rows) {
  const int cpus = fewest_pinned_cpus(r.current.pinned_cpus);
  if (cpus == 0) return;
  std::vector<std::string> names;
  int most = 0;
  for (const auto* b : rows) {
    const int threads = threads_of_name(b->name);
    if (threads <= cpus) continue;
    names.push_back(b->name);
    most = std::max(most, threads);
  }
  if (names.empty()) return;
  const bool one = names.size() == 1;
  notes.push_back({std::move(names),
                   fmt::format("{}{} threads on {} pinned CPU{} ({} {}): the threads take turns, so the time measures "
                               "the scheduler as much as the code",
                               one ? "" : "up to ", most, cpus, cpus == 1 ? "" : "s",
                               r.current.pinned_cpus.find(';') != std::string::npos ? "lanes"
                               : cpus == 1                                          ? "CPU"
                                                                                    : "CPUs",
                               r.current.pinned_cpus),
                   fmt::format("pin at least {} CPUs for {}, or measure {} unpinned", most,
                               one ? "this benchmark" : "these benchmarks", one ? "it" : "them"),
                   ""});
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
  if (!r.identical_builds.empty())
    notes.push_back({r.identical_builds,
                     "--before and --after are the same bytes: an A/A comparison, so any change found is the "
                     "machine's, not the code's",
                     "point --after at the build with the change (or rebuild it)", ""});
  if (!r.identical_to_reference.empty())
    notes.push_back({r.identical_to_reference,
                     "the bench binaries are the same bytes as the reference build's: the commits since the "
                     "reference changed none of their code, so this is an A/A comparison and any change found is the "
                     "machine's",
                     "", ""});
  if (!r.unmatched_thresholds.empty())
    notes.push_back({r.unmatched_thresholds,
                     fmt::format("in {}: appl{} to no compared benchmark, so {} threshold is not used",
                                 r.options.threshold_config.empty() ? "the thresholds" : r.options.threshold_config,
                                 r.unmatched_thresholds.size() == 1 ? "ies" : "y",
                                 r.unmatched_thresholds.size() == 1 ? "its" : "their"),
                     "a benchmarks entry is a benchmark's whole name, or an ECMAScript regex matching all of it; a "
                     "suites entry is a suite as the report names it",
                     ""});
  if (!r.files_on_both_sides.empty())
    notes.push_back({r.files_on_both_sides,
                     "on both sides: each such process run is compared with itself, so it shows no change by "
                     "construction",
                     "give each side its own process runs", "", true});
  if (r.repetitions > 0 && r.repetitions < 9)
    notes.push_back({{},
                     fmt::format("{}: the rule needs {} per side and is weak below 9", few_repetitions_phrase(r),
                                 r.options.min_samples),
                     r.samples_are_aggregates
                         ? "without --benchmark_report_aggregates_only (or ReportAggregatesOnly() in the benchmark) "
                           "each repetition is a sample; as they are, only more process runs per side add samples"
                         : "more process runs per side judge more than more repetitions in one process (the next "
                           "step, where a run judged nothing, says how many)",
                     "repetitions"});
}

void add_benchmark_notes(std::vector<PlainNote>& notes, const ComparisonReport& r,
                         const std::vector<const BenchmarkComparison*>& rows) {
  add_threads_beyond_pinned_note(notes, r, rows);
  if (auto names = names_where(rows, cpu_time_decided); !names.empty())
    notes.push_back({std::move(names),
                     "other processes took the CPU on one side but not the other, so wall time cannot tell the "
                     "code's change from theirs; CPU time decided instead",
                     "re-run on a quiet machine to judge wall time", "contention"});
  const SideNames& sides = r.options.sides;
  if (auto names = names_where(rows, has_one_sided_counter); !names.empty())
    notes.push_back({std::move(names),
                     fmt::format("counters on one side only (a setting reported only where it is on, or a counter {}): "
                                 "the two sides may not have run the same configuration",
                                 sides.builds ? "the change added or removed" : "added or removed since the baseline"),
                     sides.builds ? "" : "if the change is meant, record the baseline again", ""});
  if (auto names = names_where(rows, far_slow_repetition); !names.empty())
    notes.push_back(
        {std::move(names),
         fmt::format("a repetition of {:.0f} times the median or more ({:.0f}x at the most) in {} only: "
                     "the median, and so the verdict, does not show it (a rare slow path, or a stalled "
                     "machine)",
                     BenchmarkComparison::kFarRepetition, slowest_far_repetition(rows), sides.current_place()),
         "re-run these benchmarks alone to see whether it recurs", "repetitions"});
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
                                   side == &r.throttled_baseline ? r.options.sides.baseline : r.options.sides.current),
                       "", "throttled"});
  for (const auto* side : {&r.throttled_baseline, &r.throttled_current})
    if (!side->kept_flagged.empty())
      notes.push_back({side->kept_flagged,
                       fmt::format("some repetitions ran while the GPU throttled and were kept ({} side: leaving "
                                   "them out would leave too few); these results may be slowed by the machine",
                                   side == &r.throttled_baseline ? r.options.sides.baseline : r.options.sides.current),
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

std::string regressions_heading(const SummaryModel& model) {
  const auto failed = std::count_if(model.regressions.begin(), model.regressions.end(),
                                    [](const BenchmarkComparison* b) { return b->verdict == Verdict::failed; });
  if (failed == 0) return "regressions";
  return static_cast<std::size_t>(failed) == model.regressions.size() ? "failed" : "failed or regressed";
}

SummaryModel summarise(const ComparisonReport& r) {
  SummaryModel s;
  s.rows = r.sorted();
  for (const auto* b : s.rows) {
    if (b->verdict == Verdict::failed || b->verdict == Verdict::regression) s.regressions.push_back(b);
    if (b->verdict == Verdict::improvement) s.improvements.push_back(b);
  }
  s.not_judged = not_judged_lines(s.rows, r);
  s.suites = suite_counts(s.rows);
  add_machine_notes(s.notes, r);
  add_benchmark_notes(s.notes, r, s.rows);
  add_suite_notes(s.notes, r);
  return s;
}

}  // namespace perfgate::report_detail
