#include "perfgate/compare.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/compare_analyses.hpp"
#include "analysis/compare_cycle_space.hpp"
#include "analysis/compare_next_step.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/context_pattern.hpp"
#include "perfgate/run_level.hpp"
#include "perfgate/stats.hpp"
#include "perfgate/suites.hpp"

namespace perfgate {
namespace {

using analysis::Evidence;
using analysis::MetricWork;
using analysis::SideSummary;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string pct(double v) { return fmt::format("{:+.1f}%", 100 * v); }

bool worse_is_up(MetricKind kind) { return !higher_is_better(kind); }

// ---- one gated metric: its analysis (compare_analyses.hpp) -----------------------------------------------------
const LearnedBand* learned_band_for(const CompareOptions& o, const std::string& bench_name, const std::string& metric) {
  if (!o.noise.learned_noise || o.rule.paired_runs) return nullptr;
  return o.noise.learned_noise->usable(bench_name, metric);
}

// The descriptive fields every metric gets, gated or not.
void describe_metric(MetricComparison& mc, const SideSummary& sb, const SideSummary& sc) {
  mc.runs_baseline = static_cast<int>(std::max<std::size_t>(1, sb.run_log_levels.size()));
  mc.runs_current = static_cast<int>(std::max<std::size_t>(1, sc.run_log_levels.size()));
  mc.baseline_median = sb.median;
  mc.current_median = sc.median;
  mc.change = sb.median != 0 ? sc.median / sb.median - 1 : kNaN;
  mc.raw_change = mc.change;
  mc.dispersion = std::max(sb.dispersion, sc.dispersion);
}

// Too few samples (noisy) or values a ratio cannot be taken of (not gated): the verdict without an analysis.
bool cannot_be_judged(MetricComparison& mc, const MetricWork& w, const SideSummary& sb, const SideSummary& sc,
                      const CompareOptions& o) {
  if (static_cast<int>(mc.n_baseline) < o.rule.min_samples || static_cast<int>(mc.n_current) < o.rule.min_samples) {
    mc.verdict = Verdict::noisy;
    mc.noisy_cause = NoisyCause::few_samples;
    mc.reason = fmt::format("too few samples to judge ({} {}, {} {}; need {} per side)", mc.n_baseline,
                            o.sides.baseline, mc.n_current, o.sides.current, o.rule.min_samples);
    return true;
  }
  if (sb.positive && sc.positive) return false;
  mc.verdict = Verdict::unchanged;
  mc.reason = sb.all_equal && sc.all_equal && w.base->samples[0] == w.cur->samples[0]
                  ? "identical constant values"
                  : "values <= 0: a ratio is undefined, not gated";
  mc.gated = false;
  return true;
}

// The change and its interval from the analysis. The estimate is the one the interval is built around (the mean
// log run median, the mean round difference, the Hodges-Lehmann shift, the session levels): never a ratio of
// pooled medians beside an interval of another statistic, which could print an estimate outside its own interval.
void set_change_interval(const MetricWork& w, MetricComparison& mc) {
  mc.interval_bounded = w.bounded;
  if (w.bounded) mc.change = mc.raw_change = std::expm1(w.log_estimate);
  mc.change_lower = w.bounded ? std::expm1(w.log_lower) : -1;
  mc.change_upper = w.bounded ? std::expm1(w.log_upper) : std::numeric_limits<double>::infinity();
}

// Fills descriptive fields and the p-value/interval of one gated metric; the verdict comes later,
// after the multiple-comparison correction.
void analyse_metric(MetricWork& w, MetricComparison& mc, const CompareOptions& o, const std::string& bench_name) {
  thread_local SideSummary sb, sc;
  analysis::summarise(*w.base, w.level, mc.kind, sb);
  analysis::summarise(*w.cur, w.level, mc.kind, sc);
  mc.n_baseline = w.base->samples.size();
  mc.n_current = w.cur->samples.size();
  describe_metric(mc, sb, sc);
  if (!mc.gated || cannot_be_judged(mc, w, sb, sc, o)) return;
  const double prior_noise = mc.name == "cpu_time" ? o.noise.cpu_run_noise : o.noise.run_noise;
  const analysis::RunNoise noise = analysis::pooled_run_noise(sb, sc, prior_noise, o);
  mc.run_noise = std::expm1(noise.sd);
  mc.run_noise_estimated = noise.df_data > 0;
  const Evidence e{*w.base, *w.cur, sb, sc, noise, learned_band_for(o, bench_name, mc.name), bench_name, o};
  analysis::choose_analysis(e).analyse(e, w, mc);
  if (w.level == RunLevel::fastest) mc.method += "; each run's fastest repetition (floor-bound)";
  set_change_interval(w, mc);
}

// ---- the verdict of one metric --------------------------------------------------------------------------------
// The within-run dispersion vetoes a verdict unless the analysis's noise carries it
// (MetricComparison::noise_carries_dispersion; RuleOptions::paired_dispersion_gate restores the veto).
bool dispersion_gate_applies(const MetricComparison& mc, const CompareOptions& o) {
  return mc.dispersion > o.rule.max_dispersion && (!mc.noise_carries_dispersion || o.rule.paired_dispersion_gate);
}

// Whether the whole interval lies beyond +-margin: on the bad side (worse) or on the good side.
bool interval_beyond(const MetricComparison& mc, double margin, bool worse) {
  if (worse_is_up(mc.kind) == worse) return mc.change_lower > margin;
  return mc.change_upper < -margin;
}

// Regression or improvement: significant, and the whole interval beyond +-margin on one side. false: neither.
bool decide_direction(MetricComparison& mc, bool significant, double margin, const std::string& reason) {
  if (!significant) return false;
  if (interval_beyond(mc, margin, true)) {
    mc.verdict = Verdict::regression;
  } else if (interval_beyond(mc, margin, false)) {
    mc.verdict = Verdict::improvement;
  } else {
    return false;
  }
  mc.reason = reason;
  return true;
}

// Interference inside a run: only a change larger than threshold + dispersion is believed.
void decide_dispersed(MetricComparison& mc, bool significant, const std::string& stat, const CompareOptions& o) {
  const std::string beyond =
      fmt::format("{}; beyond threshold + within-run dispersion {:.1f}%", stat, 100 * mc.dispersion);
  if (decide_direction(mc, significant, mc.threshold + mc.dispersion, beyond)) return;
  mc.verdict = Verdict::noisy;
  mc.noisy_cause = NoisyCause::dispersion;
  mc.reason = fmt::format("within-run dispersion {:.1f}% above the {:.1f}% limit; {}", 100 * mc.dispersion,
                          100 * o.rule.max_dispersion, stat);
}

// Paired rounds or a learned band with a high within-run dispersion: their noise carries it (see
// RuleOptions::paired_dispersion_gate); the reason says so.
std::string with_carried_dispersion(const MetricComparison& mc, const std::string& stat, const CompareOptions& o) {
  if (!mc.noise_carries_dispersion || !(mc.dispersion > o.rule.max_dispersion)) return stat;
  return fmt::format("{}; within-run dispersion {:.1f}% (in the {})", stat, 100 * mc.dispersion,
                     mc.learned_noise ? "learned session noise" : "per-round differences");
}

// Whether the whole interval lies within +-margin: the comparison could have seen a change of that size.
bool interval_within(const MetricComparison& mc, double margin) {
  return mc.change_lower >= -margin && mc.change_upper <= margin;
}

void decide_against_threshold(MetricComparison& mc, bool significant, const std::string& stat) {
  if (decide_direction(mc, significant, mc.threshold, stat)) return;
  if (interval_within(mc, mc.threshold)) {
    mc.verdict = Verdict::unchanged;
    mc.reason = stat;
    return;
  }
  mc.verdict = Verdict::noisy;
  mc.noisy_cause = NoisyCause::interval;
  const std::string noise =
      mc.run_noise > 0 ? fmt::format(" (between-run noise {:.1f}%)", 100 * mc.run_noise) : std::string();
  mc.reason =
      std::fabs(mc.change) > mc.threshold  // change relative to the suite's common drift where removed
          ? fmt::format("{}: a change beyond the threshold that the evidence cannot separate from noise{}", stat, noise)
          : fmt::format(
                "{}: the interval reaches past the threshold, so a change of that size cannot be "
                "ruled out{}",
                stat, noise);
}

// Turns statistics into a verdict for one gated metric.
void decide_metric(MetricComparison& mc, const CompareOptions& o) {
  if (!mc.gated || mc.verdict == Verdict::noisy) return;
  if (!mc.interval_bounded) {
    mc.verdict = Verdict::noisy;
    mc.noisy_cause = NoisyCause::few_samples;
    mc.reason = fmt::format("too few samples for a {:.0f}% interval ({} vs {})", 100 * (1 - o.rule.alpha),
                            mc.n_baseline, mc.n_current);
    return;
  }
  const bool significant = mc.p_adjusted <= o.rule.alpha;
  const std::string stat =
      fmt::format("change {} [{}, {}], p={:.2g} (adjusted {:.2g}), threshold {:.1f}%", pct(mc.change),
                  pct(mc.change_lower), pct(mc.change_upper), mc.p_value, mc.p_adjusted, 100 * mc.threshold);
  if (dispersion_gate_applies(mc, o)) {
    decide_dispersed(mc, significant, stat, o);
    return;
  }
  decide_against_threshold(mc, significant, with_carried_dispersion(mc, stat, o));
}

// The smallest worse-direction change the rule would have called a regression (MetricComparison::detectable_change).
void set_detectable_change(MetricComparison& mc, const CompareOptions& o) {
  if (!mc.gated || !mc.interval_bounded || !(mc.change > -1) || !(mc.change_lower > -1)) return;
  const double margin = mc.threshold + (dispersion_gate_applies(mc, o) ? mc.dispersion : 0.0);
  const double est = std::log1p(mc.change);
  if (worse_is_up(mc.kind)) {
    mc.detectable_change = std::expm1(std::log1p(margin) + (est - std::log1p(mc.change_lower)));
  } else if (margin < 1 && std::isfinite(mc.change_upper)) {
    mc.detectable_change = std::expm1(std::log1p(-margin) - (std::log1p(mc.change_upper) - est));
  }
}

// ---- the verdict of one benchmark -------------------------------------------------------------------------------
int metric_rank(Verdict v) {
  switch (v) {
    case Verdict::regression: return 0;
    case Verdict::noisy: return 1;
    case Verdict::improvement: return 2;
    default: return 3;
  }
}

// How strongly a metric supports its verdict (for choosing the driver): the bad-direction change for
// regressions, the size of the change otherwise.
double strength(const MetricComparison& m) {
  const double bad = worse_is_up(m.kind) ? m.change : -m.change;
  if (m.verdict == Verdict::regression) return bad;
  return std::isnan(m.change) ? 0 : std::fabs(m.change);
}

// Wall-time metrics of a benchmark whose real/cpu time ratio moved between the sides: contention, not
// code, may explain them, so they cannot decide; the CPU time (gated for such benchmarks) does.
void downgrade_contended(BenchmarkComparison& bc) {
  for (auto& m : bc.metrics) {
    if (!m.gated || m.name == "cpu_time" || !is_alarm(m.verdict)) continue;
    m.reason = fmt::format(
        "machine contention: real/cpu time {:.2f} -> {:.2f} (CPU time {}), so the wall time is judged by "
        "cpu_time; was {}: {}",
        bc.contention_baseline, bc.contention_current, pct(bc.cpu_time_change), to_string(m.verdict), m.reason);
    m.verdict = Verdict::noisy;
    m.noisy_cause = NoisyCause::contention;
  }
}

// The worst gated metric (regression > noisy > improvement > unchanged; the stronger of two alike), else the first.
const MetricComparison& driving_metric_of(const BenchmarkComparison& bc) {
  const MetricComparison* worst = nullptr;
  for (const auto& m : bc.metrics) {
    if (!m.gated) continue;
    if (!worst || metric_rank(m.verdict) < metric_rank(worst->verdict) ||
        (metric_rank(m.verdict) == metric_rank(worst->verdict) && strength(m) > strength(*worst)))
      worst = &m;
  }
  return worst ? *worst : bc.metrics.front();
}

// Verdicts per metric, then the benchmark's (= its driving metric's).
void decide_benchmark(BenchmarkComparison& bc, bool contended, const CompareOptions& o) {
  if (bc.metrics.empty()) return;
  for (auto& m : bc.metrics) {
    decide_metric(m, o);
    set_detectable_change(m, o);
  }
  if (contended) downgrade_contended(bc);
  const MetricComparison& worst = driving_metric_of(bc);
  bc.verdict = worst.verdict;
  bc.driver = worst.name;
  bc.reason = fmt::format("{} ({}): {}", worst.name, metric_kind_name(worst.kind), worst.reason);
}

// ---- what goes into the comparison --------------------------------------------------------------------------------
// The verdict of a benchmark that cannot be compared (missing, failed, skipped, new); false when it can.
bool set_uncomparable_verdict(BenchmarkComparison& bc, const BenchmarkResult* base, const BenchmarkResult* cur,
                              const SideNames& sides) {
  if (!cur) {
    bc.verdict = Verdict::missing;
    bc.reason = sides.builds ? "only " + sides.baseline_place() + " has it" : "in the baseline, not in the current run";
  } else if (cur->error) {
    bc.verdict = Verdict::failed;
    bc.message = cur->error;
    if (sides.builds) bc.failed_in = base != nullptr && base->error ? "both builds" : sides.current_place();
    bc.reason =
        fmt::format("the benchmark failed{}: {}", bc.failed_in.empty() ? "" : " in " + bc.failed_in, *cur->error);
  } else if (cur->skip_reason) {
    bc.verdict = Verdict::skipped;
    bc.message = cur->skip_reason;
    bc.reason = "skipped: " + *cur->skip_reason;
  } else if (!base) {
    bc.verdict = Verdict::new_benchmark;
    bc.reason = sides.builds ? "only " + sides.current_place() + " has it" : "not in the baseline";
  } else if (base->error || base->skip_reason) {
    bc.verdict = Verdict::new_benchmark;
    bc.reason =
        fmt::format("{} in {}, nothing to compare with", base->error ? "failed" : "skipped", sides.baseline_place());
  } else {
    return false;
  }
  return true;
}

// real_time / cpu_time per repetition: how much of the wall time the process was not on a CPU.
bool contention_ratio(const BenchmarkResult& b, double& ratio, double& cpu_median) {
  if (b.time_kind == "manual_time" || b.cpu_time.samples.size() != b.time.samples.size() || b.time.samples.empty())
    return false;
  thread_local std::vector<double> r;
  r.resize(b.time.samples.size());
  for (std::size_t i = 0; i < r.size(); ++i) {
    const double c = b.cpu_time.samples[i];
    if (!(c > 0) || !std::isfinite(c)) return false;
    r[i] = b.time.samples[i] / c;
  }
  ratio = stats::median_inplace(r);
  cpu_median = stats::median(b.cpu_time.samples);
  return cpu_median > 0;
}

MetricComparison gated_latency(const std::string& name, double threshold) {
  MetricComparison m;
  m.name = name;
  m.kind = MetricKind::latency;
  m.gated = true;
  m.threshold = threshold;
  return m;
}

// A counter in only one side: reported, never gated.
void describe_one_sided(MetricComparison& mc, const Metric* bm, const Metric* cm, const SideNames& sides) {
  mc.reason = "only in " + (bm ? sides.baseline_place() : sides.current_place());
  if (bm) mc.baseline_median = stats::median(bm->samples);
  if (cm) mc.current_median = stats::median(cm->samples);
  mc.change = kNaN;
  mc.n_baseline = bm ? bm->samples.size() : 0;
  mc.n_current = cm ? cm->samples.size() : 0;
}

// A gated phase's share of its benchmark's baseline time (NaN where it cannot be known).
double phase_share(const Metric& bm, double baseline_time_ns) {
  return stats::median(bm.samples) * 1e6 / baseline_time_ns;
}

// A phase's threshold is at least phase_impact / share: it gates what is worth phase_impact of the benchmark's time.
void apply_phase_impact(MetricComparison& mc, double share, const CompareOptions& o) {
  if (o.rule.phase_impact > 0 && share > 0) mc.threshold = std::max(mc.threshold, o.rule.phase_impact / share);
}

// A phase below min_phase_share of the benchmark's baseline time is reported, not gated.
void apply_min_phase_share(MetricComparison& mc, double share, const CompareOptions& o) {
  if (o.selection.min_phase_share <= 0 || share >= o.selection.min_phase_share) return;
  mc.gated = false;
  mc.below_min_phase_share = true;
  mc.reason = fmt::format(
      "{:.3g}% of the benchmark's time in {}, below the {:.3g}% a phase needs to gate (--min-phase-share): "
      "reported, not gated",
      100 * share, o.sides.baseline_place(), 100 * o.selection.min_phase_share);
}

// Runs body(i) for i in [0, n) on `threads` threads, in chunks.
template <class Body>
void parallel_for(unsigned threads, std::size_t n, const Body& body) {
  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    constexpr std::size_t kChunk = 64;
    for (;;) {
      const std::size_t begin = next.fetch_add(kChunk);
      if (begin >= n) return;
      const std::size_t end = std::min(n, begin + kChunk);
      for (std::size_t i = begin; i < end; ++i) body(i);
    }
  };
  if (threads <= 1) {
    worker();
    return;
  }
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

// ---- suite drift (one process run per side) ------------------------------------------------------------------------
// The change common to a suite's metrics, removed from each of them; their spread around it, pooled with the prior,
// is the between-run noise.
struct Drift {
  double shift = 0;  // bad-direction log change common to the suite
  double var = 0;    // of one metric's log change (two runs)
  double sd = 0;     // its square root
  double df = 0;
};

bool joins_suite_drift(const MetricWork& w, const MetricComparison& mc) {
  return w.within_run && mc.gated && mc.verdict != Verdict::noisy;
}

Drift estimate_suite_drift(const std::vector<double>& bad_changes, const CompareOptions& o) {
  std::vector<double> bad = bad_changes;
  Drift d;
  d.shift = stats::median(bad);
  for (auto& v : bad) v = std::fabs(v - d.shift);
  const double spread = 1.4826 * stats::median_inplace(bad);  // SD of one metric's change (two runs)
  const double n = static_cast<double>(bad.size());
  // Pool with the prior (per-run SD -> SD of a difference of two runs: x sqrt 2).
  const double prior_sd = std::log1p(std::max(0.0, o.noise.run_noise)) * std::sqrt(2.0);
  const double prior_df = o.noise.run_noise > 0 ? std::max(0.0, o.noise.run_noise_df) : 0.0;
  d.df = prior_df + (n - 1);
  d.var = (prior_df * prior_sd * prior_sd + (n - 1) * spread * spread) / d.df;
  d.sd = std::sqrt(d.var);
  return d;
}

// One metric judged relative to its suite's drift: interval, change and the test of the shifted samples.
void remove_drift(MetricWork& w, MetricComparison& mc, const Drift& drift, const CompareOptions& o) {
  const double shift = (worse_is_up(mc.kind) ? 1.0 : -1.0) * drift.shift;  // in log(current / baseline)
  const double est = w.log_estimate - shift;
  const double lo_half = w.log_estimate - w.within_lower, hi_half = w.within_upper - w.log_estimate;
  const double widen = stats::student_t_quantile_cached(1 - o.rule.alpha / 2, drift.df) * drift.sd;
  w.log_lower = est - std::sqrt(lo_half * lo_half + widen * widen);
  w.log_upper = est + std::sqrt(hi_half * hi_half + widen * widen);
  mc.change_lower = std::expm1(w.log_lower);
  mc.change_upper = std::expm1(w.log_upper);
  mc.common_shift = std::expm1(shift);
  mc.change = (1 + mc.raw_change) / std::exp(shift) - 1;
  mc.run_noise = std::expm1(drift.sd / std::sqrt(2.0));
  mc.run_noise_estimated = true;
  mc.method = fmt::format("within-run, suite drift {} removed", pct(mc.common_shift));
  // The test too is of the change relative to the drift: shift the current samples back.
  thread_local std::vector<double> lb, lc;
  lb.resize(w.base->samples.size());
  lc.resize(w.cur->samples.size());
  for (std::size_t k = 0; k < lb.size(); ++k) lb[k] = std::log(w.base->samples[k]);
  for (std::size_t k = 0; k < lc.size(); ++k) lc[k] = std::log(w.cur->samples[k]) - shift;
  mc.p_value = stats::mann_whitney_u(lb, lc).p_value;
}

void note_suite_drifts(ComparisonReport& report, const CompareOptions& o) {
  for (const auto& [suite, d] : report.suite_drift) {
    if (std::fabs(d.shift) > o.rule.threshold / 2)
      report.notes.push_back(fmt::format(
          "suite {}: its {} metrics moved by {} together (median; spread {:.1f}% around it) between the two runs. "
          "This is taken as drift of the machine and every metric is judged relative to it, so a change of the whole "
          "suite cannot be told from drift here: confirm such a change with interleaved runs (perfgate ab).",
          suite, d.metrics, pct(d.shift), 100 * d.spread));
  }
}

// ---- learned bands with the suite's common mode removed -------------------------------------------------------------
// Per suite, when at least common_mode_min_metrics of its benchmarks' times were judged with a band that has a
// common-mode variant, and those variants are tighter (median over the suite), the median time change over them
// is the session's common mode: it is removed from every such metric of the suite, which is then judged with its
// common-mode band.
bool has_common_mode_band(const MetricWork& w) {
  return w.band && w.band->relative_sd_common_mode && w.band->sessions_common_mode >= 2;
}

void judge_without_common_mode(MetricWork& w, MetricComparison& mc, double shift, const CompareOptions& o) {
  const double sign = worse_is_up(mc.kind) ? 1.0 : -1.0;
  analysis::judge_between_sessions(w, mc, w.log_estimate - sign * shift, *w.band->relative_sd_common_mode,
                                   w.band->sessions_common_mode, o);
  mc.common_shift = std::expm1(sign * shift);
  mc.change = std::expm1(w.log_estimate);
  mc.change_lower = std::expm1(w.log_lower);
  mc.change_upper = std::expm1(w.log_upper);
  mc.method = fmt::format(
      "between-session ({} vs {} runs{}), suite common mode {} removed, learned noise {:.2f}% "
      "from {} sessions",
      mc.runs_baseline, mc.runs_current, analysis::pooled_text(w), pct(std::expm1(shift)),
      100 * *w.band->relative_sd_common_mode, w.band->sessions_common_mode);
}

void add_learned_noise_notes(ComparisonReport& report, const LearnedNoiseTable& table) {
  if (report.learned_metrics == 0 && report.prior_metrics == 0) return;
  report.notes.push_back(fmt::format(
      "learned noise ({}, class {}, {} sessions, window {}): {} gated metric{} judged with the between-session noise "
      "learned for them, {} with the class prior (no band, or fewer than {} sessions since the last change point)",
      table.source, table.machine_class, table.history_sessions, table.window, report.learned_metrics,
      report.learned_metrics == 1 ? "" : "s", report.prior_metrics, table.min_sessions));
  if (!table.borrowed_from.empty())
    report.notes.push_back(fmt::format(
        "class {} has too few sessions of its own: its learned noise is borrowed from class {} ({} sessions), every "
        "band widened x{:.2f} by what this class's own {} session(s) showed against them",
        table.machine_class, table.borrowed_from, table.history_sessions, table.widen, table.own_sessions));
  for (const auto& [suite, d] : report.learned_common_mode)
    report.notes.push_back(fmt::format(
        "suite {}: its common mode ({} over {} benchmarks' times) was removed and the bands learned with the "
        "common mode removed were used (median {:.2f}%, tighter than without): a session that moves the whole "
        "suite is machine drift here, not a change of each benchmark",
        suite, pct(d.shift), d.metrics, 100 * d.spread));
}

// ---- notes about the whole comparison ---------------------------------------------------------------------------
void note_contention(ComparisonReport& report, std::ptrdiff_t contended) {
  if (contended <= 0) return;
  report.notes.push_back(fmt::format(
      "{} benchmark{} ran under different machine contention on the two sides (real/cpu time ratio moved by more "
      "than half the threshold): wall time could not decide there, CPU time did (threshold raised for cache "
      "interference)",
      contended, contended == 1 ? "" : "s"));
}

// Counters that one side has and the other lacks: a setting a bench reports only where it is on (a knob's own
// counter), or a counter added or removed since the baseline. Either way the two sides may not run the same
// configuration, and a time change between them may be the setting's, which the verdict alone would not say.
void note_one_sided_counters(ComparisonReport& report) {
  std::vector<std::pair<std::string, std::vector<std::string>>> one_sided;  // benchmark, "'counter' only in ..."
  for (const auto& b : report.benchmarks) {
    std::vector<std::string> counters;
    for (const auto& m : b.metrics)
      if (m.one_sided()) counters.push_back(fmt::format("'{}' {}", m.name, m.reason));
    if (!counters.empty()) one_sided.emplace_back(b.name, std::move(counters));
  }
  if (one_sided.empty()) return;
  constexpr std::size_t kExamples = 2;
  std::vector<std::string> examples;
  for (std::size_t i = 0; i < one_sided.size() && i < kExamples; ++i)
    examples.push_back(fmt::format("{}: {}", one_sided[i].first, fmt::join(one_sided[i].second, ", ")));
  const std::size_t benchmarks = one_sided.size();
  const bool builds = report.options.sides.builds;
  report.notes.push_back(fmt::format(
      "{} {} counters on one side only ({}{}): a setting that is reported only where it is on, or a counter {}, so "
      "the two sides may not have run the same configuration{}",
      benchmarks, benchmarks == 1 ? "benchmark reports" : "benchmarks report", fmt::join(examples, "; "),
      benchmarks > examples.size() ? "; and more" : "",
      builds ? "the change added or removed" : "added or removed since the baseline",
      builds ? "" : "; if the change is meant, record the baseline again"));
}

// The slowest sample over `median`, the samples' median (NaN: no samples, or a median that is not positive).
double slowest_over_median(const std::vector<double>& samples, double median) {
  if (samples.empty() || !(median > 0)) return kNaN;
  return *std::max_element(samples.begin(), samples.end()) / median;
}

// A repetition far slower than the rest on the current side only (BenchmarkComparison::far_slow_repetition): the
// median moves little with one such repetition among several, so the verdict can read unchanged over it.
void note_far_slow_repetitions(ComparisonReport& report) {
  const SideNames& sides = report.options.sides;
  std::vector<std::string> far;
  for (const auto& b : report.benchmarks)
    if (b.far_slow_repetition())
      far.push_back(fmt::format("{}: {:.0f}x, {}'s slowest {:.1f}x", b.name, b.slowest_over_median_current,
                                sides.baseline_place(), b.slowest_over_median_baseline));
  if (far.empty()) return;
  constexpr std::size_t kExamples = 3;
  const std::size_t shown = std::min(far.size(), kExamples);
  report.notes.push_back(fmt::format(
      "{} {} a repetition of {:.0f} times the median or more in {} only ({}{}): the median, and so the verdict, does "
      "not show it; a rare slow path or a stalled machine, which a re-run of the benchmark alone tells apart",
      far.size(), far.size() == 1 ? "benchmark has" : "benchmarks have", BenchmarkComparison::kFarRepetition,
      sides.current_place(), fmt::join(far.begin(), far.begin() + static_cast<std::ptrdiff_t>(shown), "; "),
      far.size() > shown ? "; and more" : ""));
}

void note_repetitions(ComparisonReport& report, const std::vector<std::size_t>& sample_counts,
                      std::size_t aggregate_benchmarks, const CompareOptions& o) {
  if (sample_counts.empty()) return;
  report.samples_are_aggregates = aggregate_benchmarks == sample_counts.size();
  const auto [fewest, most] = std::minmax_element(sample_counts.begin(), sample_counts.end());
  report.fewest_repetitions = static_cast<int>(*fewest);
  report.most_repetitions = static_cast<int>(*most);
  std::vector<double> counts(sample_counts.begin(), sample_counts.end());
  report.repetitions = static_cast<int>(stats::median_inplace(counts));
  // No advice here: more repetitions in one process cannot show the noise between processes (compare_next_step.hpp).
  if (report.repetitions < 9)
    report.notes.push_back(fmt::format("{}: the rule needs >= {} per side to judge and is weak below 9",
                                       few_repetitions_phrase(report), o.rule.min_samples));
}

std::vector<double> adjusted_p_values(const std::vector<double>& p, Correction correction) {
  switch (correction) {
    case Correction::benjamini_hochberg: return stats::benjamini_hochberg(p);
    case Correction::holm: return stats::holm(p);
    case Correction::none: break;
  }
  return p;
}

// The files given on both sides (the same path, or two paths to one file): process runs compared with themselves.
std::vector<std::string> files_on_both_sides(const ResultSet& baseline, const ResultSet& current) {
  auto identity = [](const std::string& file) {
    std::error_code ec;
    const auto canonical = std::filesystem::weakly_canonical(file, ec);
    return ec ? file : canonical.string();
  };
  std::set<std::string> baseline_files;
  for (const auto& c : baseline.contexts) baseline_files.insert(identity(c.source_file));
  std::vector<std::string> shared;
  for (const auto& c : current.contexts)
    if (baseline_files.count(identity(c.source_file)) != 0 &&
        std::find(shared.begin(), shared.end(), c.source_file) == shared.end())
      shared.push_back(c.source_file);
  return shared;
}

// One binary a side under two names (my_bench_old against my_bench) is one suite: the baseline's files take the
// current side's suite, as perfgate ab pairs them, and the report says so. Returns the note ("" when nothing paired).
std::string pair_lone_binaries(std::map<std::string, std::string>& baseline_suites,
                               const std::map<std::string, std::string>& current_suites) {
  auto distinct = [](const std::map<std::string, std::string>& by_file) {
    std::set<std::string> out;
    for (const auto& entry : by_file) out.insert(entry.second);
    return out;
  };
  const std::set<std::string> before = distinct(baseline_suites), after = distinct(current_suites);
  if (before.size() != 1 || after.size() != 1 || before == after) return "";
  for (auto& entry : baseline_suites) entry.second = *after.begin();
  return fmt::format("one binary on each side: {} (baseline) paired with {} (current) as suite {}", *before.begin(),
                     *after.begin(), *after.begin());
}

// Per suite, the NVTX ranges and the executable its runs name (the current side first). A binary that is not a
// perfgate suite (a user's own Google Benchmark binary) names no suite in its runs: the suite its benchmarks are
// filed under (`suite_of_file`, suites_by_file) gets its file's executable.
void record_suite_context(ComparisonReport& report, const ResultSet& side,
                          const std::map<std::string, std::string>& suite_of_file) {
  std::map<std::string, std::string> executable_of_file;
  for (const auto& c : side.contexts) {
    const std::string exe = c.get("executable");
    if (!exe.empty()) executable_of_file.emplace(c.source_file, exe);
    const std::string suite = suite_of_context(c);
    if (suite.empty()) continue;
    const std::string ranges = c.get(context_keys::kNvtxRanges);
    if (!ranges.empty()) report.nvtx_ranges.emplace(suite, ranges);
    if (!exe.empty()) report.executables.emplace(suite, exe);
  }
  for (const auto& b : side.benchmarks) {
    const auto exe = executable_of_file.find(b.source_file);
    if (exe != executable_of_file.end()) report.executables.emplace(reported_suite(suite_of_file, b), exe->second);
  }
}

std::optional<ThrottleRule> throttle_rule(const CompareOptions& o) {
  if (!o.host.discard_throttled) return std::nullopt;
  return ThrottleRule{o.host.throttle_clock_share, o.rule.min_samples};
}

// ---- the engine: compare() in its steps -----------------------------------------------------------------------------
class Comparison {
 public:
  Comparison(ComparisonReport& report, const CompareOptions& o, std::map<std::string, int> baseline_sessions,
             std::optional<ContextPattern> host_dependent, std::optional<ContextPattern> floor_bound)
      : report_(report),
        o_(o),
        baseline_sessions_(std::move(baseline_sessions)),
        host_dependent_(std::move(host_dependent)),
        floor_bound_(std::move(floor_bound)) {}

