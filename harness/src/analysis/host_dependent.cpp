#include "perfgate/host_dependent.hpp"

#include <fmt/format.h>

#include "perfgate/loader.hpp"

namespace perfgate {

std::optional<HostDependence> host_dependence(const ResultSet& baseline, const ResultSet& current) {
  return context_pattern(baseline, current, kHostDependentKey);
}

bool has_own_threshold(const CompareOptions& options, const std::string& benchmark_name) {
  for (const auto& p : options.config.benchmarks) {
    if (p.text == benchmark_name) return true;
    if (p.valid_regex && std::regex_match(benchmark_name, p.regex)) return true;
  }
  return false;
}

int make_host_dependent_informational(ComparisonReport& report, const ResultSet& baseline, const ResultSet& current,
                                      const std::function<bool(const std::string&)>& has_band) {
  const auto dependence = host_dependence(baseline, current);
  if (!dependence) return 0;
  int informational = 0;
  for (auto& b : report.benchmarks) {
    if (!is_compared(b.verdict) || !std::regex_match(b.name, dependence->regex)) continue;
    if (has_band && has_band(b.name)) continue;
    for (auto& m : b.metrics) m.gated = false;
    if (is_alarm(b.verdict)) b.verdict = Verdict::noisy;
    b.reason = fmt::format(
        "host-dependent ({} '{}'): its time follows the host's memory and CPU, which differ between machines of one "
        "class, so against a stored baseline it is informational, not gated (give it a threshold of its own in "
        "thresholds.json, or a learned band, to gate it): {}",
        kHostDependentKey, dependence->pattern, b.reason);
    ++informational;
  }
  if (informational == 0) return 0;
  recount(report);
  report.notes.push_back(
      fmt::format("{} host-dependent benchmark{} reported, not gated against the stored baseline "
                  "(no band of their own; {} '{}')",
                  informational, informational == 1 ? "" : "s", kHostDependentKey, dependence->pattern));
  return informational;
}

}  // namespace perfgate
