// The merged report of a sharded run (perfgate/fleet.hpp): Markdown, JUnit and JSON, rendered here with the
// other reports; merging the shards is the history's (history/fleet.cpp).
#include <map>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perfgate/fleet.hpp"
#include "perfgate/report.hpp"

namespace perfgate::history {

using nlohmann::json;

namespace {

std::string shard_name(int index, int count) { return fmt::format("shard {}/{}", index, count); }

// j[key] of a const object, null when absent (a const operator[] must not be asked for a missing key).
json field(const json& j, const char* key) { return j.is_object() && j.contains(key) ? j[key] : json(nullptr); }

std::string text_of(const json& b, const char* key) {
  return b.contains(key) && b[key].is_string() ? b[key].get<std::string>() : std::string();
}

// The metric that decided a benchmark's verdict (its "driver"), else its time.
const json* deciding_metric(const json& b) {
  if (!b.contains("metrics") || !b["metrics"].is_array()) return nullptr;
  const std::string driver = field(b, "driver").is_string() ? b["driver"].get<std::string>() : "time";
  for (const auto& m : b["metrics"])
    if (m.value("name", "") == driver) return &m;
  return b["metrics"].empty() ? nullptr : &b["metrics"][0];
}

std::string percent(const json& v) {
  return v.is_number() ? fmt::format("{:+.1f}%", 100 * v.get<double>()) : std::string("n/a");
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') out += c;
    }
  }
  return out;
}

}  // namespace

std::string merge_markdown(const MergeResult& m, const std::string& history) {
  std::string counts;
  for (const auto& [verdict, n] : m.counts) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, verdict);
  std::string md = fmt::format("## perfgate merge: {} -- {} shard{}, {} benchmarks{}{} (exit {})\n\n",
                               outcome_word(m.exit_code), m.shard_count, m.shard_count == 1 ? "" : "s",
                               m.benchmarks.size(), counts.empty() ? "" : ": ", counts, m.exit_code);
  md += fmt::format("Commit `{}`, merged from the history `{}`.\n\n", m.commit, history);
  if (!m.problems.empty()) {
    md += "**Problems:**\n\n";
    for (const auto& p : m.problems) md += "* " + escape_markdown(p) + "\n";
    md += "\n";
  }
  md += "| shard | exit | host | session | recorded | summary |\n| --- | ---: | --- | ---: | --- | --- |\n";
  for (const auto& s : m.shards) {
    if (!s.session) {
      md += fmt::format("| {} | | | | | **missing** |\n", s.index);
      continue;
    }
    const std::string summary = s.report.is_object() ? text_of(s.report, "summary") : "no report";
    md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", s.index, shard_exit_code(s),
                      escape_markdown(s.session->info.host), s.session->id, s.session->info.time,
                      escape_markdown(summary));
  }
  if (m.benchmarks.empty()) return md;
  md +=
      "\n| verdict | benchmark | shard | metric | change | interval | reason |\n| --- | --- | ---: | --- | ---: | --- "
      "| --- |\n";
  for (const auto& b : m.benchmarks) {
    const json* metric = deciding_metric(b);
    const std::string verdict = text_of(b, "verdict");
    const bool bad = verdict == "regression" || verdict == "failed";
    std::string interval = "";
    if (metric && field(*metric, "change_lower").is_number() && field(*metric, "change_upper").is_number())
      interval =
          fmt::format("[{}, {}]", percent(field(*metric, "change_lower")), percent(field(*metric, "change_upper")));
    md += fmt::format("| {} | `{}` | {} | {} | {} | {} | {} |\n", bad ? "**" + verdict + "**" : verdict,
                      text_of(b, "name"), b.value("shard", 0), metric ? escape_markdown(metric->value("name", "")) : "",
                      metric ? percent(field(*metric, "change")) : "", interval, escape_markdown(text_of(b, "reason")));
  }
  return md;
}

std::string merge_junit(const MergeResult& m) {
  int failures = 0, errors = 0, skipped = 0;
  std::string cases;
  for (const auto& s : m.shards)
    if (!s.problem.empty()) {
      ++errors;
      cases +=
          fmt::format("    <testcase classname=\"perfgate.shards\" name=\"{}\"><error message=\"{}\"/></testcase>\n",
                      xml_escape(shard_name(s.index, m.shard_count)), xml_escape(s.problem));
    }
  for (const auto& b : m.benchmarks) {
    const std::string verdict = text_of(b, "verdict");
    const json* metric = deciding_metric(b);
    const std::string message = fmt::format("{} {} ({}): {}", verdict, metric ? percent(field(*metric, "change")) : "",
                                            shard_name(b.value("shard", 0), m.shard_count), text_of(b, "reason"));
    std::string body;
    if (verdict == "regression") {
      ++failures;
      body = fmt::format("<failure message=\"{}\"/>", xml_escape(message));
    } else if (verdict == "failed") {
      ++errors;
      body = fmt::format("<error message=\"{}\"/>", xml_escape(message + " " + text_of(b, "message")));
    } else if (verdict == "skipped") {
      ++skipped;
      body = fmt::format("<skipped message=\"{}\"/>", xml_escape(text_of(b, "reason")));
    } else {
      body = fmt::format("<system-out>{}</system-out>", xml_escape(message));
    }
    cases += fmt::format("    <testcase classname=\"{}\" name=\"{}\">{}</testcase>\n",
                         xml_escape("perfgate." + text_of(b, "suite")), xml_escape(text_of(b, "name")), body);
  }
  const std::size_t tests = m.benchmarks.size() + static_cast<std::size_t>(std::count_if(
                                                      m.shards.begin(), m.shards.end(),
                                                      [](const ShardOutcome& s) { return !s.problem.empty(); }));
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"perfgate\" tests=\"{0}\" failures=\"{1}\" "
      "errors=\"{2}\" "
      "skipped=\"{3}\">\n  <testsuite name=\"perfgate merge {4}\" tests=\"{0}\" failures=\"{1}\" errors=\"{2}\" "
      "skipped=\"{3}\">\n{5}"
      "  </testsuite>\n</testsuites>\n",
      tests, failures, errors, skipped, xml_escape(m.commit), cases);
}

json merge_json(const MergeResult& m) {
  json shards = json::array();
  for (const auto& s : m.shards) {
    json row = {{"shard", s.index}, {"exit_code", shard_exit_code(s)}, {"problem", s.problem}};
    if (s.session) {
      row["session_id"] = s.session->id;
      row["host"] = s.session->info.host;
      row["time"] = s.session->info.time;
    }
    if (s.report.is_object()) row["summary"] = text_of(s.report, "summary");
    shards.push_back(row);
  }
  return {{"schema", "perfgate.merge/1"}, {"commit", m.commit},
          {"shards", m.shard_count},      {"outcome", outcome_word(m.exit_code)},
          {"exit_code", m.exit_code},     {"problems", m.problems},
          {"counts", m.counts},           {"shard_runs", shards},
          {"benchmarks", m.benchmarks}};
}

}  // namespace perfgate::history
