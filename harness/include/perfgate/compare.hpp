#pragma once
// The verdict engine: baseline ResultSet x current ResultSet -> one verdict per benchmark.
// The rule (docs/statistics.md): a metric regressed only when the change is statistically significant
// after multiple-comparison control across everything compared AND its confidence interval lies
// entirely beyond the practical threshold in the worse direction. The interval carries between-run
// noise (spread of per-process-run medians, or a prior for the machine class when a side has one run),
// so drift between process runs is not mistaken for a change. Too few samples or too much dispersion
// within runs is "noisy", never "regression".
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "perfgate/context_pattern.hpp"
#include "perfgate/learned_noise.hpp"
#include "perfgate/model.hpp"
#include "perfgate/throttled.hpp"

namespace perfgate {

enum class Verdict { regression, improvement, unchanged, noisy, missing, new_benchmark, failed, skipped };

// "regression", "improvement", "unchanged", "noisy", "missing", "new", "failed", "skipped".
const char* to_string(Verdict verdict);
// Report order: failed, regression, missing, noisy, improvement, new, skipped, unchanged (0 = first).
int severity_rank(Verdict verdict);
// Compared on both sides: not missing, new, failed or skipped.
inline bool is_compared(Verdict v) {
  return v == Verdict::regression || v == Verdict::improvement || v == Verdict::unchanged || v == Verdict::noisy;
}
// A significant change beyond the threshold, either way.
inline bool is_alarm(Verdict v) { return v == Verdict::regression || v == Verdict::improvement; }

// Why a metric is too noisy to judge, each with its own remedy: too few samples a side; a spread within runs above
// --max-dispersion; an interval that reaches past the threshold; wall time under different machine contention.
enum class NoisyCause { none, few_samples, dispersion, interval, contention };

enum class Correction { benjamini_hochberg, holm, none };
enum class IntervalMethod { hodges_lehmann, bootstrap };

// The rule's knobs that both a thresholds.json and the command line can set (unset: not given there).
struct RuleKnobs {
  std::optional<double> run_noise;
  std::optional<double> run_noise_df;
  std::optional<double> session_noise;
  std::optional<double> max_dispersion;
  std::optional<double> phase_impact;
  std::optional<int> min_samples;
  std::optional<double> alpha;
  std::optional<bool> common_mode;
  std::optional<bool> contention_check;
};

// thresholds.json next to the baselines (baselines/<class>/thresholds.json). Every key is optional:
// {
//   "default": 0.05,                              practical threshold, relative (0.05 = 5%)
//   "suites": {"lora_backward": 0.08},            per suite (first path component of the name)
//   "benchmarks": {"transfers/h2d/pageable/.*": 0.15, "exact/name": 0.1},
//                                                 exact name, else ECMAScript regex (full match);
//                                                 the first match in file order wins
//   "run_noise": 0.05,                            prior between-run noise of this machine class
//   "run_noise_df": 8,                            weight of that prior, in degrees of freedom
//   "session_noise": 0.06,                        prior drift between measuring sessions (stored runs)
//   "max_dispersion": 0.10,                       robust CV within a run above which a metric is noisy
//   "phase_impact": 0.005,                        a phase's change must be worth this share of its benchmark's
//                                                 time to be practically significant (its threshold becomes
//                                                 at least phase_impact / its share of the time; 0: off)
//   "min_samples": 4,                             per side, below which a metric is noisy
//   "alpha": 0.05,                                significance / 1 - interval confidence
//   "common_mode": false,                         remove a suite's common drift in single-run comparisons
//   "contention_check": true                      judge by CPU time when real/cpu time shows contention
//   "host_dependent": "lora_backward/.*/threads:1/.*"
//                                                 benchmarks whose time follows the host on this class: reported,
//                                                 not gated, against a stored baseline (host_dependent.hpp)
// }
struct ThresholdConfig : RuleKnobs {
  std::optional<double> default_threshold;
  std::map<std::string, double> suites;
  struct Pattern {
    std::string text;
    std::regex regex;
    bool valid_regex = false;
    double threshold = 0;
  };
  std::vector<Pattern> benchmarks;
  // "host_dependent": an ECMAScript regex over the whole normalised name, compiled once. A class whose hosts differ
  // where the suite cannot know it (one-thread timings on a large shared VM) names such benchmarks here.
  std::optional<ContextPattern> host_dependent;
  std::string source;  // file it came from (for reports), empty when none
  // Given for this one comparison (perfgate compare --config): every entry is meant for its benchmarks, so one that
  // applies to none is worth a note. A class's file, or one --config for every suite of a run, names other suites
  // too: there only an entry that names a compared suite is.
  bool for_this_comparison = false;
};

// Parses the JSON text above. Throws InputError (file = source) on malformed JSON, unknown keys,
// wrong types, thresholds outside [0, 10), or values that make no sense (negative noise, ...).
ThresholdConfig parse_threshold_config(const std::string& json_text, const std::string& source);
ThresholdConfig load_threshold_config(const std::string& file);

// Relative values (thresholds, noise priors) as users write them, shared by the flags and thresholds.json: a
// percentage ("5%" -> 0.05; nullopt when `text` is no number followed by '%'), and why a bare value of 1 or more is
// refused ("5 would be 500%: ..."; empty below 1), its percentages wrapped in `quote` as the input needs them.
std::optional<double> parse_percentage(const std::string& text);
std::string bare_relative_problem(double value, const char* quote);
// A relative value as a command line gives it, "0.05" or "5%" -> 0.05; nullopt, with `why` said, for anything else
// (a word, a bare number of 1 or more).
std::optional<double> parse_relative(const std::string& text, std::string& why);

// The options of one comparison, in groups by what they decide (resolved in one place each: options.hpp).

// The rule: what counts as a change, how sure the verdict must be, and how the statistics are computed.
struct RuleOptions {
  double alpha = 0.05;                       // significance level after correction; intervals are (1 - alpha)
  double threshold = 0.05;                   // practical threshold when neither config nor flag gives one
  std::optional<double> threshold_override;  // --threshold: beats every config entry
  ThresholdConfig config;
  Correction correction = Correction::benjamini_hochberg;
  IntervalMethod interval = IntervalMethod::hodges_lehmann;
  int bootstrap_resamples = 2000;
  std::uint64_t seed = 0x5eed;   // bootstrap seed (mixed with the benchmark/metric name)
  int min_samples = 4;           // per side
  double max_dispersion = 0.10;  // robust CV (1.4826 MAD / median) within a process run
  // Interleaved A/B sessions (perfgate ab, the confirm step): process run i of the baseline was measured
  // next to process run i of the current side. When both sides hold the same number (>= 3) of runs, the
  // rule then works on the per-round differences of run medians (paired t, no prior), which cancels the
  // slow drift that hits both sides of a round alike.
  bool paired_runs = false;
  // The within-run dispersion gate (max_dispersion) for paired analyses. Off by default: the paired t
  // interval is built from the per-round differences of run medians, so the within-run spread that moves a
  // round's median is already in it (it widens the interval instead of vetoing the verdict). On: a paired
  // metric above max_dispersion is noisy unless its interval lies beyond threshold + dispersion, as in
  // the other analyses (perfgate's earlier rule).
  bool paired_dispersion_gate = false;
  // A phase's practical threshold is at least phase_impact / (its share of the benchmark's baseline time): a change
  // of a small phase is practically significant only where it is worth that much of the benchmark (0: off).
  double phase_impact = 0;
};

// The noise a change is judged against: priors of the machine class, learned bands, drift removed.
struct NoiseOptions {
  // Between-run noise prior: relative standard deviation of a process run's median on this machine
  // class (measured here: +-10% and more between runs, 2-3% within) and its weight in degrees of
  // freedom. Estimated spreads of per-run medians are pooled with it; with one run per side the prior
  // alone widens the interval. run_noise_df = 0 turns the prior off (pure within-run analysis).
  double run_noise = 0.05;
  double run_noise_df = 8;
  // Drift between measuring sessions: relative SD of a whole session's level on this machine class.
  // Process runs of one session vary around that session's level, so the spread of run medians cannot
  // show it, and with many runs per side the between-run interval shrinks below it (the measured session
  // drift of the 2-vCPU runner and the A/A false alarms it caused: docs/results/statistics-evidence.md).
  // Widens the between-run interval (two stored sides) in quadrature by t(run_noise_df) * session_noise
  // * sqrt 2, like the run prior of single-run comparisons. Never applies to sides measured in one
  // session (perfgate ab, the confirm step against a fresh baseline build). 0: off (the default).
  double session_noise = 0.0;
  // Suite drift: when both sides are single process runs, the machine's drift between the two runs moves
  // every metric of a suite together (measured here: whole suites 2x slower in one run, 0.5-3% spread
  // inside runs). With at least common_mode_min_metrics gated metrics in a suite, the median change over
  // them (worse-direction, in logs) is taken as the machine's drift and removed, and the robust spread
  // of the changes around it (1.4826 MAD, pooled with the prior) is the between-run noise of one
  // metric. A change of the whole suite therefore cannot fail such a comparison; the report says so and
  // names the shift. Interleaved runs (perfgate ab, several process runs per side) are not affected.
  bool common_mode = false;
  int common_mode_min_metrics = 8;
  // Between-run noise prior of CPU time (gated only for contended benchmarks, HostOptions::contention_check):
  // measured here 0.4-0.9% between process runs whose wall times differed by 2x.
  double cpu_run_noise = 0.01;
  // Learned between-session noise (learned_noise.hpp), from a results history or a baselines/ snapshot. For
  // sides measured in different sessions (a stored baseline; never paired runs), a metric with a usable band
  // is judged on the difference of the two session medians (medians of run medians) with the band in place
  // of run_noise and session_noise: interval d +- t(sessions) x band x sqrt 2. Where a suite's bands were
  // also learned with the suite's common mode removed and those are tighter, the comparison's own common
  // mode (the median time change over the suite's benchmarks, one vote each) is removed and those bands
  // are used, when the suite has at least common_mode_min_metrics such benchmarks. nullptr: the prior only.
  std::shared_ptr<const LearnedNoiseTable> learned_noise;
};

// Which metrics gate: rate and phase counters, and phases too small to act on.
struct SelectionOptions {
  bool gate_rates = true;
  bool gate_phases = true;
  // A phase gates only when it is at least this share of the benchmark's baseline time (phase counters are
  // ms per iteration, latency ns per iteration). Below it the phase is reported, not gated: a 60 ns phase
  // of a 3 ms benchmark that tripled is a real, significant change the user cannot act on, and a gate that
  // fails on it gets switched off (a main job once reported 8 "regressions", all of a phase at 0.002% of the
  // time: docs/statistics.md, "Parameters").
  double min_phase_share = 0.01;
};

// What the host did to the measurement: contention, clocks, throttling.
struct HostOptions {
  // Machine contention: for real-time (not manual-time) benchmarks the ratio real_time / cpu_time of a
  // repetition shows how much of the wall time the process was not running (measured here: 1.00 on a quiet
  // run, 1.5 and 2.0 with one or two neighbours, CPU time stable within 1%). When that ratio moved by more
  // than half the threshold between the sides, contention may explain any wall-time change within the
  // threshold, wall time cannot decide: its regression/improvement becomes noisy, and the benchmark's
  // cpu_time is gated instead (threshold raised by 15% of the ratio's change, because a neighbour also
  // pollutes caches: +15% CPU time on a cache-bound walk when the wall time doubled).
  bool contention_check = true;
  // Cycle space (cycle_space.hpp, docs/statistics.md): when a benchmark's median sm_clock_mhz differs between
  // the sides by more than clock_tolerance (relative), its time is also judged as time x clock, and for the
  // benchmarks a suite names compute-bound (perfgate.compute_bound) that judgement decides. Off: time only.
  bool cycle_space = true;
  double clock_tolerance = 0.01;
  // Throttled repetitions (throttled.hpp, docs/statistics.md): a GPU repetition with thermal_share > 0, or whose
  // sampled mean SM clock is below throttle_clock_share of its benchmark's fastest repetition on that side, is
  // discarded from every metric of that benchmark, unless fewer than min_samples would be left. Off: all count.
  bool discard_throttled = true;
  double throttle_clock_share = 0.70;
};

// What the reports call the two sides: a stored baseline and the current run, or two builds measured in one
// session (`builds`, set for every interleaved comparison: perfgate ab's "before" and "after", the reference gate's
// "reference" and "current"). The caller names them in RuleSources::base.
struct SideNames {
  std::string baseline = "baseline";
  std::string current = "current";
  bool builds = false;
  std::string baseline_place() const;  // "the baseline", "the before build"
  std::string current_place() const;   // "the current run", "the after build"
};

struct CompareOptions {
  RuleOptions rule;
  NoiseOptions noise;
  SelectionOptions selection;
  HostOptions host;
  SideNames sides;
  int threads = 0;  // how the engine runs, not what it judges: 0: up to 2 (the CI machines have 2 cores)
};

// What a report says about the options its verdicts were reached with: only what the renderers show.
struct ReportedOptions {
  double alpha = 0.05;
  double default_threshold = 0.05;   // --threshold, else thresholds.json's "default", else the built-in value
  bool threshold_from_flag = false;  // --threshold gave it
  std::string threshold_config;      // the thresholds.json used (empty: none)
  Correction correction = Correction::benjamini_hochberg;
  IntervalMethod interval = IntervalMethod::hodges_lehmann;
  double run_noise = 0.05, run_noise_df = 8, session_noise = 0, cpu_run_noise = 0.01;
  bool paired_runs = false, common_mode = false, contention_check = true;
  double max_dispersion = 0.10, min_phase_share = 0.01, phase_impact = 0;
  int min_samples = 4;
  double throttle_clock_share = 0.70;
  std::string learned_noise_source;  // where the learned bands came from (empty: none)
  SideNames sides;
};
ReportedOptions reported_options(const CompareOptions& options);

struct MetricComparison {
  std::string name;  // "time" for latency, else the counter name
  MetricKind kind = MetricKind::info;
  bool gated = false;
  bool below_min_phase_share = false;  // a phase reported but not gated (SelectionOptions::min_phase_share)
  Verdict verdict = Verdict::unchanged;
  std::string reason;  // one line: why this verdict
  std::size_t n_baseline = 0, n_current = 0;
  int runs_baseline = 0, runs_current = 0;
  double baseline_median = 0, current_median = 0;
  double change = 0;        // the change judged: current_median / baseline_median - 1, relative to the
                            // suite's common drift when that was removed (see common_shift)
  double raw_change = 0;    // current_median / baseline_median - 1, always
  double common_shift = 0;  // suite-wide drift removed from this metric (relative; 0: none)
  double change_lower = 0, change_upper = 0;  // (1 - alpha) interval of the relative change
  bool interval_bounded = false;
  double p_value = 1, p_adjusted = 1;
  double dispersion = 0;             // max robust CV within a run, both sides
  double run_noise = 0;              // between-run relative SD used (0: none)
  bool run_noise_estimated = false;  // true when per-run medians contributed to it
  std::string method;                // "within-run" (Mann-Whitney + interval) | "between-run (k vs k runs)"
                                     // (run medians, moderated t) | "paired (k rounds)" (per-round differences, t)
  double threshold = 0;
  // The smallest change in the worse direction that this comparison, with the evidence it had, would call a
  // regression: the threshold (plus the within-run dispersion where that gate applies) plus the interval's
  // half-width on the better side of its estimate. Relative, signed like `change` (+ slower for times,
  // - for rates). NaN when the metric is not gated or has no bounded interval.
  double detectable_change = std::numeric_limits<double>::quiet_NaN();
  bool learned_noise = false;  // judged with a learned band (method says which)
  // The analysis's noise holds the within-run spread (paired rounds: the per-round differences; learned bands:
  // the spread of session levels), so a high dispersion widens the interval instead of vetoing the verdict.
  bool noise_carries_dispersion = false;
  NoisyCause noisy_cause = NoisyCause::none;  // set with the verdict noisy
  // A counter that one side has and the other lacks (reason says which side): never judged.
  bool one_sided() const { return (n_baseline == 0) != (n_current == 0); }
};

// A benchmark whose sides ran at different SM clocks (cycle_space.hpp): its clocks, and what time space said.
struct CycleSpaceJudgement {
  double baseline_clock_mhz = 0, current_clock_mhz = 0;  // medians of the sm_clock_mhz counter
  bool compute_bound = false;                            // named by perfgate.compute_bound
  bool cycles_decided = false;  // the "cycles" metric decided: a time-space alarm that the clock difference explains
  Verdict time_verdict = Verdict::unchanged;  // the verdict in time space, and its driving metric
  std::string time_driver;
};

struct BenchmarkComparison {
  std::string name;      // normalised
  std::string raw_name;  // current's raw name when present, else the baseline's
  std::string suite;
  Verdict verdict = Verdict::unchanged;
  std::string reason;
  std::string driver;  // metric that decided the verdict (empty for missing/new/failed/skipped)
  double threshold = 0;
  std::vector<MetricComparison> metrics;  // time, then counters by name; gated and info alike
  std::optional<std::string> message;     // failure / skip message
  std::string failed_in;  // between two builds, where it failed: "the after build", "both builds"; else empty
  std::string label_baseline, label_current;  // each side's Google Benchmark label (State::SetLabel), if any
  // real_time / cpu_time medians (real-time benchmarks with CPU time; NaN otherwise) and the CPU time change.
  double contention_baseline = std::numeric_limits<double>::quiet_NaN();
  double contention_current = std::numeric_limits<double>::quiet_NaN();
  double cpu_time_change = std::numeric_limits<double>::quiet_NaN();
  std::optional<CycleSpaceJudgement> cycle_space;  // set only when the clocks differed (metric "cycles" added)
  // Each side's slowest repetition of the time over the median of its repetitions (NaN: no samples). One repetition
  // far out on the current side only is a rare slow path that the median, and so the verdict, does not show.
  double slowest_over_median_baseline = std::numeric_limits<double>::quiet_NaN();
  double slowest_over_median_current = std::numeric_limits<double>::quiet_NaN();
  // Whether the current side holds a repetition at least kFarRepetition times its median that the baseline lacks.
  static constexpr double kFarRepetition = 10;
  bool far_slow_repetition() const {
    return slowest_over_median_current >= kFarRepetition && !(slowest_over_median_baseline >= kFarRepetition);
  }

