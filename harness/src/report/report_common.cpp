// Helpers shared by the report writers: escaping, quoting, number formatting, the summary line.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "perfgate/report.hpp"
#include "report/report_internal.hpp"

namespace perfgate {

namespace report_detail {
std::string visible_filter(std::string_view name) {
  std::string out;
  for (std::size_t i = 0; i < name.size();) {
    const Utf8Char d = decode_utf8(name, i);
    const bool shown = !(d.code_point == kReplacementCharacter && d.length == 1) && !is_hidden_code_point(d.code_point);
    out += shown ? regex_escape(name.substr(i, d.length)) : ".";
    i += d.length;
  }
  return out;
}
}  // namespace report_detail

std::string markdown_code_block(std::string_view code, std::string_view language) {
  std::size_t longest = 0, run = 0;
  for (char c : code) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(std::max<std::size_t>(3, longest + 1), '`');
  std::string out = fence;
  out += language;
  out += '\n';
  out += code;
  if (code.empty() || code.back() != '\n') out += '\n';
  out += fence;
  out += '\n';
  return out;
}

std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  out += '\'';
  return out;
}

std::string format_duration(std::chrono::duration<double, std::nano> duration) {
  using report_detail::sig3;
  const double ns = duration.count();
  if (std::isnan(ns)) return "n/a";
  const double a = std::fabs(ns);
  // Unit boundaries at 999.5 so that rounding never prints "1000 ns".
  if (a < 999.5) return sig3(ns) + " ns";
  if (a < 999.5e3) return sig3(ns / 1e3) + " us";
  if (a < 999.5e6) return sig3(ns / 1e6) + " ms";
  if (a < 59.5e9 || std::isinf(a)) return sig3(ns / 1e9) + " s";
  const std::string sign = ns < 0 ? "-" : "";
  const long s = std::lround(a / 1e9);
  if (s >= 3600) return fmt::format("{}{}h{:02}m", sign, s / 3600, (s % 3600) / 60);
  return fmt::format("{}{}m{:02}s", sign, s / 60, s % 60);
}

namespace report_detail {

std::string sig3(double v) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  const double a = std::fabs(v);
  // Boundaries where rounding would add a digit: 99.96 -> "100", 9.996 -> "10.0", 0.9996 -> "1.00".
  if (a >= 99.95) return fmt::format("{:.0f}", v);
  if (a >= 9.995) return fmt::format("{:.1f}", v);
  if (a >= 0.9995) return fmt::format("{:.2f}", v);
  if (a == 0) return "0";
  return fmt::format("{:.3g}", v);
}

std::string si(double v, const std::string& unit) {
  if (std::isnan(v)) return "n/a";
  static const char* const kPrefix[] = {"", "k", "M", "G", "T", "P", "E"};
  int p = 0;
  double a = std::fabs(v);
  while (a >= 999.5 && p < 6) {  // 999.7 -> "1.00 k", never "1000"
    a /= 1000;
    v /= 1000;
    ++p;
  }
  return sig3(v) + " " + kPrefix[p] + unit;
}

std::string percent(double v) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return v > 0 ? "+inf" : "-inf";
  return fmt::format("{:+.1f}%", 100 * v);
}

std::string interval(const MetricComparison& m) {
  if (!m.gated) return "";
  if (!m.interval_bounded) return "n/a";
  return fmt::format("[{}, {}]", percent(m.change_lower), percent(m.change_upper));
}

std::string p_value(double p) {
  if (std::isnan(p)) return "n/a";
  if (p < 1e-4) return fmt::format("{:.0e}", p);
  return fmt::format("{:.3g}", p);
}

std::string ceiling_summary(const BenchmarkComparison& b, const std::string& separator) {
  std::string out;
  for (const auto& m : b.metrics) {
    if (m.name.rfind("pct.", 0) != 0) continue;
    if (!out.empty()) out += separator;
    out += m.name.substr(4) + " " + (std::isnan(m.current_median) ? "n/a" : fmt::format("{:.1f}%", m.current_median));
    if (!std::isnan(m.baseline_median) && m.n_baseline > 0) out += fmt::format(" (was {:.1f}%)", m.baseline_median);
  }
  return out;
}

bool has_phases(const BenchmarkComparison& b) {
  return std::any_of(b.metrics.begin(), b.metrics.end(),
                     [](const MetricComparison& m) { return m.kind == MetricKind::phase; });
}

std::string binary_for(const ComparisonReport& r, const BenchmarkComparison& b, const ReportOptions& o) {
  const auto it = o.binaries.find(b.suite);
  if (it != o.binaries.end()) return it->second;
  const auto ex = r.executables.find(b.suite);
  if (ex != r.executables.end() && !ex->second.empty()) return ex->second;
  return "bin/bench_" + b.suite;
}

