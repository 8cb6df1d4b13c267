#include "perfgate/compare.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "perfgate/loader.hpp"
#include "perfgate/stats.hpp"

#include "compare_cycle_space.hpp"

namespace perfgate {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string suite_of(const std::string& name) {
  const auto slash = name.find('/');
  return slash == std::string::npos ? name : name.substr(0, slash);
}

std::uint64_t fnv1a(const std::string& s, std::uint64_t seed) {
  std::uint64_t h = 1469598103934665603ULL ^ seed;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string pct(double v) { return fmt::format("{:+.1f}%", 100 * v); }

// ---- per-metric statistics ----------------------------------------------------------------------
struct SideSummary {
  std::vector<double> logs;            // log of every sample
  std::vector<double> run_log_medians; // one per process run with samples
  double median = kNaN;
  double dispersion = 0;               // max robust CV over its runs
  bool positive = true;
  bool all_equal = true;
};

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

void summarise(const Metric& m, SideSummary& s) {
  const std::size_t n = m.samples.size();
  s.logs.resize(n);
  s.run_log_medians.clear();
  s.positive = true;
  s.all_equal = true;
  s.dispersion = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = m.samples[i];
    if (!(v > 0) || !std::isfinite(v)) s.positive = false;
    if (v != m.samples[0]) s.all_equal = false;
    s.logs[i] = v > 0 ? std::log(v) : kNaN;
  }
  // Group by process run (samples of one run are contiguous when loaded file by file).
  bool single_run = true;
  for (std::size_t i = 1; i < m.process_run.size(); ++i)
    if (m.process_run[i] != m.process_run[0]) single_run = false;
  if (single_run || m.process_run.size() != n) {
    const auto [med, cv] = median_and_cv(m.samples.data(), n);
    s.median = med;
    s.dispersion = cv;
    if (s.positive) s.run_log_medians.push_back(std::log(s.median));
    return;
  }
  s.median = stats::median(m.samples);
  std::map<int, std::vector<double>> runs;
  for (std::size_t i = 0; i < n; ++i) runs[m.process_run[i]].push_back(m.samples[i]);
  for (auto& [run, values] : runs) {
    const auto [med, cv] = median_and_cv(values.data(), values.size());
    s.dispersion = std::max(s.dispersion, cv);
    if (s.positive) s.run_log_medians.push_back(std::log(med));
  }
}

struct MetricWork {
  std::size_t bench = 0;            // index into report.benchmarks
  std::size_t metric = 0;           // index into that benchmark's metrics
  const Metric* base = nullptr;
  const Metric* cur = nullptr;
  double log_lower = 0, log_upper = 0;  // interval of log(current/baseline)
  bool bounded = false;
  bool testable = false;            // has a p-value that enters the correction
  // Within-run mode (one process run per side): the unwidened interval, for the suite drift pass.
  bool within_run = false;
  double log_estimate = 0, within_lower = 0, within_upper = 0;
  const LearnedBand* band = nullptr;  // judged with this learned band (between sessions)
};

bool worse_is_up(MetricKind kind) { return !higher_is_better(kind); }

// log of a session's level as the history measures it: the median of its process runs' medians.
double session_log_level(const SideSummary& s) { return stats::median(s.run_log_medians); }

// The t interval and two-sided t test of a log estimate with standard error se and df degrees of freedom (a zero
// se: the estimate itself, and p 1 or 0).
void set_t_interval(MetricWork& w, MetricComparison& mc, double estimate, double se, double df, const CompareOptions& o) {
  w.log_estimate = estimate;
  if (se > 0) {
    const double t = stats::student_t_quantile_cached(1 - o.alpha / 2, df);
    w.log_lower = estimate - t * se;
    w.log_upper = estimate + t * se;
    mc.p_value = std::clamp(2 * (1 - stats::student_t_cdf(std::fabs(estimate) / se, df)), 0.0, 1.0);
  } else {
    w.log_lower = w.log_upper = estimate;
    mc.p_value = estimate == 0 ? 1.0 : 0.0;
  }
  w.bounded = true;
  w.testable = true;
}

// Interval and p of a log difference d of two session levels whose noise is a learned band (relative SD sd of
// one session level, `sessions` degrees of freedom).
void judge_between_sessions(MetricWork& w, MetricComparison& mc, double d, double sd, int sessions, const CompareOptions& o) {
  set_t_interval(w, mc, d, sd * std::sqrt(2.0), std::max(1, sessions), o);
  mc.run_noise = sd;
  mc.run_noise_estimated = true;
}

// A stored comparison judged with the learned band of this metric (CompareOptions::learned_noise).
void analyse_with_learned_band(MetricWork& w, MetricComparison& mc, const SideSummary& sb, const SideSummary& sc,
                               const LearnedBand& band, const CompareOptions& o) {
  w.band = &band;
  mc.learned_noise = true;
  const double d = session_log_level(sc) - session_log_level(sb);
  judge_between_sessions(w, mc, d, band.relative_sd, band.sessions, o);
  mc.method = fmt::format("between-session ({} vs {} runs), learned noise {:.2f}% from {} sessions", sb.run_log_medians.size(),
                          sc.run_log_medians.size(), 100 * band.relative_sd, band.sessions);
}

const LearnedBand* learned_band_for(const CompareOptions& o, const std::string& bench_name, const std::string& metric) {
  if (!o.learned_noise || o.paired_runs) return nullptr;
  return o.learned_noise->usable(bench_name, metric);
}

// Fills descriptive fields and the p-value/interval of one gated metric; the verdict comes later,
// after the multiple-comparison correction.
void analyse_metric(MetricWork& w, MetricComparison& mc, const CompareOptions& o, const std::string& bench_name) {
  const Metric& b = *w.base;
  const Metric& c = *w.cur;
  mc.n_baseline = b.samples.size();
  mc.n_current = c.samples.size();
  thread_local SideSummary sb, sc;
  summarise(b, sb);
  summarise(c, sc);
  mc.runs_baseline = static_cast<int>(std::max<std::size_t>(1, sb.run_log_medians.size()));
  mc.runs_current = static_cast<int>(std::max<std::size_t>(1, sc.run_log_medians.size()));
  mc.baseline_median = sb.median;
  mc.current_median = sc.median;
  mc.change = sb.median != 0 ? sc.median / sb.median - 1 : kNaN;
  mc.raw_change = mc.change;
  mc.dispersion = std::max(sb.dispersion, sc.dispersion);
  if (!mc.gated) return;

  if (static_cast<int>(mc.n_baseline) < o.min_samples || static_cast<int>(mc.n_current) < o.min_samples) {
    mc.verdict = Verdict::noisy;
    mc.reason = fmt::format("too few samples to judge ({} baseline, {} current; need {} per side: "
                            "run with --benchmark_repetitions)",
                            mc.n_baseline, mc.n_current, o.min_samples);
    mc.gated = true;
    return;
  }
  if (!sb.positive || !sc.positive) {
    if (sb.all_equal && sc.all_equal && b.samples[0] == c.samples[0]) {
      mc.verdict = Verdict::unchanged;
      mc.reason = "identical constant values";
    } else {
      mc.verdict = Verdict::unchanged;
      mc.reason = "values <= 0: a ratio is undefined, not gated";
    }
    mc.gated = false;
    return;
  }

  const double confidence = 1 - o.alpha;
  const int kb = static_cast<int>(sb.run_log_medians.size());
  const int kc = static_cast<int>(sc.run_log_medians.size());
  // Between-run noise: pooled spread of per-run log medians, moderated by the machine-class prior.
  double ss = 0;
  double df_data = 0;
  for (const SideSummary* s : {&sb, &sc}) {
    const auto& r = s->run_log_medians;
    if (r.size() < 2) continue;
    double mean = 0;
    for (double v : r) mean += v;
    mean /= static_cast<double>(r.size());
    for (double v : r) ss += (v - mean) * (v - mean);
    df_data += static_cast<double>(r.size() - 1);
  }
  const double prior_noise = mc.name == "cpu_time" ? o.cpu_run_noise : o.run_noise;
  const double prior_sd = std::log1p(std::max(0.0, prior_noise));
  const double prior_df = prior_noise > 0 ? std::max(0.0, o.run_noise_df) : 0.0;
  const double df_total = prior_df + df_data;
  const double between_var = df_total > 0 ? (prior_df * prior_sd * prior_sd + ss) / df_total : 0.0;
  const double between_sd = std::sqrt(between_var);
  mc.run_noise = std::expm1(between_sd);
  mc.run_noise_estimated = df_data > 0;

  if (const LearnedBand* band = learned_band_for(o, bench_name, mc.name); band && !sb.run_log_medians.empty() &&
                                                                          !sc.run_log_medians.empty()) {
    analyse_with_learned_band(w, mc, sb, sc, *band, o);
  } else if (o.paired_runs && kb == kc && kb >= 3) {
    // Interleaved rounds: difference of run medians within each round; drift common to a round cancels.
    mc.method = fmt::format("paired ({} rounds)", kb);
    double mean = 0;
    for (int i = 0; i < kb; ++i) mean += sc.run_log_medians[static_cast<std::size_t>(i)] - sb.run_log_medians[static_cast<std::size_t>(i)];
    mean /= kb;
    double ssd = 0;
    for (int i = 0; i < kb; ++i) {
      const double d = sc.run_log_medians[static_cast<std::size_t>(i)] - sb.run_log_medians[static_cast<std::size_t>(i)] - mean;
      ssd += d * d;
    }
    const double df = kb - 1;
    const double sd = std::sqrt(ssd / df);
    const double se = sd / std::sqrt(static_cast<double>(kb));
    mc.run_noise = std::expm1(sd / std::sqrt(2.0));  // per-run noise implied by the round differences
    mc.run_noise_estimated = true;
    set_t_interval(w, mc, mean, se, df, o);
  } else if (kb + kc >= 3) {
    // Several process runs: the run median is the unit of analysis (samples inside one run are not
    // independent evidence about the next run). Moderated t on the mean log run medians.
    mc.method = fmt::format("between-run ({} vs {} runs)", kb, kc);
    double mb = 0, mcur = 0;
    for (double v : sb.run_log_medians) mb += v;
    for (double v : sc.run_log_medians) mcur += v;
    mb /= kb;
    mcur /= kc;
    const double d = mcur - mb;
    w.log_estimate = d;
    const double se = between_sd * std::sqrt(1.0 / kb + 1.0 / kc);
    // The two sides' sessions each sit at their own level: a variance the runs cannot estimate (prior).
    const double session_sd = std::log1p(std::max(0.0, o.session_noise)) * std::sqrt(2.0);
    const double session_df = std::max(1.0, o.run_noise_df);
    if (session_sd > 0 && df_total > 0) {
      mc.method += fmt::format(" + session drift {:.1f}%", 100 * o.session_noise);
      const double half = std::hypot(stats::student_t_quantile_cached(1 - o.alpha / 2, df_total) * se,
                                     stats::student_t_quantile_cached(1 - o.alpha / 2, session_df) * session_sd);
      w.log_lower = d - half;
      w.log_upper = d + half;
      w.bounded = true;
      // Welch-Satterthwaite degrees of freedom of the two variance components
      const double v1 = se * se, v2 = session_sd * session_sd;
      const double df_eff = (v1 + v2) * (v1 + v2) / (v1 * v1 / df_total + v2 * v2 / session_df);
      mc.p_value = std::clamp(2 * (1 - stats::student_t_cdf(std::fabs(d) / std::sqrt(v1 + v2), df_eff)), 0.0, 1.0);
    } else if (se > 0 && df_total > 0) {
      const double t = stats::student_t_quantile_cached(1 - o.alpha / 2, df_total);
      w.log_lower = d - t * se;
      w.log_upper = d + t * se;
      w.bounded = true;
      mc.p_value = std::clamp(2 * (1 - stats::student_t_cdf(std::fabs(d) / se, df_total)), 0.0, 1.0);
    } else {
      // No spread at all (identical run medians, no prior): equal medians or a deterministic change.
      w.log_lower = w.log_upper = d;
      w.bounded = true;
      mc.p_value = d == 0 ? 1.0 : 0.0;
    }
    w.testable = true;
  } else {
    mc.method = "within-run";
    const auto mwu = stats::mann_whitney_u(b.samples, c.samples);
    mc.p_value = mwu.p_value;
    w.testable = true;
    stats::Interval iv;
    if (o.interval == IntervalMethod::bootstrap) {
      const auto r = stats::bootstrap_median_ratio(b.samples, c.samples, confidence, o.bootstrap_resamples,
                                                   fnv1a(bench_name + "\n" + mc.name, o.seed));
      iv.estimate = std::log(r.estimate);
      iv.lower = std::log(r.lower);
      iv.upper = std::log(r.upper);
      iv.bounded = r.bounded && r.lower > 0;
    } else {
      iv = stats::hodges_lehmann_shift(sb.logs, sc.logs, confidence);
    }
    if (!iv.bounded) {
      w.bounded = false;
    } else {
      w.within_run = true;
      w.log_estimate = iv.estimate;
      w.within_lower = iv.lower;
      w.within_upper = iv.upper;
      // Between-run noise the samples cannot show (one run per side): widen by the prior.
      double widen = 0;
      if (between_sd > 0 && df_total > 0)
        widen = stats::student_t_quantile_cached(1 - o.alpha / 2, df_total) * between_sd * std::sqrt(2.0);
      const double lo_half = iv.estimate - iv.lower, hi_half = iv.upper - iv.estimate;
      w.log_lower = iv.estimate - std::sqrt(lo_half * lo_half + widen * widen);
      w.log_upper = iv.estimate + std::sqrt(hi_half * hi_half + widen * widen);
      w.bounded = true;
    }
  }
  mc.interval_bounded = w.bounded;
  // The estimate the interval is built around (the mean log run median, the mean round difference, the
  // Hodges-Lehmann shift, the session levels): never a ratio of pooled medians beside an interval of another
  // statistic, which could print an estimate outside its own interval.
  if (w.bounded) mc.change = mc.raw_change = std::expm1(w.log_estimate);
  mc.change_lower = w.bounded ? std::expm1(w.log_lower) : -1;
  mc.change_upper = w.bounded ? std::expm1(w.log_upper) : std::numeric_limits<double>::infinity();
}

// Turns statistics into a verdict for one gated metric.
void decide_metric(MetricComparison& mc, const CompareOptions& o) {
  if (!mc.gated || mc.verdict == Verdict::noisy) return;
  const double thr = mc.threshold;
  const bool up_bad = worse_is_up(mc.kind);
  const double lo = mc.change_lower, hi = mc.change_upper;
  const std::string interval = mc.interval_bounded ? fmt::format("[{}, {}]", pct(lo), pct(hi)) : "[unbounded]";
  if (!mc.interval_bounded) {
    mc.verdict = Verdict::noisy;
    mc.reason = fmt::format("too few samples for a {:.0f}% interval ({} vs {})", 100 * (1 - o.alpha),
                            mc.n_baseline, mc.n_current);
    return;
  }
  const bool significant = mc.p_adjusted <= o.alpha;
  const auto beyond = [&](double margin, bool worse) {
    // worse: the whole interval on the bad side of +-margin; else on the good side.
    if (up_bad == worse) return lo > margin;
    return hi < -margin;
  };
  const std::string stat = fmt::format("change {} {}, p={:.2g} (adjusted {:.2g}), threshold {:.1f}%",
                                       pct(mc.change), interval, mc.p_value, mc.p_adjusted, 100 * thr);
  // Paired rounds and learned bands carry the within-run spread in their own noise (the per-round differences,
  // the spread of session levels): it widens their interval instead of vetoing the verdict.
  const bool noise_carries_dispersion = mc.method.rfind("paired", 0) == 0 || mc.learned_noise;
  if (mc.dispersion > o.max_dispersion && (!noise_carries_dispersion || o.paired_dispersion_gate)) {
    // Interference inside a run: only a change larger than threshold + dispersion is believed.
    const double margin = thr + mc.dispersion;
    if (significant && beyond(margin, true)) {
      mc.verdict = Verdict::regression;
      mc.reason = fmt::format("{}; beyond threshold + within-run dispersion {:.1f}%", stat, 100 * mc.dispersion);
    } else if (significant && beyond(margin, false)) {
      mc.verdict = Verdict::improvement;
      mc.reason = fmt::format("{}; beyond threshold + within-run dispersion {:.1f}%", stat, 100 * mc.dispersion);
    } else {
      mc.verdict = Verdict::noisy;
      mc.reason = fmt::format("within-run dispersion {:.1f}% above the {:.1f}% limit; {}", 100 * mc.dispersion,
                              100 * o.max_dispersion, stat);
    }
    return;
  }
  // Paired rounds with a high within-run dispersion: the per-round differences carry it (see
  // CompareOptions::paired_dispersion_gate); the reason says so.
  const std::string stat_disp = noise_carries_dispersion && mc.dispersion > o.max_dispersion
                                    ? fmt::format("{}; within-run dispersion {:.1f}% (in the {})", stat,
                                                  100 * mc.dispersion,
                                                  mc.learned_noise ? "learned session noise" : "per-round differences")
                                    : stat;
  if (significant && beyond(thr, true)) {
    mc.verdict = Verdict::regression;
    mc.reason = stat_disp;
  } else if (significant && beyond(thr, false)) {
    mc.verdict = Verdict::improvement;
    mc.reason = stat_disp;
  } else if (std::fabs(mc.change) > thr) {  // change relative to the suite's common drift where removed
    mc.verdict = Verdict::noisy;
    mc.reason = fmt::format("{}: a change beyond the threshold that the evidence cannot separate from noise{}", stat_disp,
                            mc.run_noise > 0 ? fmt::format(" (between-run noise {:.1f}%)", 100 * mc.run_noise) : "");
  } else {
    mc.verdict = Verdict::unchanged;
    mc.reason = stat_disp;
  }
}

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

std::string first_context_value(const ResultSet& r, std::initializer_list<const char*> keys) {
  for (const char* key : keys)
    for (const auto& c : r.contexts) {
      const std::string v = c.get(key);
      if (!v.empty()) return v;
    }
  return {};
}

double number_field(const nlohmann::json& j, const std::string& key, const std::string& source, double lo, double hi) {
  if (!j.is_number()) throw InputError(source, "", key, "must be a number");
  const double v = j.get<double>();
  if (!std::isfinite(v) || v < lo || v >= hi)
    throw InputError(source, "", key, fmt::format("must be in [{}, {}), got {}", lo, hi, v));
  return v;
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

// Wall-time metrics of a benchmark whose real/cpu time ratio moved between the sides: contention, not
// code, may explain them, so they cannot decide; the CPU time (gated for such benchmarks) does.
void downgrade_contended(BenchmarkComparison& bc) {
  for (auto& m : bc.metrics) {
    if (!m.gated || m.name == "cpu_time" || (m.verdict != Verdict::regression && m.verdict != Verdict::improvement)) continue;
    m.reason = fmt::format("machine contention: real/cpu time {:.2f} -> {:.2f} (CPU time {}), so the wall time is judged by "
                           "cpu_time; was {}: {}",
                           bc.contention_baseline, bc.contention_current, pct(bc.cpu_time_change), to_string(m.verdict),
                           m.reason);
    m.verdict = Verdict::noisy;
  }
}

}  // namespace

// ---- public helpers ---------------------------------------------------------------------------------
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

const MetricComparison* BenchmarkComparison::driving_metric() const { return driver.empty() ? nullptr : metric(driver); }

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

int exit_code_for(const VerdictCounts& c) {
  // A failed benchmark is a result, not an input problem: it wins even when nothing else compared.
  if (c.failed > 0) return 3;
  if (c.compared() == 0) {
    const int produced = c.total() - c.missing;  // entries of the current run
    if (produced > 0 && produced == c.skipped) return 77;  // everything skipped: nothing ran at all
    return 2;  // nothing in common with the baseline (or nothing at all): no comparison possible
  }
  if (c.regression > 0) return 1;
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

// ---- thresholds ---------------------------------------------------------------------------------------
ThresholdConfig parse_threshold_config(const std::string& text, const std::string& source) {
  ThresholdConfig cfg;
  cfg.source = source;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(source, "", "", fmt::format("malformed JSON: {}", e.what()));
  }
  if (!j.is_object()) throw InputError(source, "", "", "the top level must be an object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const auto& v = it.value();
    if (key == "default") {
      cfg.default_threshold = number_field(v, key, source, 0, 10);
    } else if (key == "suites" || key == "benchmarks") {
      if (!v.is_object()) throw InputError(source, "", key, "must be an object of name -> threshold");
      for (auto e = v.begin(); e != v.end(); ++e) {
        const double t = number_field(e.value(), key + "." + e.key(), source, 0, 10);
        if (key == "suites") {
          cfg.suites[e.key()] = t;
        } else {
          ThresholdConfig::Pattern p;
          p.text = e.key();
          p.threshold = t;
          try {
            p.regex = std::regex(p.text, std::regex::ECMAScript | std::regex::optimize);
            p.valid_regex = true;
          } catch (const std::regex_error&) {
            p.valid_regex = false;  // still usable as an exact name
          }
          cfg.benchmarks.push_back(std::move(p));
        }
      }
    } else if (key == "run_noise") {
      cfg.run_noise = number_field(v, key, source, 0, 1);
    } else if (key == "run_noise_df") {
      cfg.run_noise_df = number_field(v, key, source, 0, 1e6);
    } else if (key == "session_noise") {
      cfg.session_noise = number_field(v, key, source, 0, 1);
    } else if (key == "max_dispersion") {
      cfg.max_dispersion = number_field(v, key, source, 0, 100);
    } else if (key == "min_samples") {
      if (!v.is_number_integer() || v.get<long long>() < 2 || v.get<long long>() > 100000)
        throw InputError(source, "", key, "must be an integer >= 2");
      cfg.min_samples = static_cast<int>(v.get<long long>());
    } else if (key == "alpha") {
      cfg.alpha = number_field(v, key, source, 1e-12, 0.5);
    } else if (key == "common_mode" || key == "contention_check") {
      if (!v.is_boolean()) throw InputError(source, "", key, "must be true or false");
      (key == "common_mode" ? cfg.common_mode : cfg.contention_check) = v.get<bool>();
    } else if (key == "comment" || key == "$comment" || key == "_comment") {
      // free text, ignored
    } else {
      throw InputError(source, "", key,
                       "unknown key (expected default, suites, benchmarks, run_noise, run_noise_df, session_noise, max_dispersion, "
                       "min_samples, alpha, common_mode, contention_check)");
    }
  }
  return cfg;
}

ThresholdConfig load_threshold_config(const std::string& file) {
  return parse_threshold_config(read_config_file(file, "threshold config", 16u << 20), file);
}

void CompareOptions::apply_config_defaults() {
  if (config.alpha) alpha = *config.alpha;
  if (config.run_noise) run_noise = *config.run_noise;
  if (config.run_noise_df) run_noise_df = *config.run_noise_df;
  if (config.session_noise) session_noise = *config.session_noise;
  if (config.max_dispersion) max_dispersion = *config.max_dispersion;
  if (config.min_samples) min_samples = *config.min_samples;
  if (config.common_mode) common_mode = *config.common_mode;
  if (config.contention_check) contention_check = *config.contention_check;
}

double threshold_for(const CompareOptions& o, const std::string& name) {
  if (o.threshold_override) return *o.threshold_override;
  for (const auto& p : o.config.benchmarks)
    if (p.text == name) return p.threshold;
  for (const auto& p : o.config.benchmarks)
    if (p.valid_regex && std::regex_match(name, p.regex)) return p.threshold;
  const auto s = o.config.suites.find(suite_of(name));
  if (s != o.config.suites.end()) return s->second;
  if (o.config.default_threshold) return *o.config.default_threshold;
  return o.threshold;
}

SideInfo describe_side(const ResultSet& r) {
  SideInfo s;
  s.commit = first_context_value(r, {"perfgate.git_commit", "perfgate.commit", "perfgate.baseline.commit", "git_commit"});
  s.date = first_context_value(r, {"perfgate.baseline.date", "date"});
  s.host = first_context_value(r, {"host_name"});
  s.executable = first_context_value(r, {"executable"});
  s.machine_class = first_context_value(r, {"perfgate.baseline.machine", "perfgate.machine_class"});
  s.process_runs = r.process_runs();
  std::set<std::string> seen;
  for (const auto& c : r.contexts)
    if (seen.insert(c.source_file).second) s.files.push_back(c.source_file);
  return s;
}

// Learned bands with the suite's common mode removed (CompareOptions::learned_noise): per suite, when at least
// common_mode_min_metrics of its benchmarks' times were judged with a band that has a common-mode variant, and
// those variants are tighter (median over the suite), the median time change over them is the session's common
// mode: it is removed from every such metric of the suite, which is then judged with its common-mode band.
void remove_learned_common_mode(std::vector<MetricWork>& work, ComparisonReport& report, const CompareOptions& o) {
  std::map<std::string, std::vector<std::size_t>> items;  // suite -> work items with a common-mode band
  for (std::size_t i = 0; i < work.size(); ++i)
    if (work[i].band && work[i].band->relative_sd_common_mode && work[i].band->sessions_common_mode >= 2)
      items[report.benchmarks[work[i].bench].suite].push_back(i);
  for (const auto& [suite, list] : items) {
    std::vector<double> time_changes, plain_sd, removed_sd;
    for (std::size_t i : list) {
      const auto& mc = report.benchmarks[work[i].bench].metrics[work[i].metric];
      if (mc.name != "time") continue;
      time_changes.push_back(work[i].log_estimate);
      plain_sd.push_back(work[i].band->relative_sd);
      removed_sd.push_back(*work[i].band->relative_sd_common_mode);
    }
    if (static_cast<int>(time_changes.size()) < std::max(3, o.common_mode_min_metrics)) continue;
    if (!(stats::median(removed_sd) < stats::median(plain_sd))) continue;  // removal would not sharpen
    const double shift = stats::median(time_changes);
    for (std::size_t i : list) {
      auto& w = work[i];
      auto& mc = report.benchmarks[w.bench].metrics[w.metric];
      const double sign = worse_is_up(mc.kind) ? 1.0 : -1.0;
      judge_between_sessions(w, mc, w.log_estimate - sign * shift, *w.band->relative_sd_common_mode,
                             w.band->sessions_common_mode, o);
      mc.common_shift = std::expm1(sign * shift);
      mc.change = std::expm1(w.log_estimate);
      mc.change_lower = std::expm1(w.log_lower);
      mc.change_upper = std::expm1(w.log_upper);
      mc.method = fmt::format("between-session ({} vs {} runs), suite common mode {} removed, learned noise {:.2f}% "
                              "from {} sessions",
                              mc.runs_baseline, mc.runs_current, pct(std::expm1(shift)),
                              100 * *w.band->relative_sd_common_mode, w.band->sessions_common_mode);
    }
    report.learned_common_mode[suite] = {std::expm1(shift), std::expm1(stats::median(removed_sd)),
                                         static_cast<int>(time_changes.size())};
  }
}

void add_learned_noise_notes(ComparisonReport& report, const LearnedNoiseTable& table) {
  if (report.learned_metrics == 0 && report.prior_metrics == 0) return;
  report.notes.push_back(fmt::format(
      "learned noise ({}, class {}, {} sessions, window {}): {} gated metric{} judged with the between-session noise "
      "learned for them, {} with the class prior (no band, or fewer than {} sessions since the last change point)",
      table.source, table.machine_class, table.history_sessions, table.window, report.learned_metrics,
      report.learned_metrics == 1 ? "" : "s", report.prior_metrics, table.min_sessions));
  for (const auto& [suite, d] : report.learned_common_mode)
    report.notes.push_back(fmt::format(
        "suite {}: its common mode ({} over {} benchmarks' times) was removed and the bands learned with the "
        "common mode removed were used (median {:.2f}%, tighter than without): a session that moves the whole "
        "suite is machine drift here, not a change of each benchmark",
        suite, pct(d.shift), d.metrics, 100 * d.spread));
}

// The smallest worse-direction change the rule would have called a regression (MetricComparison::detectable_change).
void set_detectable_change(MetricComparison& mc, const CompareOptions& o) {
  if (!mc.gated || !mc.interval_bounded || !(mc.change > -1) || !(mc.change_lower > -1)) return;
  const bool noise_carries_dispersion = mc.method.rfind("paired", 0) == 0 || mc.learned_noise;
  const double margin =
      mc.threshold +
      (mc.dispersion > o.max_dispersion && (!noise_carries_dispersion || o.paired_dispersion_gate) ? mc.dispersion : 0.0);
  const double est = std::log1p(mc.change);
  if (worse_is_up(mc.kind)) {
    mc.detectable_change = std::expm1(std::log1p(margin) + (est - std::log1p(mc.change_lower)));
  } else if (margin < 1 && std::isfinite(mc.change_upper)) {
    mc.detectable_change = std::expm1(std::log1p(-margin) - (std::log1p(mc.change_upper) - est));
  }
}

// ---- the engine -----------------------------------------------------------------------------------------
ComparisonReport compare(const ResultSet& baseline, const ResultSet& current, const CompareOptions& o) {
  ComparisonReport report;
  report.options = o;
  report.baseline = describe_side(baseline);
  report.current = describe_side(current);
  for (const ResultSet* side : {&current, &baseline})
    for (const auto& c : side->contexts) {
      std::string suite = c.get("perfgate.suite");
      const std::string exe_path = c.get("executable");
      if (suite.empty()) {  // bench_<suite> binaries (perfgate_add_suite) name their suite
        const auto base = exe_path.substr(exe_path.find_last_of('/') + 1);
        if (base.rfind("bench_", 0) == 0) suite = base.substr(6);
      }
      const std::string ranges = c.get("perfgate.nvtx_ranges");
      if (!suite.empty() && !ranges.empty()) report.nvtx_ranges.emplace(suite, ranges);
      const std::string exe = c.get("executable");
      if (!suite.empty() && !exe.empty()) report.executables.emplace(suite, exe);
    }

  std::vector<MetricWork> work;
  std::vector<std::size_t> sample_counts;
  std::vector<char> contended;  // per report.benchmarks: real/cpu ratio moved, cpu_time gated
  const auto add_benchmark = [&](const BenchmarkResult* base, const BenchmarkResult* cur) {
    BenchmarkComparison bc;
    bc.name = cur ? cur->name : base->name;
    bc.raw_name = cur ? cur->raw_name : base->raw_name;
    bc.suite = suite_of(bc.name);
    bc.threshold = threshold_for(o, bc.name);
    if (!cur) {
      bc.verdict = Verdict::missing;
      bc.reason = "in the baseline, not in the current run";
    } else if (cur->error) {
      bc.verdict = Verdict::failed;
      bc.message = cur->error;
      bc.reason = "the benchmark failed: " + *cur->error;
    } else if (cur->skip_reason) {
      bc.verdict = Verdict::skipped;
      bc.message = cur->skip_reason;
      bc.reason = "skipped: " + *cur->skip_reason;
    } else if (!base) {
      bc.verdict = Verdict::new_benchmark;
      bc.reason = "not in the baseline";
    } else if (base->error || base->skip_reason) {
      bc.verdict = Verdict::new_benchmark;
      bc.reason = base->error ? "failed in the baseline, nothing to compare with"
                              : "skipped in the baseline, nothing to compare with";
    }
    const std::size_t index = report.benchmarks.size();
    bool is_contended = false;
    if (cur && base && !cur->error && !cur->skip_reason && !base->error && !base->skip_reason) {
      sample_counts.push_back(cur->time.samples.size());
      // Latency first, then every counter of either side (sorted by name).
      MetricComparison t;
      t.name = "time";
      t.kind = MetricKind::latency;
      t.gated = true;
      t.threshold = bc.threshold;
      bc.metrics.push_back(t);
      work.push_back({index, 0, &base->time, &cur->time});
      double rb, rc, cb, cc;
      if (o.contention_check && contention_ratio(*base, rb, cb) && contention_ratio(*cur, rc, cc)) {
        bc.contention_baseline = rb;
        bc.contention_current = rc;
        bc.cpu_time_change = cc / cb - 1;
        if (std::fabs(rc / rb - 1) > bc.threshold / 2) {
          is_contended = true;
          MetricComparison ct;
          ct.name = "cpu_time";
          ct.kind = MetricKind::latency;
          ct.gated = true;
          // A neighbour also pollutes caches: the CPU time of a cache-bound walk rose 15% here when the wall
          // time doubled. So CPU time must move beyond the threshold plus 15% of the contention change.
          ct.threshold = bc.threshold + 0.15 * std::fabs(rc / rb - 1);
          work.push_back({index, bc.metrics.size(), &base->cpu_time, &cur->cpu_time});
          bc.metrics.push_back(ct);
        }
      }
      const double baseline_time_ns = stats::median(base->time.samples);  // phase shares are relative to it
      std::set<std::string> names;
      for (const auto& m : cur->counters) names.insert(m.name);
      for (const auto& m : base->counters) names.insert(m.name);
      for (const auto& n : names) {
        const Metric* bm = base->counter(n);
        const Metric* cm = cur->counter(n);
        MetricComparison mc;
        mc.name = n;
        mc.kind = classify_counter(n);
        mc.threshold = bc.threshold;
        mc.gated = bm && cm && ((mc.kind == MetricKind::rate && o.gate_rates) || (mc.kind == MetricKind::phase && o.gate_phases));
        if (mc.gated && mc.kind == MetricKind::phase && o.min_phase_share > 0) {
          const double share = stats::median(bm->samples) * 1e6 / baseline_time_ns;
          if (std::isfinite(share) && share < o.min_phase_share) {
            mc.gated = false;
            mc.below_min_phase_share = true;
            mc.reason = fmt::format("{:.3g}% of the benchmark's time in the baseline, below the {:.3g}% a phase needs "
                                    "to gate (--min-phase-share): reported, not gated",
                                    100 * share, 100 * o.min_phase_share);
          }
        }
        if (bm && cm) {
          work.push_back({index, bc.metrics.size(), bm, cm});
        } else {
          mc.reason = bm ? "only in the baseline" : "only in the current run";
          if (bm) mc.baseline_median = stats::median(bm->samples);
          if (cm) mc.current_median = stats::median(cm->samples);
          mc.change = kNaN;
          mc.n_baseline = bm ? bm->samples.size() : 0;
          mc.n_current = cm ? cm->samples.size() : 0;
        }
        bc.metrics.push_back(std::move(mc));
      }
    }
    report.benchmarks.push_back(std::move(bc));
    contended.push_back(is_contended);
  };
  for (const auto& cur : current.benchmarks) add_benchmark(baseline.find(cur.name), &cur);
  for (const auto& base : baseline.benchmarks)
    if (!current.find(base.name)) add_benchmark(&base, nullptr);

  // Statistics per metric, in parallel (each item writes only its own MetricComparison).
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  unsigned threads = o.threads > 0 ? static_cast<unsigned>(o.threads) : std::min(2u, hw);
  if (work.size() < 512) threads = 1;
  // Runs body(i) for i in [0, n) on `threads` threads, in chunks.
  const auto parallel_for = [threads](std::size_t n, const auto& body) {
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
  };
  parallel_for(work.size(), [&](std::size_t i) {
    auto& w = work[i];
    auto& bc = report.benchmarks[w.bench];
    analyse_metric(w, bc.metrics[w.metric], o, bc.name);
  });

  // Suite drift (single process run per side): remove the change common to a suite's metrics and use
  // their spread around it as the between-run noise.
  if (o.common_mode) {
    std::map<std::string, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < work.size(); ++i) {
      const auto& w = work[i];
      const auto& mc = report.benchmarks[w.bench].metrics[w.metric];
      if (w.within_run && mc.gated && mc.verdict != Verdict::noisy) groups[report.benchmarks[w.bench].suite].push_back(i);
    }
    std::vector<std::size_t> adjust;
    std::vector<double> group_shift(work.size(), 0.0), group_sd(work.size(), 0.0), group_df(work.size(), 0.0);
    for (const auto& [suite, items] : groups) {
      if (static_cast<int>(items.size()) < std::max(3, o.common_mode_min_metrics)) continue;
      std::vector<double> bad;
      bad.reserve(items.size());
      for (std::size_t i : items) {
        const auto& mc = report.benchmarks[work[i].bench].metrics[work[i].metric];
        bad.push_back(worse_is_up(mc.kind) ? work[i].log_estimate : -work[i].log_estimate);
      }
      const double common = stats::median(bad);
      for (auto& v : bad) v = std::fabs(v - common);
      const double spread = 1.4826 * stats::median_inplace(bad);  // SD of one metric's change (two runs)
      const double n = static_cast<double>(items.size());
      // Pool with the prior (per-run SD -> SD of a difference of two runs: x sqrt 2).
      const double prior_sd = std::log1p(std::max(0.0, o.run_noise)) * std::sqrt(2.0);
      const double prior_df = o.run_noise > 0 ? std::max(0.0, o.run_noise_df) : 0.0;
      const double df = prior_df + (n - 1);
      const double var = (prior_df * prior_sd * prior_sd + (n - 1) * spread * spread) / df;
      report.suite_drift[suite] = {std::expm1(common), std::expm1(std::sqrt(var / 2)), static_cast<int>(items.size())};
      for (std::size_t i : items) {
        group_shift[i] = common;
        group_sd[i] = std::sqrt(var);
        group_df[i] = df;
        adjust.push_back(i);
      }
    }
    parallel_for(adjust.size(), [&](std::size_t a) {
      const std::size_t i = adjust[a];
      auto& w = work[i];
      auto& mc = report.benchmarks[w.bench].metrics[w.metric];
      const double sign = worse_is_up(mc.kind) ? 1.0 : -1.0;
      const double shift = sign * group_shift[i];  // in log(current / baseline)
      const double est = w.log_estimate - shift;
      const double lo_half = w.log_estimate - w.within_lower, hi_half = w.within_upper - w.log_estimate;
      const double widen = stats::student_t_quantile_cached(1 - o.alpha / 2, group_df[i]) * group_sd[i];
      w.log_lower = est - std::sqrt(lo_half * lo_half + widen * widen);
      w.log_upper = est + std::sqrt(hi_half * hi_half + widen * widen);
      mc.change_lower = std::expm1(w.log_lower);
      mc.change_upper = std::expm1(w.log_upper);
      mc.common_shift = std::expm1(shift);
      mc.change = (1 + mc.raw_change) / std::exp(shift) - 1;
      mc.run_noise = std::expm1(group_sd[i] / std::sqrt(2.0));
      mc.run_noise_estimated = true;
      mc.method = fmt::format("within-run, suite drift {} removed", pct(mc.common_shift));
      // The test too is of the change relative to the drift: shift the current samples back.
      thread_local std::vector<double> lb, lc;
      lb.resize(w.base->samples.size());
      lc.resize(w.cur->samples.size());
      for (std::size_t k = 0; k < lb.size(); ++k) lb[k] = std::log(w.base->samples[k]);
      for (std::size_t k = 0; k < lc.size(); ++k) lc[k] = std::log(w.cur->samples[k]) - shift;
      mc.p_value = stats::mann_whitney_u(lb, lc).p_value;
    });
    for (const auto& [suite, d] : report.suite_drift) {
      if (std::fabs(d.shift) > o.threshold / 2)
        report.notes.push_back(fmt::format(
            "suite {}: its {} metrics moved by {} together (median; spread {:.1f}% around it) between the two runs. "
            "This is taken as drift of the machine and every metric is judged relative to it, so a change of the whole "
            "suite cannot be told from drift here: confirm such a change with interleaved runs (perfgate ab).",
            suite, d.metrics, pct(d.shift), 100 * d.spread));
    }
  }

