#include "perfgate/session.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "perfgate/baseline_store.hpp"
#include "perfgate/benchmark_filter.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/history.hpp"
#include "perfgate/host_dependent.hpp"
#include "perfgate/learned_noise.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/machine_class.hpp"
#include "perfgate/report.hpp"
#include "perfgate/stats.hpp"
#include "run/session_internal.hpp"

namespace perfgate {

using namespace session_detail;

namespace {

double worse_change(const MetricComparison& m) { return higher_is_better(m.kind) ? -m.change : m.change; }

BenchmarkComparison manual_entry(const BenchmarkResult& b, const std::string& suite, Verdict v, std::string reason) {
  BenchmarkComparison c;
  c.name = b.name;
  c.raw_name = b.raw_name.empty() ? b.name : b.raw_name;
  c.suite = suite;
  c.verdict = b.error ? Verdict::failed : (b.skip_reason ? Verdict::skipped : v);
  if (b.error) {
    c.message = *b.error;
    c.reason = "failed: " + *b.error;
  } else if (b.skip_reason) {
    c.message = *b.skip_reason;
    c.reason = "skipped: " + *b.skip_reason;
  } else {
    c.reason = std::move(reason);
  }
  return c;
}

// The report of a suite whose current side has no usable run (everything failed) or no baseline.
SuiteReport report_without_comparison(const std::string& suite, const ResultSet& current, Verdict v,
                                      const std::string& reason, const std::string& baseline_file) {
  SuiteReport sr;
  sr.suite = suite;
  sr.baseline_file = baseline_file;
  sr.baseline_found = false;
  for (const auto& b : current.benchmarks) sr.report.benchmarks.push_back(manual_entry(b, suite, v, reason));
  sr.report.counts = count_verdicts(sr.report.benchmarks);
  if (!current.contexts.empty()) sr.report.current = describe_side(current);
  sr.report.exit_code = sr.report.counts.failed > 0 ? 3 : 77;
  return sr;
}

// The options of one suite's comparison on machine class `machine` (empty: no class file), its sides as given.
CompareOptions options_for_class(const GateOptions& gate, const std::string& machine, ComparedSides sides) {
  if (!machine.empty()) sides.class_thresholds = class_thresholds_file(gate.baseline_dir, machine);
  return resolve_rule_options(gate.rule, sides);
}

// The snapshot noise.json beside `baseline_file` when the gate uses it, it exists and it is of class `key`; a table
// of another class is not used, and the note says why.
std::shared_ptr<const LearnedNoiseTable> snapshot_noise_for(const GateOptions& gate, const std::string& key,
                                                            const std::filesystem::path& snapshot,
                                                            std::vector<std::string>& notes) {
  std::error_code ec;
  if (!gate.use_noise_snapshot || !std::filesystem::exists(snapshot, ec)) return nullptr;
  auto table = std::make_shared<const LearnedNoiseTable>(load_noise_snapshot(snapshot.string()));
  if (table->machine_class == key) return table;
  notes.push_back(fmt::format("learned noise {} is of class {}, this run is {}: not used, the class prior judges",
                              snapshot.string(), table->machine_class, key));
  return nullptr;
}

// The learned noise for a stored-baseline comparison of `current` against `baseline_file`
// (GateOptions::learned_noise, then the snapshot beside the baseline). A history that has nothing for this class is
// noted with what judges instead.
std::shared_ptr<const LearnedNoiseTable> learned_noise_for(const GateOptions& gate, const ResultSet& current,
                                                           const std::filesystem::path& baseline_file,
                                                           std::vector<std::string>& notes) {
  const std::string key = history::history_class(current);
  if (gate.learned_noise)
    if (auto table = gate.learned_noise(key)) return table;
  const auto snapshot = baseline_file.parent_path() / kNoiseSnapshotFile;
  std::vector<std::string> snapshot_notes;
  auto table = snapshot_noise_for(gate, key, snapshot, snapshot_notes);
  if (gate.learned_noise && !gate.learned_noise_origin.empty())
    notes.push_back(
        empty_history_note(gate.learned_noise_origin, key, table ? snapshot.string() : std::string("the class prior")));
  notes.insert(notes.end(), snapshot_notes.begin(), snapshot_notes.end());
  return table;
}

}  // namespace

bool looks_regressed(const BenchmarkComparison& b) {
  if (b.verdict == Verdict::regression) return true;
  if (b.verdict != Verdict::noisy) return false;
  for (const auto& m : b.metrics) {
    if (!m.gated) continue;
    if (m.verdict == Verdict::regression) return true;
    if (m.verdict == Verdict::noisy && std::isfinite(m.change) && worse_change(m) > m.threshold) return true;
  }
  return false;
}

VerdictCounts count_verdicts(const std::vector<BenchmarkComparison>& benchmarks) {
  VerdictCounts c;
  for (const auto& b : benchmarks) c.add(b);
  return c;
}

int session_exit_code(const std::vector<SuiteReport>& suites) {
  VerdictCounts compared;
  int failed = 0;
  bool any_baseline = false;
  for (const auto& s : suites) {
    any_baseline = any_baseline || s.baseline_found;
    for (const auto& b : s.report.benchmarks) {
      // A failed benchmark counts wherever it ran; the other verdicts only where a baseline was found.
      if (b.verdict == Verdict::failed) ++failed;
      else if (s.baseline_found) compared.add(b);
    }
  }
  if (failed > 0) return 3;
  if (!any_baseline) return 77;
  return exit_code_for(compared);
}

namespace {

// A suite's next step as the run's line: prefixed with the suite when there are several, and with the flags of this
// command that take that many runs: for a suite gated against a reference build its rounds against it (and the main
// job's variables), for one gated against a stored baseline its own rounds and the baseline's recording.
std::string run_next_step(const SuiteReport& s, bool several_suites) {
  const ComparisonReport& r = s.report;
  std::string line = several_suites ? s.suite + ": " + r.next_step : r.next_step;
  if (s.reference_gate && r.next_step_runs > 0 && r.next_step_repetitions == 0) {  // aggregates: runs alone count
    line += fmt::format(
        "; for this run's reference gate: perfgate run --against-rounds {0} (ci/perf.sh: "
        "PERFGATE_AB_ROUNDS={0})",
        r.next_step_runs);
  } else if (s.reference_gate && r.next_step_runs > 0) {
    line += fmt::format(
        "; for this run's reference gate: perfgate run --against-rounds {0} --against-repetitions {1}={2} "
        "(ci/perf.sh: PERFGATE_AB_ROUNDS={0} PERFGATE_AB_REPETITIONS={1}={2})",
        r.next_step_runs, s.suite, r.next_step_repetitions);
  } else if (!s.reference_gate && !s.baseline_file.empty() && !r.next_step_commands.empty()) {
    // Against a stored baseline both sides need the runs, and the baseline holds only those it was recorded with:
    // this command's own flags say it, in place of the commands that take files or two builds.
    const auto at = line.find(r.next_step_commands);
    if (at != std::string::npos)
      line.replace(at, r.next_step_commands.size(),
                   fmt::format("perfgate run --rounds {0} --repetitions {1} --update-baseline records the stored "
                               "baseline with that many, then perfgate run --rounds {0} --repetitions {1} gates with "
                               "as many",
                               r.next_step_runs, r.next_step_repetitions));
  }
  return line;
}

// What decides the run's too-noisy benchmarks, as this command's flags say it: for a suite gated against a reference
// build the interleaved rounds against it (--against-rounds), not the run's own process runs (--rounds), which
// decide for a suite gated against a stored baseline; with both kinds noisy, which suites take which. Empty when
// no such suite has a noisy benchmark (ab's interleaved builds keep the summary's own advice).
std::string run_noisy_advice(const std::vector<SuiteReport>& suites) {
  std::vector<std::string> reference, stored;
  for (const auto& s : suites) {
    if (count_verdicts(s.report.benchmarks).noisy == 0) continue;
    if (s.reference_gate) reference.push_back(s.suite);
    else if (!s.report.options.paired_runs) stored.push_back(s.suite);
  }
  const std::string against =
      "more interleaved rounds against the reference build decide (--against-rounds; ci/perf.sh: PERFGATE_AB_ROUNDS)";
  const std::string more_runs = "more process runs of this build decide (--rounds; ci/perf.sh: PERFGATE_ROUNDS)";
  if (reference.empty()) return stored.empty() ? std::string() : more_runs;
  if (stored.empty()) return against;
  return fmt::format("{}: {}; {}: {}", fmt::join(reference, ", "), against, fmt::join(stored, ", "), more_runs);
}

// `files` appended to `into` where it does not hold them yet, in their order.
void add_missing(std::vector<std::string>& into, const std::vector<std::string>& files) {
  for (const auto& f : files)
    if (std::find(into.begin(), into.end(), f) == into.end()) into.push_back(f);
}

}  // namespace

ComparisonReport combine_reports(const std::vector<SuiteReport>& suites) {
  ComparisonReport out;
  bool have_sides = false;
  for (const auto& s : suites) {
    const ComparisonReport& r = s.report;
    if (!have_sides && s.baseline_found) {
      out.baseline = r.baseline;
      out.current = r.current;
      out.options = r.options;
      out.machine_mismatch_allowed = r.machine_mismatch_allowed;
      have_sides = true;
    }
    if (out.current.machine_class.empty()) out.current = r.current;
    out.benchmarks.insert(out.benchmarks.end(), r.benchmarks.begin(), r.benchmarks.end());
    for (const auto& n : r.notes) out.notes.push_back(suites.size() > 1 ? s.suite + ": " + n : n);
    for (const auto& [k, v] : r.nvtx_ranges) out.nvtx_ranges[k] = v;
    for (const auto& [k, v] : r.current_runs) out.current_runs[k] = v;
    out.repetitions = std::max(out.repetitions, r.repetitions);
    if (out.next_step.empty() && !r.next_step.empty()) out.next_step = run_next_step(s, suites.size() > 1);
    if (have_sides) {
      out.baseline.process_runs = std::max(out.baseline.process_runs, r.baseline.process_runs);
      out.current.process_runs = std::max(out.current.process_runs, r.current.process_runs);
      out.baseline.extra_process_runs = std::max(out.baseline.extra_process_runs, r.baseline.extra_process_runs);
      out.current.extra_process_runs = std::max(out.current.extra_process_runs, r.current.extra_process_runs);
      add_missing(out.baseline.files, r.baseline.files);
      add_missing(out.current.files, r.current.files);
    }
    add_missing(out.identical_builds, r.identical_builds);
    add_missing(out.identical_to_reference, r.identical_to_reference);
    add_missing(out.unmatched_thresholds, r.unmatched_thresholds);
  }
  // Suites gated two ways (a stored baseline, a reference build) name their sides differently: the whole run's
  // report then uses the plain names.
  for (const auto& s : suites)
    if (s.baseline_found && (s.report.options.sides.baseline != out.options.sides.baseline ||
                             s.report.options.sides.builds != out.options.sides.builds))
      out.options.sides = SideNames{};
  out.counts = count_verdicts(out.benchmarks);
  out.noisy_advice = run_noisy_advice(suites);
  out.exit_code = session_exit_code(suites);
  if (out.exit_code != 77) out.next_step.clear();  // another suite was judged: nothing to advise for the run
  return out;
}

namespace {

// ---- gate_run: the stored-baseline comparison of each suite ----

// What the confirm step needs of each compared suite: its baseline and its rule's options.
struct StoredComparisons {
  std::map<std::string, ResultSet> baselines;
  std::map<std::string, CompareOptions> options;
  std::map<std::string, std::string> machines;  // each suite's machine class, for the confirm step's options
};

// How to record the missing baseline `file` of `suite`: the commands, with this run's run file when the caller
// writes one (GateOptions::runs_dir).
std::string record_baseline_advice(const std::string& suite, const std::filesystem::path& file,
                                   const GateOptions& gate) {
  if (gate.runs_dir.empty())
    return "record one with `perfgate run --update-baseline` or `perfgate baseline update --suite " + suite +
           " --from RUN.json`";
  const std::string root =
      gate.baseline_dir == "baselines" ? "" : " --baseline-dir " + shell_quote(gate.baseline_dir.string());
  const auto runs = run_file(gate.runs_dir, suite, "current");
  return fmt::format(
      "record one from this run with `perfgate baseline update --suite {} --from {}{}`, or run again "
      "with --update-baseline; it is written to {}",
      shell_quote(suite), shell_quote(runs.string()), root, file.string());
}

// A baseline of the suite where this run does not look, and why it is not this run's (the "no baseline" line's
// parenthesis).
struct NearbyBaseline {
  std::filesystem::path file;
  std::string why;
};

// `skips_explained`: the caller's notes already say why every benchmark of the suite skips (GateOptions).
// `nearby`: a baseline of the suite under another class (empty file: none).
SuiteReport report_without_baseline(const std::string& suite, const ResultSet& cur, const std::string& machine,
                                    const std::filesystem::path& file, const GateOptions& gate,
                                    const NearbyBaseline& nearby) {
  const bool skips_explained = gate.skips_explained.contains(suite);
  const std::string why = nearby.file.empty()
                              ? "no baseline: " + file.string()
                              : fmt::format("no baseline: {} ({} {})", file.string(), nearby.file.string(), nearby.why);
  SuiteReport sr = report_without_comparison(suite, cur, Verdict::new_benchmark, why, file.string());
  // Once, in the suite's report (combine_reports prefixes it with the suite for the whole-run report).
  if (!cur.every_benchmark_skipped())
    sr.report.notes.push_back(fmt::format("no baseline for suite {} on machine class {}: {} ({})", suite, machine,
                                          file.string(), record_baseline_advice(suite, file, gate)));
  else if (!skips_explained)
    sr.report.notes.push_back(
        fmt::format("every benchmark of suite {} skipped on machine class {}: nothing to "
                    "compare (no baseline {} is needed here)",
                    suite, machine, file.string()));
  return sr;
}

// Where a plain Google Benchmark binary's baseline was filed before the runner gave its runs this host's CPU facts
// (runner.hpp, host_context): under the class that what the binary itself wrote names (no perfgate key is the
// binary's own), cpu-unknown-<N>c. Empty when the runs recorded their own facts.
std::filesystem::path baseline_before_host_facts(const std::filesystem::path& root, const ResultSet& cur,
                                                 const std::string& suite) {
  const RunContext& c = cur.contexts.front();
  if (c.get(context_keys::kRunHostFacts).empty()) return {};
  RunContext bare = c;
  std::erase_if(bare.fields, [](const auto& field) { return field.first.starts_with(context_keys::kPrefix); });
  return baseline_path(root, derive_machine_class(bare), suite);
}

// A CPU class counts the CPUs a bench process may use (docs/baselines.md): the same suite's baseline under the same
// class name with another count (recorded unpinned, or pinned to other CPUs) is the one a run pinned otherwise misses.
NearbyBaseline baseline_for_other_cpu_count(const std::filesystem::path& root, const std::string& machine,
                                            const ResultSet& cur, const std::string& suite) {
  static const std::regex cpu_class("(cpu-.*-)([0-9]+)c");
  std::smatch own;
  if (!std::regex_match(machine, own, cpu_class)) return {};
  std::error_code ec;
  std::set<std::string> classes;  // in name order, so the same folder is named on every run
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) classes.insert(entry.path().filename());
  for (const std::string& name : classes) {
    std::smatch other;
    if (!std::regex_match(name, other, cpu_class) || other[1] != own[1] || name == machine) continue;
    const auto file = find_baseline(root, name, cur.contexts.front().get(context_keys::kCpuSignature), suite);
    if (!std::filesystem::exists(file, ec)) continue;
    return {file, fmt::format("is its baseline on {} CPUs, and this run's processes may use {} (--pin-cpus)",
                              other[2].str(), own[2].str())};
  }
  return {};
}

// What to do with a baseline found where the suite's runs no longer look (baseline_before_host_facts).
std::string moved_baseline_note(const std::filesystem::path& old_file, const std::filesystem::path& file,
                                const ResultSet& cur) {
  const std::string cpu = cur.contexts.front().get(context_keys::kCpuSignature);
  return fmt::format(
      "{} holds a baseline of this binary recorded before perfgate gave a plain Google Benchmark binary's runs the "
      "host's CPU facts; if it was recorded on this CPU{}, move it to {}, else record a new one",
      old_file.string(), cpu.empty() ? "" : " (" + cpu + ")", file.string());
}

// The comparison of one suite with its stored baseline `base` (filter applied; `unselected` of it dropped).
SuiteReport compared_report(const std::string& suite, const ResultSet& base, const ResultSet& cur,
                            const std::filesystem::path& file, const CompareOptions& o, const MachineClassCheck& check,
                            int unselected, const std::string& filter, std::vector<std::string> noise_notes) {
  SuiteReport sr;
  sr.suite = suite;
  sr.baseline_file = file.string();
  sr.report = compare(base, cur, o);
  sr.report.notes.insert(sr.report.notes.end(), noise_notes.begin(), noise_notes.end());
  if (unselected > 0) sr.report.notes.push_back(unselected_note(unselected, filter));
  // The stored baseline comes from another machine of the class: what follows the host is not gated there
  // without a threshold of its own.
  make_host_dependent_informational(sr.report, base, cur, o);
  sr.report.machine_mismatch_allowed = !check.same;
  if (!check.same) sr.report.notes.push_back(allowed_mismatch(check));
  if (!check.unknown_cpu_note.empty()) sr.report.notes.push_back(check.unknown_cpu_note);
  return sr;
}

// One suite of the current measurement against its stored baseline (or why it is not compared).
SuiteReport judge_suite(const std::string& suite, const ResultSet& cur, const GateOptions& gate,
                        const MeasureOptions& options, StoredComparisons& stored) {
  if (cur.contexts.empty())
    return report_without_comparison(suite, cur, Verdict::failed, "no process run produced results", "");
  const std::string machine = machine_class(cur);
  const auto file =
      find_baseline(gate.baseline_dir, machine, cur.contexts.front().get(context_keys::kCpuSignature), suite);
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    std::filesystem::path filed_before = baseline_before_host_facts(gate.baseline_dir, cur, suite);
    if (filed_before == file || !std::filesystem::exists(filed_before, ec)) filed_before.clear();
    if (!filed_before.empty()) {
      SuiteReport sr = report_without_baseline(
          suite, cur, machine, file, gate,
          {filed_before,
           "is one from before plain binaries' runs named their CPU: move it here if it was recorded on this CPU"});
      sr.report.notes.push_back(moved_baseline_note(filed_before, file, cur));
      return sr;
    }
    return report_without_baseline(suite, cur, machine, file, gate,
                                   baseline_for_other_cpu_count(gate.baseline_dir, machine, cur, suite));
  }
  ResultSet base = load_result_file(file.string());
  // Baseline benchmarks the filter did not select are not compared (they are not missing).
  const int unselected = drop_unselected(base, BenchmarkFilter(options.filter));
  const MachineClassCheck check = check_machine_class(base, cur);
  if (check.cpu_changed && check.baseline_class == check.current_class && !gate.allow_machine_mismatch) {
    // Measured and reported, not compared: the verdicts would be about the hardware.
    SuiteReport sr = report_without_comparison(suite, cur, Verdict::new_benchmark,
                                               "baseline from another CPU generation: " + file.string(), file.string());
    sr.report.notes.push_back(refused_mismatch(check));
    return sr;
  }
  if (!check.same && !gate.allow_machine_mismatch)
    throw InputError(file.string(), "", "context", refused_mismatch(check));
  std::vector<std::string> noise_notes;
  const CompareOptions o =
      options_for_class(gate, machine, ComparedSides{{}, learned_noise_for(gate, cur, file, noise_notes), {}});
  SuiteReport sr =
      compared_report(suite, base, cur, file, o, check, unselected, options.filter, std::move(noise_notes));
  stored.baselines.emplace(suite, std::move(base));
  stored.options.emplace(suite, o);
  stored.machines.emplace(suite, machine);
  return sr;
}

