// Markdown report: summary line first, then the table sorted by severity, per-phase breakdowns,
// failures, reproduce commands (benchmark, nsys, ncu), a Mermaid chart, and how the verdicts were made.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "perfgate/gpu_counters.hpp"
#include "perfgate/report.hpp"
#include "report/report_internal.hpp"

namespace perfgate {
namespace {

using namespace report_detail;

const char* verdict_badge(Verdict v) {
  switch (v) {
    case Verdict::failed: return "**failed**";
    case Verdict::regression: return "**regression**";
    case Verdict::missing: return "**missing**";
    case Verdict::noisy: return "noisy";
    case Verdict::improvement: return "improvement";
    case Verdict::new_benchmark: return "new";
    case Verdict::skipped: return "skipped";
    case Verdict::unchanged: return "unchanged";
  }
  return "?";
}

// Phases below SelectionOptions::min_phase_share are analysed but not gated; say why in the verdict column.
std::string not_gated_label(const BenchmarkComparison& b, const MetricComparison& m, const ReportedOptions& o) {
  if (b.cycle_space && b.cycle_space->cycles_decided && m.name == "time")  // cycle_space.hpp
    return fmt::format("not gated: {} in time space [{}, {}], cycles decided", to_string(m.verdict),
                       percent(m.change_lower), percent(m.change_upper));
  if (m.below_min_phase_share) return fmt::format("not gated (< {:.3g}% of the time)", 100 * o.min_phase_share);
  return "not gated";
}

// Mermaid labels: quoted strings; keep a safe character set.
std::string mermaid_label(const std::string& name, std::size_t max_len = 28) {
  std::string out;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '/' || c == ':' || c == '.' || c == '-';
    out += ok ? c : '_';
  }
  if (out.size() > max_len) out = "..." + out.substr(out.size() - (max_len - 3));
  return out;
}

// A side's result files for the table: all of them when they are few; else how many, their folder when they share
// one, and the first and last, since a relative gate's 20 or 40 raw runs would take more of the report than its
// results (the JSON report lists every path).
std::string files_cell(const std::vector<std::string>& files) {
  constexpr std::size_t kListedInFull = 3;
  if (files.size() <= kListedInFull) return fmt::format("{}", fmt::join(files, ", "));
  const auto folder = [](const std::string& f) { return std::filesystem::path(f).parent_path().string(); };
  const auto name = [](const std::string& f) { return std::filesystem::path(f).filename().string(); };
  const std::string dir = folder(files.front());
  const bool one_folder =
      std::all_of(files.begin(), files.end(), [&](const std::string& f) { return folder(f) == dir; });
  if (one_folder)
    return fmt::format("{} files in {}: {} ... {} (every path in the JSON report)", files.size(), dir,
                       name(files.front()), name(files.back()));
  return fmt::format("{} files: {} ... {} (every path in the JSON report)", files.size(), files.front(), files.back());
}

std::string process_runs_cell(const SideInfo& side) {
  if (side.extra_process_runs <= 0) return std::to_string(side.process_runs);
  return fmt::format("{} + {} in extra rounds (of the benchmarks re-measured)",
                     side.process_runs - side.extra_process_runs, side.extra_process_runs);
}

void side_table(std::string& md, const ComparisonReport& r) {
  const auto row = [&](const char* what, const std::string& b, const std::string& c) {
    md += fmt::format("| {} | {} | {} |\n", what, b.empty() ? "unknown" : escape_markdown(b),
                      c.empty() ? "unknown" : escape_markdown(c));
  };
  md += fmt::format("| | {} | {} |\n| --- | --- | --- |\n", r.options.sides.baseline, r.options.sides.current);
  row("machine class", r.baseline.machine_class, r.current.machine_class);
  row("commit", r.baseline.commit, r.current.commit);
  row("date", r.baseline.date, r.current.date);
  row("host", r.baseline.host, r.current.host);
  row("process runs", process_runs_cell(r.baseline), process_runs_cell(r.current));
  row("files", files_cell(r.baseline.files), files_cell(r.current.files));
  md += "\n";
  if (r.machine_mismatch_allowed && r.baseline.machine_class != r.current.machine_class)
    md += "> **Warning:** the machine classes differ (compared anyway, --allow-machine-mismatch).\n\n";
}

// `rows` is one suite's slice (or all) of the sorted rows; `number` gives each its row in the whole report,
// which the chart's "#n" labels refer to.
void results_table(std::string& md, const ComparisonReport& r, const std::vector<const BenchmarkComparison*>& rows,
                   const std::map<const BenchmarkComparison*, std::size_t>& number, const ReportOptions& o) {
  const double confidence = 100 * (1 - r.options.alpha);
  const bool any_ceiling =
      std::any_of(rows.begin(), rows.end(), [](const BenchmarkComparison* b) { return !ceiling_summary(*b).empty(); });
  md += fmt::format(
      "| # | verdict | benchmark | metric | {} | {} | change | {:.0f}% interval | p (adj.) | threshold | "
      "detectable{} |\n",
      r.options.sides.baseline, r.options.sides.current, confidence, any_ceiling ? " | % of ceiling" : "");
  md += fmt::format("| ---: | --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---:{} |\n",
                    any_ceiling ? " | ---" : "");
  std::size_t unchanged_shown = 0, unchanged_hidden = 0;
  for (const BenchmarkComparison* b : rows) {
    const std::size_t index = number.at(b);
    if (b->verdict == Verdict::unchanged && unchanged_shown >= o.max_unchanged_rows) {
      ++unchanged_hidden;
      continue;
    }
    if (b->verdict == Verdict::unchanged) ++unchanged_shown;
    const MetricComparison* m = b->driving_metric();
    std::string metric, base, cur, change, iv, p, thr, detectable;
    if (m) {
      metric = escape_markdown(metric_label(*b, *m));
      base = escape_markdown(format_metric_value(m->kind, m->name, m->baseline_median));
      cur = escape_markdown(format_metric_value(m->kind, m->name, m->current_median));
      change = change_in_words(m->kind, m->name, m->change);
      if (m->common_shift != 0) change += " (raw " + change_in_words(m->kind, m->name, m->raw_change) + ")";
      iv = interval_in_words(*m);
      p = m->gated ? p_value(m->p_adjusted) : "";
      thr = fmt::format("{:.1f}%", 100 * m->threshold);
      detectable = detectable_in_words(*b);
    } else if (b->message) {
      metric = escape_markdown(*b->message);
    } else {
      metric = escape_markdown(b->reason);
    }
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}{} |\n", index, verdict_badge(b->verdict),
                      code_span(b->name), metric, base, cur, change, iv, p, thr, detectable,
                      any_ceiling ? " | " + escape_markdown(ceiling_summary(*b, "\n")) : "");
  }
  if (unchanged_hidden)
    md += fmt::format("\n{} more unchanged benchmarks are not listed (see the JSON report).\n", unchanged_hidden);
  md += "\n";
}