  if (o.learned_noise) remove_learned_common_mode(work, report, o);
  for (const auto& w : work) {
    const auto& mc = report.benchmarks[w.bench].metrics[w.metric];
    if (!mc.gated) continue;
    if (w.band) ++report.learned_metrics;
    else if (!o.paired_runs && mc.name != "cpu_time") ++report.prior_metrics;
  }

  // Multiple-comparison control across every gated, testable metric of the whole comparison.
  std::vector<double> p;
  std::vector<MetricComparison*> tested;
  for (const auto& w : work) {
    auto& mc = report.benchmarks[w.bench].metrics[w.metric];
    if (mc.gated && w.testable && mc.verdict != Verdict::noisy) {
      p.push_back(mc.p_value);
      tested.push_back(&mc);
    }
  }
  std::vector<double> adjusted;
  switch (o.correction) {
    case Correction::benjamini_hochberg: adjusted = stats::benjamini_hochberg(p); break;
    case Correction::holm: adjusted = stats::holm(p); break;
    case Correction::none: adjusted = p; break;
  }
  for (std::size_t i = 0; i < tested.size(); ++i) tested[i]->p_adjusted = adjusted[i];
  // Verdicts per metric, then per benchmark (= worst gated metric), in parallel over benchmarks.
  parallel_for(report.benchmarks.size(), [&](std::size_t bi) {
    auto& bc = report.benchmarks[bi];
    if (bc.metrics.empty()) return;
    for (auto& m : bc.metrics) {
      decide_metric(m, o);
      set_detectable_change(m, o);
    }
    if (contended[bi]) downgrade_contended(bc);
    const MetricComparison* worst = nullptr;
    for (const auto& m : bc.metrics) {
      if (!m.gated) continue;
      if (!worst || metric_rank(m.verdict) < metric_rank(worst->verdict) ||
          (metric_rank(m.verdict) == metric_rank(worst->verdict) && strength(m) > strength(*worst)))
        worst = &m;
    }
    if (!worst) worst = &bc.metrics.front();
    bc.verdict = worst->verdict;
    bc.driver = worst->name;
    bc.reason = fmt::format("{} ({}): {}", worst->name, metric_kind_name(worst->kind), worst->reason);
  });

