// Terminal table: the outcome line, then one row per benchmark that needs attention (all rows when few).
// Colour only when writing to a TTY and NO_COLOR is unset.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

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

// Control characters in names would move the cursor: show them as \xNN.
std::string printable(const std::string& s, std::size_t max_len) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  if (out.size() > max_len) out = out.substr(0, max_len - 3) + "...";
  return out;
}

}  // namespace

std::string render_terminal(const ComparisonReport& r, bool color, const ReportOptions& o) {
  const auto rows = r.sorted();
  std::size_t name_width = 9;
  for (const auto* b : rows) name_width = std::max(name_width, std::min<std::size_t>(60, b->name.size()));
  const char* reset = color ? "\033[0m" : "";
  std::string out;
  out += fmt::format("{:<11} {:<{}} {:<18} {:>11} {:>11} {:>8} {:>18} {:>8} {:>10}\n", "verdict", "benchmark",
                     name_width, "metric", "baseline", "current", "change", "interval", "p(adj)", "detectable");
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
    const std::string name = printable(b->name, 60);
    if (m) {
      const double detectable = b->detectable_change();
      out += fmt::format("{}{:<11}{} {:<{}} {:<18} {:>11} {:>11} {:>8} {:>18} {:>8} {:>10}\n",
                         color ? colour_of(b->verdict) : "", verdict, color ? reset : "", name, name_width,
                         printable(m->name, 18), format_metric_value(m->kind, m->name, m->baseline_median),
                         format_metric_value(m->kind, m->name, m->current_median), percent(m->change), interval(*m),
                         m->gated ? p_value(m->p_adjusted) : "", std::isfinite(detectable) ? percent(detectable) : "");
    } else {
      out += fmt::format("{}{:<11}{} {:<{}} {}\n", color ? colour_of(b->verdict) : "", verdict, color ? reset : "",
                         name, name_width, printable(b->message.value_or(b->reason), 120));
    }
  }
  if (hidden) out += fmt::format("... {} more unchanged\n", hidden);
  for (const auto& note : r.notes) out += "note: " + printable(note, 400) + "\n";
  const char* head = r.exit_code == 0 ? "\033[1;32m" : (r.exit_code == 77 ? "\033[1;36m" : "\033[1;31m");
  out += fmt::format("{}{}{}\n", color ? head : "", summary_line(r), reset);
  if (!r.next_step.empty()) out += "next step: " + printable(r.next_step, 600) + "\n";
  return out;
}

void print_terminal(const ComparisonReport& r, std::FILE* out, const ReportOptions& o) {
  const bool color = o.color && ::isatty(::fileno(out)) != 0;
  const std::string text = render_terminal(r, color, o);
  std::fwrite(text.data(), 1, text.size(), out);
  std::fflush(out);
}

}  // namespace perfgate