// Suites in the order their first (most severe) benchmark appears in the sorted rows.
std::vector<std::string> suites_in_order(const std::vector<const BenchmarkComparison*>& rows) {
  std::vector<std::string> out;
  for (const auto* b : rows)
    if (std::find(out.begin(), out.end(), b->suite) == out.end()) out.push_back(b->suite);
  return out;
}

// Every skip with its reason, the names folded: the summary above names the reasons, this lists each benchmark.
void skipped_section(std::string& md, const std::vector<const BenchmarkComparison*>& rows) {
  const auto suites = suites_in_order(rows);
  if (std::none_of(rows.begin(), rows.end(), [](const auto* b) { return b->verdict == Verdict::skipped; })) return;
  md += "## Skipped, with reasons\n\n";
  for (const auto& suite : suites) {
    std::vector<std::pair<std::string, std::vector<const BenchmarkComparison*>>> groups;  // first reason, members
    std::vector<std::string> keys;
    for (const auto* b : rows) {
      if (b->suite != suite || b->verdict != Verdict::skipped) continue;
      const std::string reason = b->message.value_or(b->reason);
      const std::string key = numbers_blanked(reason);
      const auto it = std::find(keys.begin(), keys.end(), key);
      if (it == keys.end()) {
        keys.push_back(key);
        groups.push_back({reason, {b}});
      } else {
        groups[static_cast<std::size_t>(it - keys.begin())].second.push_back(b);
      }
    }
    for (const auto& [reason, members] : groups) {
      md += fmt::format("- {}: {} benchmark{}: {}\n  <details><summary>which</summary>\n\n", code_span(suite),
                        members.size(), members.size() == 1 ? "" : "s", escape_markdown(reason));
      for (const auto* b : members) md += "  " + code_span(b->name) + "<br>\n";
      md += "\n  </details>\n";
    }
  }
  md += "\n";
}

