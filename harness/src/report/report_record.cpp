// The record-only reporters: Markdown and JSON of a RecordReport (record.hpp), which the session computed.
#include <chrono>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perfgate/report.hpp"
#include "report/report_internal.hpp"

namespace perfgate {
namespace {

std::string suite_markdown(const RecordedSuite& suite, const std::string& side_label, bool several_sides) {
  std::string out = fmt::format("## {}{}\n\n", escape_markdown(suite.name),
                                several_sides ? " [" + escape_markdown(side_label) + "]" : "");
  if (suite.has_context) {
    out += fmt::format("Commit `{}`, build type {}, {} process run(s).\n\n", escape_markdown(suite.commit),
                       escape_markdown(suite.build_type), suite.process_runs);
  }
  out += "| benchmark | samples | runs | median | within-run CV | spread of run medians | status |\n";
  out += "| --- | ---: | ---: | ---: | ---: | ---: | --- |\n";
  for (const auto& s : suite.benchmarks) {
    out += fmt::format("| {} | {} | {} | {} | {:.1f}% | {:.1f}% | {} |\n", escape_markdown(s.name), s.samples, s.runs,
                       format_duration(std::chrono::duration<double, std::nano>(s.median)), 100 * s.within_cv,
                       100 * s.between_spread, escape_markdown(s.status));
  }
  return out + "\n";
}

nlohmann::json side_json(const RecordedSide& side) {
  nlohmann::json js;
  js["label"] = side.label;
  js["processes"] = side.processes;
  js["repetitions"] = side.repetitions;
  js["process_seconds"] = side.process_seconds;
  js["raw_files"] = side.raw_files;
  js["failures"] = nlohmann::json::array();
  for (const auto& f : side.failures) {
    js["failures"].push_back({{"suite", f.suite},
                              {"binary", f.binary},
                              {"round", f.round},
                              {"what", f.what},
                              {"message", f.message},
                              {"benchmarks", f.benchmarks}});
  }
  js["suites"] = nlohmann::json::object();
  for (const auto& suite : side.suites) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& s : suite.benchmarks) {
      nlohmann::json jb{{"name", s.name},     {"samples", s.samples},         {"runs", s.runs},
                        {"status", s.status}, {"within_run_cv", s.within_cv}, {"run_median_spread", s.between_spread}};
      jb["median_ns"] = std::isfinite(s.median) ? nlohmann::json(s.median) : nlohmann::json(nullptr);
      list.push_back(jb);
    }
    js["suites"][suite.name] = list;
  }
  return js;
}

}  // namespace

std::string render_record_markdown(const RecordReport& r, const std::string& title) {
  std::string out = fmt::format("# {}\n\n", escape_markdown(title));
  int failed = 0, total = 0;
  for (const auto& side : r.sides) {
    failed += static_cast<int>(side.failures.size());
    for (const auto& suite : side.suites) total += static_cast<int>(suite.benchmarks.size());
  }
  out += fmt::format("**Recorded {} benchmark(s), no comparison (record only){}.**\n\n", total,
                     failed > 0 ? fmt::format("; {} process failure(s)", failed) : "");
  out += fmt::format("{:.1f} s wall, seed {}.\n\n", r.wall_seconds, r.seed);
  for (const auto& side : r.sides) {
    for (const auto& suite : side.suites) out += suite_markdown(suite, side.label, r.sides.size() > 1);
    for (const auto& f : side.failures) {
      out += fmt::format("- FAILED {} [{}] round {}: {}: {}\n", escape_markdown(f.suite), escape_markdown(f.side),
                         f.round, escape_markdown(f.what), escape_markdown(f.message));
    }
  }
  for (const auto& n : r.notes) out += "- " + escape_markdown(n) + "\n";
  return out;
}

std::string render_record_json(const RecordReport& r) {
  nlohmann::json j;
  j["kind"] = "perfgate.measurement";
  j["wall_seconds"] = r.wall_seconds;
  j["seed"] = r.seed;
  j["notes"] = r.notes;
  j["sides"] = nlohmann::json::array();
  for (const auto& side : r.sides) j["sides"].push_back(side_json(side));
  return j.dump(2);
}

}  // namespace perfgate