// ---- gate_run: the confirm step ----

using Candidates = std::map<std::string, std::vector<BenchmarkComparison>>;  // suite -> initial entries

// The benchmarks that look regressed, per suite; none of a suite that leaves the stored gate.
Candidates confirm_candidates(const std::vector<SuiteReport>& suites, const GateOptions& gate,
                              ConfirmSummary& summary) {
  Candidates candidates;
  for (const auto& sr : suites) {
    if (!sr.baseline_found) continue;
    if (gate.leaves_stored_gate && gate.leaves_stored_gate(sr)) {
      const auto n = std::count_if(sr.report.benchmarks.begin(), sr.report.benchmarks.end(), looks_regressed);
      if (n > 0) summary.left_to_reference.push_back(fmt::format("{} ({})", sr.suite, n));
      continue;
    }
    for (const auto& b : sr.report.benchmarks) {
      if (!looks_regressed(b)) continue;
      candidates[sr.suite].push_back(b);
      summary.candidates.push_back(b.name);
    }
  }
  return candidates;
}

// The confirm step's cost for one suite, estimated from the measurement: its processes' mean wall time x the rounds
// the step runs (x 2 with a baseline build, whose processes alternate with the current build's). A confirm process
// runs the candidates only, so this is an upper bound: what a process costs outside its benchmarks (start-up, set-up,
// reference checks) is all it is sure to save.
double confirm_estimate(const std::string& suite, const SideResult& measured, const MeasureOptions& options,
                        const GateOptions& gate) {
  const auto it = measured.suite_seconds.find(suite);
  if (it == measured.suite_seconds.end()) return 0.0;
  const double per_process = it->second / std::max(1, options.rounds);
  return per_process * gate.confirm_rounds * (gate.baseline_build.empty() ? 1 : 2);
}

