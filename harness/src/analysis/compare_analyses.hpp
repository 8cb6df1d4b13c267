#pragma once
// The analyses of one gated metric (docs/statistics.md, "How the interval is built"): within-run, between-run,
// paired rounds and between sessions with a learned band. Each is a named type behind one interface,
// chosen in one place (choose_analysis), and each sets the interval of log(current / baseline) together with
// the estimate that interval is built around. Internal to compare.cpp.
#include <limits>
#include <string>
#include <vector>

#include "perfgate/compare.hpp"
#include "perfgate/model.hpp"
#include "perfgate/run_level.hpp"

namespace perfgate::analysis {

// What one side of a metric holds, in the form the analyses use.
struct SideSummary {
  std::vector<double> logs;                                  // log of every sample
  std::vector<double> run_log_levels;                        // one per process run with samples (run_level.hpp)
  double median = std::numeric_limits<double>::quiet_NaN();  // of the samples, or of the run levels where fastest
  double dispersion = 0;                                     // max robust CV over its runs
  bool positive = true;
  bool all_equal = true;
};

// `level` and `kind` say how each process run's repetitions make its level (run_level.hpp).
void summarise(const Metric& m, RunLevel level, MetricKind kind, SideSummary& s);

// One gated metric on its way through compare(): what it compares and the interval found for it.
struct MetricWork {
  std::size_t bench = 0;   // index into report.benchmarks
  std::size_t metric = 0;  // index into that benchmark's metrics
  const Metric* base = nullptr;
  const Metric* cur = nullptr;
  double log_lower = 0, log_upper = 0;  // interval of log(current/baseline)
  bool bounded = false;
  bool testable = false;  // has a p-value that enters the correction
  // Within-run mode (one process run per side): the unwidened interval, for the suite drift pass.
  bool within_run = false;
  double log_estimate = 0, within_lower = 0, within_upper = 0;
  const LearnedBand* band = nullptr;  // judged with this learned band (between sessions)
  // Sessions the baseline's level is pooled from (distinct perfgate runs among its process runs): its share of
  // the between-session noise is sd / sqrt(baseline_sessions).
  int baseline_sessions = 1;
  RunLevel level = RunLevel::median;  // how a process run's repetitions make its level
};

// The between-run noise of a metric: the pooled spread of both sides' log run levels, moderated by the
// machine-class prior (docs/statistics.md, situation 2).
struct RunNoise {
  double sd = 0;        // of one log run level
  double df_total = 0;  // prior + data degrees of freedom
  double df_data = 0;   // from the runs alone (0: the prior only)
};

// Everything an analysis reads about one gated metric.
struct Evidence {
  const Metric& base;
  const Metric& cur;
  const SideSummary& sb;
  const SideSummary& sc;
  RunNoise noise;
  const LearnedBand* band;  // the usable learned band of this metric, if any
  const std::string& bench_name;
  const CompareOptions& o;
};

class Analysis {
 public:
  Analysis() = default;
  Analysis(const Analysis&) = delete;
  Analysis& operator=(const Analysis&) = delete;
  virtual ~Analysis() = default;
  // Sets mc.method, mc.p_value, the interval in w (w.bounded false: none could be built) and w.log_estimate.
  virtual void analyse(const Evidence& e, MetricWork& w, MetricComparison& mc) const = 0;
};

// The rule's choice: a learned band where one is usable, paired rounds where asked for and possible,
// run levels where either side has several process runs, else the samples of one run per side.
const Analysis& choose_analysis(const Evidence& e);

RunNoise pooled_run_noise(const SideSummary& sb, const SideSummary& sc, double prior_noise, const CompareOptions& o);

// "; baseline pooled from N sessions" for a method's text where the baseline pools several sessions, else "".
std::string pooled_text(const MetricWork& w);

// Interval and p of a log difference d of two session levels whose noise is a learned band (relative SD sd of
// one session level, `sessions` degrees of freedom); the baseline's level may pool w.baseline_sessions sessions.
void judge_between_sessions(MetricWork& w, MetricComparison& mc, double d, double sd, int sessions,
                            const CompareOptions& o);

}  // namespace perfgate::analysis
