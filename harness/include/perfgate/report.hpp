#pragma once
// Reports of a ComparisonReport (compare.hpp): a terminal table (coloured only on a TTY), Markdown for
// people and merge requests, JSON for machines. None of them ever reads as a pass when a benchmark
// failed, regressed, or nothing could be compared: the first line states the outcome and exit code.
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>

#include "perfgate/compare.hpp"
#include "perfgate/record.hpp"
#include "perfgate/text.hpp"  // escape_markdown, code_span, regex_escape

namespace perfgate {

struct ReportOptions {
  std::string title;                            // e.g. the suite name or "compare"; empty: "perfgate"
  std::string command;                          // the command that produced the report (shown in the footer)
  int reproduce_repetitions = 20;               // --benchmark_repetitions in the reproduce commands
  std::size_t max_reproduce = 10;               // benchmarks that get reproduce commands (worst first)
  std::size_t max_chart_bars = 30;              // bars in the Mermaid chart (largest |change| first)
  std::size_t max_unchanged_rows = 200;         // unchanged rows listed in Markdown/terminal before summarising
  bool color = true;                            // colour the terminal report on a TTY (the CLI clears it for NO_COLOR)
  std::map<std::string, std::string> binaries;  // suite -> bench binary for reproduce commands
                                                // (default: the run's "executable", else bin/bench_<suite>)
  // The summary (render_summary): where its readers find the rest. Empty: the line is left out.
  std::string full_report_link;                               // the full Markdown report (a URL or a relative path)
  std::string dashboard_link;                                 // the trend dashboard (perfgate history report)
  std::string glossary_link = "docs/statistics.md#glossary";  // the words the notes use
  std::map<std::string, std::string> likeliest_causes;        // benchmark -> first finding of --explain
  // A pull-request comment holds 65,536 characters; the summary stays below this whatever the run.
  std::size_t summary_max_chars = 60000;
  std::size_t summary_max_rows = 50;    // regressions listed before "N more, see the full report"
  std::size_t summary_max_names = 5;    // benchmarks named per note or "not judged" line
  std::size_t summary_max_suites = 40;  // rows of the per-suite table
  bool verbose = false;                 // terminal: the full table (-v) after the summary
};

// One line: outcome first ("FAIL: 2 regressions", "ERROR: nothing could be compared", "PASS", ...),
// then the counts and the exit code.
std::string summary_line(const ComparisonReport& report);
// "FAIL", "ERROR", "SKIPPED" or "PASS" for report.exit_code.
const char* outcome_word(int exit_code);

// The full report: the summary's sections first, then every table, breakdown, chart and command.
std::string render_markdown(const ComparisonReport& report, const ReportOptions& options = {});
// The summary for pull-request comments and job summaries: the verdict, what regressed (interval, smallest
// detectable change, likeliest cause), what was not judged and why, counts per suite, plain-word notes naming
// their benchmarks, and links. At most options.summary_max_chars characters, whatever the run.
std::string render_summary(const ComparisonReport& report, const ReportOptions& options = {});
std::string render_json(const ComparisonReport& report, const ReportOptions& options = {});
// The JSON report of a comparison that could not be made (exit 2): schema, outcome "ERROR", exit_code 2,
// `summary` and no benchmarks, so that a stale report can never be mistaken for this run's.
std::string render_json_error(const std::string& summary);
// The record-only reports (record.hpp): Markdown under `title`, and JSON of kind perfgate.measurement.
std::string render_record_markdown(const RecordReport& report, const std::string& title);
std::string render_record_json(const RecordReport& report);
std::string render_terminal(const ComparisonReport& report, bool color, const ReportOptions& options = {});
// Writes render_terminal to `out`, coloured when `out` is a TTY and options.color is set.
void print_terminal(const ComparisonReport& report, std::FILE* out = stdout, const ReportOptions& options = {});

// A change in words, whatever the metric's unit: "12.3% slower" / "9.3% faster" for times and rates (a higher
// rate is faster), "4.0% larger" / "smaller" for the rest; "no change" below 0.05%.
std::string change_in_words(MetricKind kind, const std::string& metric_name, double change);
// The metric's interval in words: "8.1% to 16.0% slower", "3.0% faster to 5.0% slower"; "n/a" unbounded.
std::string interval_in_words(const MetricComparison& metric);
// A phase's share of its benchmark's baseline time (phase ms per iteration / time ns per iteration); NaN when
// the metric is no phase or the time is unknown.
double phase_share(const BenchmarkComparison& benchmark, const MetricComparison& metric);
// A fenced code block that no backtick run inside `code` can close.
std::string markdown_code_block(std::string_view code, std::string_view language = "sh");
// Single-quotes `text` for a POSIX shell.
std::string shell_quote(std::string_view text);

// The one duration formatter (reports, progress ETAs, wall times). Below a minute: 3 significant digits in
// ns/us/ms/s ("812 ns", "12.3 ms", "1.50 s"); from a minute on: "3m05s", then "1h02m"; "n/a" when not a
// number. Negative durations (differences) keep their sign. Nanoseconds, so that report values (ns) are
// formatted without a unit conversion; seconds convert implicitly: format_duration(std::chrono::duration<double>(s)).
std::string format_duration(std::chrono::duration<double, std::nano> duration);

// Human-readable value of a metric: latency in ns/us/ms/s, phases in ms, rates with SI prefixes.
std::string format_metric_value(MetricKind kind, const std::string& metric_name, double value);

}  // namespace perfgate
