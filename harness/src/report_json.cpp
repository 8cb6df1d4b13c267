// JSON verdicts for machines (schema "perfgate.report/1"; documented in docs/statistics.md).
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include <fmt/format.h>

#include "perfgate/report.hpp"
#include "report_internal.hpp"

namespace perfgate {
namespace {

// Non-finite numbers become null; finite ones are rounded to 10 significant digits so the output is
// stable across libm versions (golden files) and still far more precise than any measurement.
nlohmann::json num(double v) {
  if (!std::isfinite(v)) return nullptr;
  if (v == 0) return 0.0;
  return std::stod(fmt::format("{:.10g}", v));
}

const char* kind_string(MetricKind k) {
  switch (k) {
    case MetricKind::latency: return "latency";
    case MetricKind::rate: return "rate";
    case MetricKind::phase: return "phase";
    case MetricKind::info: return "info";
  }
  return "info";
}

nlohmann::json side(const SideInfo& s) {
  return {{"machine_class", s.machine_class}, {"commit", s.commit}, {"date", s.date}, {"host", s.host},
          {"process_runs", s.process_runs},   {"files", s.files}};
}

}  // namespace

std::string render_json(const ComparisonReport& r, const ReportOptions& o) {
  using nlohmann::json;
  const auto& opt = r.options;
  json counts = {{"regression", r.counts.regression}, {"improvement", r.counts.improvement},
                 {"unchanged", r.counts.unchanged},   {"noisy", r.counts.noisy},
                 {"missing", r.counts.missing},       {"new", r.counts.new_benchmark},
                 {"failed", r.counts.failed},         {"skipped", r.counts.skipped},
                 {"total", r.counts.total()}};
  json options = {{"alpha", opt.alpha},
                  {"default_threshold", opt.threshold_override ? *opt.threshold_override
                                                               : opt.config.default_threshold.value_or(opt.threshold)},
                  {"threshold_from_flag", opt.threshold_override.has_value()},
                  {"threshold_config", opt.config.source},
                  {"correction", opt.correction == Correction::benjamini_hochberg ? "benjamini-hochberg"
                                 : opt.correction == Correction::holm               ? "holm"
                                                                                    : "none"},
                  {"interval", opt.interval == IntervalMethod::bootstrap ? "bootstrap" : "hodges-lehmann"},
                  {"run_noise", opt.run_noise},
                  {"run_noise_df", opt.run_noise_df},
                  {"max_dispersion", opt.max_dispersion},
                  {"min_samples", opt.min_samples}};
  json benchmarks = json::array();
  for (const BenchmarkComparison* b : r.sorted()) {
    json metrics = json::array();
    for (const auto& m : b->metrics) {
      metrics.push_back({{"name", m.name},
                         {"kind", kind_string(m.kind)},
                         {"gated", m.gated},
                         {"verdict", m.gated ? json(to_string(m.verdict)) : json(nullptr)},
                         {"reason", m.reason},
                         {"method", m.method},
                         {"n_baseline", m.n_baseline},
                         {"n_current", m.n_current},
                         {"runs_baseline", m.runs_baseline},
                         {"runs_current", m.runs_current},
                         {"baseline_median", num(m.baseline_median)},
                         {"current_median", num(m.current_median)},
                         {"change", num(m.change)},
                         {"change_lower", m.gated && m.interval_bounded ? num(m.change_lower) : json(nullptr)},
                         {"change_upper", m.gated && m.interval_bounded ? num(m.change_upper) : json(nullptr)},
                         {"p_value", m.gated ? num(m.p_value) : json(nullptr)},
                         {"p_adjusted", m.gated ? num(m.p_adjusted) : json(nullptr)},
                         {"dispersion", num(m.dispersion)},
                         {"run_noise", num(m.run_noise)},
                         {"run_noise_estimated", m.run_noise_estimated},
                         {"threshold", num(m.threshold)}});
    }
    json entry = {{"name", b->name},       {"raw_name", b->raw_name}, {"suite", b->suite},
                  {"verdict", to_string(b->verdict)}, {"reason", b->reason},
                  {"driver", b->driver.empty() ? json(nullptr) : json(b->driver)},
                  {"threshold", num(b->threshold)},  {"message", b->message ? json(*b->message) : json(nullptr)},
                  {"metrics", std::move(metrics)}};
    benchmarks.push_back(std::move(entry));
  }
  json doc = {{"schema", "perfgate.report/1"},
              {"title", o.title},
              {"outcome", outcome_word(r.exit_code)},
              {"exit_code", r.exit_code},
              {"summary", summary_line(r)},
              {"counts", std::move(counts)},
              {"notes", r.notes},
              {"options", std::move(options)},
              {"baseline", side(r.baseline)},
              {"current", side(r.current)},
              {"machine_mismatch_allowed", r.machine_mismatch_allowed},
              {"command", o.command},
              {"benchmarks", std::move(benchmarks)}};
  // Invalid UTF-8 in names (the loader passes bytes through) is replaced, never thrown on.
  return doc.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace perfgate
