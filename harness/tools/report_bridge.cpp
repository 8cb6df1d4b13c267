#include "report_bridge.hpp"

#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace perfgate::cli {

// Interim rendering until the report writers land; same content, plainer layout.
std::string markdown_report(const ComparisonReport& report, const std::string& title) {
  const VerdictCounts& c = report.counts;
  std::string out = fmt::format("# {}\n\n**{} regression(s), {} failed, {} noisy, {} improvement(s), {} unchanged, "
                                "{} new, {} missing, {} skipped.**\n\n",
                                title, c.regression, c.failed, c.noisy, c.improvement, c.unchanged, c.new_benchmark,
                                c.missing, c.skipped);
  out += "| benchmark | verdict | reason |\n| --- | --- | --- |\n";
  for (const auto* b : report.sorted()) out += fmt::format("| {} | {} | {} |\n", b->name, to_string(b->verdict), b->reason);
  out += "\n";
  for (const auto& n : report.notes) out += "- " + n + "\n";
  return out;
}

std::string json_report(const ComparisonReport& report) {
  nlohmann::json j;
  j["exit_code"] = report.exit_code;
  j["benchmarks"] = nlohmann::json::array();
  for (const auto& b : report.benchmarks) {
    nlohmann::json jb{{"name", b.name}, {"suite", b.suite}, {"verdict", to_string(b.verdict)}, {"reason", b.reason}};
    for (const auto& m : b.metrics)
      jb["metrics"].push_back({{"name", m.name}, {"verdict", to_string(m.verdict)}, {"change", m.change},
                               {"lower", m.change_lower}, {"upper", m.change_upper}, {"p", m.p_value},
                               {"p_adjusted", m.p_adjusted}, {"gated", m.gated},
                               {"baseline_median", m.baseline_median}, {"current_median", m.current_median},
                               {"threshold", m.threshold}});
    j["benchmarks"].push_back(jb);
  }
  j["notes"] = report.notes;
  return j.dump(2);
}

void print_terminal_report(const ComparisonReport& report) {
  for (const auto* b : report.sorted()) std::printf("%-12s %s  %s\n", to_string(b->verdict), b->name.c_str(), b->reason.c_str());
  for (const auto& n : report.notes) std::printf("note: %s\n", n.c_str());
}

}  // namespace perfgate::cli
