#include "perfgate/host_fit.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "perfgate/stats.hpp"

namespace perfgate {
namespace {

// The time metric when it was compared with a ratio; nullptr otherwise.
const MetricComparison* compared_time(const BenchmarkComparison& b) {
  if (!is_compared(b.verdict)) return nullptr;
  const MetricComparison* t = b.metric("time");
  if (t == nullptr || !std::isfinite(t->change) || !(t->change > -1)) return nullptr;
  return t;
}

double limit_of(const MetricComparison& m) {
  const double spread = m.learned_noise ? 3.0 * std::sqrt(2.0) * m.run_noise : 2.0 * m.threshold;
  return std::max(m.threshold, spread);
}

struct Shifts {
  std::vector<double> log_changes, limits;
};

Shifts collect(const ComparisonReport& report, bool calibration) {
  Shifts s;
  for (const auto& b : report.benchmarks) {
    if (is_calibration_benchmark(b.name) != calibration) continue;
    const MetricComparison* t = compared_time(b);
    if (t == nullptr || (!calibration && !t->gated)) continue;
    s.log_changes.push_back(std::log1p(t->change));
    s.limits.push_back(limit_of(*t));
  }
  return s;
}

}  // namespace

bool is_calibration_benchmark(const std::string& name) { return name.find("/calibration/") != std::string::npos; }

namespace {

// "12.3% faster than" / "4.0% slower than" / "as fast as": the host difference in the words the report's change
// column uses, so that a reader never has to know which way a signed time change points.
std::string speed_against(double time_change) {
  const double percent = 100 * std::fabs(time_change);
  if (percent < 0.05) return "as fast as";
  return fmt::format("{:.1f}% {} than", percent, time_change < 0 ? "faster" : "slower");
}

}  // namespace

std::string HostFit::explain() const {
  if (!checked) return "not checked (no calibration benchmark, and too few benchmarks for a common mode)";
  return fmt::format(
      "this host runs {} the baseline's host by its {} ({} the {:.1f}% that the class's "
      "hosts differ by)",
      speed_against(shift), basis, fits ? "within" : "beyond", 100 * limit);
}

HostFit host_fit(const ComparisonReport& report) {
  HostFit fit;
  Shifts s = collect(report, true);
  fit.basis = fmt::format("calibration benchmarks ({})", s.log_changes.size());
  if (s.log_changes.empty()) {
    s = collect(report, false);
    fit.basis = fmt::format("common mode ({} benchmarks)", s.log_changes.size());
    if (static_cast<int>(s.log_changes.size()) < kMinCommonModeBenchmarks) return fit;
  }
  fit.checked = true;
  fit.shift = std::expm1(stats::median_inplace(s.log_changes));
  fit.limit = stats::median_inplace(s.limits);
  fit.fits = std::fabs(std::log1p(fit.shift)) <= std::log1p(fit.limit);
  return fit;
}

}  // namespace perfgate
