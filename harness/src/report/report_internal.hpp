#pragma once
// Formatting helpers shared by report_*.cpp (not part of the public API).
#include <string>
#include <string_view>
#include <vector>

#include "perfgate/report.hpp"

namespace perfgate::report_detail {

// Reasons that differ only in numbers ("22.5 GiB available" vs "22.6") are one reason: digits and dots blanked.
std::string numbers_blanked(const std::string& reason);

std::string sig3(double v);                         // 3 significant digits, fixed notation
std::string si(double v, const std::string& unit);  // 831 TFLOP/s
std::string percent(double v);                      // +12.3%
std::string interval(const MetricComparison& m);    // [+1.0%, +3.5%] / n/a / "" (not gated)
std::string p_value(double p);
// "amx_peak 41.0% (was 40.2%), hbm 12.0%"; entries joined by `separator` (Markdown tables: "<br>", one per
// line, so five ceilings make a cell five lines tall instead of a narrow column a dozen lines tall).
std::string ceiling_summary(const BenchmarkComparison& b, const std::string& separator = ", ");
bool has_phases(const BenchmarkComparison& b);
std::string binary_for(const ComparisonReport& r, const BenchmarkComparison& b, const ReportOptions& o);
std::vector<std::string> nvtx_ranges_for(const ComparisonReport& r, const std::string& suite);
std::string counts_text(const VerdictCounts& c);
using perfgate::code_span;  // text.hpp

// regex_escape(name), with each character that would reorder, hide or break the command's line (and each byte
// that is not UTF-8) as '.', which matches it: a reproduce command shows as what it runs.
std::string visible_filter(std::string_view name);

// ---- the summary's model (report_summary_model.cpp) ----------------------------------------------------------
// Text fields are plain (unescaped); each renderer escapes them for its medium.

// Benchmarks not judged for one reason: too noisy, missing, new, reported but not gated, or skipped (grouped by the
// skip reason with its numbers blanked, across suites).
struct NotJudgedLine {
  std::string what;    // "skipped", "too noisy to judge", ...
  std::string reason;  // the first member's reason (skips, not gated), or what it means
  std::vector<const BenchmarkComparison*> members;
  std::vector<std::string> suites;  // in order of first appearance
  std::string advice;               // what to do, if anything
};

struct SuiteCount {
  std::string suite;
  VerdictCounts counts;
};

// A note in plain words about the named benchmarks (none: the whole run), with what to do and the glossary entry.
struct PlainNote {
  std::vector<std::string> names;
  std::string text;
  std::string advice;
  std::string glossary_term;
  bool names_are_paths = false;  // file paths: a cut path no longer names its file, so they are shown whole
};

struct SummaryModel {
  std::vector<const BenchmarkComparison*> rows;          // ComparisonReport::sorted()
  std::vector<const BenchmarkComparison*> regressions;   // failed and regressed, most severe first
  std::vector<const BenchmarkComparison*> improvements;  // largest first
  std::vector<NotJudgedLine> not_judged;
  std::vector<SuiteCount> suites;  // in order of their most severe benchmark
  std::vector<PlainNote> notes;
};
SummaryModel summarise(const ComparisonReport& report);
// What the regressions list holds, as its heading: "regressions", "failed", or "failed or regressed".
std::string regressions_heading(const SummaryModel& model);

// ---- shared by the Markdown summary, the full report and the terminal -----------------------------------------
// What changed, in words: "time 12.3% slower (1.20 ms -> 1.35 ms)", "phase.A, 31% of the time, 24.4% slower (...)";
// a failure's message; `name_of` escapes the metric name for the medium.
std::string what_changed(const BenchmarkComparison& b, std::string (*escape)(std::string_view));
// A metric's name with a phase's share of the benchmark's time: "phase.A (31% of the time)".
std::string metric_label(const BenchmarkComparison& b, const MetricComparison& m);
// True for a change that change_in_words calls "no change" (under 0.05%, which one decimal reads as 0.0%).
bool reads_as_no_change(double change);
// The regressed or improved benchmarks among `rows` whose user counters moved (rates and information counters, not
// their time or phases): the first `max_benchmarks` with up to `per_benchmark` counters each, largest change first,
// and how many more such benchmarks there are.
struct MovedCounters {
  struct Benchmark {
    const BenchmarkComparison* benchmark;
    std::vector<const MetricComparison*> counters;
  };
  std::vector<Benchmark> listed;
  std::size_t more = 0;
};
MovedCounters moved_counters(const std::vector<const BenchmarkComparison*>& rows, std::size_t max_benchmarks,
                             std::size_t per_benchmark);
// The smallest detectable slowdown in words ("5.2% slower"), "" when there is none.
std::string detectable_in_words(const BenchmarkComparison& b);
// `text` cut to at most `max_bytes` bytes at a UTF-8 boundary, with "..." when cut.
std::string cut(const std::string& text, std::size_t max_bytes);
// The Markdown sections of the summary below its title line: regressions, not judged, per suite, notes. `full`:
// they head the full report, whose later sections hold what the lists leave out.
void summary_sections(std::string& md, const ComparisonReport& report, const SummaryModel& model,
                      const ReportOptions& options, bool full);
// The outcome as a Markdown heading: "## perfgate run: FAIL: ...".
std::string markdown_title(const ComparisonReport& report, const ReportOptions& options);

}  // namespace perfgate::report_detail
