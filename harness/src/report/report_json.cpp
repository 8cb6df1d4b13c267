// JSON verdicts for machines (schema "perfgate.report/1"; documented in docs/statistics.md), written with
// nlohmann::ordered_json: keys keep the order below, which the golden file and readers rely on.
#include <charconv>
#include <cmath>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perfgate/report.hpp"
#include "report/report_internal.hpp"

namespace perfgate {
namespace {

using Json = nlohmann::ordered_json;

// Non-finite numbers become null; finite ones keep 10 significant digits (stable golden files, and far
// more precise than any measurement). -0 is written as 0.
Json number(double v) {
  if (!std::isfinite(v)) return nullptr;
  if (v == 0) return 0;
  const std::string text = fmt::format("{:.10g}", v);
  double rounded = v;
  if (std::from_chars(text.data(), text.data() + text.size(), rounded).ec != std::errc()) return v;
  return rounded;
}

Json number_if(bool present, double v) { return present ? number(v) : Json(nullptr); }

const char* correction_name(Correction c) {
  switch (c) {
    case Correction::benjamini_hochberg: return "benjamini-hochberg";
    case Correction::holm: return "holm";
    default: return "none";
  }
}

Json side(const SideInfo& s) {
  Json j{{"machine_class", s.machine_class}, {"commit", s.commit}, {"date", s.date}, {"host", s.host},
         {"process_runs", s.process_runs},   {"files", s.files}};
  if (s.extra_process_runs > 0) j["extra_process_runs"] = s.extra_process_runs;  // only adaptive sessions have them
  return j;
}

Json metric(const MetricComparison& m) {
  const bool bounded = m.gated && m.interval_bounded;
  return Json{{"name", m.name},
              {"kind", metric_kind_name(m.kind)},
              {"gated", m.gated},
              {"verdict", m.gated ? Json(to_string(m.verdict)) : Json(nullptr)},
              {"baseline_median", number(m.baseline_median)},
              {"current_median", number(m.current_median)},
              {"change", number(m.change)},
              {"raw_change", number(m.raw_change)},
              {"common_shift", number(m.common_shift)},
              {"change_lower", number_if(bounded, m.change_lower)},
              {"change_upper", number_if(bounded, m.change_upper)},
              {"p_value", number_if(m.gated, m.p_value)},
              {"p_adjusted", number_if(m.gated, m.p_adjusted)},
              {"threshold", number(m.threshold)},
              {"detectable_change", number(m.detectable_change)},
              {"learned_noise", m.learned_noise},
              {"n_baseline", m.n_baseline},
              {"n_current", m.n_current},
              {"runs_baseline", m.runs_baseline},
              {"runs_current", m.runs_current},
              {"dispersion", number(m.dispersion)},
              {"run_noise", number(m.run_noise)},
              {"run_noise_estimated", m.run_noise_estimated},
              {"method", m.method},
              {"reason", m.reason}};
}

// Both judgements of a benchmark whose SM clocks differed (cycle_space.hpp), gated or not.
Json estimate(const MetricComparison* m) {
  if (m == nullptr) return Json(nullptr);
  return Json{{"change", number(m->change)},
              {"change_lower", number_if(m->interval_bounded, m->change_lower)},
              {"change_upper", number_if(m->interval_bounded, m->change_upper)},
              {"verdict", to_string(m->verdict)}};
}

Json cycle_space(const BenchmarkComparison& b) {
  const CycleSpaceJudgement& c = *b.cycle_space;
  return Json{{"baseline_clock_mhz", number(c.baseline_clock_mhz)},
              {"current_clock_mhz", number(c.current_clock_mhz)},
              {"compute_bound", c.compute_bound},
              {"decided_by", c.cycles_decided ? "cycles" : "time"},
              {"time_verdict", to_string(c.time_verdict)},
              {"time", estimate(b.metric("time"))},
              {"cycles", estimate(b.metric("cycles"))}};
}

Json benchmark(const BenchmarkComparison& b) {
  Json metrics = Json::array();
  for (const MetricComparison& m : b.metrics) metrics.push_back(metric(m));
  Json j{{"name", b.name},
         {"raw_name", b.raw_name},
         {"suite", b.suite},
         {"verdict", to_string(b.verdict)},
         {"driver", b.driver.empty() ? Json(nullptr) : Json(b.driver)},
         {"threshold", number(b.threshold)},
         {"detectable_change", number(b.detectable_change())},
         {"reason", b.reason},
         {"message", b.message ? Json(*b.message) : Json(nullptr)},
         {"contention_baseline", number(b.contention_baseline)},
         {"contention_current", number(b.contention_current)},
         {"cpu_time_change", number(b.cpu_time_change)},
         {"metrics", std::move(metrics)}};
  if (b.cycle_space) j["cycle_space"] = cycle_space(b);
  return j;
}

Json counts(const VerdictCounts& c) {
  return Json{{"regression", c.regression}, {"improvement", c.improvement}, {"unchanged", c.unchanged},
              {"noisy", c.noisy},           {"missing", c.missing},         {"new", c.new_benchmark},
              {"failed", c.failed},         {"skipped", c.skipped},         {"judged", c.judged},
              {"total", c.total()}};
}

Json options(const ReportedOptions& opt) {
  return Json{{"alpha", number(opt.alpha)},
              {"default_threshold", number(opt.default_threshold)},
              {"threshold_from_flag", opt.threshold_from_flag},
              {"threshold_config", opt.threshold_config},
              {"correction", correction_name(opt.correction)},
              {"interval", opt.interval == IntervalMethod::bootstrap ? "bootstrap" : "hodges-lehmann"},
              {"run_noise", number(opt.run_noise)},
              {"run_noise_df", number(opt.run_noise_df)},
              {"session_noise", number(opt.session_noise)},
              {"paired_runs", opt.paired_runs},
              {"common_mode", opt.common_mode},
              {"contention_check", opt.contention_check},
              {"cpu_run_noise", number(opt.cpu_run_noise)},
              {"max_dispersion", number(opt.max_dispersion)},
              {"min_phase_share", number(opt.min_phase_share)},
              {"phase_impact", number(opt.phase_impact)},
              {"min_samples", opt.min_samples},
              {"side_names", Json{{"baseline", opt.sides.baseline}, {"current", opt.sides.current}}}};
}

Json suite_drift(const ComparisonReport& r) {
  Json drift = Json::object();
  for (const auto& [suite, d] : r.suite_drift) {
    drift[suite] = Json{{"shift", number(d.shift)}, {"spread", number(d.spread)}, {"metrics", d.metrics}};
  }
  return drift;
}

Json throttled_side(const ThrottledSide& t) {
  return Json{{"discarded_repetitions", t.discarded_repetitions()},
              {"thermal", t.thermal_repetitions},
              {"low_clock", t.low_clock_repetitions},
              {"discarded_from", t.discarded_from},
              {"kept_repetitions", t.kept_repetitions},
              {"kept_flagged", t.kept_flagged}};
}

// "throttled" (throttled.hpp) only where the rule found something: reports without it keep their bytes.
void add_throttled(Json& report, const ComparisonReport& r) {
  if (r.throttled_baseline.empty() && r.throttled_current.empty()) return;
  report["throttled"] = {{"clock_share", number(r.options.throttle_clock_share)},
                         {"baseline", throttled_side(r.throttled_baseline)},
                         {"current", throttled_side(r.throttled_current)}};
}

}  // namespace

std::string render_json(const ComparisonReport& r, const ReportOptions& o) {
  Json benchmarks = Json::array();
  for (const BenchmarkComparison* b : r.sorted()) benchmarks.push_back(benchmark(*b));
  Json report{{"schema", "perfgate.report/1"},
              {"title", o.title},
              {"outcome", r.exit_code == 77 && r.counts.compared() > 0 ? "NOT JUDGED" : outcome_word(r.exit_code)},
              {"exit_code", r.exit_code},
              {"summary", summary_line(r)},
              {"next_step", r.next_step},
              {"counts", counts(r.counts)},
              {"notes", r.notes},
              {"options", options(r.options)},
              {"baseline", side(r.baseline)},
              {"current", side(r.current)},
              {"suite_drift", suite_drift(r)},
              {"machine_mismatch_allowed", r.machine_mismatch_allowed},
              {"command", o.command},
              {"benchmarks", std::move(benchmarks)}};
  add_throttled(report, r);
  // Names and messages are bytes from the bench output: invalid UTF-8 becomes U+FFFD, never an exception.
  return report.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string render_json_error(const std::string& summary) {
  const Json report{{"schema", "perfgate.report/1"},
                    {"outcome", "ERROR"},
                    {"exit_code", 2},
                    {"summary", summary},
                    {"benchmarks", Json::array()}};
  return report.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace perfgate