  void add_benchmark(const BenchmarkResult* base, const BenchmarkResult* cur, std::string suite);
  void analyse_metrics();
  void remove_suite_drift();
  void remove_learned_common_mode();
  void count_noise_sources();
  void correct_for_multiple_comparisons();
  void decide();
  void finish();

 private:
  MetricComparison& metric_of(const MetricWork& w) { return report_.benchmarks[w.bench].metrics[w.metric]; }
  bool add_cpu_time_if_contended(BenchmarkComparison& bc, const BenchmarkResult& base, const BenchmarkResult& cur);
  void add_metrics(BenchmarkComparison& bc, const BenchmarkResult& base, const BenchmarkResult& cur);
  void add_counter(BenchmarkComparison& bc, const std::string& name, const BenchmarkResult& base,
                   const BenchmarkResult& cur, double baseline_time_ns);
  std::map<std::string, std::vector<std::size_t>> suite_drift_groups();
  std::optional<double> learned_common_mode(const std::string& suite, const std::vector<std::size_t>& items);
  // Named by the suite's perfgate.host_dependent or the class's thresholds.json "host_dependent", as the gate's
  // host-dependent pass names them (host_dependent.hpp).
  bool is_host_dependent(const std::string& name) const;

  ComparisonReport& report_;
  const CompareOptions& o_;
  std::vector<MetricWork> work_;
  std::vector<std::size_t> sample_counts_;
  std::size_t aggregate_benchmarks_ = 0;  // of those counted: a side's files held aggregates only
  std::vector<char> contended_;           // per report.benchmarks: real/cpu ratio moved, cpu_time gated
  unsigned threads_ = 1;
  std::map<std::string, int> baseline_sessions_;  // suite -> sessions its baseline is pooled from
  std::optional<ContextPattern> host_dependent_;  // the suites' perfgate.host_dependent
  std::optional<ContextPattern> floor_bound_;     // the suites' perfgate.floor_bound (run_level.hpp)
};

void Comparison::add_benchmark(const BenchmarkResult* base, const BenchmarkResult* cur, std::string suite) {
  BenchmarkComparison bc;
  bc.name = cur ? cur->name : base->name;
  bc.raw_name = cur ? cur->raw_name : base->raw_name;
  bc.suite = std::move(suite);
  bc.threshold = threshold_for(o_, bc.name, bc.suite);
  if (base != nullptr) bc.label_baseline = base->label;
  if (cur != nullptr) bc.label_current = cur->label;
  contended_.push_back(0);
  if (!set_uncomparable_verdict(bc, base, cur, o_.sides)) add_metrics(bc, *base, *cur);
  report_.benchmarks.push_back(std::move(bc));
}

// Latency first, then the CPU time where contention moved, then every counter of either side (sorted by name).
void Comparison::add_metrics(BenchmarkComparison& bc, const BenchmarkResult& base, const BenchmarkResult& cur) {
  const std::size_t index = report_.benchmarks.size();
  sample_counts_.push_back(cur.time.samples.size());
  if (!cur.aggregate_level.empty() || !base.aggregate_level.empty()) ++aggregate_benchmarks_;
  const double baseline_time_ns = stats::median(base.time.samples);  // phase shares are relative to it
  bc.slowest_over_median_baseline = slowest_over_median(base.time.samples, baseline_time_ns);
  bc.slowest_over_median_current = slowest_over_median(cur.time.samples, stats::median(cur.time.samples));
  bc.metrics.push_back(gated_latency("time", bc.threshold));
  work_.push_back({index, 0, &base.time, &cur.time});
  contended_.back() = add_cpu_time_if_contended(bc, base, cur);
  std::set<std::string> names;
  for (const auto& m : cur.counters) names.insert(m.name);
  for (const auto& m : base.counters) names.insert(m.name);
  // A counter one side left out as non-finite has its load note; it is neither compared nor one-sided.
  for (const auto& n : names)
    if (!base.non_finite_counters.contains(n) && !cur.non_finite_counters.contains(n))
      add_counter(bc, n, base, cur, baseline_time_ns);
}

bool Comparison::add_cpu_time_if_contended(BenchmarkComparison& bc, const BenchmarkResult& base,
                                           const BenchmarkResult& cur) {
  double rb, rc, cb, cc;
  if (!o_.host.contention_check || !contention_ratio(base, rb, cb) || !contention_ratio(cur, rc, cc)) return false;
  bc.contention_baseline = rb;
  bc.contention_current = rc;
  bc.cpu_time_change = cc / cb - 1;
  if (!(std::fabs(rc / rb - 1) > bc.threshold / 2)) return false;
  // A neighbour also pollutes caches: the CPU time of a cache-bound walk rose 15% here when the wall
  // time doubled. So CPU time must move beyond the threshold plus 15% of the contention change.
  work_.push_back({report_.benchmarks.size(), bc.metrics.size(), &base.cpu_time, &cur.cpu_time});
  bc.metrics.push_back(gated_latency("cpu_time", bc.threshold + 0.15 * std::fabs(rc / rb - 1)));
  return true;
}

void Comparison::add_counter(BenchmarkComparison& bc, const std::string& name, const BenchmarkResult& base,
                             const BenchmarkResult& cur, double baseline_time_ns) {
  const Metric* bm = base.counter(name);
  const Metric* cm = cur.counter(name);
  MetricComparison mc;
  mc.name = name;
  mc.kind = classify_counter(name);
  mc.threshold = bc.threshold;
  mc.gated = bm && cm &&
             ((mc.kind == MetricKind::rate && o_.selection.gate_rates) ||
              (mc.kind == MetricKind::phase && o_.selection.gate_phases));
  if (bm && cm) {
    if (mc.gated && mc.kind == MetricKind::phase) {
      const double share = phase_share(*bm, baseline_time_ns);
      if (std::isfinite(share)) {
        apply_phase_impact(mc, share, o_);
        apply_min_phase_share(mc, share, o_);
      }
    }
    work_.push_back({report_.benchmarks.size(), bc.metrics.size(), bm, cm});
  } else {
    describe_one_sided(mc, bm, cm, o_.sides);
  }
  bc.metrics.push_back(std::move(mc));
}

// Statistics per metric, in parallel (each item writes only its own MetricComparison).
void Comparison::analyse_metrics() {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  threads_ = o_.threads > 0 ? static_cast<unsigned>(o_.threads) : std::min(2u, hw);
  if (work_.size() < 512) threads_ = 1;
  for (auto& w : work_) {
    const auto it = baseline_sessions_.find(report_.benchmarks[w.bench].suite);
    if (it != baseline_sessions_.end()) w.baseline_sessions = it->second;
    w.level = run_level_of(report_.benchmarks[w.bench].name, floor_bound_);
  }
  parallel_for(threads_, work_.size(), [&](std::size_t i) {
    auto& w = work_[i];
    analyse_metric(w, metric_of(w), o_, report_.benchmarks[w.bench].name);
  });
}

std::map<std::string, std::vector<std::size_t>> Comparison::suite_drift_groups() {
  std::map<std::string, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < work_.size(); ++i)
    if (joins_suite_drift(work_[i], metric_of(work_[i]))) groups[report_.benchmarks[work_[i].bench].suite].push_back(i);
  return groups;
}

// Suite drift (single process run per side): remove the change common to a suite's metrics and use
// their spread around it as the between-run noise.
void Comparison::remove_suite_drift() {
  if (!o_.noise.common_mode) return;
  std::vector<std::pair<std::size_t, Drift>> adjust;
  for (const auto& [suite, items] : suite_drift_groups()) {
    if (static_cast<int>(items.size()) < std::max(3, o_.noise.common_mode_min_metrics)) continue;
    std::vector<double> bad;
    bad.reserve(items.size());
    for (std::size_t i : items)
      bad.push_back(worse_is_up(metric_of(work_[i]).kind) ? work_[i].log_estimate : -work_[i].log_estimate);
    const Drift drift = estimate_suite_drift(bad, o_);
    report_.suite_drift[suite] = {std::expm1(drift.shift), std::expm1(std::sqrt(drift.var / 2)),
                                  static_cast<int>(items.size())};
    for (std::size_t i : items) adjust.emplace_back(i, drift);
  }
  parallel_for(threads_, adjust.size(), [&](std::size_t a) {
    auto& w = work_[adjust[a].first];
    remove_drift(w, metric_of(w), adjust[a].second, o_);
  });
  note_suite_drifts(report_, o_);
}

// The suite's common mode of the learned bands (see has_common_mode_band), when there is one to remove.
std::optional<double> Comparison::learned_common_mode(const std::string& suite, const std::vector<std::size_t>& items) {
  std::vector<double> time_changes, plain_sd, removed_sd;
  for (std::size_t i : items) {
    if (metric_of(work_[i]).name != "time") continue;
    time_changes.push_back(work_[i].log_estimate);
    plain_sd.push_back(work_[i].band->relative_sd);
    removed_sd.push_back(*work_[i].band->relative_sd_common_mode);
  }
  if (static_cast<int>(time_changes.size()) < std::max(3, o_.noise.common_mode_min_metrics)) return std::nullopt;
  if (!(stats::median(removed_sd) < stats::median(plain_sd))) return std::nullopt;  // removal would not sharpen
  const double shift = stats::median(time_changes);
  report_.learned_common_mode[suite] = {std::expm1(shift), std::expm1(stats::median(removed_sd)),
                                        static_cast<int>(time_changes.size())};
  return shift;
}

bool Comparison::is_host_dependent(const std::string& name) const {
  return names(host_dependent_, name) || names(o_.rule.config.host_dependent, name);
}

void Comparison::remove_learned_common_mode() {
  if (!o_.noise.learned_noise) return;
  std::map<std::string, std::vector<std::size_t>> items;  // suite -> work items with a common-mode band
  for (std::size_t i = 0; i < work_.size(); ++i) {
    if (!has_common_mode_band(work_[i])) continue;
    const BenchmarkComparison& bc = report_.benchmarks[work_[i].bench];
    // A host-dependent benchmark drifts with its host, not with the machine's common mode: on an H100 whose pageable
    // and mapped copies ran 3% slow, removing that from the device copy made it a false 3% improvement.
    if (!is_host_dependent(bc.name)) items[bc.suite].push_back(i);
  }
  for (const auto& [suite, list] : items) {
    const std::optional<double> shift = learned_common_mode(suite, list);
    if (!shift) continue;
    for (std::size_t i : list) judge_without_common_mode(work_[i], metric_of(work_[i]), *shift, o_);
  }
}

void Comparison::count_noise_sources() {
  for (const auto& w : work_) {
    const auto& mc = metric_of(w);
    if (!mc.gated) continue;
    if (w.band) ++report_.learned_metrics;
    else if (!o_.rule.paired_runs && mc.name != "cpu_time") ++report_.prior_metrics;
  }
}

// Multiple-comparison control across every gated, testable metric of the whole comparison.
void Comparison::correct_for_multiple_comparisons() {
  std::vector<double> p;
  std::vector<MetricComparison*> tested;
  for (const auto& w : work_) {
    auto& mc = metric_of(w);
    if (mc.gated && w.testable && mc.verdict != Verdict::noisy) {
      p.push_back(mc.p_value);
      tested.push_back(&mc);
    }
  }
  const std::vector<double> adjusted = adjusted_p_values(p, o_.rule.correction);
  for (std::size_t i = 0; i < tested.size(); ++i) tested[i]->p_adjusted = adjusted[i];
}

// Verdicts per metric, then per benchmark (= worst gated metric), in parallel over benchmarks.
void Comparison::decide() {
  parallel_for(threads_, report_.benchmarks.size(),
               [&](std::size_t bi) { decide_benchmark(report_.benchmarks[bi], contended_[bi] != 0, o_); });
}

void Comparison::finish() {
  recount(report_);
  note_contention(report_, std::count(contended_.begin(), contended_.end(), 1));
  note_repetitions(report_, sample_counts_, aggregate_benchmarks_, o_);
  note_one_sided_counters(report_);
  note_far_slow_repetitions(report_);
  if (o_.noise.learned_noise) add_learned_noise_notes(report_, *o_.noise.learned_noise);
  if (report_.counts.compared() == 0 && report_.exit_code == 2)
    report_.notes.push_back(fmt::format("no benchmark could be compared: {} and {} share no benchmark name",
                                        o_.sides.baseline_place(), o_.sides.current_place()));
  const analysis::NextStep step = analysis::next_step_advice(report_, o_);
  report_.next_step = step.text;
  report_.next_step_runs = step.runs;
  report_.next_step_repetitions = step.repetitions;
  report_.next_step_commands = step.commands;
}

}  // namespace