  const MetricComparison* metric(const std::string& metric_name) const;
  const MetricComparison* driving_metric() const;
  // detectable_change of the time metric, else of the driving metric; NaN when none.
  double detectable_change() const;
};

struct VerdictCounts {
  int regression = 0, improvement = 0, unchanged = 0, noisy = 0, missing = 0, new_benchmark = 0, failed = 0,
      skipped = 0;
  // Compared benchmarks whose verdict a gated metric decided: a regression, an improvement, or unchanged with the
  // interval within the threshold. A run with none judged says so (exit 77), never PASS.
  int judged = 0;
  void add(Verdict v);                     // one more benchmark with this verdict
  void add(const BenchmarkComparison& b);  // the same, and whether it was judged
  int compared() const { return regression + improvement + unchanged + noisy; }
  int total() const { return compared() + missing + new_benchmark + failed + skipped; }
};

struct SideInfo {
  std::string machine_class;  // empty when it could not be derived
  std::string commit;         // from the context (perfgate.git_commit, perfgate.baseline.commit, ...)
  std::string date;
  std::string host;
  std::string executable;
  int process_runs = 0;
  // Of process_runs, those of adaptive extra rounds, which ran only the benchmarks still undecided (session.hpp).
  int extra_process_runs = 0;
  // perfgate.run.cpus when every process run of the side was pinned (the distinct lists, "; "-joined); empty when
  // any ran unpinned or did not say.
  std::string pinned_cpus;
  std::vector<std::string> files;
};

struct SuiteDrift {
  double shift = 0;   // median worse-direction change of the suite's metrics, relative (+0.8 = 80% slower)
  double spread = 0;  // robust SD of one metric's change around it, relative
  int metrics = 0;    // gated metrics it was estimated from
};

struct ComparisonReport {
  std::vector<BenchmarkComparison> benchmarks;  // current's order, then benchmarks only in the baseline
  VerdictCounts counts;
  int exit_code = 0;
  SideInfo baseline, current;
  bool machine_mismatch_allowed = false;
  std::vector<std::string> files_on_both_sides;  // process runs compared with themselves (a user's slip)
  std::vector<std::string> identical_builds;     // ab: suites whose --before and --after binaries are the same bytes
  // run --against: suites whose bench binaries are the same bytes as the reference build's (no code of theirs changed)
  std::vector<std::string> identical_to_reference;
  // thresholds.json entries that apply to no compared benchmark ("benchmarks 'BM_Sumx/.*'"): unmatched_thresholds
  std::vector<std::string> unmatched_thresholds;
  // When no benchmark ran: why each bench binary had nothing to run (a filter that matched none, say); the headline
  // says it
  std::vector<std::string> nothing_ran_because;
  ReportedOptions options;                         // the options the renderers show (reported_options)
  std::vector<std::string> notes;                  // warnings for the reports (e.g. few repetitions)
  std::map<std::string, std::string> nvtx_ranges;  // suite -> comma list (perfgate.nvtx_ranges)
  std::map<std::string, std::string> executables;  // suite -> bench binary ("executable" in the context)
  // suite -> what `perfgate baseline update --from` takes to store this comparison's current runs (perfgate run's run
  // file, compare's current files as given): the advice for a benchmark with no baseline names it
  std::map<std::string, std::string> current_runs;
  int repetitions = 0;                               // typical samples per benchmark in the current run (median)
  int fewest_repetitions = 0, most_repetitions = 0;  // the range behind that median
  bool samples_are_aggregates = false;  // every compared benchmark's files held aggregates only: one sample a run
  std::map<std::string, SuiteDrift> suite_drift;  // suites whose common drift was removed
  // Learned noise: how many gated metrics it judged, and suites whose common mode was removed for it.
  int learned_metrics = 0;
  int prior_metrics = 0;  // gated metrics of stored comparisons judged with the prior
  std::map<std::string, SuiteDrift> learned_common_mode;
  ThrottledSide throttled_baseline, throttled_current;  // repetitions discarded / kept as throttled (throttled.hpp)