// Marks the candidates of a suite left out of the confirm step (copies of its report's entries, just taken): their
// verdict stays the first look's.
void leave_unconfirmed(std::vector<SuiteReport>& suites, const std::string& suite,
                       const std::vector<BenchmarkComparison>& list, ConfirmSummary& summary) {
  const auto sr = std::find_if(suites.begin(), suites.end(), [&](const SuiteReport& s) { return s.suite == suite; });
  for (BenchmarkComparison entry : list) {
    entry.reason = "not confirmed (the confirm step would pass the run's time budget): " + entry.reason;
    if (sr != suites.end()) replace_entry(sr->report, entry);
    summary.unconfirmed.push_back(entry.name);
    std::erase(summary.candidates, entry.name);
  }
}

// Keeps in the confirm step the suites whose estimated cost fits the time left of GateOptions::time_budget_s,
// cheapest first, so that as many suites as fit are confirmed.
void keep_within_budget(Candidates& candidates, SessionResult& out, const MeasureOptions& options,
                        const GateOptions& gate, double spent) {
  std::vector<std::pair<double, std::string>> by_cost;
  for (const auto& [suite, list] : candidates)
    by_cost.emplace_back(confirm_estimate(suite, out.measurement.sides.at(0), options, gate), suite);
  std::sort(by_cost.begin(), by_cost.end());
  out.confirm.budget = gate.time_budget_s;
  out.confirm.spent_before = spent;
  double planned = spent;
  for (const auto& [cost, suite] : by_cost) {
    if (planned + cost <= gate.time_budget_s) {
      planned += cost;
      continue;
    }
    out.confirm.over_budget.push_back(fmt::format("{} (~{:.0f} s)", suite, cost));
    leave_unconfirmed(out.suites, suite, candidates.at(suite), out.confirm);
    candidates.erase(suite);
  }
}