std::string few_repetitions_phrase(const ComparisonReport& report) {
  if (report.samples_are_aggregates)
    return fmt::format("only {} sample{} per benchmark, one a process run (the files hold aggregates only)",
                       report.repetitions, report.repetitions == 1 ? "" : "s");
  // The repetitions of every process run of the current side count together: say over how many runs, so that 6 after
  // --benchmark_repetitions=3 reads as what it is.
  const int runs = report.current.process_runs;
  const std::string over = runs > 1 ? fmt::format(" over {} process runs", runs) : "";
  if (report.fewest_repetitions == report.most_repetitions)
    return fmt::format("only {} repetition{} per benchmark{}", report.repetitions, report.repetitions == 1 ? "" : "s",
                       over);
  return fmt::format("a median of {} repetitions per benchmark ({} to {}){}", report.repetitions,
                     report.fewest_repetitions, report.most_repetitions, over);
}

std::string first_context_value(const ResultSet& r, std::initializer_list<const char*> keys) {
  for (const char* key : keys)
    for (const auto& c : r.contexts) {
      std::string v = c.get(key);
      if (!v.empty()) return v;
    }
  return {};
}

// ---- public helpers ---------------------------------------------------------------------------------
std::string SideNames::baseline_place() const { return builds ? "the " + baseline + " build" : "the baseline"; }
std::string SideNames::current_place() const { return builds ? "the " + current + " build" : "the current run"; }

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::regression: return "regression";
    case Verdict::improvement: return "improvement";
    case Verdict::unchanged: return "unchanged";
    case Verdict::noisy: return "noisy";
    case Verdict::missing: return "missing";
    case Verdict::new_benchmark: return "new";
    case Verdict::failed: return "failed";
    case Verdict::skipped: return "skipped";
  }
  return "unknown";
}

