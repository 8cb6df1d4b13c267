#pragma once
// Sessions: what `perfgate run` and `perfgate ab` do with measurements (docs/running.md).
//
//   gate_run()  current measurement vs stored baselines/<class>/<suite>.json, then the confirm step:
//               benchmarks that look regressed are re-measured (alone, --benchmark_filter), alternating
//               with a fresh run of the baseline build when one is given, and only evidence from the
//               re-measurement can make a regression final.
//   gate_ab()   two builds measured alternately in one session, compared with the same rule.
// Both return one combined report over every suite; per-suite reports are kept too.
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "perfgate/compare.hpp"
#include "perfgate/runner.hpp"

namespace perfgate {

struct SuiteReport {
  std::string suite;
  std::string baseline_file;        // empty for ab
  bool baseline_found = true;
  ComparisonReport report;
};

struct ConfirmSummary {
  bool enabled = false;
  bool against_baseline_build = false;
  std::vector<std::string> candidates;    // benchmarks that looked regressed
  int confirmed = 0;                      // still regression after the re-measurement
  int processes = 0;                      // extra process runs
  long repetitions = 0;                   // extra benchmark repetitions measured (both sides)
  double seconds = 0;                     // wall time of the confirm step
};

struct SessionResult {
  ComparisonReport combined;              // every suite, one report
  std::vector<SuiteReport> suites;
  ConfirmSummary confirm;
  MeasureResult measurement;              // the main measurement
  int exit_code = 0;
  std::vector<std::string> notes;         // facts for the reports: rounds, seeds, costs, missing baselines
};

struct GateOptions {
  CompareOptions compare;                 // threshold_override / alpha / ...; thresholds.json is added per class
  std::filesystem::path baseline_dir = "baselines";
  bool allow_machine_mismatch = false;
  int confirm_rounds = 3;                 // 0: no confirm step
  std::vector<BenchBinary> baseline_build;  // fresh baseline for the confirm step (optional)
  std::vector<std::pair<std::string, std::string>> baseline_env;
  // Explicit flags: they beat baselines/<class>/thresholds.json (which is read unless compare.config
  // already came from a file).
  std::optional<double> alpha, run_noise, run_noise_df, max_dispersion;
  // Two sides measured in interleaved rounds (ab, confirm with a baseline build): judge the per-round
  // differences (CompareOptions::paired_runs).
  bool paired = true;
};

// Does this comparison look like a regression worth re-measuring? A regression verdict, or a noisy one
// whose gated metric moved beyond its threshold in the worse direction.
bool looks_regressed(const BenchmarkComparison& b);

// Merges per-suite reports into one (benchmarks concatenated, counts recomputed, notes prefixed).
ComparisonReport combine_reports(const std::vector<SuiteReport>& suites);

// Counts of a list of benchmark comparisons.
VerdictCounts count_verdicts(const std::vector<BenchmarkComparison>& benchmarks);

// Exit code of a session: 77 when no suite had a baseline (or everything was skipped) and nothing
// failed; otherwise DESIGN.md's order over the compared suites plus failures anywhere.
int session_exit_code(const std::vector<SuiteReport>& suites);

// `perfgate run`: measure `current` (options), gate against baselines, confirm. Throws InputError for
// unreadable baselines or a machine-class mismatch that was not allowed.
SessionResult gate_run(const Side& current, const MeasureOptions& options, const GateOptions& gate);

// `perfgate ab`: measure before/after alternately, compare after against before per suite. The rule
// options are gate.compare plus baselines/<class>/thresholds.json and the explicit overrides, as in
// gate_run (the confirm fields of `gate` are unused).
SessionResult gate_ab(const Side& before, const Side& after, const MeasureOptions& options, const GateOptions& gate);

// Record only (no comparison): the per-suite results of side 0 of a measurement.
struct RecordResult {
  MeasureResult measurement;
  int exit_code = 0;                      // 3 when a bench failed, 77 when nothing ran, else 0
};
RecordResult record_run(const Side& current, const MeasureOptions& options);

// Markdown / JSON of a measurement without verdicts (record-only mode): per benchmark its samples,
// process runs, median, within-run robust CV and the spread of per-run medians; failures.
std::string measurement_markdown(const MeasureResult& m, const std::string& title);
std::string measurement_json(const MeasureResult& m);

}  // namespace perfgate