// The confirm step's measurement: the candidates alone, alternating with the baseline build when given.
struct ConfirmRun {
  std::vector<Side> sides;
  MeasureOptions options;
  MeasureResult result;
};

ConfirmRun measure_candidates(const Candidates& candidates, const Side& current, const MeasureOptions& options,
                              const GateOptions& gate, std::uint64_t seed) {
  std::set<std::string> suites;
  std::vector<std::string> raw_names;
  for (const auto& [suite, list] : candidates) {
    suites.insert(suite);
    for (const auto& b : list) raw_names.push_back(b.raw_name.empty() ? b.name : b.raw_name);
  }
  ConfirmRun run;
  run.options = options;
  run.options.rounds = gate.confirm_rounds;
  run.options.filter = exact_filter(raw_names);
  run.options.phase_label = "confirm";
  run.options.work_dir = options.work_dir / "confirm";
  run.options.seed = seed + 1;
  if (!gate.baseline_build.empty())
    run.sides.push_back(Side{"baseline build", binaries_for(gate.baseline_build, suites), gate.baseline_env});
  run.sides.push_back(Side{"current", binaries_for(current.benches, suites), current.env});
  run.result = measure(run.sides, run.options);
  return run;
}

bool has_results(const std::map<std::string, ResultSet>& suites, const std::string& suite) {
  const auto it = suites.find(suite);
  return it != suites.end() && !it->second.contexts.empty();
}

