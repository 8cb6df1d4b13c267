#pragma once
// What the history tells (docs/history.md, "Method"):
//   - change points of each (class, benchmark, metric) series of session medians: E-Divisive means
//     (Matteson & James 2014, as MongoDB's Hunter/Apache Otava use it) with a permutation test;
//   - the learned between-session noise of a series, for the gate.
//
// Everything works on *log slowness*: log(value) for times and phases, -log(value) for rates, so that
// a positive change is always "slower" and relative changes of every metric kind compare.
// Session medians that are not > 0 (a phase of 0 ms, a rate of 0) have no log slowness and are left out
// of their series.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "perfgate/history.hpp"
#include "perfgate/learned_noise.hpp"
#include "perfgate/model.hpp"

namespace perfgate::history {

// log(value) for latency and phase, -log(value) for rate. value must be > 0.
double log_slowness(double value, MetricKind kind);

// ---- E-Divisive means on one series -----------------------------------------------------------------

struct ChangePointOptions {
  double max_p = 0.001;             // a split is kept when its permutation p-value is at most this
  int max_permutations = 999;       // the smallest reachable p-value is 1 / (max_permutations + 1)
  int stop_after_exceedances = 10;  // Besag & Clifford (1991): stop once this many permutations beat the
                                    // observed statistic (the p-value is then clearly too large)
  int min_segment = 3;              // sessions on each side of a change point
  // Hampel filter before detection: a point further than this many robust SDs (of the session-to-session
  // differences) from the median of its 5-point neighbourhood is replaced by that median, so one or two
  // outlying sessions cannot make a change point. 0 switches the filter off.
  double outlier_sigmas = 4.0;
  std::uint64_t seed = 0x0e11c0de5eedULL;
};

struct ChangePoint {
  std::size_t index = 0;  // position of the first point of the new level
  double p_value = 1;
  double statistic = 0;     // the E-Divisive statistic of the split
  double level_before = 0;  // median log slowness of the segment before / after
  double level_after = 0;
};

// Change points of `x` (in order), found by binary segmentation: the best E-Divisive split of a segment
// is kept when significant, then both halves are searched again. Sorted by index. Deterministic for a seed.
std::vector<ChangePoint> e_divisive(std::span<const double> x, const ChangePointOptions& options = {});

// About the fewest sessions in which a change point can reach options.max_p: the length of the shortest series whose
// clean step (half its sessions at one level, half at another, a little noise on each) e_divisive finds with these
// options, searched up to `longest`; 0 when none up to it does. A random permutation reproduces the split of n
// points with a chance of about 2 / C(n, n/2), which bounds the p-value from below: shorter series stay without
// change points however large their step.
std::size_t sessions_for_a_change_point(const ChangePointOptions& options, std::size_t longest = 64);

// The Hampel filter described at ChangePointOptions::outlier_sigmas.
std::vector<double> hampel_filter(std::span<const double> x, double sigmas);

// ---- over a class's history --------------------------------------------------------------------------

struct ChangeOptions {
  ChangePointOptions test;
  // Subtract each session's common mode (the median, over the suite's benchmarks, of each benchmark's
  // time deviation from its own typical level) before detection: a session that moves a whole suite is
  // machine drift, not a change of one benchmark. The common mode series itself is searched too and
  // reported as benchmark "<suite>/*", metric "common_mode".
  bool remove_common_mode = true;
  std::size_t min_series_for_common_mode = 8;  // benchmarks of a suite in a session; fewer: no removal
  double min_change = 0;                       // report only |step| >= this (relative)
};

struct SeriesChange {
  SeriesKey key;
  std::size_t index = 0;        // in the series' points
  std::string commit;           // first commit of the new level
  std::string previous_commit;  // last commit of the old level
  std::string time;             // of the first session of the new level
  std::int64_t session_id = 0;
  double step = 0;        // relative change of this step: 0.25 = 25% slower
  double cumulative = 0;  // relative change from the series' first level to the new level
  double p_value = 1;
  double confidence = 0;                                // 1 - p_value
  std::size_t sessions_before = 0, sessions_after = 0;  // in the adjacent segments
  bool common_mode_removed = false;
};

// Change points of every series of `history`, sorted by time of the change then benchmark and metric.
std::vector<SeriesChange> find_changes(const ClassHistory& history, const ChangeOptions& options = {});

// Common mode of each session (index into history.sessions) per suite (Series::suite): suite -> log-slowness
// shift per session (0 where the suite has too few benchmarks in that session).
std::map<std::string, std::vector<double>> common_mode(const ClassHistory& history, std::size_t min_series);

// ---- learned noise, for the gate ------------------------------------------------------------------

struct NoiseOptions {
  std::size_t window = 30;       // the most recent sessions considered
  std::size_t min_sessions = 5;  // fewer usable sessions: `sufficient` is false, keep the class prior
  bool remove_common_mode = false;
  std::size_t min_series_for_common_mode = 8;
  ChangePointOptions test;  // to find the last change point inside the window
};

struct LearnedNoise {
  double relative_sd = 0;      // between-session noise, relative SD (1.4826 x MAD of log medians)
  double plain_sd = 0;         // the ordinary sample SD of the same log medians: counts outlying sessions
  int degrees_of_freedom = 0;  // the number of sessions used
  std::size_t sessions_used = 0;
  bool sufficient = false;      // sessions_used >= min_sessions
  std::size_t since_index = 0;  // first point used (after the window's last change point)
};

// The between-session noise of one series of session medians (oldest first), all in the metric's own
// units: take the last `window` medians, find their last change point (E-Divisive, as above), keep the
// sessions since it, and return the robust spread of their log slowness, 1.4826 x MAD, which estimates
// the relative SD of a session median and ignores single outlying sessions. Its weight in degrees of
// freedom is the number of sessions it used.
LearnedNoise learned_noise(std::span<const double> session_medians, MetricKind kind, const NoiseOptions& options = {});

// learned_noise for every series of a class. Fetch the history with
// store.class_history(class, options.window): the window is then read from the database, not computed
// from every session. With remove_common_mode the suite's common mode is subtracted first.
std::map<SeriesKey, LearnedNoise> learned_noise(const ClassHistory& history, const NoiseOptions& options = {});

// The gate's table (learned_noise.hpp) for one class. A band is the larger of relative_sd and plain_sd: the gate
// must expect the outlying sessions this machine has (on the project's 2-vCPU runner 1 session in 6 was
// 10-25% slow in some benchmark; bands that ignored them gave 8 false regressions in 330 A/A comparisons,
// docs/history.md "Evidence"), while a quiet benchmark keeps a band as narrow as its sessions are.
// Every series' band is learned as above, once as it is and
// once with the suite's common mode removed (where the suite has a common mode), from the history's most
// recent options.window sessions. options.remove_common_mode is ignored: both are learned.
LearnedNoiseTable learned_noise_table(const ClassHistory& history, const NoiseOptions& options,
                                      const std::string& source);

}  // namespace perfgate::history
