#include "analysis/compare_analyses.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "perfgate/stats.hpp"

namespace perfgate::analysis {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::uint64_t fnv1a(const std::string& s, std::uint64_t seed) {
  std::uint64_t h = 1469598103934665603ULL ^ seed;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// Median and robust CV (1.4826 MAD / median) of one set of values with a single sort.
std::pair<double, double> median_and_cv(const double* values, std::size_t n) {
  thread_local std::vector<double> sorted, dev;
  sorted.assign(values, values + n);
  std::sort(sorted.begin(), sorted.end());
  if (n == 0) return {kNaN, 0.0};
  const double med = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  if (n < 2 || med == 0) return {med, 0.0};
  dev.resize(n);
  for (std::size_t i = 0; i < n; ++i) dev[i] = std::fabs(sorted[i] - med);
  const double mad = stats::median_inplace(dev);
  return {med, 1.4826 * mad / std::fabs(med)};
}

// The logs of the samples, and whether all are positive (a ratio exists) and all equal.
void summarise_samples(const Metric& m, SideSummary& s) {
  const std::size_t n = m.samples.size();
  s.logs.resize(n);
  s.positive = true;
  s.all_equal = true;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = m.samples[i];
    if (!(v > 0) || !std::isfinite(v)) s.positive = false;
    if (v != m.samples[0]) s.all_equal = false;
    s.logs[i] = v > 0 ? std::log(v) : kNaN;
  }
}

bool has_one_process_run(const Metric& m) {
  for (std::size_t i = 1; i < m.process_run.size(); ++i)
    if (m.process_run[i] != m.process_run[0]) return false;
  return true;
}

// Per process run: its level (as a log) and robust CV, the largest CV being the side's dispersion. The median is
// that of the samples, or for fastest levels that of the run levels, so that the reported change is the judged one.
void summarise_runs(const Metric& m, RunLevel level, MetricKind kind, SideSummary& s) {
  std::map<int, std::vector<double>> runs;
  for (std::size_t i = 0; i < m.samples.size(); ++i) runs[m.process_run[i]].push_back(m.samples[i]);
  std::vector<double> levels;
  for (auto& [run, values] : runs) {
    const auto [med, cv] = median_and_cv(values.data(), values.size());
    s.dispersion = std::max(s.dispersion, cv);
    levels.push_back(level == RunLevel::fastest ? fastest_value(values, kind) : med);
    if (s.positive) s.run_log_levels.push_back(std::log(levels.back()));
  }
  s.median = level == RunLevel::fastest ? stats::median_inplace(levels) : stats::median(m.samples);
}

double t_quantile(const CompareOptions& o, double df) {
  return stats::student_t_quantile_cached(1 - o.rule.alpha / 2, df);
}

double two_sided_p(double t_statistic, double df) {
  // From the lower tail: 1 - cdf(|t|) rounds to 0 for large t, and a p-value of 0 reads as a bug.
  return std::clamp(2 * stats::student_t_cdf(-std::fabs(t_statistic), df), 0.0, 1.0);
}

// The t interval and two-sided t test of a log estimate with standard error se and df degrees of freedom (a zero
// se: the estimate itself, and p 1 or 0).
void set_t_interval(MetricWork& w, MetricComparison& mc, double estimate, double se, double df,
                    const CompareOptions& o) {
  w.log_estimate = estimate;
  if (se > 0) {
    const double t = t_quantile(o, df);
    w.log_lower = estimate - t * se;
    w.log_upper = estimate + t * se;
    mc.p_value = two_sided_p(estimate / se, df);
  } else {
    w.log_lower = w.log_upper = estimate;
    mc.p_value = estimate == 0 ? 1.0 : 0.0;
  }
  w.bounded = true;
  w.testable = true;
}

double mean_of(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

// ---- 1. within-run: the samples of one process run per side --------------------------------------------------
class WithinRun final : public Analysis {
 public:
  // The p-value comes from the interval's own model, so that the test and the printed interval always agree and the
  // p-value can be as small as the evidence allows at any sample size (a rank test's smallest p-value at 5 samples a
  // side, 2/252, can never pass a correction over thousands of benchmarks). The within-run part is the
  // Hodges-Lehmann interval read as a t interval; the between-run noise the samples cannot show (one run per side)
  // is the prior, added in quadrature; Welch-Satterthwaite gives the degrees of freedom of the sum.
  void analyse(const Evidence& e, MetricWork& w, MetricComparison& mc) const override {
    mc.method = "within-run";
    const stats::Interval iv = sample_interval(e, mc.name);
    w.bounded = iv.bounded;
    w.testable = true;
    mc.p_value = 1.0;
    if (!iv.bounded) return;
    w.within_run = true;
    w.log_estimate = iv.estimate;
    w.within_lower = iv.lower;
    w.within_upper = iv.upper;
    const double df_within = std::max(1.0, static_cast<double>(e.sb.logs.size() + e.sc.logs.size()) - 2.0);
    const double t_within = t_quantile(e.o, df_within);
    const double prior_var = e.noise.df_total > 0 ? 2.0 * e.noise.sd * e.noise.sd : 0.0;
    const double df_prior = std::max(1.0, e.noise.df_total);
    // Each side of the interval from its own half-width (the HL interval need not be symmetric).
    const auto half_of = [&](double within_half, double& df_out) {
      const double v_within = (within_half / t_within) * (within_half / t_within);
      const double v = v_within + prior_var;
      const double denom = v_within * v_within / df_within + prior_var * prior_var / df_prior;
      df_out = denom > 0 ? v * v / denom : df_within;
      return std::sqrt(v);
    };
    double df_lo = 0, df_hi = 0;
    const double se_lo = half_of(iv.estimate - iv.lower, df_lo);
    const double se_hi = half_of(iv.upper - iv.estimate, df_hi);
    w.log_lower = iv.estimate - t_quantile(e.o, df_lo) * se_lo;
    w.log_upper = iv.estimate + t_quantile(e.o, df_hi) * se_hi;
    // The side facing zero decides whether zero is excluded: the test uses that side.
    const double se = iv.estimate >= 0 ? se_lo : se_hi;
    const double df = iv.estimate >= 0 ? df_lo : df_hi;
    mc.p_value = se > 0 ? two_sided_p(iv.estimate / se, df) : (iv.estimate == 0 ? 1.0 : 0.0);
  }

 private:
  // The interval of the shift of log(sample): Hodges-Lehmann, or a bootstrap of the median ratio.
  static stats::Interval sample_interval(const Evidence& e, const std::string& metric) {
    const double confidence = 1 - e.o.rule.alpha;
    if (e.o.rule.interval != IntervalMethod::bootstrap)
      return stats::hodges_lehmann_shift(e.sb.logs, e.sc.logs, confidence);
    const auto r =
        stats::bootstrap_median_ratio(e.base.samples, e.cur.samples, confidence, e.o.rule.bootstrap_resamples,
                                      fnv1a(e.bench_name + "\n" + metric, e.o.rule.seed));
    stats::Interval iv;
    iv.estimate = std::log(r.estimate);
    iv.lower = std::log(r.lower);
    iv.upper = std::log(r.upper);
    iv.bounded = r.bounded && r.lower > 0;
    return iv;
  }
};

// ---- 2. between-run: run levels of several process runs -------------------------------------------------------
// The run level (its median, or its fastest repetition: run_level.hpp) is the unit of analysis (samples inside
// one run are not independent evidence about the next run): a moderated t on the difference of the mean log run
// levels.
class BetweenRun final : public Analysis {
 public:
  void analyse(const Evidence& e, MetricWork& w, MetricComparison& mc) const override {
    const auto kb = static_cast<double>(e.sb.run_log_levels.size());
    const auto kc = static_cast<double>(e.sc.run_log_levels.size());
    mc.method = fmt::format("between-run ({} vs {} runs)", e.sb.run_log_levels.size(), e.sc.run_log_levels.size());
    const double d = mean_of(e.sc.run_log_levels) - mean_of(e.sb.run_log_levels);
    // pooled_run_noise gives sd 0 when it has no degrees of freedom, so se > 0 implies df_total > 0.
    const double se = e.noise.sd * std::sqrt(1.0 / kb + 1.0 / kc);
    // The two sides' sessions each sit at their own level: a variance the runs cannot estimate (prior).
    const double session_sd = std::log1p(std::max(0.0, e.o.noise.session_noise)) * std::sqrt(2.0);
    if (session_sd > 0 && e.noise.df_total > 0) {
      mc.method += fmt::format(" + session drift {:.1f}%", 100 * e.o.noise.session_noise);
      w.log_estimate = d;
      with_session_drift(e, w, mc, d, se, session_sd);
      w.bounded = true;
      w.testable = true;
    } else {
      // se 0 (identical run levels, no prior): equal medians or a deterministic change.
      set_t_interval(w, mc, d, se, e.noise.df_total, e.o);
    }
  }

 private:
  // The run-median interval widened in quadrature by the session drift prior; the p-value from both variances
  // with Welch-Satterthwaite degrees of freedom.
  static void with_session_drift(const Evidence& e, MetricWork& w, MetricComparison& mc, double d, double se,
                                 double session_sd) {
    const double df_total = e.noise.df_total;
    const double session_df = std::max(1.0, e.o.noise.run_noise_df);
    const double half = std::hypot(t_quantile(e.o, df_total) * se, t_quantile(e.o, session_df) * session_sd);
    w.log_lower = d - half;
    w.log_upper = d + half;
    const double v1 = se * se, v2 = session_sd * session_sd;
    const double df_eff = (v1 + v2) * (v1 + v2) / (v1 * v1 / df_total + v2 * v2 / session_df);
    mc.p_value = two_sided_p(d / std::sqrt(v1 + v2), df_eff);
  }
};

// ---- 3. paired: interleaved rounds ---------------------------------------------------------------------------
// The difference of run levels within each round: drift common to a round cancels.
class Paired final : public Analysis {
 public:
  void analyse(const Evidence& e, MetricWork& w, MetricComparison& mc) const override {
    const std::size_t k = e.sb.run_log_levels.size();
    mc.method = fmt::format("paired ({} rounds)", k);
    mc.noise_carries_dispersion = true;
    const auto kd = static_cast<double>(static_cast<int>(k));
    double mean = 0;
    for (std::size_t i = 0; i < k; ++i) mean += e.sc.run_log_levels[i] - e.sb.run_log_levels[i];
    mean /= kd;
    double ssd = 0;
    for (std::size_t i = 0; i < k; ++i) {
      const double d = e.sc.run_log_levels[i] - e.sb.run_log_levels[i] - mean;
      ssd += d * d;
    }
    const double df = kd - 1;
    const double sd = std::sqrt(ssd / df);
    const double se = sd / std::sqrt(kd);
    mc.run_noise = std::expm1(sd / std::sqrt(2.0));  // per-run noise implied by the round differences
    mc.run_noise_estimated = true;
    set_t_interval(w, mc, mean, se, df, e.o);
  }
};

// ---- 4. between sessions: the levels of two sessions, judged with the learned band of the metric -----------------
class BetweenSessions final : public Analysis {
 public:
  void analyse(const Evidence& e, MetricWork& w, MetricComparison& mc) const override {
    const LearnedBand& band = *e.band;
    w.band = &band;
    mc.learned_noise = true;
    mc.noise_carries_dispersion = true;
    // A session's level as the history measures it: the median of its process runs' levels.
    const double d = stats::median(e.sc.run_log_levels) - stats::median(e.sb.run_log_levels);
    judge_between_sessions(w, mc, d, band.relative_sd, band.sessions, e.o);
    mc.method = fmt::format("between-session ({} vs {} runs{}), learned noise {:.2f}% from {} sessions",
                            e.sb.run_log_levels.size(), e.sc.run_log_levels.size(), pooled_text(w),
                            100 * band.relative_sd, band.sessions);
  }
};

}  // namespace

void summarise(const Metric& m, RunLevel level, MetricKind kind, SideSummary& s) {
  summarise_samples(m, s);
  s.run_log_levels.clear();
  s.dispersion = 0;
  if (has_one_process_run(m) || m.process_run.size() != m.samples.size()) {
    const auto [med, cv] = median_and_cv(m.samples.data(), m.samples.size());
    s.dispersion = cv;
    s.median = level == RunLevel::fastest && !m.samples.empty() ? fastest_value(m.samples, kind) : med;
    if (s.positive) s.run_log_levels.push_back(std::log(s.median));
    return;
  }
  summarise_runs(m, level, kind, s);
}

RunNoise pooled_run_noise(const SideSummary& sb, const SideSummary& sc, double prior_noise, const CompareOptions& o) {
  double ss = 0;
  RunNoise noise;
  for (const SideSummary* s : {&sb, &sc}) {
    const auto& r = s->run_log_levels;
    if (r.size() < 2) continue;
    const double mean = mean_of(r);
    for (double v : r) ss += (v - mean) * (v - mean);
    noise.df_data += static_cast<double>(r.size() - 1);
  }
  const double prior_sd = std::log1p(std::max(0.0, prior_noise));
  const double prior_df = prior_noise > 0 ? std::max(0.0, o.noise.run_noise_df) : 0.0;
  noise.df_total = prior_df + noise.df_data;
  const double between_var = noise.df_total > 0 ? (prior_df * prior_sd * prior_sd + ss) / noise.df_total : 0.0;
  noise.sd = std::sqrt(between_var);
  return noise;
}

std::string pooled_text(const MetricWork& w) {
  return w.baseline_sessions > 1 ? fmt::format("; baseline pooled from {} sessions", w.baseline_sessions)
                                 : std::string();
}

void judge_between_sessions(MetricWork& w, MetricComparison& mc, double d, double sd, int sessions,
                            const CompareOptions& o) {
  // One session's level against the baseline's, itself the level of one session or pooled from several.
  const double spread = sd * std::sqrt(1.0 + 1.0 / std::max(1, w.baseline_sessions));
  set_t_interval(w, mc, d, spread, std::max(1, sessions), o);
  mc.run_noise = sd;
  mc.run_noise_estimated = true;
}

const Analysis& choose_analysis(const Evidence& e) {
  static const WithinRun within_run;
  static const BetweenRun between_run;
  static const Paired paired;
  static const BetweenSessions between_sessions;
  const std::size_t kb = e.sb.run_log_levels.size(), kc = e.sc.run_log_levels.size();
  if (e.band != nullptr && kb > 0 && kc > 0) return between_sessions;
  if (e.o.rule.paired_runs && kb == kc && kb >= 3) return paired;
  if (kb + kc >= 3) return between_run;
  return within_run;
}

}  // namespace perfgate::analysis