// With a baseline build, the confirm step is an interleaved A/B session of the candidates: each suite is
// compared on the fresh runs, and adaptive extra rounds apply (its looks carry alpha / looks; the initial
// look against the stored baseline only chose what to re-measure, it decides nothing).
// The sides of a comparison measured in this session: round i of one side next to round i of the other when the
// gate pairs them, alpha split over every look of an adaptive session (the first included).
ComparedSides interleaved_sides(const GateOptions& gate, int looks) {
  return {{}, nullptr, Interleaving{gate.paired, looks}};
}

std::map<std::string, SuiteReport> judge_against_build(ConfirmRun& run, const Candidates& candidates,
                                                       const StoredComparisons& stored, const GateOptions& gate,
                                                       SessionResult& out, std::vector<std::string>& notes) {
  std::map<std::string, SuiteReport> reports;
  std::map<std::string, CompareOptions> confirm_options;
  std::set<std::string> eligible;
  const int looks = plan_adaptive(out.adaptive, gate.confirm_rounds, gate);
  SideResult& base_side = run.result.sides.front();
  SideResult& cur_side = run.result.sides.back();
  for (const auto& [suite, list] : candidates) {
    if (!has_results(cur_side.suites, suite) || !has_results(base_side.suites, suite)) continue;
    const CompareOptions o = options_for_class(gate, stored.machines.at(suite), interleaved_sides(gate, looks));
    if (confirm_options.empty()) out.adaptive.alpha_per_look = o.rule.alpha;
    SuiteReport r;
    r.suite = suite;
    r.report = compare(base_side.suites.at(suite), cur_side.suites.at(suite), o);
    reports.emplace(suite, std::move(r));
    confirm_options.emplace(suite, o);
    for (const auto& b : list) eligible.insert(b.name);
  }
  if (gate.max_extra_rounds > 0) {
    AdaptiveRun adaptive{{}, base_side, cur_side, run.sides, confirm_options, run.options, gate, &eligible, "confirm"};
    for (auto& [suite, r] : reports) adaptive.reports.push_back(&r);
    extend_undecided(adaptive, run.result.wall_seconds, out.adaptive, notes);
    out.confirm.processes += out.adaptive.processes;
    out.confirm.repetitions += out.adaptive.repetitions;
  }
  return reports;
}

// The re-measured comparison of one suite: against the fresh baseline build, or (without one) against the
// stored baseline with the initial and the re-measured runs pooled. nullopt when nothing was re-measured.
std::optional<ComparisonReport> confirm_comparison(const std::string& suite, const ResultSet& initial_runs,
                                                   const ResultSet& remeasured, const StoredComparisons& stored,
                                                   const std::map<std::string, SuiteReport>& build_reports,
                                                   bool with_build, std::string& against) {
  if (with_build) {
    const auto it = build_reports.find(suite);
    if (it == build_reports.end()) return std::nullopt;
    against = "fresh baseline build, interleaved";
    return it->second.report;
  }
  // Against the stored baseline the re-measurement adds evidence: the initial and the re-measured process
  // runs are judged together (more runs narrow the between-run interval), so a change must hold over both
  // before it can fail the build.
  ResultSet pooled = initial_runs;
  try {
    ResultSet extra = remeasured;
    merge_results(pooled, std::move(extra));
    against = "stored baseline, initial + re-measured runs";
  } catch (const std::exception&) {
    pooled = remeasured;
    against = "stored baseline, re-measured runs";
  }
  return compare(stored.baselines.at(suite), pooled, stored.options.at(suite));
}

