#pragma once
// Sessions: what `perfgate run` and `perfgate ab` do with measurements (docs/running.md).
//
//   gate_run()  current measurement vs stored baselines/<class>/<suite>.json, then the confirm step:
//               benchmarks that look regressed are re-measured (alone, --benchmark_filter), alternating
//               with a fresh run of the baseline build when one is given, and only evidence from the
//               re-measurement can make a regression final.
//   gate_ab()   two builds measured alternately in one session, compared with the same rule.
// Both return one combined report over every suite; per-suite reports are kept too.
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "perfgate/compare.hpp"
#include "perfgate/options.hpp"
#include "perfgate/record.hpp"
#include "perfgate/runner.hpp"

namespace perfgate {

struct SuiteReport {
  std::string suite;
  std::string baseline_file;  // empty for ab; the reference's label for perfgate run's reference gate
  bool baseline_found = true;
  bool reference_gate = false;  // perfgate run gated it against a reference build (the relative gate)
  ComparisonReport report;
};

struct ConfirmSummary {
  bool enabled = false;
  bool against_baseline_build = false;
  std::vector<std::string> candidates;  // benchmarks that looked regressed
  int confirmed = 0;                    // still regression after the re-measurement
  int processes = 0;                    // extra process runs
  long repetitions = 0;                 // extra benchmark repetitions measured (both sides)
  double seconds = 0;                   // wall time of the confirm step
  // Suites left out because their estimated cost would pass GateOptions::time_budget_s: "suite (~N s)".
  std::vector<std::string> over_budget;
  std::vector<std::string> unconfirmed;  // their candidates, which keep the verdict of the first look
  double budget = 0;                     // GateOptions::time_budget_s when it was checked (0: none)
  double spent_before = 0;               // seconds of the run spent when the budget was checked
  // Suites not confirmed since they go to the reference gate (GateOptions::leaves_stored_gate): "suite (N)",
  // N of its benchmarks looked regressed.
  std::vector<std::string> left_to_reference;
};

// Adaptive extra rounds (perfgate ab, and run's confirm step with --baseline-build): benchmarks still
// undecided after the initial rounds are measured again in further interleaved rounds (alone, filtered)
// and judged on all their rounds, until decided or the budget is spent. Every look at the data uses
// alpha / planned_looks (Bonferroni over the planned looks), so stopping early cannot inflate the
// false-regression rate above alpha (docs/statistics.md, "Adaptive extra rounds").
struct AdaptiveSummary {
  bool enabled = false;
  int looks_planned = 1;  // 1 + look_schedule().size()
  int looks_used = 1;
  std::vector<int> schedule;          // extra rounds of each later look (look_schedule)
  double alpha_per_look = 0;          // of the first suite (thresholds.json may differ per class)
  std::vector<std::string> extended;  // benchmarks given extra rounds (each once)
  int decided = 0;                    // of those, decided (regression / improvement / unchanged) at the end
  int extra_rounds = 0;               // extra rounds measured (per side)
  int processes = 0;                  // extra process runs (all sides)
  long repetitions = 0;               // extra repetitions (all sides)
  double seconds = 0;
  double budget_seconds = 0;  // max_extra_time_factor x the initial measurement, within the run's time budget (0: none)
  bool stopped_by_budget = false;  // a look was left out because of that budget
};

struct SessionResult {
  ComparisonReport combined;  // every suite, one report
  std::vector<SuiteReport> suites;
  ConfirmSummary confirm;
  AdaptiveSummary adaptive;   // ab, or the confirm step with a baseline build
  MeasureResult measurement;  // the main measurement
  int exit_code = 0;
  std::vector<std::string> notes;  // facts for the reports: rounds, seeds, costs, missing baselines
};

struct GateOptions {
  // Where the rule's options come from (options.hpp): each suite's are resolved with its class's
  // baselines/<class>/thresholds.json (resolve_rule_options).
  RuleSources rule;
  std::filesystem::path baseline_dir = "baselines";
  // Where the caller writes this run's run files (<dir>/<suite>.current.json; perfgate run: <report-dir>/runs), so
  // that a suite without a baseline is told the command that stores them as one. Empty: the note names no file.
  std::filesystem::path runs_dir;
  bool allow_machine_mismatch = false;
  int confirm_rounds = 3;  // 0: no confirm step
  // The whole run's time budget in seconds (0: none), counted from `started`. The confirm step re-measures only
  // the suites whose estimated cost (their processes' mean wall time in the measurement x its rounds) still fits,
  // cheapest first; the candidates of the others keep the verdict of the first look, with the reason. Adaptive
  // extra rounds stop where their next look would pass it. It never changes a verdict: a first-look regression
  // left unconfirmed still fails the run.
  double time_budget_s = 0;
  // When the run began: the options are made as it starts (the CLI makes them before building a reference).
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::vector<BenchBinary> baseline_build;  // fresh baseline for the confirm step (optional)
  std::vector<std::pair<std::string, std::string>> baseline_env;
  // Whether a suite leaves the stored-baseline gate once judged (perfgate run moves a suite whose baseline does not
  // fit this host, or judged nothing here, to the reference gate): such a suite gets no confirm step, since the
  // reference gate measures it again and its stored verdicts are dropped. Unset: every suite stays.
  std::function<bool(const SuiteReport&)> leaves_stored_gate;
  // Suites whose skips the caller's own notes explain (perfgate run's plan found their hardware missing): a suite
  // of these with every benchmark skipped and no baseline gets no note of its own, which would say it again.
  std::set<std::string> skips_explained;
  // Two sides measured in interleaved rounds (ab, confirm with a baseline build): judge the per-round
  // differences (RuleOptions::paired_runs).
  bool paired = true;
  // Adaptive extra rounds (AdaptiveSummary): at most this many extra rounds per side for undecided
  // benchmarks (0: off, the rule judges the initial rounds at the full alpha), in looks of
  // extra_rounds_step rounds (0: each look doubles the rounds measured so far: 5 -> 10 -> 20 -> 40).
  int max_extra_rounds = 0;
  int extra_rounds_step = 0;
  // Time budget of the extra rounds: a look is not started when the extra time so far plus its estimate
  // (its rounds x the seconds per round of the previous look, or of the initial measurement) would exceed
  // this factor x the initial measurement's wall time (0: no limit), or what is left of time_budget_s. A suite
  // whose processes spend 15-45 s on setup and correctness checks (lora_backward) would otherwise spend 35 x 2 of
  // them on one benchmark.
  double max_extra_time_factor = 3.0;
  // Learned noise for the stored-baseline gate (NoiseOptions::learned_noise). `learned_noise` gives the table
  // of a history class (history::history_class of the current run), e.g. from a results history that the CLI
  // opened (--history); nullptr, or no callback: the snapshot noise.json beside the suite's baseline file is
  // used when use_noise_snapshot and it exists. Neither: the class prior alone.
  std::function<std::shared_ptr<const LearnedNoiseTable>(const std::string& history_class)> learned_noise;
  std::string learned_noise_origin;  // the history `learned_noise` reads, for the note when it has nothing
  bool use_noise_snapshot = true;
};

// The extra rounds of each look after the first: `step` each (the last one capped by the budget), or with
// step <= 0 as many as measured so far (doubling; at least 1). Empty when max_extra_rounds <= 0.
// Examples: (5, 35, 0) -> 5, 10, 20; (5, 12, 5) -> 5, 5, 2; (5, 10, 0) -> 5, 5.
std::vector<int> look_schedule(int initial_rounds, int max_extra_rounds, int step);

// Is more data worth having for this benchmark? Verdict noisy (any reason: interval straddles the
// threshold, not significant, too few samples, contention), or unchanged while the interval of a gated
// metric still reaches beyond its threshold in the worse direction (a regression is not excluded).
bool undecided(const BenchmarkComparison& b);

// Looks of an adaptive session: the initial one plus those of look_schedule().
int planned_looks(int initial_rounds, int max_extra_rounds, int step);

// The adaptive extra rounds' time budget in seconds: max_extra_time_factor x the initial measurement's
// `initial_seconds`, and no more than what is left of the run's time_budget_s since gate.started (0: no limit).
double extra_time_budget(const GateOptions& gate, double initial_seconds);

// The report's note on the adaptive rounds of a session (`what` names them, e.g. "adaptive rounds").
std::string adaptive_note(const AdaptiveSummary& a, const std::string& what);
// Alpha for each look: alpha_per_look (options.hpp), which resolve_rule_options applies to interleaved sides.

// Does this comparison look like a regression worth re-measuring? A regression verdict, or a noisy one
// whose gated metric moved beyond its threshold in the worse direction.
bool looks_regressed(const BenchmarkComparison& b);

// Merges per-suite reports into one (benchmarks concatenated, counts recomputed, notes prefixed).
ComparisonReport combine_reports(const std::vector<SuiteReport>& suites);

// Counts of a list of benchmark comparisons.
VerdictCounts count_verdicts(const std::vector<BenchmarkComparison>& benchmarks);

// Exit code of a session: 77 when no suite had a baseline (or everything was skipped) and nothing
// failed; otherwise the exit-code order (docs/architecture.md) over the compared suites plus failures anywhere.
int session_exit_code(const std::vector<SuiteReport>& suites);

// `perfgate run`: measure `current` (options), gate against baselines, confirm. Throws InputError for
// unreadable baselines or a machine-class mismatch that was not allowed.
SessionResult gate_run(const Side& current, const MeasureOptions& options, const GateOptions& gate);

// `perfgate ab`: measure before/after alternately, compare after against before per suite. The rule
// options are resolved from gate.rule with baselines/<class>/thresholds.json, as in gate_run (the confirm
// fields of `gate` are unused).
SessionResult gate_ab(const Side& before, const Side& after, const MeasureOptions& options, const GateOptions& gate);

// A gate_ab session of `perfgate run --against`, whose before is the reference build labelled `reference`: each
// suite names it as its baseline and is marked a reference-gate suite, and identical builds are noted as the
// reference's (no code changed since it), not as ab's --before and --after.
void mark_reference_gate(SessionResult& s, const std::string& reference);

// "regression, time 12.3% slower (interval 9.8% to 14.1% slower)": a verdict with the change and interval of its
// deciding metric, in the reports' words (a rate's fall reads slower, as a time's rise does).
std::string change_text(const BenchmarkComparison& b);

// One `perfgate run` can gate some suites against stored baselines and others against a reference build
// (gate_plan.hpp): the parts become one session, suites and notes in order, one combined report and exit
// code. `lead_notes` (which gate each suite used, and why) come first.
SessionResult merge_sessions(std::vector<SessionResult> parts, const std::vector<std::string>& lead_notes);

// Record only (no comparison): the per-suite results of side 0 of a measurement.
struct RecordResult {
  MeasureResult measurement;
  RecordReport report;  // what the record-only reports print (summarise_record)
  int exit_code = 0;    // 3 when a bench failed, 77 when nothing ran, else 0
};
RecordResult record_run(const Side& current, const MeasureOptions& options);

// A measurement without verdicts, summarised for the record-only reports: per benchmark its samples,
// process runs, median, within-run robust CV and the spread of per-run medians; failures.
RecordReport summarise_record(const MeasureResult& m);

}  // namespace perfgate
