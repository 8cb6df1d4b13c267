// Terminal table: the outcome line, then one row per benchmark that needs attention (all rows when few).
// Colour only when writing to a TTY and NO_COLOR is unset.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "perfgate/report.hpp"
#include "report/report_internal.hpp"

namespace perfgate {
namespace {

using namespace report_detail;

const char* colour_of(Verdict v) {
  switch (v) {
    case Verdict::failed:
    case Verdict::regression: return "\033[1;31m";
    case Verdict::missing:
    case Verdict::noisy: return "\033[33m";
    case Verdict::improvement: return "\033[32m";
    case Verdict::new_benchmark:
    case Verdict::skipped: return "\033[36m";
    case Verdict::unchanged: return "";
  }
  return "";
}

constexpr std::size_t kWholeText = 400;  // code points: longer text is cut, shorter is shown whole
std::string plain(std::string_view text) { return printable_name(text, kWholeText); }

constexpr std::size_t kTerminalRows = 20;  // regressions listed before "N more"

// "a, b, c and 4 more"
std::string names_text(const std::vector<std::string>& names, std::size_t max, std::size_t name_length = 80) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < max; ++i)
    out += (i ? ", " : "") + printable_name(names[i], name_length);
  if (names.size() > max) out += fmt::format(" and {} more", names.size() - max);
  return out;
}

// "  name what changed; interval ..." of a regressed, failed or improved benchmark, without the line's end.
std::string change_line(const BenchmarkComparison& b, bool color) {
  std::string out = fmt::format("  {}{}{} {}", color ? colour_of(b.verdict) : "", printable_name(b.name, 120),
                                color ? "\033[0m" : "", what_changed(b, plain));
  const MetricComparison* m = b.verdict == Verdict::failed ? nullptr : b.driving_metric();
  if (m) out += fmt::format("; interval {}", interval_in_words(*m));
  return out;
}

void regression_lines(std::string& out, const SummaryModel& s, bool color, const ReportOptions& o) {
  if (s.regressions.empty()) return;
  out += regressions_heading(s) + ":\n";
  for (std::size_t i = 0; i < s.regressions.size() && i < kTerminalRows; ++i) {
    const BenchmarkComparison& b = *s.regressions[i];
    out += change_line(b, color);
    if (const std::string d = detectable_in_words(b); !d.empty()) out += "; smallest detectable " + d;
    out += "\n";
    // --explain's lead, as the Markdown summary gives it.
    if (const auto cause = o.likeliest_causes.find(b.name); cause != o.likeliest_causes.end())
      out += "    likeliest cause: " + printable_name(cause->second, 400) + "\n";
  }
  if (s.regressions.size() > kTerminalRows)
    out += fmt::format("  ... {} more in the Markdown report\n", s.regressions.size() - kTerminalRows);
}

constexpr std::size_t kTerminalImprovements = 5;  // improvements listed before "N more"

void improvement_lines(std::string& out, const SummaryModel& s, bool color) {
  if (s.improvements.empty()) return;
  out += "improvements:\n";
  for (std::size_t i = 0; i < s.improvements.size() && i < kTerminalImprovements; ++i) {
    out += change_line(*s.improvements[i], color) + "\n";
  }
  if (s.improvements.size() > kTerminalImprovements)
    out += fmt::format("  ... {} more in the Markdown report\n", s.improvements.size() - kTerminalImprovements);
}

void not_judged_lines(std::string& out, const SummaryModel& s, const ReportOptions& o) {
  if (s.not_judged.empty()) return;
  out += "not judged:\n";
  for (const auto& line : s.not_judged) {
    std::vector<std::string> names;
    if (line.what == "skipped" && line.members.size() > o.summary_max_names) names = line.suites;
    else
      for (const auto* b : line.members) names.push_back(b->name);
    out += fmt::format("  {} {} ({})", line.members.size(), line.what, names_text(names, o.summary_max_names));
    if (!line.reason.empty()) out += ": " + printable_name(line.reason, 200);
    if (!line.advice.empty()) out += "; " + line.advice;
    out += "\n";
  }
}

void suite_lines(std::string& out, const SummaryModel& s) {
  if (s.suites.size() < 2) return;  // one suite: the verdict line has its counts
  out += "suites:\n";
  for (const auto& suite : s.suites)
    out += fmt::format("  {}: {}\n", printable_name(suite.suite, 80), counts_text(suite.counts));
}

void note_lines(std::string& out, const SummaryModel& s, const ReportOptions& o) {
  for (const auto& note : s.notes) {
    out += "note: ";
    if (!note.names.empty())
      out += names_text(note.names, o.summary_max_names, note.names_are_paths ? kWholeText : 80) + ": ";
    out += note.text + (note.advice.empty() ? "" : ". " + note.advice) + "\n";
  }
}

constexpr std::size_t kCountersPerBenchmark = 4;  // a line each: the counters that moved most