int severity_rank(Verdict v) {
  switch (v) {
    case Verdict::failed: return 0;
    case Verdict::regression: return 1;
    case Verdict::missing: return 2;
    case Verdict::noisy: return 3;
    case Verdict::improvement: return 4;
    case Verdict::new_benchmark: return 5;
    case Verdict::skipped: return 6;
    case Verdict::unchanged: return 7;
  }
  return 8;
}

const MetricComparison* BenchmarkComparison::metric(const std::string& metric_name) const {
  for (const auto& m : metrics)
    if (m.name == metric_name) return &m;
  return nullptr;
}

const MetricComparison* BenchmarkComparison::driving_metric() const {
  return driver.empty() ? nullptr : metric(driver);
}

double BenchmarkComparison::detectable_change() const {
  if (const MetricComparison* t = metric("time"); t && std::isfinite(t->detectable_change)) return t->detectable_change;
  if (const MetricComparison* d = driving_metric(); d) return d->detectable_change;
  return std::numeric_limits<double>::quiet_NaN();
}

void VerdictCounts::add(Verdict v) {
  switch (v) {
    case Verdict::regression: ++regression; break;
    case Verdict::improvement: ++improvement; break;
    case Verdict::unchanged: ++unchanged; break;
    case Verdict::noisy: ++noisy; break;
    case Verdict::missing: ++missing; break;
    case Verdict::new_benchmark: ++new_benchmark; break;
    case Verdict::failed: ++failed; break;
    case Verdict::skipped: ++skipped; break;
  }
}