  apply_cycle_space(report, baseline, current, o);  // time x clock where the SM clocks differ (compare_cycle_space.hpp)
  for (const auto& bc : report.benchmarks) report.counts.add(bc.verdict);
  report.exit_code = exit_code_for(report.counts);
  const auto n_contended = std::count(contended.begin(), contended.end(), 1);
  if (n_contended > 0)
    report.notes.push_back(fmt::format(
        "{} benchmark{} ran under different machine contention on the two sides (real/cpu time ratio moved by more "
        "than half the threshold): wall time could not decide there, CPU time did (threshold raised for cache "
        "interference)",
        n_contended, n_contended == 1 ? "" : "s"));
  if (!sample_counts.empty()) {
    std::vector<double> counts(sample_counts.begin(), sample_counts.end());
    report.repetitions = static_cast<int>(stats::median_inplace(counts));
    if (report.repetitions < 9)
      report.notes.push_back(fmt::format("only {} repetitions per benchmark: the rule needs >= {} to judge and is "
                                         "weak below 9 (run with --benchmark_repetitions=20)",
                                         report.repetitions, o.min_samples));
  }
  if (o.learned_noise) add_learned_noise_notes(report, *o.learned_noise);
  if (report.counts.compared() == 0 && report.exit_code == 2)
    report.notes.push_back("no benchmark could be compared: baseline and current share no benchmark name");
  return report;
}

}  // namespace perfgate