void phase_breakdown(std::string& md, const std::vector<const BenchmarkComparison*>& rows, const ComparisonReport& r,
                     const ReportOptions& o) {
  std::size_t with_phases = 0;
  for (const auto* b : rows) with_phases += has_phases(*b);
  if (!with_phases) return;
  md += "## Per-phase breakdown\n\n";
  std::size_t unchanged_shown = 0, hidden = 0;
  for (const BenchmarkComparison* b : rows) {
    if (!has_phases(*b)) continue;
    const bool fold = b->verdict == Verdict::unchanged || b->verdict == Verdict::improvement;
    if (b->verdict == Verdict::unchanged && unchanged_shown >= o.max_unchanged_rows) {
      ++hidden;
      continue;
    }
    unchanged_shown += b->verdict == Verdict::unchanged;
    if (fold) md += fmt::format("<details><summary>{} ({})</summary>\n\n", code_span(b->name), to_string(b->verdict));
    else md += fmt::format("### {} ({})\n\n", code_span(b->name), to_string(b->verdict));
    md += fmt::format("| metric | share of the time | {} | {} | change | {:.0f}% interval | verdict |\n",
                      r.options.sides.baseline, r.options.sides.current, 100 * (1 - r.options.alpha));
    md += "| --- | ---: | ---: | ---: | --- | --- | --- |\n";
    for (const auto& m : b->metrics) {
      if (m.kind != MetricKind::phase && m.kind != MetricKind::latency) continue;
      const bool driver = m.name == b->driver && b->verdict != Verdict::unchanged;
      const double share = phase_share(*b, m);
      md += fmt::format("| {}{}{} | {} | {} | {} | {} | {} | {} |\n", driver ? "**" : "", escape_markdown(m.name),
                        driver ? "**" : "", std::isfinite(share) ? fmt::format("{:.3g}%", 100 * share) : "",
                        escape_markdown(format_metric_value(m.kind, m.name, m.baseline_median)),
                        escape_markdown(format_metric_value(m.kind, m.name, m.current_median)),
                        change_in_words(m.kind, m.name, m.change), interval_in_words(m),
                        m.gated ? to_string(m.verdict) : not_gated_label(*b, m, r.options));
    }
    md += fold ? "\n</details>\n\n" : "\n";
  }
  if (hidden) md += fmt::format("{} more unchanged benchmarks with phases are not shown.\n\n", hidden);
}

// row_number: "#n" ties a bar to its row in the results tables.
void chart(std::string& md, const std::vector<const BenchmarkComparison*>& rows,
           std::map<const BenchmarkComparison*, std::size_t> row_number, const SideNames& sides,
           const ReportOptions& o) {
  std::vector<const BenchmarkComparison*> bars;
  for (const auto* b : rows) {
    if (row_number.count(b) == 0) continue;
    const MetricComparison* m = b->metric("time");
    if (m && !std::isnan(m->change) && std::isfinite(m->change)) bars.push_back(b);
  }
  if (bars.empty()) return;
  std::stable_sort(bars.begin(), bars.end(), [](const auto* a, const auto* b) {
    return std::fabs(a->metric("time")->change) > std::fabs(b->metric("time")->change);
  });
  if (bars.size() > o.max_chart_bars) bars.resize(o.max_chart_bars);
  double lo = 0, hi = 0;
  for (const auto* b : bars) {
    lo = std::min(lo, 100 * b->metric("time")->change);
    hi = std::max(hi, 100 * b->metric("time")->change);
  }
  lo = std::floor(lo / 5) * 5 - 5;
  hi = std::ceil(hi / 5) * 5 + 5;
  md += "## Latency change\n\n";
  md += fmt::format("Change of the median latency, {} vs {} (%; positive = slower){}.\n\n", sides.current,
                    sides.baseline, bars.size() < rows.size() ? fmt::format(", the {} largest", bars.size()) : "");
  md += "```mermaid\nxychart-beta\n    title \"Latency change (%)\"\n    x-axis [";
  for (std::size_t i = 0; i < bars.size(); ++i)
    md += fmt::format("{}\"#{} {}\"", i ? ", " : "", row_number[bars[i]], mermaid_label(bars[i]->name));
  md += fmt::format("]\n    y-axis \"change %\" {:.0f} --> {:.0f}\n    bar [", lo, hi);
  for (std::size_t i = 0; i < bars.size(); ++i)
    md += fmt::format("{}{:.2f}", i ? ", " : "", 100 * bars[i]->metric("time")->change);
  md += "]\n```\n\n";
}