bool is_judged(const BenchmarkComparison& b) {
  if (is_alarm(b.verdict)) return true;
  if (b.verdict != Verdict::unchanged) return false;
  const MetricComparison* driver = b.driving_metric();
  return driver != nullptr && driver->gated;
}

void VerdictCounts::add(const BenchmarkComparison& b) {
  add(b.verdict);
  if (is_judged(b)) ++judged;
}

void recount(ComparisonReport& report) {
  report.counts = VerdictCounts{};
  for (const auto& b : report.benchmarks) report.counts.add(b);
  report.exit_code = exit_code_for(report.counts);
}

int exit_code_for(const VerdictCounts& c) {
  // A failed benchmark is a result, not an input problem: it wins even when nothing else compared.
  if (c.failed > 0) return 3;
  if (c.compared() == 0) {
    const int produced = c.total() - c.missing;            // entries of the current run
    if (produced > 0 && produced == c.skipped) return 77;  // everything skipped: nothing ran at all
    return 2;  // nothing in common with the baseline (or nothing at all): no comparison possible
  }
  if (c.regression > 0) return 1;
  if (c.judged == 0) return 77;
  return 0;
}

std::vector<const BenchmarkComparison*> ComparisonReport::sorted() const {
  std::vector<const BenchmarkComparison*> out;
  out.reserve(benchmarks.size());
  for (const auto& b : benchmarks) out.push_back(&b);
  std::stable_sort(out.begin(), out.end(), [](const BenchmarkComparison* a, const BenchmarkComparison* b) {
    const int ra = severity_rank(a->verdict), rb = severity_rank(b->verdict);
    if (ra != rb) return ra < rb;
    const MetricComparison* ma = a->driving_metric();
    const MetricComparison* mb = b->driving_metric();
    const double sa = ma ? strength(*ma) : 0, sb = mb ? strength(*mb) : 0;
    if (sa != sb) return sa > sb;
    return a->name < b->name;
  });
  return out;
}

