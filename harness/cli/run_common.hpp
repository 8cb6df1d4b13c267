#pragma once
// Shared by `perfgate run` (cmd_run.cpp) and `perfgate ab` (cmd_ab.cpp): measurement flags, report
// files, the run files kept for later `perfgate compare` / `perfgate baseline update`.
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "perfgate/compare.hpp"
#include "perfgate/options.hpp"
#include "perfgate/profile_run.hpp"
#include "perfgate/report.hpp"
#include "perfgate/runner.hpp"
#include "perfgate/session.hpp"

namespace perfgate::cli {

// The headings of the runner commands' --help, so that their many options read by purpose (CLI11 lists options by
// group, in the order the groups first appear).
inline const std::string kMeasuringGroup = "Measuring";
inline const std::string kReportsGroup = "Reports";
inline const std::string kRuleGroup = "The rule";
inline const std::string kExtraRoundsGroup = "Extra rounds for undecided benchmarks";
inline const std::string kConfirmGroup = "The confirm step";
inline const std::string kBaselinesGroup = "Baselines and learned noise";
inline const std::string kReferenceGroup = "The reference build (--against)";
inline const std::string kExplainGroup = "--explain";
// Puts the options added to `cmd` from its `first`-th on (counting --help) under `group` in its --help.
void name_option_group(CLI::App* cmd, std::size_t first, const std::string& group);

// --summary FILE, its links and -v (perfgate run, ab, compare).
struct SummaryFlags {
  std::string file;            // the summary for comments and job summaries; empty: none written
  std::string report_link;     // where its readers find the full report (default: its path from the summary's folder)
  std::string dashboard_link;  // the trend dashboard, when there is one
  std::string docs_link;       // where docs/ is read (for the glossary link); default: perfgate's own docs/ folder
  bool verbose = false;        // the terminal shows every benchmark's row
};
void add_summary_flags(CLI::App* cmd, SummaryFlags& f);
// The summary's links and -v in `o`; `full_report` is the Markdown report written next to the summary.
void apply_summary_flags(const SummaryFlags& f, const std::string& full_report, ReportOptions& o);
// The glossary's link in a report written to `report_file`: under --docs-link when given, else the path from the
// report's folder to perfgate's own docs (installed beside the executable, or the source tree it was built from);
// empty when neither is there, so that no report links a file that does not exist.
std::string glossary_link_for(const std::string& report_file, const std::string& docs_link);
// Writes the summary when --summary was given (the file names its full report through `o`).
void write_summary(const SummaryFlags& f, const ComparisonReport& report, const ReportOptions& o);
// --explain's likeliest cause per benchmark, for the summary.
std::map<std::string, std::string> likeliest_causes(const std::vector<Explanation>& list);

struct MeasureFlags {
  int rounds = 5;
  int repetitions = 4;
  double min_time = 0;  // 0: the bench's default
  double warmup = 0;    // 0: none
  std::string filter;
  bool no_interleave = false;
  double timeout = 900;
  std::uint64_t seed = 0;
  std::vector<std::string> bench_args;
  bool quiet = false;
  bool realtime = false;
  std::string pin_cpus;  // empty: not pinned
  std::string report_dir = "build/reports";
  std::string report_name = "perf-report";
  SummaryFlags summary;  // run and ab only (add_summary_flags)
};

// The rule's flags (perfgate compare, run, ab, bisect); the gating flags only for the commands that run benches.
struct CompareFlags {
  double threshold = -1;  // < 0: not given
  double alpha = -1;
  double run_noise = -1;  // < 0: default / thresholds.json
  double run_noise_df = -1;
  double session_noise = -1;
  double max_dispersion = -1;
  double phase_impact = -1;
  std::string config;  // thresholds.json given explicitly
  bool no_gate_rates = false;
  bool no_gate_phases = false;
  double min_phase_share = -1;  // < 0: the library's default
  bool paired_dispersion_gate = false;
  // perfgate compare only (its own flags; the commands that run benches leave them unset).
  int min_samples = 0;  // 0: not given
  bool common_mode = false, no_contention_check = false;
  std::string correction = "bh", interval = "hl";
  bool paired = false;  // the files' process runs form rounds of an interleaved session
  int threads = 0;
};

// Adaptive extra rounds (perfgate ab; perfgate run's confirm step with --baseline-build).
struct AdaptiveFlags {
  int max_extra_rounds = 35;           // with the default 5 rounds: looks at 5, 10, 20, 40 rounds
  int extra_rounds_step = 0;           // 0: each look doubles the rounds measured so far
  double max_extra_time_factor = 3.0;  // GateOptions::max_extra_time_factor
};
void add_adaptive_flags(CLI::App* cmd, AdaptiveFlags& f, const std::string& where);
void apply_adaptive_flags(const AdaptiveFlags& f, GateOptions& gate);

// --explain / --explain-max / --explain-ncu-launches / --no-explain-timeline (perfgate ab; perfgate run with a
// baseline or reference build).
struct ExplainFlags {
  bool explain = false;
  int max = 3;
  int ncu_launches = 2000;
  bool timeline = true;
};
void add_explain_flags(CLI::App* cmd, ExplainFlags& f, const std::string& against);

void add_measure_flags(CLI::App* cmd, MeasureFlags& f);

// The check of a LANES flag (ab --lanes, run --against-lanes): "" when `text` parses (parse_cpu_lanes) and names
// only CPUs this process may use, else why not.
std::string check_lanes(const std::string& text);
// `text` as MeasureOptions::lanes; empty text: none. A malformed one is a CLI::ValidationError of `flag`.
std::vector<std::vector<int>> lanes_flag(const std::string& text, const std::string& flag);

// How a command words two of the rule flags' help.
struct RuleFlagsHelp {
  std::string config_default;     // where the thresholds.json used without --config lies
  std::string session_noise_use;  // which comparisons --session-noise widens
};
// --threshold, --alpha, --run-noise, --run-noise-df, --session-noise, --max-dispersion, --config and
// --paired-dispersion-gate: the knobs of the rule (options.hpp).
void add_rule_flags(CLI::App* cmd, CompareFlags& f, const RuleFlagsHelp& help);
// add_rule_flags with run's wording, and which counters gate: --no-gate-rates, --no-gate-phases,
// --min-phase-share (perfgate run, ab, bisect).
void add_compare_flags(CLI::App* cmd, CompareFlags& f);

MeasureOptions to_measure_options(const MeasureFlags& f, const std::filesystem::path& work_dir);
// The flags and --config of a command, for resolve_rule_options (options.hpp): the one place where a command's
// flags become the rule's sources. Loads --config (InputError naming the file and field when it is malformed).
RuleSources to_rule_sources(const CompareFlags& f);

// "KEY=VALUE" -> pair; throws CLI::ValidationError on a malformed entry.
std::vector<std::pair<std::string, std::string>> parse_env(const std::vector<std::string>& entries,
                                                           const std::string& flag);

// <report-dir>/raw/<UTC timestamp>-<pid>: where this invocation's raw bench JSON go.
std::filesystem::path raw_dir(const std::string& report_dir, const std::string& kind);

// The build folder this perfgate executable belongs to (<build>/bin/perfgate -> <build>), or "".
std::filesystem::path own_build_dir();

// Writes <dir>/<name>.md and <dir>/<name>.json (combined) and <dir>/<suite>.<name>.md/.json per suite;
// prints the terminal table. Returns the files written.
// With --summary, the combined report's summary too; `causes` are --explain's likeliest causes.
std::vector<std::string> write_session_reports(const SessionResult& s, const std::string& dir, const std::string& name,
                                               const std::string& title, const SummaryFlags& summary,
                                               const std::map<std::string, std::string>& causes = {});

// Keeps the measured runs as Google Benchmark JSON (per suite): <dir>/runs/<suite>.<label>.json.
// Returns the files written.
std::vector<std::string> write_run_files(const SideResult& side, const std::string& dir, const std::string& label,
                                         const std::string& command);

// --explain: each regression of the session (up to `max`) re-run alone per side under the profilers
// (profile_run.hpp, explain.hpp); the likeliest causes lead the combined report's notes.
std::vector<Explanation> explain_regressions(SessionResult& s, const Side& before, const Side& after,
                                             const MeasureOptions& mo, const std::string& report_dir,
                                             const ExplainFlags& flags);
// The "Why: differential profiles" section appended to the Markdown report.
std::string explanations_markdown(const std::vector<Explanation>& list, const std::string& report_dir);

// The command line as one string, for reports.
std::string command_line();

}  // namespace perfgate::cli
