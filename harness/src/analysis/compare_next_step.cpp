#include "analysis/compare_next_step.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "perfgate/stats.hpp"

namespace perfgate::analysis {
namespace {

// An interval half-width this share of the threshold leaves room for the estimate's own wobble: an unchanged
// benchmark's interval then lies within the threshold most of the time.
constexpr double kHalfWidthShare = 0.6;
// Within-run spread is the only sign of the between-run noise that one run per side gives; never advise from less.
constexpr double kMinRunSd = 0.005;

// Why the noisy gated metrics could not be judged, counted over the benchmarks' driving metrics.
struct Causes {
  int few_samples = 0, single_run = 0, learned = 0, dispersed = 0, between_runs = 0;
  int max_repetitions = 0;         // repetitions in one process run, the most of any side
  int fewest_runs = 0;             // of the metrics with several runs a side: the fewest runs either side had
  int one_run = 0;                 // metrics with a single process run on a side, whatever their cause
  int few_sample_runs = 0;         // of the metrics with too few samples over several runs a side: the fewest runs
  std::size_t fewest_samples = 0;  // ... and the fewest samples either side had
  std::vector<double> run_sd;      // per metric: its between-run noise, or its within-run spread for one run a side
  double threshold = 0;
  double learned_sd = 0;
};

// Repetitions per process run of a side that kept `samples` over `runs` runs.
int per_run(std::size_t samples, int runs) {
  const auto r = static_cast<std::size_t>(std::max(runs, 1));
  return static_cast<int>((samples + r - 1) / r);
}

void note_few_samples(Causes& c, const MetricComparison& m) {
  const int runs = std::min(m.runs_baseline, m.runs_current);
  const std::size_t samples = std::min(m.n_baseline, m.n_current);
  c.few_sample_runs = c.few_sample_runs == 0 ? runs : std::min(c.few_sample_runs, runs);
  c.fewest_samples = c.fewest_samples == 0 ? samples : std::min(c.fewest_samples, samples);
}

Causes count_causes(const ComparisonReport& report, const CompareOptions& o) {
  Causes c;
  for (const auto& b : report.benchmarks) {
    if (b.verdict != Verdict::noisy) continue;
    const MetricComparison* m = b.driving_metric();
    if (m == nullptr || !m->gated) continue;
    c.threshold = std::max(c.threshold, m->threshold);
    c.max_repetitions =
        std::max({c.max_repetitions, per_run(m->n_baseline, m->runs_baseline), per_run(m->n_current, m->runs_current)});
    const bool one_run = m->runs_baseline <= 1 || m->runs_current <= 1;
    if (m->learned_noise) {
      ++c.learned;
      c.learned_sd = std::max(c.learned_sd, m->run_noise);
    } else if (static_cast<int>(std::min(m->n_baseline, m->n_current)) < o.rule.min_samples) {
      ++c.few_samples;
      if (!one_run) note_few_samples(c, *m);
    } else if (m->dispersion > o.rule.max_dispersion && !m->noise_carries_dispersion) {
      ++c.dispersed;
    } else if (one_run) {
      ++c.single_run;
    } else {
      ++c.between_runs;
      const int runs = std::min(m->runs_baseline, m->runs_current);
      c.fewest_runs = c.fewest_runs == 0 ? runs : std::min(c.fewest_runs, runs);
    }
    if (one_run) ++c.one_run;
    if (!m->learned_noise) c.run_sd.push_back(std::max(kMinRunSd, one_run ? m->dispersion : m->run_noise));
  }
  return c;
}

// Why more process runs, and not more repetitions, decide: what the runs of this comparison could show.
std::string why_runs(const Causes& c, double typical_run_sd, int min_samples) {
  if (c.between_runs > c.single_run + c.few_samples) {
    return fmt::format(
        "with {} process runs a side and a between-run noise of about {:.1f}% (the runs' spread moderated by the "
        "prior), only more runs narrow the interval, not more repetitions",
        c.fewest_runs, 100 * typical_run_sd);
  }
  if (c.one_run > 0 || c.few_sample_runs == 0)
    return "one process run per side cannot show the noise between runs, so more repetitions alone do not help";
  return fmt::format(
      "{} process runs a side gave {} sample(s), fewer than the {} the rule needs: repetitions give it the samples, "
      "and only more runs narrow the interval of the noise between runs",
      c.few_sample_runs, c.fewest_samples, min_samples);
}

// What to do about a noisy machine: pin the bench processes, or, where they already ran pinned, quieten what else
// runs on those CPUs' host.
std::string quieten(const ComparisonReport& report) {
  if (report.current.pinned_cpus.empty()) return "pin the bench process (--pin-cpus) and quiet the machine";
  return fmt::format(
      "the bench processes already ran pinned (CPUs {}), so quiet what else runs on the machine (or its host's "
      "other guests) or use a quieter one",
      report.current.pinned_cpus);
}

// Files of aggregates only give one sample a process run, whatever --benchmark_repetitions says: the runs are the
// samples, so at least the rule's minimum of them.
NextStep aggregates_runs_advice(int runs) {
  return {fmt::format("measure each side as {} separate process runs, or without --benchmark_report_aggregates_only "
                      "(or ReportAggregatesOnly() in the benchmark): the files hold aggregates only, so each process "
                      "run is one sample, however many repetitions it ran",
                      runs),
          runs, 0};
}

NextStep runs_advice(const ComparisonReport& report, const Causes& c, const CompareOptions& o, int repetitions) {
  std::vector<double> sd = c.run_sd;
  const double typical = sd.empty() ? kMinRunSd : stats::median_inplace(sd);
  const int k = process_runs_to_judge(typical, c.threshold, o);
  if (k == 0) {
    return {
        fmt::format("the runs spread by about {:.1f}%, too much to judge a {:.1f}% threshold: {}, or raise the "
                    "threshold",
                    100 * typical, 100 * c.threshold, quieten(report))};
  }
  if (report.samples_are_aggregates) return aggregates_runs_advice(std::max(k, o.rule.min_samples));
  std::string commands = fmt::format(
      "perfgate compare takes a comma list of files per side; perfgate ab --rounds {0} --repetitions {1} does it for "
      "two builds; a stored baseline holds the runs it was recorded with",
      k, repetitions);
  return {fmt::format("measure each side as {} separate process runs of --benchmark_repetitions={} ({}): {}", k,
                      repetitions, commands, why_runs(c, typical, o.rule.min_samples)),
          k, repetitions, std::move(commands)};
}

}  // namespace

int process_runs_to_judge(double run_sd, double threshold, const CompareOptions& o) {
  const double prior_sd = std::log1p(std::max(0.0, o.noise.run_noise));
  const double prior_df = o.noise.run_noise > 0 ? std::max(0.0, o.noise.run_noise_df) : 0.0;
  const double data_sd = std::log1p(std::max(0.0, run_sd));
  const double session_sd = std::log1p(std::max(0.0, o.noise.session_noise)) * std::sqrt(2.0);
  const double target = std::log1p(threshold) * kHalfWidthShare;
  for (int k = 2; k <= kMaxAdvisedRuns; ++k) {
    const double data_df = 2.0 * (k - 1);
    const double df = prior_df + data_df;
    const double var = (prior_df * prior_sd * prior_sd + data_df * data_sd * data_sd) / df;
    const double t = stats::student_t_quantile(1 - o.rule.alpha / 2, df);
    const double half = std::hypot(t * std::sqrt(var * 2.0 / k), t * session_sd);
    if (half <= target) return k;
  }
  return 0;
}

NextStep next_step_advice(const ComparisonReport& report, const CompareOptions& o) {
  if (report.counts.judged > 0 || report.counts.compared() == 0) return {};
  const Causes c = count_causes(report, o);
  const int repetitions = std::max({o.rule.min_samples, 5, c.max_repetitions});
  std::string why;
  if (c.learned > 0 && c.learned >= c.single_run + c.few_samples + c.between_runs + c.dispersed) {
    return {fmt::format(
        "the stored baseline's learned noise (up to {:.1f}%) is too wide for the threshold here: gate against a "
        "reference build measured interleaved with this one instead (perfgate run --against REV, or ci/perf.sh "
        "--against REV)",
        100 * c.learned_sd)};
  }
  if (c.dispersed > 0 && c.dispersed >= c.single_run + c.few_samples + c.between_runs) {
    return {fmt::format("the repetitions inside a run spread by more than the {:.0f}% limit: {}, then measure again",
                        100 * o.rule.max_dispersion, quieten(report))};
  }
  if (c.few_samples > 0 && c.few_samples >= c.single_run + c.between_runs) {
    why = fmt::format("fewer than {} {} per side; ", o.rule.min_samples,
                      report.samples_are_aggregates ? "samples" : "repetitions");
  }
  if (c.single_run + c.few_samples + c.between_runs + c.dispersed == 0) return {};
  NextStep step = runs_advice(report, c, o, repetitions);
  step.text = why + step.text;
  return step;
}

}  // namespace perfgate::analysis