// For each regressed or improved benchmark, the user counters that moved, largest change first: one line each,
// as the full report's counters section (the terminal otherwise shows only the time that judged it).
void counter_lines(std::string& out, const std::vector<const BenchmarkComparison*>& rows) {
  const MovedCounters moved = moved_counters(rows, kTerminalRows, kCountersPerBenchmark);
  if (!moved.listed.empty()) out += "counters that moved (regressed and improved benchmarks, largest change first):\n";
  for (const auto& [b, counters] : moved.listed) {
    out += "  " + printable_name(b->name, 120) + ":";
    for (std::size_t i = 0; i < counters.size(); ++i) {
      const MetricComparison& m = *counters[i];
      out += fmt::format(
          "{} {} {} ({} -> {}{})", i ? ";" : "", plain(m.name), change_in_words(m.kind, m.name, m.change),
          format_metric_value(m.kind, m.name, m.baseline_median), format_metric_value(m.kind, m.name, m.current_median),
          m.gated ? std::string(", ") + to_string(m.verdict) : std::string());
    }
    out += "\n";
  }
  if (moved.more) out += fmt::format("  ... {} more in the Markdown report\n", moved.more);
}

// Every benchmark in one table (-v), the counters that moved, then the run's own notes.
void full_table(std::string& out, const ComparisonReport& r, const std::vector<const BenchmarkComparison*>& rows,
                bool color, const ReportOptions& o) {
  std::size_t name_width = 9;
  for (const auto* b : rows) name_width = std::max(name_width, std::min<std::size_t>(60, b->name.size()));
  const char* reset = color ? "\033[0m" : "";
  out += fmt::format("{:<11} {:<{}} {:<18} {:>11} {:>11} {:>14} {:>28} {:>8} {:>14}\n", "verdict", "benchmark",
                     name_width, "metric", r.options.sides.baseline, r.options.sides.current, "change", "interval",
                     "p(adj)", "detectable");
  std::size_t unchanged_shown = 0, hidden = 0;
  const std::size_t unchanged_limit = std::min<std::size_t>(o.max_unchanged_rows, 50);
  for (const auto* b : rows) {
    if (b->verdict == Verdict::unchanged && unchanged_shown >= unchanged_limit) {
      ++hidden;
      continue;
    }
    unchanged_shown += b->verdict == Verdict::unchanged;
    const MetricComparison* m = b->driving_metric();
    const std::string verdict = to_string(b->verdict);
    const std::string name = printable_name(b->name, 60);
    if (m) {
      out += fmt::format("{}{:<11}{} {:<{}} {:<18} {:>11} {:>11} {:>14} {:>28} {:>8} {:>14}\n",
                         color ? colour_of(b->verdict) : "", verdict, color ? reset : "", name, name_width,
                         printable_name(m->name, 18), format_metric_value(m->kind, m->name, m->baseline_median),
                         format_metric_value(m->kind, m->name, m->current_median),
                         change_in_words(m->kind, m->name, m->change), interval_in_words(*m),
                         m->gated ? p_value(m->p_adjusted) : "", detectable_in_words(*b));
    } else {
      out += fmt::format("{}{:<11}{} {:<{}} {}\n", color ? colour_of(b->verdict) : "", verdict, color ? reset : "",
                         name, name_width, printable_name(b->message.value_or(b->reason), 120));
    }
  }
  if (hidden) out += fmt::format("... {} more unchanged\n", hidden);
  counter_lines(out, rows);
  for (const auto& note : r.notes) out += "run note: " + printable_name(note, 400) + "\n";
}

}  // namespace

// The summary's order: the verdict, what regressed, what was not judged, one line per suite, notes, what improved; -v
// adds every benchmark's row and the run's own notes.
std::string render_terminal(const ComparisonReport& r, bool color, const ReportOptions& o) {
  const SummaryModel s = summarise(r);
  const char* head = r.exit_code == 0 ? "\033[1;32m" : (r.exit_code == 77 ? "\033[1;36m" : "\033[1;31m");
  std::string out = fmt::format("{}{}{}\n", color ? head : "", summary_line(r), color ? "\033[0m" : "");
  if (!r.next_step.empty()) out += "next step: " + printable_name(r.next_step, 600) + "\n";
  regression_lines(out, s, color, o);
  not_judged_lines(out, s, o);
  suite_lines(out, s);
  note_lines(out, s, o);
  improvement_lines(out, s, color);
  if (o.verbose) {
    full_table(out, r, s.rows, color, o);
  } else if (!s.rows.empty()) {
    out += "(every benchmark: -v, or the Markdown report)\n";
  } else {
    // No benchmark at all: the run's own notes are all that says why (a binary that registers none, a filter).
    for (const auto& note : r.notes) out += "run note: " + printable_name(note, 400) + "\n";
  }
  return out;
}

void print_terminal(const ComparisonReport& r, std::FILE* out, const ReportOptions& o) {
  const bool color = o.color && ::isatty(::fileno(out)) != 0;
  const std::string text = render_terminal(r, color, o);
  std::fwrite(text.data(), 1, text.size(), out);
  std::fflush(out);
}

}  // namespace perfgate