namespace {
// The CPU lists the side's process runs were pinned to, when every one was (perfgate.run.cpus); else empty.
std::string pinned_cpus_of(const ResultSet& r) {
  std::vector<std::string> lists;
  for (const auto& c : r.contexts) {
    const std::string cpus = c.get(context_keys::kRunCpus);
    if (cpus.empty() || cpus == "any") return {};
    if (std::find(lists.begin(), lists.end(), cpus) == lists.end()) lists.push_back(cpus);
  }
  return fmt::format("{}", fmt::join(lists, "; "));
}
}  // namespace

SideInfo describe_side(const ResultSet& r) {
  SideInfo s;
  s.commit = first_context_value(
      r, {context_keys::kGitCommit, context_keys::kLegacyCommit, context_keys::kBaselineCommit, "git_commit"});
  s.date = first_context_value(r, {context_keys::kBaselineDate, "date"});
  s.host = first_context_value(r, {"host_name"});
  s.executable = first_context_value(r, {"executable"});
  s.machine_class = first_context_value(r, {context_keys::kBaselineMachine, context_keys::kMachineClass});
  s.process_runs = r.process_runs();
  s.pinned_cpus = pinned_cpus_of(r);
  std::set<std::string> seen;
  for (const auto& c : r.contexts)
    if (seen.insert(c.source_file).second) s.files.push_back(c.source_file);
  return s;
}