// A benchmark measured on a GPU reports the SM clock the fixtures sample (gpu_counters.hpp); a CPU one does not.
bool ran_on_gpu(const BenchmarkComparison& b) { return b.metric(kClockCounter) != nullptr; }

std::string gpu_profiler_commands(const std::vector<std::string>& ranges, const std::string& file_stem,
                                  const std::string& bin, const std::string& filter) {
  std::string cmds = fmt::format("nsys profile --trace=cuda,nvtx --output={} {} {} --benchmark_repetitions=1\n",
                                 shell_quote("perfgate_" + file_stem), shell_quote(bin), filter);
  for (const auto& range : ranges)
    cmds += fmt::format(
        "ncu --nvtx --nvtx-include {} --set full --output={} {} {} --benchmark_repetitions=1 "
        "--benchmark_min_time=0.01\n",
        shell_quote(range + "/"), shell_quote("perfgate_" + file_stem), shell_quote(bin), filter);
  if (ranges.empty())
    cmds += fmt::format("ncu --set full --output={} {} {} --benchmark_repetitions=1 --benchmark_min_time=0.01\n",
                        shell_quote("perfgate_" + file_stem), shell_quote(bin), filter);
  return cmds;
}

std::string cpu_profiler_commands(const std::vector<std::string>& ranges, const std::string& file_stem,
                                  const std::string& bin, const std::string& filter) {
  std::string nvtx;
  if (!ranges.empty())
    nvtx = fmt::format("nsys profile --trace=nvtx,osrt --output={} {} {} --benchmark_repetitions=1\n",
                       shell_quote("perfgate_" + file_stem), shell_quote(bin), filter);
  return nvtx + fmt::format(
                    "perf stat -e task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions {} {} "
                    "--benchmark_repetitions=1\n"
                    "perf record -g --output={} {} {} --benchmark_repetitions=1\n",
                    shell_quote(bin), filter, shell_quote("perfgate_" + file_stem + ".perf.data"), shell_quote(bin),
                    filter);
}

// N of a benchmark registered with its own Repetitions(N): Google Benchmark names it ".../repeats:N" and ignores
// --benchmark_repetitions for it. 0 when it has none.
int own_repetitions(const std::string& raw_name) {
  static const std::regex repeats("/repeats:([0-9]+)(/|$)");
  std::smatch m;
  return std::regex_search(raw_name, m, repeats) ? std::stoi(m[1].str()) : 0;
}

// The line that re-runs one benchmark as the gate measured it.
std::string rerun_command(const std::string& bin, const std::string& filter, const std::string& raw_name,
                          int repetitions) {
  if (const int own = own_repetitions(raw_name); own > 0)
    return fmt::format(
        "# Repetitions({}) in its registration sets the repetitions; --benchmark_repetitions does not\n"
        "{} {}\n",
        own, shell_quote(bin), filter);
  return fmt::format("{} {} --benchmark_repetitions={}\n", shell_quote(bin), filter, repetitions);
}

void reproduce(std::string& md, const ComparisonReport& r, const std::vector<const BenchmarkComparison*>& rows,
               const ReportOptions& o) {
  std::vector<const BenchmarkComparison*> targets;
  for (const auto* b : rows)
    if (b->verdict == Verdict::failed || b->verdict == Verdict::regression || b->verdict == Verdict::noisy)
      targets.push_back(b);
  if (targets.empty() && !rows.empty()) targets.push_back(rows.front());
  if (targets.empty()) return;
  if (targets.size() > o.max_reproduce) targets.resize(o.max_reproduce);
  md += "## Reproduce\n\n";
  for (const auto* b : targets) {
    const std::string bin = binary_for(r, *b, o);
    const std::string filter = shell_quote("--benchmark_filter=^" + visible_filter(b->raw_name) + "$");
    std::string cmds = rerun_command(bin, filter, b->raw_name, o.reproduce_repetitions);
    // The whole (sanitised) name, up to a file-name-safe length: cut at 40 characters, different
    // benchmarks (".../tokens:128/routing:uniform/mode:cold") wrote the same profile file.
    const std::string stem = mermaid_label(b->name, 200);
    std::string file_stem;
    for (char c : stem) file_stem += (c == '/' || c == ':' || c == '.') ? '_' : c;
    cmds += ran_on_gpu(*b) ? gpu_profiler_commands(nvtx_ranges_for(r, b->suite), file_stem, bin, filter)
                           : cpu_profiler_commands(nvtx_ranges_for(r, b->suite), file_stem, bin, filter);
    md += fmt::format("{} ({}):\n\n", code_span(b->name), to_string(b->verdict));
    md += markdown_code_block(cmds, "sh");
    md += "\n";
  }
}