std::vector<std::string> nvtx_ranges_for(const ComparisonReport& r, const std::string& suite) {
  std::vector<std::string> out;
  const auto it = r.nvtx_ranges.find(suite);
  if (it == r.nvtx_ranges.end()) return out;
  std::string cur;
  for (char c : it->second) {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (c != ' ' || !cur.empty()) {
      cur += c;
    }
  }
  while (!cur.empty() && cur.back() == ' ') cur.pop_back();
  if (!cur.empty()) out.push_back(cur);
  return out;
}

std::string counts_text(const VerdictCounts& c) {
  std::string out = fmt::format("{} benchmark{}", c.total(), c.total() == 1 ? "" : "s");
  // Nouns take a plural, the adjectives not: "2 regressions, 3 improvements, 4 unchanged".
  const std::tuple<int, const char*, const char*> parts[] = {{c.failed, "failed", "failed"},
                                                             {c.regression, "regression", "regressions"},
                                                             {c.missing, "missing", "missing"},
                                                             {c.noisy, "noisy", "noisy"},
                                                             {c.improvement, "improvement", "improvements"},
                                                             {c.new_benchmark, "new", "new"},
                                                             {c.skipped, "skipped", "skipped"},
                                                             {c.unchanged, "unchanged", "unchanged"}};
  bool first = true;
  for (const auto& [n, one, many] : parts) {
    if (n == 0) continue;
    out += first ? ": " : ", ";
    out += fmt::format("{} {}", n, n == 1 ? one : many);
    first = false;
  }
  return out;
}

}  // namespace report_detail

// "; largest unconfirmed change: NAME time X% slower" for the noisy benchmark whose change is largest beyond its
// threshold in the worse direction (empty when none is).
std::string largest_unconfirmed(const ComparisonReport& r) {
  const BenchmarkComparison* worst = nullptr;
  double worst_change = 0;
  for (const auto& b : r.benchmarks) {
    const MetricComparison* m = b.driving_metric();
    if (b.verdict != Verdict::noisy || m == nullptr || !m->gated || !std::isfinite(m->change)) continue;
    const double bad = higher_is_better(m->kind) ? -m->change : m->change;
    if (bad > m->threshold && bad > worst_change) {
      worst = &b;
      worst_change = bad;
    }
  }
  if (worst == nullptr) return {};
  const MetricComparison& m = *worst->driving_metric();
  return fmt::format("; largest unconfirmed change: {} {} {}", printable_name(worst->name, 80), m.name,
                     change_in_words(m.kind, m.name, m.change));
}

const char* outcome_word(int exit_code) {
  switch (exit_code) {
    case 0: return "PASS";
    case 77: return "SKIPPED";
    case 2: return "ERROR";
    default: return "FAIL";
  }
}

std::string summary_line(const ComparisonReport& r) {
  using namespace report_detail;
  const auto& c = r.counts;
  std::string head;
  switch (r.exit_code) {
    case 3:
      head = fmt::format("FAIL: {} benchmark{} failed", c.failed, c.failed == 1 ? "" : "s");
      if (c.regression) head += fmt::format(", {} regression{}", c.regression, c.regression == 1 ? "" : "s");
      break;
    case 1: head = fmt::format("FAIL: {} regression{}", c.regression, c.regression == 1 ? "" : "s"); break;
    case 2: head = "ERROR: nothing could be compared"; break;
    case 77:
      // 77 also when benchmarks ran but had no usable baseline (none, or one from another CPU generation), and when
      // benchmarks were compared but none could be judged to its threshold.
      if (c.compared() > 0) {
        head = fmt::format("NOT JUDGED: none of {} compared benchmark{} could be judged to its threshold{}",
                           c.compared(), c.compared() == 1 ? "" : "s", largest_unconfirmed(r));
      } else {
        head = c.new_benchmark > 0 && c.new_benchmark + c.skipped == c.total()
                   ? "SKIPPED: nothing compared (no usable baseline)"
                   : "SKIPPED: nothing ran";
        if (c.total() == 0 && !r.nothing_ran_because.empty())
          head += fmt::format(": {}", fmt::join(r.nothing_ran_because, "; "));
      }
      break;
    case 0:
      head = c.noisy ? fmt::format("PASS: no regression ({} too noisy to judge)", c.noisy) : "PASS: no regression";
      break;
    default: head = fmt::format("FAIL: exit {}", r.exit_code); break;
  }
  return fmt::format("{} -- {} (exit {})", head, counts_text(c), r.exit_code);
}