  // What decides a too-noisy benchmark in the command that made the report, as its flags say it (empty: the
  // summary's own for the report's sides: more rounds for two interleaved builds, more process runs otherwise).
  std::string noisy_advice;
  // When no gated benchmark could be judged: the cheapest step that would judge them, one line (empty otherwise).
  std::string next_step;
  // When that step is more process runs: how many a side, of how many repetitions each (0: another step), and the
  // part of next_step that says which commands take them ("perfgate compare takes ..."), for a command that names
  // its own flags instead.
  int next_step_runs = 0, next_step_repetitions = 0;
  std::string next_step_commands;

  // Benchmarks sorted for reports: by severity, then by how far beyond the threshold, then by name.
  std::vector<const BenchmarkComparison*> sorted() const;
};

// Whether a gated metric decided this benchmark's verdict (VerdictCounts::judged).
bool is_judged(const BenchmarkComparison& b);

// Exit codes over mixed results (docs/architecture.md): 3 if any benchmark failed (a failure is a result, so it is
// reported as such even when nothing else could be compared); else, when no benchmark could be compared:
// 77 if every benchmark of the current run was skipped (nothing ran at all), 2 otherwise (no name in
// common with the baseline, or empty inputs); else 1 if any regression; else 77 when none was judged (every
// one noisy or reported only: a run that saw nothing does not pass); else 0.
int exit_code_for(const VerdictCounts& counts);
// The report's counts and exit code, again from its benchmarks' verdicts (after a step changed some).
void recount(ComparisonReport& report);

// The engine. Does not check machine classes (the CLI does, see machine_class.hpp); fills
// baseline/current SideInfo from the contexts it is given.
ComparisonReport compare(const ResultSet& baseline, const ResultSet& current, const CompareOptions& options);

// "only 3 repetitions per benchmark", or where the benchmarks' counts differ "a median of 3 repetitions per
// benchmark (1 to 5)": the phrase of the few-repetitions notes.
std::string few_repetitions_phrase(const ComparisonReport& report);

// The threshold that applies to one benchmark (flag > benchmark entry > suite entry > config default >
// options.threshold). The suite entry is the one of `suite`, the suite the report files it under (a plain binary's
// name), else the one of the name's part before its first '/'.
double threshold_for(const CompareOptions& options, const std::string& benchmark_name, const std::string& suite = "");

// The entries of the thresholds file that apply to no benchmark named in `names` (ThresholdConfig::for_this_comparison
// says which count), as "benchmarks 'NAME'" or "suites 'NAME'"; none where a flag's threshold beats them all.
// `suites`: the compared suites, as reported and as names' parts before their first '/'.
std::vector<std::string> unmatched_thresholds(const CompareOptions& options, const std::vector<std::string>& names,
                                              const std::set<std::string>& suites);

// Facts about one side from its contexts (first non-empty value of each key).
SideInfo describe_side(const ResultSet& results);

// The value of the first of `keys` that some context of `results` gives (non-empty); empty when none does.
std::string first_context_value(const ResultSet& results, std::initializer_list<const char*> keys);

}  // namespace perfgate