namespace {
// Google Benchmark's context says whether the CPU's frequency scaling was on: where it was, the clock follows the load,
// a noise that pinning and more runs do not remove. Named once, with the sides it concerns.
void note_cpu_scaling(ComparisonReport& report, const ResultSet& baseline, const ResultSet& current) {
  const auto scaled = [](const ResultSet& side) {
    return std::any_of(side.contexts.begin(), side.contexts.end(),
                       [](const RunContext& c) { return c.get("cpu_scaling_enabled") == "true"; });
  };
  const bool b = scaled(baseline), c = scaled(current);
  if (!b && !c) return;
  const SideNames& sides = report.options.sides;
  report.notes.push_back(fmt::format(
      "CPU frequency scaling was on for {} (Google Benchmark's context, cpu_scaling_enabled): the clock follows the "
      "load, which adds noise between and within runs that pinning and more runs do not remove; a fixed clock (the "
      "performance governor, e.g. cpupower frequency-set -g performance) does",
      b && c ? "both sides" : (b ? sides.baseline_place() : sides.current_place())));
}

// Per suite, the sessions the baseline's level is pooled from: the distinct perfgate.run.seed values of its process
// runs (one perfgate run, one seed). `perfgate baseline update --from` of several sessions' run files pools them.
std::map<std::string, int> pooled_sessions_by_suite(const ResultSet& baseline) {
  std::map<std::string, std::set<std::string>> seeds;
  for (const auto& c : baseline.contexts) {
    const std::string suite = c.get(context_keys::kSuite);
    const std::string seed = c.get(context_keys::kRunSeed);
    if (!suite.empty() && !seed.empty()) seeds[suite].insert(seed);
  }
  std::map<std::string, int> sessions;
  for (const auto& [suite, distinct] : seeds) sessions[suite] = static_cast<int>(distinct.size());
  return sessions;
}
}  // namespace