// What the run and the analysis said, as they said it: costs, seeds, gates chosen, learned noise. The summary's
// notes above say what matters in plain words; these are for whoever digs.
void run_notes_section(std::string& md, const ComparisonReport& r, const ReportOptions& o) {
  if (r.notes.empty()) return;
  md += "## Run notes\n\n";
  if (!o.glossary_link.empty()) md += fmt::format("Terms are explained in the [glossary]({}).\n\n", o.glossary_link);
  for (const auto& note : r.notes) md += "- " + escape_markdown(note) + "\n";
  md += "\n";
}

std::string correction_name(Correction c) {
  return c == Correction::benjamini_hochberg ? "Benjamini-Hochberg"
                                             : (c == Correction::holm ? "Holm" : "no multiple-comparison");
}

// The rule the verdicts were reached with, and where the noise came from.
void rule_section(std::string& md, const ComparisonReport& r) {
  const auto& opt = r.options;
  md += fmt::format(
      "Rule: a regression is a change that is significant after {} control at alpha {} **and** whose {:.0f}% "
      "interval lies entirely beyond the threshold; between-run noise {}; within-run dispersion above {:.0f}% or "
      "fewer than {} samples per side is *noisy*. See docs/statistics.md.\n\n",
      correction_name(opt.correction), opt.alpha, 100 * (1 - opt.alpha),
      opt.run_noise > 0 && opt.run_noise_df > 0
          ? fmt::format("from the spread of per-run medians, pooled with a prior of {:.1f}% ({:g} d.f.)",
                        100 * opt.run_noise, opt.run_noise_df)
          : std::string("from the spread of per-run medians where a side has several runs"),
      100 * opt.max_dispersion, opt.min_samples);
  if (opt.phase_impact > 0)
    md += fmt::format(
        "A phase's threshold is at least {:.2g}% of its benchmark's time over the phase's share of it "
        "(`phase_impact`).\n\n",
        100 * opt.phase_impact);
  if (opt.session_noise > 0 && !opt.paired_runs && r.prior_metrics > 0)
    md += fmt::format(
        "Stored runs from different sessions: intervals widened by a session drift of {:.1f}% per session "
        "(`session_noise`).\n\n",
        100 * opt.session_noise);
  if (r.learned_metrics > 0)
    md += fmt::format(
        "Learned noise: {} gated metric{} judged on the difference of the two sessions' levels with the "
        "between-session noise learned for each from `{}` (method \"between-session\"); {} with the "
        "class prior.\n\n",
        r.learned_metrics, r.learned_metrics == 1 ? "" : "s", escape_markdown(opt.learned_noise_source),
        r.prior_metrics);
  md +=
      "*detectable*: the smallest slowdown of the benchmark's time that this comparison, with the runs it had, "
      "would call a regression (the threshold plus the interval's half-width).\n\n";
}

// One table per suite; rows are numbered across the whole report (the chart's "#n"), skipped ones are in the
// summary only.
void results_section(std::string& md, const ComparisonReport& r, const std::vector<const BenchmarkComparison*>& rows,
                     const std::map<const BenchmarkComparison*, std::size_t>& number, const ReportOptions& o) {
  md += "## Results\n\n";
  const auto suites = suites_in_order(rows);
  for (const auto& suite : suites) {
    std::vector<const BenchmarkComparison*> judged;
    for (const auto* b : rows)
      if (b->suite == suite && b->verdict != Verdict::skipped) judged.push_back(b);
    if (suites.size() > 1) md += fmt::format("### {}\n\n", code_span(suite));
    if (judged.empty()) {
      md += "Every benchmark of this suite was skipped (see the summary).\n\n";
      continue;
    }
    results_table(md, r, judged, number, o);
  }
}

// Failures with the bench's own message.
void failures_section(std::string& md, const std::vector<const BenchmarkComparison*>& rows) {
  bool any_failed = false;
  for (const auto* b : rows)
    if (b->verdict == Verdict::failed) {
      if (!any_failed) md += "## Failures\n\n";
      any_failed = true;
      md += fmt::format("- {}: {}\n", code_span(b->name), escape_markdown(b->message.value_or(b->reason)));
    }
  if (any_failed) md += "\n";
}