namespace {

// Whether a rising value of the metric means slower (times, phases, cycles), faster (rates) or neither.
enum class Direction { time_like, rate_like, size_like };

Direction direction_of(MetricKind kind) {
  switch (kind) {
    case MetricKind::latency:
    case MetricKind::phase: return Direction::time_like;
    case MetricKind::rate: return Direction::rate_like;
    case MetricKind::info: return Direction::size_like;
  }
  return Direction::size_like;
}

// "slower" / "faster" / "larger" / "smaller" for a change of this sign.
const char* direction_word(Direction d, bool up) {
  switch (d) {
    case Direction::time_like: return up ? "slower" : "faster";
    case Direction::rate_like: return up ? "faster" : "slower";
    case Direction::size_like: return up ? "larger" : "smaller";
  }
  return up ? "larger" : "smaller";
}

std::string magnitude(double change) {
  if (std::isinf(change)) return "infinitely";
  return fmt::format("{:.1f}%", 100 * std::fabs(change));
}

constexpr double kNoChange = 0.0005;  // below 0.05% the one-decimal percentage reads 0.0%

}  // namespace

bool report_detail::reads_as_no_change(double change) { return std::fabs(change) < kNoChange; }

namespace {
// The counters of `b` that moved, largest change first, at most `max`; none unless it regressed or improved.
std::vector<const MetricComparison*> moved_counters_of(const BenchmarkComparison& b, std::size_t max) {
  std::vector<const MetricComparison*> moved;
  if (b.verdict != Verdict::regression && b.verdict != Verdict::improvement) return moved;
  for (const auto& m : b.metrics)
    if ((m.kind == MetricKind::rate || m.kind == MetricKind::info) && std::isfinite(m.change) &&
        !report_detail::reads_as_no_change(m.change))
      moved.push_back(&m);
  std::stable_sort(moved.begin(), moved.end(), [](const MetricComparison* x, const MetricComparison* y) {
    return std::fabs(x->change) > std::fabs(y->change);
  });
  if (moved.size() > max) moved.resize(max);
  return moved;
}
}  // namespace

report_detail::MovedCounters report_detail::moved_counters(const std::vector<const BenchmarkComparison*>& rows,
                                                           std::size_t max_benchmarks, std::size_t per_benchmark) {
  MovedCounters out;
  for (const auto* b : rows) {
    std::vector<const MetricComparison*> moved = moved_counters_of(*b, per_benchmark);
    if (moved.empty()) continue;
    if (out.listed.size() == max_benchmarks) ++out.more;
    else out.listed.push_back({b, std::move(moved)});
  }
  return out;
}

std::string change_in_words(MetricKind kind, const std::string& /*metric_name*/, double change) {
  if (std::isnan(change)) return "n/a";
  if (report_detail::reads_as_no_change(change)) return "no change";
  return magnitude(change) + " " + direction_word(direction_of(kind), change > 0);
}

std::string interval_in_words(const MetricComparison& m) {
  if (!m.gated) return "";
  if (!m.interval_bounded || std::isnan(m.change_lower) || std::isnan(m.change_upper)) return "n/a";
  const Direction d = direction_of(m.kind);
  const double lo = m.change_lower, hi = m.change_upper;
  // Both ends on one side read as one range; an interval across zero names both directions.
  if (lo >= 0 || hi <= 0) {
    const bool up = lo >= 0 && hi > 0;
    const double near = up ? lo : hi, far = up ? hi : lo;
    return fmt::format("{} to {} {}", magnitude(near), magnitude(far), direction_word(d, up));
  }
  // Time-like: the lower end is the faster one; rate-like: the lower end is the slower one.
  return fmt::format("{} {} to {} {}", magnitude(lo), direction_word(d, false), magnitude(hi), direction_word(d, true));
}

double phase_share(const BenchmarkComparison& b, const MetricComparison& m) {
  if (m.kind != MetricKind::phase) return std::numeric_limits<double>::quiet_NaN();
  const MetricComparison* time = b.metric("time");
  if (time == nullptr || !(time->baseline_median > 0) || std::isnan(m.baseline_median))
    return std::numeric_limits<double>::quiet_NaN();
  return m.baseline_median * 1e6 / time->baseline_median;  // phases: ms per iteration; time: ns per iteration
}

std::string format_metric_value(MetricKind kind, const std::string& name, double v) {
  using namespace report_detail;
  if (std::isnan(v)) return "n/a";
  switch (kind) {
    case MetricKind::latency:
      if (name == "cycles") return si(v, "cycles");  // cycle_space.hpp: time x SM clock
      return format_duration(std::chrono::duration<double, std::nano>(v));
    case MetricKind::phase:
      return format_duration(std::chrono::duration<double, std::milli>(v));  // phase counters: ms per iteration
    case MetricKind::rate:
      if (name == "bytes_per_second") return si(v, "B/s");
      if (name == "items_per_second") return si(v, "items/s");
      return si(v, name);
    case MetricKind::info:
      if (name.rfind("pct.", 0) == 0) return fmt::format("{:.1f}%", v);
      return std::fabs(v) >= 1000 ? si(v, "") : sig3(v);
  }
  return sig3(v);
}

}  // namespace perfgate