// The final entry of a candidate: only evidence from the re-measurement can make a regression final.
BenchmarkComparison final_entry(const BenchmarkComparison& init, const BenchmarkComparison* re,
                                const BenchmarkResult* remeasured, bool with_build, const std::string& against) {
  BenchmarkComparison entry = re != nullptr ? *re : init;
  if (re == nullptr) {
    // Nothing re-measured (the confirm process failed): a failure of the bench if it failed, else the
    // initial evidence stands as noisy: it was never confirmed.
    const bool failed = remeasured != nullptr && remeasured->error;
    entry.verdict = failed ? Verdict::failed : Verdict::noisy;
    if (failed) entry.message = *remeasured->error;
    entry.reason = fmt::format("confirm step could not re-measure it; initial: {}", change_text(init));
  } else if (with_build) {
    entry.reason =
        fmt::format("confirm vs {}: {} (initial vs stored baseline: {})", against, re->reason, change_text(init));
  } else if (re->verdict == Verdict::regression) {
    entry.reason = fmt::format("confirmed ({}): {} (initial: {})", against, re->reason, change_text(init));
  } else if (re->verdict != Verdict::failed) {
    entry.reason = fmt::format("not confirmed: initial {}; {}: {}", change_text(init), against, change_text(*re));
  }
  return entry;
}

// Replaces the candidates' entries of one suite by their confirmed (or not) verdicts.
void settle_suite(SuiteReport& sr, const std::vector<BenchmarkComparison>& initial, const SideResult& initial_side,
                  const SideResult& cur_side, const StoredComparisons& stored,
                  const std::map<std::string, SuiteReport>& build_reports, bool with_build, ConfirmSummary& summary) {
  std::optional<ComparisonReport> again;
  std::string against;
  const auto cur_it = cur_side.suites.find(sr.suite);
  if (has_results(cur_side.suites, sr.suite))
    again = confirm_comparison(sr.suite, initial_side.suites.at(sr.suite), cur_it->second, stored, build_reports,
                               with_build, against);
  for (const auto& init : initial) {
    const BenchmarkComparison* re = again ? find_entry(*again, init.name) : nullptr;
    const BenchmarkResult* cb = cur_it != cur_side.suites.end() ? cur_it->second.find(init.name) : nullptr;
    const BenchmarkComparison entry = final_entry(init, re, cb, with_build, against);
    if (entry.verdict == Verdict::regression) ++summary.confirmed;
    replace_entry(sr.report, entry);
  }
  recount(sr.report);
}

void confirm_step(SessionResult& out, const Candidates& candidates, const StoredComparisons& stored,
                  const Side& current, const MeasureOptions& options, const GateOptions& gate) {
  const auto t0 = std::chrono::steady_clock::now();
  ConfirmRun run = measure_candidates(candidates, current, options, gate, out.measurement.seed);
  for (const auto& s : run.result.sides) {
    out.confirm.processes += s.processes;
    out.confirm.repetitions += s.repetitions;
  }
  const bool with_build = out.confirm.against_baseline_build;
  std::vector<std::string> extra_notes;
  const auto build_reports = with_build ? judge_against_build(run, candidates, stored, gate, out, extra_notes)
                                        : std::map<std::string, SuiteReport>{};
  for (auto& sr : out.suites) {
    const auto it = candidates.find(sr.suite);
    if (it == candidates.end()) continue;
    settle_suite(sr, it->second, out.measurement.sides.at(0), run.result.sides.back(), stored, build_reports,
                 with_build, out.confirm);
  }
  out.confirm.seconds = seconds_since(t0);
  for (auto& n : extra_notes) out.notes.push_back(std::move(n));
  // Failures during confirmation are failures of the run.
  for (const auto& s : run.result.sides)
    for (const auto& f : s.failures)
      out.notes.push_back(
          fmt::format("confirm step: {} [{}] round {}: {}: {}", f.suite, f.side, f.round, f.what, f.message));
}

// A failed bench process as a run note: where (the side where two builds ran), what happened, the bench's own words,
// and the benchmarks it marked failed (none while a crash is still being narrowed down).
std::string failure_note(const ProcessFailure& f, bool with_side) {
  std::string note =
      fmt::format("FAILED {}{} round {}: {}", f.suite, with_side ? " [" + f.side + "]" : "", f.round, f.what);
  if (!f.message.empty()) note += ": " + f.message;
  if (!f.benchmarks.empty()) note += fmt::format("; marked failed: {}", fmt::join(f.benchmarks, ", "));
  return note;
}