// The benches' own labels (Google Benchmark's State::SetLabel): what a benchmark says about its run that no
// counter holds, e.g. which GPU was the straggler. The current side's, and the baseline's where it differs.
void labels_section(std::string& md, const std::vector<const BenchmarkComparison*>& rows, const SideNames& sides) {
  bool any = false;
  for (const auto* b : rows) {
    if (b->label_current.empty() && b->label_baseline.empty()) continue;
    if (!any) md += "## Labels\n\n";
    any = true;
    const bool differ = !b->label_baseline.empty() && b->label_baseline != b->label_current;
    md += fmt::format("- {}: {}", code_span(b->name),
                      escape_markdown(b->label_current.empty() ? "(none)" : b->label_current));
    if (differ) md += fmt::format(" ({}: {})", sides.baseline, escape_markdown(b->label_baseline));
    md += "\n";
  }
  if (any) md += "\n";
}

constexpr std::size_t kCounterBenchmarks = 20;    // benchmarks whose counters are listed before "N more"
constexpr std::size_t kCountersPerBenchmark = 8;  // the counters that moved most, per benchmark

// The counters a regressed or improved benchmark reports besides its time and phases (Google Benchmark's user
// counters: rates, sizes, counts), where they moved: next to the time, they are where a reader looks for why.
void counters_section(std::string& md, const std::vector<const BenchmarkComparison*>& rows, const SideNames& sides) {
  const MovedCounters moved = moved_counters(rows, kCounterBenchmarks, kCountersPerBenchmark);
  std::string table;
  for (const auto& [b, counters] : moved.listed)
    for (const MetricComparison* c : counters) {
      const MetricComparison& m = *c;
      table += fmt::format("| {} | {} | {} | {} | {} | {} |\n", code_span(b->name), code_span(m.name),
                           escape_markdown(format_metric_value(m.kind, m.name, m.baseline_median)),
                           escape_markdown(format_metric_value(m.kind, m.name, m.current_median)),
                           change_in_words(m.kind, m.name, m.change),
                           m.gated ? to_string(m.verdict) : "information, not gated");
    }
  if (table.empty()) return;
  md += "## Counters of the changed benchmarks\n\n";
  const std::size_t benchmarks = moved.listed.size() + moved.more;
  md += fmt::format("<details><summary>{} benchmark{}: the counters that moved most</summary>\n\n", benchmarks,
                    benchmarks == 1 ? "" : "s");
  md += fmt::format(
      "The counters each regressed or improved benchmark reports, up to {} a benchmark, largest change first. Rates "
      "(`*_per_second`, names ending in `/s`) are gated with the time; other counters are information.\n\n",
      kCountersPerBenchmark);
  md += fmt::format("| benchmark | counter | {} | {} | change | verdict |\n| --- | --- | ---: | ---: | --- | --- |\n",
                    sides.baseline, sides.current);
  md += table;
  if (moved.more) md += fmt::format("\n{} more changed benchmarks with moved counters are not shown.\n", moved.more);
  md += "\n</details>\n\n";
}

}  // namespace

std::string render_markdown(const ComparisonReport& r, const ReportOptions& o) {
  // The first line is the outcome: never a pass when something failed, regressed, or could not be read. The
  // summary's sections follow, so that the full report reads like the comment, then holds everything.
  std::string md = markdown_title(r, o);
  const SummaryModel s = summarise(r);
  summary_sections(md, r, s, o, true);
  run_notes_section(md, r, o);
  md += "## Details\n\n";
  side_table(md, r);
  rule_section(md, r);
  const auto& rows = s.rows;
  if (rows.empty()) {
    md += "No benchmarks in either input.\n";
    return md;
  }
  std::map<const BenchmarkComparison*, std::size_t> number;
  for (const auto* b : rows)
    if (b->verdict != Verdict::skipped) number.emplace(b, number.size() + 1);
  results_section(md, r, rows, number, o);
  skipped_section(md, rows);
  failures_section(md, rows);
  labels_section(md, rows, r.options.sides);
  phase_breakdown(md, rows, r, o);
  counters_section(md, rows, r.options.sides);
  chart(md, rows, number, r.options.sides, o);
  reproduce(md, r, rows, o);
  if (!o.command.empty()) md += "Produced by: " + code_span(o.command) + "\n";
  return md;
}

}  // namespace perfgate
