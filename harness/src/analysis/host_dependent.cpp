#include "perfgate/host_dependent.hpp"

#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "perfgate/loader.hpp"

namespace perfgate {

std::optional<HostDependence> host_dependence(const ResultSet& baseline, const ResultSet& current) {
  return context_pattern(baseline, current, kHostDependentKey);
}

bool has_own_threshold(const CompareOptions& options, const std::string& benchmark_name) {
  for (const auto& p : options.rule.config.benchmarks) {
    if (p.text == benchmark_name) return true;
    if (p.valid_regex && std::regex_match(benchmark_name, p.regex)) return true;
  }
  return false;
}

bool gated_against_another_host(const CompareOptions& options, const std::string& benchmark_name) {
  return has_own_threshold(options, benchmark_name);
}

namespace {

// A pattern that marks benchmarks host-dependent, and where it came from (for the reason and the note).
struct NamedPattern {
  std::string where;  // "perfgate.host_dependent '...'" or "thresholds.json host_dependent '...'"
  std::regex regex;
};

std::vector<NamedPattern> dependence_patterns(const ResultSet& baseline, const ResultSet& current,
                                              const std::optional<ContextPattern>& class_pattern) {
  std::vector<NamedPattern> patterns;
  if (const auto d = host_dependence(baseline, current))
    patterns.push_back({fmt::format("{} '{}'", kHostDependentKey, d->pattern), d->regex});
  if (class_pattern)
    patterns.push_back(
        {fmt::format("the class's thresholds.json host_dependent '{}'", class_pattern->pattern), class_pattern->regex});
  return patterns;
}

const NamedPattern* first_match(const std::vector<NamedPattern>& patterns, const std::string& name) {
  for (const auto& p : patterns)
    if (std::regex_match(name, p.regex)) return &p;
  return nullptr;
}

}  // namespace

int make_host_dependent_informational(ComparisonReport& report, const ResultSet& baseline, const ResultSet& current,
                                      const std::function<bool(const std::string&)>& has_band,
                                      const std::optional<ContextPattern>& class_pattern) {
  const auto patterns = dependence_patterns(baseline, current, class_pattern);
  if (patterns.empty()) return 0;
  int informational = 0;
  std::set<std::string> sources;
  for (auto& b : report.benchmarks) {
    const NamedPattern* match = is_compared(b.verdict) ? first_match(patterns, b.name) : nullptr;
    if (match == nullptr || (has_band && has_band(b.name))) continue;
    for (auto& m : b.metrics) m.gated = false;
    if (is_alarm(b.verdict)) b.verdict = Verdict::noisy;
    b.reason = fmt::format(
        "host-dependent ({}): its time follows the host's memory and CPU, which differ between machines of one "
        "class, so against a stored baseline it is informational, not gated (give it a threshold of its own in "
        "thresholds.json to gate it): {}",
        match->where, b.reason);
    sources.insert(match->where);
    ++informational;
  }
  if (informational == 0) return 0;
  recount(report);
  report.notes.push_back(
      fmt::format("{} host-dependent benchmark{} reported, not gated against the stored baseline "
                  "(no threshold of their own; {})",
                  informational, informational == 1 ? "" : "s", fmt::join(sources, "; ")));
  return informational;
}

int make_host_dependent_informational(ComparisonReport& report, const ResultSet& baseline, const ResultSet& current,
                                      const CompareOptions& options) {
  return make_host_dependent_informational(
      report, baseline, current,
      [&options](const std::string& name) { return gated_against_another_host(options, name); },
      options.rule.config.host_dependent);
}

}  // namespace perfgate