// What the run cost and what went wrong: the first notes of the report.
std::vector<std::string> run_cost_notes(const SessionResult& out) {
  const SideResult& side = out.measurement.sides.at(0);
  std::vector<std::string> notes;
  notes.push_back(fmt::format("measured: {} process run(s), {} repetitions, {:.1f} s; seed {}", side.processes,
                              side.repetitions, out.measurement.wall_seconds, out.measurement.seed));
  const ConfirmSummary& c = out.confirm;
  if (!c.over_budget.empty())
    notes.push_back(fmt::format(
        "confirm step: {} suite(s) not re-measured, their estimated cost would pass the "
        "run's time budget ({:.0f} s, {:.0f} s spent): {}; {} benchmark(s) keep the first look's verdict",
        c.over_budget.size(), c.budget, c.spent_before, fmt::join(c.over_budget, ", "), c.unconfirmed.size()));
  if (c.enabled && !c.left_to_reference.empty())
    notes.push_back(
        fmt::format("confirm step: not for the suites that go to the reference gate, which measures them again: {} "
                    "(benchmarks that looked regressed)",
                    fmt::join(c.left_to_reference, ", ")));
  if (!c.enabled) {
    notes.push_back("confirm step: off (--confirm-rounds 0)");
  } else if (c.candidates.empty()) {
    if (c.over_budget.empty() && c.left_to_reference.empty() && side.processes > 0)
      notes.push_back("confirm step: nothing looked regressed, no extra repetitions");
  } else {
    notes.push_back(fmt::format(
        "confirm step: {} benchmark(s) re-measured {}, {} confirmed; cost {} extra process "
        "run(s), {} extra repetitions, {:.1f} s",
        c.candidates.size(),
        c.against_baseline_build ? "alternating with a fresh baseline build" : "against the stored baseline",
        c.confirmed, c.processes, c.repetitions, c.seconds));
    if (c.against_baseline_build) notes.push_back(adaptive_note(out.adaptive, "confirm step, adaptive rounds"));
  }
  for (const auto& f : side.failures) notes.push_back(failure_note(f, false));
  for (const auto& n : out.measurement.notes) notes.push_back(n);
  return notes;
}

// The combined report over every suite, the session's notes first. Under a --filter the thresholds entries of the
// benchmarks it left out apply to nothing compared, as meant: they are not noted (`filter`).
void finish_session(SessionResult& out, const std::string& filter) {
  if (!filter.empty())
    for (auto& suite : out.suites) suite.report.unmatched_thresholds.clear();
  out.combined = combine_reports(out.suites);
  out.combined.notes.insert(out.combined.notes.begin(), out.notes.begin(), out.notes.end());
  if (out.combined.counts.total() == 0) {
    // Both sides of an A/B often have the same reason: said once.
    for (const auto& why : out.measurement.nothing_to_run)
      if (std::find(out.combined.nothing_ran_because.begin(), out.combined.nothing_ran_because.end(), why) ==
          out.combined.nothing_ran_because.end())
        out.combined.nothing_ran_because.push_back(why);
  }
  out.exit_code = out.combined.exit_code;
}

}  // namespace

SessionResult gate_run(const Side& current, const MeasureOptions& options, const GateOptions& gate) {
  SessionResult out;
  out.measurement = measure({current}, options);
  StoredComparisons stored;
  for (auto& [suite, cur] : out.measurement.sides.at(0).suites) {
    SuiteReport judged = judge_suite(suite, cur, gate, options, stored);
    if (!gate.runs_dir.empty()) judged.report.current_runs[suite] = run_file(gate.runs_dir, suite, "current").string();
    out.suites.push_back(std::move(judged));
  }
  out.confirm.enabled = gate.confirm_rounds > 0;
  out.confirm.against_baseline_build = !gate.baseline_build.empty();
  Candidates candidates = confirm_candidates(out.suites, gate, out.confirm);
  if (out.confirm.enabled && gate.time_budget_s > 0)
    keep_within_budget(candidates, out, options, gate, seconds_since(gate.started));
  if (out.confirm.enabled && !candidates.empty()) confirm_step(out, candidates, stored, current, options, gate);
  const std::vector<std::string> cost = run_cost_notes(out);
  out.notes.insert(out.notes.begin(), cost.begin(), cost.end());
  finish_session(out, options.filter);
  return out;
}

namespace {

// ---- gate_ab ----

// One suite of an A/B session: compared when both sides have results, else reported as missing / new /
// failed. `suite_options` gets the options of a compared suite.
void judge_ab_suite(const std::string& suite, const SideResult& a, const SideResult& b, const GateOptions& gate,
                    int looks, SessionResult& out, std::map<std::string, CompareOptions>& suite_options) {
  const auto ai = a.suites.find(suite);
  const auto bi = b.suites.find(suite);
  const bool a_ok = has_results(a.suites, suite);
  const bool b_ok = has_results(b.suites, suite);
  if (a_ok && b_ok) {
    std::string machine;
    try {
      machine = machine_class(bi->second);
    } catch (const InputError&) { machine.clear(); }
    const CompareOptions o = options_for_class(gate, machine, interleaved_sides(gate, looks));
    if (suite_options.empty()) out.adaptive.alpha_per_look = o.rule.alpha;
    SuiteReport sr;
    sr.suite = suite;
    sr.report = compare(ai->second, bi->second, o);
    suite_options.emplace(suite, o);
    out.suites.push_back(std::move(sr));
  } else if (bi != b.suites.end()) {
    out.suites.push_back(report_without_comparison(suite, bi->second, a_ok ? Verdict::new_benchmark : Verdict::failed,
                                                   a_ok ? "only in --after" : "the --before build produced no results",
                                                   ""));
    if (!a_ok && ai != a.suites.end()) {
      for (const auto& bb : ai->second.benchmarks)
        if (bb.error) out.suites.back().report.benchmarks.push_back(manual_entry(bb, suite, Verdict::failed, ""));
    }
    out.suites.back().baseline_found = a_ok;
  } else {
    out.suites.push_back(report_without_comparison(suite, ai->second, Verdict::missing, "only in --before", ""));
    out.suites.back().baseline_found = true;
  }
}

// Two paths to one file, or two files of the same bytes.
bool same_bytes(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ec_same, ec_a, ec_b;
  if (std::filesystem::equivalent(a, b, ec_same)) return true;
  const auto size_a = std::filesystem::file_size(a, ec_a);
  const auto size_b = std::filesystem::file_size(b, ec_b);
  if (ec_same || ec_a || ec_b || size_a != size_b) return false;
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  if (!fa || !fb) return false;
  return std::equal(std::istreambuf_iterator<char>(fa), std::istreambuf_iterator<char>(),
                    std::istreambuf_iterator<char>(fb), std::istreambuf_iterator<char>());
}

// The suites whose bench binary is the same bytes on both sides, run in the same environment (--before-env and
// --after-env can make one binary two variants): such an A/B measures the machine, not a change.
std::set<std::string> suites_with_identical_builds(const Side& before, const Side& after) {
  std::set<std::string> out;
  auto env_a = before.env, env_b = after.env;
  std::sort(env_a.begin(), env_a.end());
  std::sort(env_b.begin(), env_b.end());
  if (env_a != env_b) return out;
  for (const BenchBinary& a : before.benches)
    for (const BenchBinary& b : after.benches)
      if (a.suite == b.suite && same_bytes(a.path, b.path)) out.insert(a.suite);
  return out;
}

std::vector<std::string> ab_notes(const SessionResult& out, const MeasureOptions& options) {
  const SideResult& a = out.measurement.sides.at(0);
  const SideResult& b = out.measurement.sides.at(1);
  std::vector<std::string> notes;
  notes.push_back(
      fmt::format("ab: {} round(s), before/after alternating in random order per pair; {} + {} process "
                  "run(s), {} + {} repetitions, {:.1f} s; seed {}",
                  options.rounds, a.processes, b.processes, a.repetitions, b.repetitions, out.measurement.wall_seconds,
                  out.measurement.seed));
  if (a.processes + b.processes > 0) notes.push_back(adaptive_note(out.adaptive, "adaptive rounds"));
  return notes;
}

}  // namespace