// ---- the engine ---------------------------------------------------------------------------------------------
// The rule of docs/statistics.md, step by step: each metric analysed (compare_analyses.hpp chooses within-run,
// between-run, paired or between-session), drift common to a suite removed, p-values corrected over the whole
// comparison, then the verdicts, worst metric first.
ComparisonReport compare(const ResultSet& loaded_baseline, const ResultSet& loaded_current, const CompareOptions& o) {
  ComparisonReport report;
  const UnthrottledSides sides(loaded_baseline, loaded_current, throttle_rule(o), report.throttled_baseline,
                               report.throttled_current, report.notes, o.sides.baseline,
                               o.sides.current);  // throttled.hpp: before every analysis
  const ResultSet& baseline = sides.baseline();
  const ResultSet& current = sides.current();
  report.options = reported_options(o);
  report.baseline = describe_side(baseline);
  report.current = describe_side(current);
  auto baseline_suites = suites_by_file(baseline);
  const auto current_suites = suites_by_file(current);
  if (std::string paired = pair_lone_binaries(baseline_suites, current_suites); !paired.empty())
    report.notes.push_back(std::move(paired));
  record_suite_context(report, current, current_suites);
  record_suite_context(report, baseline, baseline_suites);
  report.files_on_both_sides = files_on_both_sides(baseline, current);
  ResultSet both_sides;  // one note for a finding of both sides' files
  both_sides.add_load_notes(baseline.load_notes);
  both_sides.add_load_notes(current.load_notes);
  for (const LoadNote& note : both_sides.load_notes) report.notes.push_back(note.line());
  note_cpu_scaling(report, baseline, current);
  Comparison comparison(report, o, pooled_sessions_by_suite(baseline),
                        context_pattern(baseline, current, kHostDependentKey),
                        context_pattern(baseline, current, kFloorBoundKey));
  for (const auto& cur : current.benchmarks)
    comparison.add_benchmark(baseline.find(cur.name), &cur, reported_suite(current_suites, cur));
  for (const auto& base : baseline.benchmarks)
    if (!current.find(base.name)) comparison.add_benchmark(&base, nullptr, reported_suite(baseline_suites, base));
  comparison.analyse_metrics();
  comparison.remove_suite_drift();
  comparison.remove_learned_common_mode();
  comparison.count_noise_sources();
  comparison.correct_for_multiple_comparisons();
  comparison.decide();
  apply_cycle_space(report, baseline, current, o);  // time x clock where the SM clocks differ (compare_cycle_space.hpp)
  comparison.finish();
  std::vector<std::string> names;
  std::set<std::string> suites;
  for (const auto& b : report.benchmarks) {
    names.push_back(b.name);
    suites.insert({b.suite, suite_of_benchmark(b.name)});
  }
  report.unmatched_thresholds = unmatched_thresholds(o, names, suites);
  return report;
}

}  // namespace perfgate