void mark_reference_gate(SessionResult& s, const std::string& reference) {
  for (auto& sr : s.suites) {
    sr.baseline_file = reference;
    sr.reference_gate = true;
    std::swap(sr.report.identical_to_reference, sr.report.identical_builds);
  }
}

SessionResult gate_ab(const Side& before, const Side& after, const MeasureOptions& options, const GateOptions& gate) {
  SessionResult out;
  out.measurement = measure({before, after}, options);
  SideResult& a = out.measurement.sides.at(0);
  SideResult& b = out.measurement.sides.at(1);
  const int looks = plan_adaptive(out.adaptive, options.rounds, gate);
  std::map<std::string, CompareOptions> suite_options;
  std::set<std::string> suites;
  for (const auto& [s, rs] : a.suites) suites.insert(s);
  for (const auto& [s, rs] : b.suites) suites.insert(s);
  for (const auto& suite : suites) judge_ab_suite(suite, a, b, gate, looks, out, suite_options);
  const std::set<std::string> identical = suites_with_identical_builds(before, after);
  for (auto& sr : out.suites)
    if (identical.contains(sr.suite)) sr.report.identical_builds = {sr.suite};
  std::vector<std::string> extra_notes;
  if (gate.max_extra_rounds > 0) {
    const std::vector<Side> sides{before, after};
    AdaptiveRun adaptive{{}, a, b, sides, suite_options, options, gate, nullptr, "ab"};
    for (auto& sr : out.suites) adaptive.reports.push_back(&sr);
    extend_undecided(adaptive, out.measurement.wall_seconds, out.adaptive, extra_notes);
  }
  out.notes = ab_notes(out, options);
  for (auto& n : extra_notes) out.notes.push_back(std::move(n));
  for (const auto* s : {&a, &b})
    for (const auto& f : s->failures) out.notes.push_back(failure_note(f, true));
  for (const auto& n : out.measurement.notes) out.notes.push_back(n);
  finish_session(out, options.filter);
  return out;
}

std::string change_text(const BenchmarkComparison& b) {
  const MetricComparison* m = b.driving_metric();
  if (m == nullptr) m = b.metric("time");
  if (m == nullptr) return to_string(b.verdict);
  const std::string interval = interval_in_words(*m);
  return fmt::format("{}, {} {}{}", to_string(b.verdict), m->name, change_in_words(m->kind, m->name, m->change),
                     interval.empty() || interval == "n/a" ? "" : " (interval " + interval + ")");
}

SessionResult merge_sessions(std::vector<SessionResult> parts, const std::vector<std::string>& lead_notes) {
  SessionResult out;
  out.notes = lead_notes;
  SideResult current;
  current.label = "current";
  for (auto& part : parts) {
    for (auto& sr : part.suites) out.suites.push_back(std::move(sr));
    for (auto& n : part.notes) out.notes.push_back(std::move(n));
    if (part.confirm.enabled) out.confirm = part.confirm;
    if (part.adaptive.enabled) out.adaptive = part.adaptive;
    out.measurement.wall_seconds += part.measurement.wall_seconds;
    for (auto& n : part.measurement.nothing_to_run) out.measurement.nothing_to_run.push_back(std::move(n));
    if (out.measurement.seed == 0) out.measurement.seed = part.measurement.seed;
    if (part.measurement.sides.empty()) continue;
    SideResult& side = part.measurement.sides.back();
    for (auto& [suite, rs] : side.suites) current.suites[suite] = std::move(rs);
    current.failures.insert(current.failures.end(), side.failures.begin(), side.failures.end());
    current.raw_files.insert(current.raw_files.end(), side.raw_files.begin(), side.raw_files.end());
    current.processes += side.processes;
    current.repetitions += side.repetitions;
    current.process_seconds += side.process_seconds;
  }
  out.measurement.sides.push_back(std::move(current));
  finish_session(out, "");  // each part was finished under its own filter
  return out;
}

}  // namespace perfgate
