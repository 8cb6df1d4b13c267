// The summary (render_summary) and what every report shares with it: bounded size whatever the run, changes in
// words (slower/faster whatever the unit), a phase's share of the time, notes that name their benchmarks, one
// "not judged" section below the regressions, names that cannot reorder or break a line, and the terminal in
// the summary's order.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "perfgate/compare.hpp"
#include "perfgate/report.hpp"
#include "test_support.hpp"

using namespace perfgate;
using perfgate::test_support::bench;
using perfgate::test_support::metric;
using perfgate::test_support::noisy;
using perfgate::test_support::set_of;
using perfgate::test_support::within_run_options;

namespace {

// A benchmark judged on its time, with the change and interval given (no statistics run: the renderers only read).
BenchmarkComparison judged(const std::string& name, Verdict verdict, double change, double base_ns = 1e6) {
  BenchmarkComparison b;
  b.name = b.raw_name = name;
  b.suite = name.substr(0, name.find('/'));
  b.verdict = verdict;
  b.driver = "time";
  MetricComparison m;
  m.name = "time";
  m.kind = MetricKind::latency;
  m.gated = true;
  m.verdict = verdict;
  m.baseline_median = base_ns;
  m.current_median = base_ns * (1 + change);
  m.change = m.raw_change = change;
  m.change_lower = change - 0.01;
  m.change_upper = change + 0.01;
  m.interval_bounded = true;
  m.threshold = 0.05;
  m.detectable_change = 0.06;
  b.metrics.push_back(m);
  return b;
}

BenchmarkComparison skipped(const std::string& name, const std::string& why) {
  BenchmarkComparison b;
  b.name = b.raw_name = name;
  b.suite = name.substr(0, name.find('/'));
  b.verdict = Verdict::skipped;
  b.message = why;
  return b;
}

ComparisonReport report_of(std::vector<BenchmarkComparison> benchmarks) {
  ComparisonReport r;
  r.benchmarks = std::move(benchmarks);
  recount(r);
  return r;
}

// Lines of a Markdown table (starting with '|') whose count of unescaped '|' differs from the table's header.
std::vector<std::string> broken_rows(const std::string& md) {
  std::vector<std::string> broken;
  std::size_t header_pipes = 0;
  std::size_t start = 0;
  bool in_table = false;
  while (start < md.size()) {
    const std::size_t end = std::min(md.find('\n', start), md.size());
    const std::string line = md.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line[0] != '|') {
      in_table = false;
      continue;
    }
    std::size_t pipes = 0;
    for (std::size_t i = 0; i < line.size(); ++i) pipes += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    if (!in_table) header_pipes = pipes;
    else if (pipes != header_pipes) broken.push_back(line);
    in_table = true;
  }
  return broken;
}

// The Markdown outside fenced code blocks (inside them, text shows literally and HTML does not render).
std::string outside_code_blocks(const std::string& md) {
  std::string out;
  bool in_block = false;
  std::size_t start = 0;
  while (start < md.size()) {
    const std::size_t end = std::min(md.find('\n', start), md.size());
    const std::string line = md.substr(start, end - start);
    start = end + 1;
    if (line.rfind("```", 0) == 0) in_block = !in_block;
    else if (!in_block) out += line + "\n";
  }
  return out;
}

}  // namespace

// 100,000 benchmarks with 1,000 regressions, 300 suites, a thousand skip reasons and long names: the summary
// stays under the limit and says how many more there are and where.
TEST(Summary, SizeIsBoundedWhateverTheRun) {
  std::vector<BenchmarkComparison> list;
  list.reserve(100000);
  const std::string long_tail(500, 'x');
  for (int i = 0; i < 100000; ++i) {
    const std::string name = fmt::format("suite{:03}/bench{:06}/{}", i % 300, i, long_tail);
    if (i % 100 == 0) list.push_back(judged(name, Verdict::regression, 0.20));
    else if (i % 100 == 1)  // reasons that differ in words, not only in numbers: each is a line of its own
      list.push_back(skipped(name, fmt::format("needs device {}{}", char('a' + i % 26), char('a' + i / 26 % 26))));
    else if (i % 100 == 2) list.push_back(judged(name, Verdict::noisy, 0.02));
    else list.push_back(judged(name, Verdict::unchanged, 0.001));
  }
  const ComparisonReport r = report_of(std::move(list));
  ASSERT_EQ(r.counts.regression, 1000);
  ReportOptions o;
  o.full_report_link = "perf-report.md";
  const std::string md = render_summary(r, o);
  EXPECT_LE(md.size(), 60000u);
  EXPECT_EQ(md.rfind("## perfgate: FAIL: 1000 regressions", 0), 0u) << md.substr(0, 200);
  EXPECT_NE(md.find("950 more failed or regressed benchmarks are listed in the [full report](perf-report.md)"),
            std::string::npos);
  EXPECT_NE(md.find("260 more suites"), std::string::npos);  // 300 suites, 40 rows
  EXPECT_NE(md.find("**1000 too noisy to judge**"), std::string::npos);
  EXPECT_TRUE(broken_rows(md).empty()) << broken_rows(md).front();
  // The hard limit holds even when the per-list limits would not: it cuts at a line end and says so.
  o.summary_max_rows = 1000;
  o.summary_max_chars = 20000;
  const std::string cut = render_summary(r, o);
  EXPECT_LE(cut.size(), 20000u);
  EXPECT_NE(cut.find("**This summary was cut at 20000 characters**: the rest is in the [full report]"),
            std::string::npos);
  EXPECT_EQ(cut.rfind("## perfgate: FAIL: 1000 regressions", 0), 0u);
}

// The verdict, then the regressions, then what was not judged, then the counts per suite; links on top.
TEST(Summary, VerdictRegressionsThenNotJudged) {
  ComparisonReport r = report_of({judged("gemm/a", Verdict::regression, 0.12), judged("gemm/b", Verdict::unchanged, 0),
                                  judged("gemm/c", Verdict::noisy, 0.03), skipped("copy/h2d", "no usable GPU"),
                                  skipped("copy/d2h", "no usable GPU")});
  ReportOptions o;
  o.title = "perfgate run";
  o.full_report_link = "perf-report.md";
  o.dashboard_link = "https://dash.example/";
  const std::string md = render_summary(r, o);
  const auto at = [&](const std::string& s) { return md.find(s); };
  EXPECT_EQ(at("## perfgate run: FAIL: 1 regression"), 0u) << md;
  ASSERT_NE(at("[Full report](perf-report.md) · [Dashboard](https://dash.example/)"), std::string::npos) << md;
  ASSERT_NE(at("### Regressions"), std::string::npos);
  ASSERT_NE(at("### Not judged"), std::string::npos);
  ASSERT_NE(at("### Per suite"), std::string::npos);
  EXPECT_LT(at("### Regressions"), at("### Not judged"));
  EXPECT_LT(at("### Not judged"), at("### Per suite"));
  EXPECT_NE(at("- <code>gemm/a</code>: time 12.0% slower (was 1.00 ms, now 1.12 ms); 95% interval 11.0% to 13.0% "
               "slower; smallest detectable 6.0% slower\n"),
            std::string::npos)
      << md;
  EXPECT_NE(at("- **1 too noisy to judge** (<code>gemm/c</code>)"), std::string::npos) << md;
  EXPECT_NE(at("- **2 skipped** (<code>copy/d2h</code>, <code>copy/h2d</code>): no usable GPU"), std::string::npos)
      << md;
  // The full report opens the same way, then holds every row.
  const std::string full = render_markdown(r, o);
  EXPECT_EQ(full.rfind("## perfgate run: FAIL: 1 regression", 0), 0u);
  EXPECT_LT(full.find("### Regressions"), full.find("## Results"));
  EXPECT_NE(full.find("<code>gemm/b</code>"), std::string::npos);
  // The run's own notes are kept, folded at the end, each cut to a line's length.
  r.notes = {"measured: 3 process run(s)", std::string(1000, 'n')};
  const std::string with_notes = render_summary(r, o);
  EXPECT_NE(with_notes.find("<details><summary>Run notes (2)</summary>\n\n- measured: 3 process run(s)\n- nnn"),
            std::string::npos)
      << with_notes;
  EXPECT_EQ(with_notes.find(std::string(301, 'n')), std::string::npos);
  EXPECT_GT(with_notes.find("<details>"), with_notes.find("### Per suite"));
}

// --explain's likeliest cause goes into the regression's row.
TEST(Summary, LikeliestCauseWhereExplainRan) {
  const ComparisonReport r = report_of({judged("gemm/a", Verdict::regression, 0.12)});
  ReportOptions o;
  o.likeliest_causes["gemm/a"] = "kernel sm90_gemm: 31% more DRAM traffic";
  const std::string md = render_summary(r, o);
  EXPECT_NE(md.find("smallest detectable 6.0% slower. Likeliest cause: kernel sm90\\_gemm: 31% more DRAM traffic\n"),
            std::string::npos)
      << md;
  // The terminal, where `perfgate ab --explain` was typed, gives it under the regression's line too.
  const std::string text = render_terminal(r, false, o);
  EXPECT_NE(
      text.find("smallest detectable 6.0% slower\n    likeliest cause: kernel sm90_gemm: 31% more DRAM traffic\n"),
      std::string::npos)
      << text;
}

TEST(Words, DirectionWhateverTheUnit) {
  EXPECT_EQ(change_in_words(MetricKind::latency, "time", 0.239), "23.9% slower");
  EXPECT_EQ(change_in_words(MetricKind::phase, "phase.A", -0.05), "5.0% faster");
  EXPECT_EQ(change_in_words(MetricKind::rate, "TFLOP/s", 0.093), "9.3% faster");
  EXPECT_EQ(change_in_words(MetricKind::rate, "bytes_per_second", -0.2), "20.0% slower");
  EXPECT_EQ(change_in_words(MetricKind::info, "pct.hbm", 0.04), "4.0% larger");
  EXPECT_EQ(change_in_words(MetricKind::latency, "time", 0.0001), "no change");
  EXPECT_EQ(change_in_words(MetricKind::latency, "time", std::nan("")), "n/a");
  MetricComparison m;
  m.gated = true;
  m.interval_bounded = true;
  m.kind = MetricKind::latency;
  m.change_lower = 0.081;
  m.change_upper = 0.16;
  EXPECT_EQ(interval_in_words(m), "8.1% to 16.0% slower");
  m.change_lower = -0.03;
  m.change_upper = 0.05;
  EXPECT_EQ(interval_in_words(m), "3.0% faster to 5.0% slower");
  m.kind = MetricKind::rate;  // a rate's lower end is the slower one
  EXPECT_EQ(interval_in_words(m), "3.0% slower to 5.0% faster");
  m.change_lower = -0.2;
  m.change_upper = -0.1;
  EXPECT_EQ(interval_in_words(m), "10.0% to 20.0% slower");
  m.interval_bounded = false;
  EXPECT_EQ(interval_in_words(m), "n/a");
}

// A faster whole next to a slower small phase reads right: the phase says how much of the time it is.
TEST(Words, PhaseRegressionSaysItsShareOfTheTime) {
  std::vector<double> base_phase = noisy(0.004, 0.005, 12, 3), cur_phase = noisy(0.0052, 0.005, 12, 4);
  BenchmarkResult b = bench("gemm/ffn", noisy(100e3, 0.005, 12, 1));      // 100 us per iteration
  BenchmarkResult c = bench("gemm/ffn", noisy(75e3, 0.005, 12, 2));       // 25% faster
  b.counters = {metric("phase.combine", MetricKind::phase, base_phase)};  // 4 us = 4% of the time
  c.counters = {metric("phase.combine", MetricKind::phase, cur_phase)};
  const auto r = compare(set_of({b}), set_of({c}), within_run_options());
  const BenchmarkComparison& ffn = r.benchmarks.at(0);
  ASSERT_EQ(ffn.driver, "phase.combine") << ffn.reason;
  const MetricComparison& phase = *ffn.metric("phase.combine");
  const MetricComparison& time = *ffn.metric("time");
  EXPECT_NEAR(phase_share(ffn, phase), 0.04, 0.001);
  EXPECT_NEAR(phase.change, 0.30, 0.01);
  EXPECT_NEAR(time.change, -0.25, 0.01);
  const std::string phase_words = change_in_words(phase.kind, phase.name, phase.change);
  const std::string time_words = change_in_words(time.kind, time.name, time.change);
  EXPECT_NE(phase_words.find("% slower"), std::string::npos);
  EXPECT_NE(time_words.find("% faster"), std::string::npos);
  const std::string md = render_summary(r);
  EXPECT_NE(md.find(fmt::format("phase.combine ({:.1f}% of the time) {}", 100 * phase_share(ffn, phase), phase_words)),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("; the whole benchmark " + time_words + "; 95% interval "), std::string::npos) << md;
  const std::string full = render_markdown(r);
  EXPECT_NE(full.find("| time |  | "), std::string::npos) << full;
  EXPECT_NE(full.find(" | " + time_words + " | "), std::string::npos) << full;
  EXPECT_NE(full.find(fmt::format("| **phase.combine** | {:.3g}% | ", 100 * phase_share(ffn, phase))),
            std::string::npos)
      << full;
}

// Each note names its benchmarks and says what to do; the glossary is linked.
TEST(Summary, NotesNameTheirBenchmarks) {
  BenchmarkComparison contended = judged("lora/backward", Verdict::unchanged, 0.01);
  MetricComparison cpu = contended.metrics.front();
  cpu.name = "cpu_time";
  contended.metrics.push_back(cpu);
  BenchmarkComparison clocked = judged("gemm/ffn", Verdict::unchanged, 0.0);
  clocked.cycle_space = CycleSpaceJudgement{1980, 1755, true, true, Verdict::regression, "time"};
  ComparisonReport r = report_of({contended, clocked});
  r.throttled_current.discarded_from = {"gemm/ffn"};
  r.baseline.machine_class = "gpu-h100-x1";
  r.current.machine_class = "gpu-h200-x1";
  r.machine_mismatch_allowed = true;
  ReportOptions o;
  o.glossary_link = "https://docs.example/statistics.md#glossary";
  const std::string md = render_summary(r, o);
  EXPECT_NE(md.find("- <code>lora/backward</code>: other processes took the CPU on one side"), std::string::npos) << md;
  EXPECT_NE(md.find("CPU time decided instead. Re-run on a quiet machine to judge wall time. "
                    "([contention](https://docs.example/"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- <code>gemm/ffn</code>: the GPU ran at different SM clocks"), std::string::npos) << md;
  EXPECT_NE(md.find("- <code>gemm/ffn</code>: repetitions measured while the GPU throttled were left out"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- The baseline ran on machine class gpu-h100-x1, this run on gpu-h200-x1"), std::string::npos)
      << md;
  EXPECT_EQ(md.find("time-space alarm"), std::string::npos) << md;  // the jargon stays in the glossary
}

// A name with a right-to-left override, a newline, pipes and HTML cannot reorder, break or forge a row anywhere.
TEST(Names, HostileNamesAreShownSafely) {
  const std::string rlo = "\xE2\x80\xAE";  // U+202E RIGHT-TO-LEFT OVERRIDE
  const std::string hostile = "gemm/evil" + rlo + "nuf|<b>x</b>\n| 1 | unchanged | forged \xE2\x80\x8B\xC2\x85\xFF";
  ComparisonReport r = report_of({judged(hostile, Verdict::regression, 0.3), judged("gemm/ok", Verdict::unchanged, 0),
                                  skipped(hostile + "/2", "reason with " + rlo + " override")});
  for (const std::string& md : {render_summary(r), render_markdown(r)}) {
    EXPECT_EQ(md.find(rlo), std::string::npos);
    EXPECT_EQ(md.find("\xE2\x80\x8B"), std::string::npos);  // zero-width space
    EXPECT_EQ(md.find("\xC2\x85"), std::string::npos);      // C1 next-line
    EXPECT_EQ(outside_code_blocks(md).find("<b>"), std::string::npos);
    EXPECT_NE(md.find("gemm/evil&lt;U+202E&gt;nuf\\|&lt;b&gt;x&lt;/b&gt;&lt;U+000A&gt;\\| 1 \\| unchanged \\| forged "
                      "&lt;U+200B&gt;&lt;U+0085&gt;\xEF\xBF\xBD"),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("reason with &lt;U+202E&gt; override"), std::string::npos);
    const auto broken = broken_rows(md);
    EXPECT_TRUE(broken.empty()) << broken.front();
  }
  ReportOptions verbose;
  verbose.verbose = true;
  const std::string t = render_terminal(r, false, verbose);
  EXPECT_EQ(t.find(rlo), std::string::npos);
  EXPECT_NE(t.find("gemm/evil\\u{202e}nuf|<b>x</b>\\x0a| 1 | unchanged | forged \\u{200b}\\u{0085}\\xff"),
            std::string::npos)
      << t;
  EXPECT_EQ(escape_markdown("bidi \xE2\x81\xA6isolate\xE2\x81\xA9"), "bidi &lt;U+2066&gt;isolate&lt;U+2069&gt;");
  EXPECT_EQ(printable_name("caf\xC3\xA9", 200), "caf\xC3\xA9");  // ordinary UTF-8 is kept
  EXPECT_EQ(printable_name("abcdef", 3), "abc...");
}

// The terminal follows the summary: the verdict, what regressed, what was not judged, one line per suite; -v adds
// every benchmark's row.
TEST(Terminal, FollowsTheSummary) {
  ComparisonReport r = report_of({judged("gemm/a", Verdict::regression, 0.12), judged("gemm/b", Verdict::unchanged, 0),
                                  judged("copy/h2d", Verdict::unchanged, 0), skipped("copy/d2h", "no usable GPU")});
  r.notes = {"measured: 3 process run(s)"};
  const std::string t = render_terminal(r, false);
  EXPECT_EQ(t.rfind("FAIL: 1 regression", 0), 0u) << t;
  const auto at = [&](const std::string& s) { return t.find(s); };
  ASSERT_NE(at("regressions:\n  gemm/a time 12.0% slower (was 1.00 ms, now 1.12 ms); interval 11.0% to 13.0% slower; "
               "smallest detectable 6.0% slower\n"),
            std::string::npos)
      << t;
  ASSERT_NE(at("not judged:\n  1 skipped (copy/d2h): no usable GPU\n"), std::string::npos) << t;
  ASSERT_NE(
      at("suites:\n  gemm: 2 benchmarks: 1 regression, 1 unchanged\n  copy: 2 benchmarks: 1 skipped, 1 unchanged\n"),
      std::string::npos)
      << t;
  EXPECT_LT(at("regressions:"), at("not judged:"));
  EXPECT_LT(at("not judged:"), at("suites:"));
  EXPECT_EQ(at("gemm/b"), std::string::npos) << t;  // unchanged rows only with -v
  EXPECT_EQ(at("measured:"), std::string::npos) << t;
  ReportOptions o;
  o.verbose = true;
  const std::string v = render_terminal(r, false, o);
  EXPECT_NE(v.find("gemm/b"), std::string::npos) << v;
  EXPECT_NE(v.find("run note: measured: 3 process run(s)"), std::string::npos) << v;
}

// Judged against the suite's common drift, a change can differ from its medians' own, in direction too: the line
// says the change as measured beside the one judged, so that "12.0% faster (was 1.00 ms, now 1.00 ms)" reads true.
TEST(Words, AChangeJudgedAgainstTheSuitesDriftSaysTheMeasuredOneToo) {
  BenchmarkComparison b = judged("lora/x", Verdict::improvement, -0.12);
  MetricComparison& m = b.metrics.front();
  m.current_median = m.baseline_median * 1.002;
  m.raw_change = 0.002;
  m.common_shift = 0.139;
  const std::string line =
      "lora/x time 12.0% faster (was 1.00 ms, now 1.00 ms: 0.2% slower as measured; the suite's "
      "common drift taken out); interval";
  std::string t = render_terminal(report_of({b}), false);
  EXPECT_NE(t.find(line), std::string::npos) << t;
  b.metrics.front().common_shift = 0;  // no drift removed: the medians' own change is the one judged
  t = render_terminal(report_of({b}), false);
  EXPECT_NE(t.find("lora/x time 12.0% faster (was 1.00 ms, now 1.00 ms); interval"), std::string::npos) << t;
}

// An improvement is named, not only counted: the largest first, last in the summary (after the notes on trusting
// the verdict) and in the terminal likewise, each list cut at its count with where the rest is.
TEST(Summary, ImprovementsAreNamedLargestFirst) {
  std::vector<BenchmarkComparison> rows = {
      judged("gemm/a", Verdict::regression, 0.12), judged("gemm/small", Verdict::improvement, -0.08),
      judged("gemm/large", Verdict::improvement, -0.30), judged("gemm/c", Verdict::noisy, 0.03)};
  for (int i = 0; i < 12; ++i) rows.push_back(judged(fmt::format("many/m{:02}", i), Verdict::improvement, -0.06));
  ComparisonReport r = report_of(std::move(rows));
  ReportOptions o;
  o.full_report_link = "perf-report.md";
  const std::string md = render_summary(r, o);
  const auto at = [&](const std::string& s) { return md.find(s); };
  ASSERT_NE(at("### Improvements\n\n- <code>gemm/large</code>: time 30.0% faster (was 1.00 ms, now 700 us); 95% "
               "interval 29.0% to 31.0% faster\n- <code>gemm/small</code>: time 8.0% faster"),
            std::string::npos)
      << md;
  EXPECT_LT(at("### Per suite"), at("### Improvements"));
  EXPECT_NE(at("4 more improved benchmarks are listed in the [full report](perf-report.md)."), std::string::npos) << md;
  EXPECT_EQ(at("smallest detectable 6.0% slower\n- <code>gemm/large"), std::string::npos) << md;
  const std::string t = render_terminal(r, false);
  ASSERT_NE(t.find("improvements:\n  gemm/large time 30.0% faster (was 1.00 ms, now 700 us); interval 29.0% to 31.0% "
                   "faster\n  gemm/small time 8.0% faster"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("  ... 9 more in the Markdown report\n"), std::string::npos) << t;
  EXPECT_LT(t.find("not judged:"), t.find("improvements:"));
  EXPECT_LT(t.find("suites:"), t.find("improvements:"));
  // No improvement, no section.
  const std::string none = render_summary(report_of({judged("gemm/a", Verdict::regression, 0.12)}), o);
  EXPECT_EQ(none.find("Improvements"), std::string::npos) << none;
}

// A run with no benchmark at all (a binary that registers none, a filter that matches nothing) has no row to point
// -v at: the terminal shows the run's notes, which say why, without -v.
TEST(Terminal, ARunWithNoBenchmarkShowsItsNotes) {
  ComparisonReport r = report_of({});
  r.exit_code = 77;
  r.notes = {"measured: 0 process run(s)", "empty (current): registers no benchmark"};
  const std::string t = render_terminal(r, false);
  EXPECT_EQ(t.rfind("SKIPPED: nothing ran", 0), 0u) << t;
  EXPECT_NE(t.find("\nrun note: empty (current): registers no benchmark\n"), std::string::npos) << t;
  EXPECT_EQ(t.find("(every benchmark: -v"), std::string::npos) << t;
}

// A failed benchmark is listed with the regressions, under a heading that says so: a bench that stopped with an
// error has not been measured slower.
TEST(Summary, FailuresAreNotCalledRegressions) {
  BenchmarkComparison failed;
  failed.name = failed.raw_name = "BM_NeedsDevice";
  failed.suite = "BM_NeedsDevice";
  failed.verdict = Verdict::failed;
  failed.message = "no device";
  const ComparisonReport only_failed = report_of({failed, judged("gemm/b", Verdict::unchanged, 0)});
  EXPECT_NE(render_terminal(only_failed, false).find("failed:\n  BM_NeedsDevice"), std::string::npos)
      << render_terminal(only_failed, false);
  EXPECT_EQ(render_terminal(only_failed, false).find("regressions:"), std::string::npos);
  EXPECT_NE(render_summary(only_failed, ReportOptions{}).find("### Failed\n"), std::string::npos);
  const ComparisonReport both = report_of({failed, judged("gemm/a", Verdict::regression, 0.12)});
  EXPECT_NE(render_terminal(both, false).find("failed or regressed:\n"), std::string::npos);
  EXPECT_NE(render_summary(both, ReportOptions{}).find("### Failed or regressed\n"), std::string::npos);
}

namespace {
// The terminal report of `after` against `before`, read as two builds of one session (perfgate ab's sides) and as a
// run against a stored baseline.
struct ReadBothWays {
  std::string two_builds, stored;
};
ReadBothWays read_both_ways(const ResultSet& before, const ResultSet& after) {
  CompareOptions o = within_run_options();
  o.rule.paired_runs = true;
  o.sides = SideNames{"before", "after", true};
  ReadBothWays out;
  out.two_builds = render_terminal(compare(before, after, o), false);
  o.rule.paired_runs = false;
  o.sides = SideNames{};
  out.stored = render_terminal(compare(before, after, o), false);
  return out;
}
}  // namespace

// Between two builds of one session (ab, the reference gate) a benchmark on one side only is a difference of the
// builds: said so, with no advice to record or update a baseline that does not exist.
TEST(Summary, ABenchmarkOfOneBuildOnlyIsNotABaselineToUpdate) {
  const ResultSet before = set_of({bench("s/kept", noisy(1000, 0.01, 8, 1)), bench("s/gone", noisy(1000, 0.01, 8, 2))});
  const ResultSet after = set_of({bench("s/kept", noisy(1000, 0.01, 8, 3)), bench("s/added", noisy(1000, 0.01, 8, 4))});
  const auto [two_builds, stored] = read_both_ways(before, after);
  EXPECT_NE(two_builds.find("1 missing (s/gone): only the before build has it\n"), std::string::npos) << two_builds;
  EXPECT_NE(two_builds.find("1 new (s/added): only the after build has it\n"), std::string::npos) << two_builds;
  EXPECT_EQ(two_builds.find("baseline update"), std::string::npos) << two_builds;
  // against a stored baseline, the advice stays
  EXPECT_NE(stored.find("1 new (s/added): not in the baseline; perfgate baseline update --suite s --from"),
            std::string::npos)
      << stored;
  EXPECT_NE(stored.find("renamed or removed? update the baseline"), std::string::npos) << stored;
}

// Where the report knows the runs that store its current side (perfgate run's run file, compare's files), the advice
// for a benchmark with no baseline names them in place of RUN.json, quoted where the shell needs it.
TEST(Summary, TheNewBenchmarksAdviceNamesTheRunsThatStoreIt) {
  const ResultSet before = set_of({bench("s/kept", noisy(1000, 0.01, 8, 1))});
  const ResultSet after = set_of({bench("s/kept", noisy(1000, 0.01, 8, 3)), bench("s/added", noisy(1000, 0.01, 8, 4))});
  ComparisonReport report = compare(before, after, CompareOptions{});
  EXPECT_NE(render_terminal(report, false).find("perfgate baseline update --suite s --from RUN.json records"),
            std::string::npos);
  report.current_runs["s"] = "build/reports/runs/s.current.json";
  EXPECT_NE(render_terminal(report, false)
                .find("perfgate baseline update --suite s --from build/reports/runs/s.current.json records"),
            std::string::npos)
      << render_terminal(report, false);
  report.current_runs["s"] = "runs/after-*.json";
  EXPECT_NE(render_terminal(report, false).find("--suite s --from 'runs/after-*.json' records"), std::string::npos)
      << render_terminal(report, false);
}

// A benchmark the current run no longer has: where the report knows the runs, the advice is the command that records
// the baseline again from them; where it does not, it says what to do without a command to copy.
TEST(Summary, TheMissingBenchmarksAdviceNamesTheRunsThatStoreTheBaselineAgain) {
  const ResultSet before = set_of({bench("s/kept", noisy(1000, 0.01, 8, 1)), bench("s/gone", noisy(1000, 0.01, 8, 2))});
  const ResultSet after = set_of({bench("s/kept", noisy(1000, 0.01, 8, 3))});
  ComparisonReport report = compare(before, after, CompareOptions{});
  EXPECT_NE(render_terminal(report, false)
                .find("1 missing (s/gone): in the baseline, not in the current run; renamed "
                      "or removed? update the baseline\n"),
            std::string::npos)
      << render_terminal(report, false);
  report.current_runs["s"] = "build/reports/runs/s.current.json";
  EXPECT_NE(render_terminal(report, false)
                .find("renamed or removed? perfgate baseline update --suite s --from build/reports/runs/s.current.json "
                      "records the baseline again from this run\n"),
            std::string::npos)
      << render_terminal(report, false);
}

// A noisy benchmark's advice fits the command: two interleaved builds need more rounds, a stored comparison more
// process runs per side; a suite the shell would mangle is quoted in the baseline command.
TEST(Summary, TheNoisyAdviceFitsTheCommandAndTheSuiteIsQuotedWhereNeeded) {
  const ResultSet before = set_of({bench("s/shaky", noisy(1000, 0.04, 8, 2)), bench("s/x", noisy(1000, 0.01, 8, 2))});
  const ResultSet after = set_of({bench("s/shaky", noisy(1040, 0.04, 8, 4)), bench("q<1>", noisy(1000, 0.01, 8, 4))});
  const auto [two_builds, stored] = read_both_ways(before, after);
  EXPECT_NE(two_builds.find("too noisy to judge (s/shaky): the interval of the change reaches beyond the threshold on "
                            "both sides; more rounds decide (--rounds)\n"),
            std::string::npos)
      << two_builds;
  EXPECT_NE(stored.find("more process runs per side decide (--rounds, or more files to compare)"), std::string::npos)
      << stored;
  EXPECT_NE(stored.find("perfgate baseline update --suite 'q<1>' --from"), std::string::npos) << stored;
}

// Each too-noisy benchmark is listed under its own cause: too few samples a side and an interval that reaches past
// the threshold are remedied by more process runs; a spread within runs above the limit is not.
TEST(Summary, TooNoisyBenchmarksAreListedByTheirCause) {
  const ResultSet before = set_of({bench("s/few", noisy(1000, 0.01, 3, 1)), bench("s/wide", noisy(1000, 0.04, 8, 2)),
                                   bench("s/shaky", noisy(1000, 0.30, 8, 5))});
  const ResultSet after = set_of({bench("s/few", noisy(1000, 0.01, 3, 3)), bench("s/wide", noisy(1040, 0.04, 8, 4)),
                                  bench("s/shaky", noisy(1000, 0.30, 8, 6))});
  const std::string text = render_terminal(compare(before, after, within_run_options()), false);
  EXPECT_NE(text.find("1 too noisy to judge (s/shaky): the spread within a process run is above the --max-dispersion "
                      "limit, so only a change beyond the threshold plus that spread is believed; quiet the machine"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1 too noisy to judge (s/few): fewer samples a side than the 4 the rule needs; more process runs "
                      "per side decide"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1 too noisy to judge (s/wide): the interval of the change reaches beyond the threshold on both "
                      "sides; more process runs per side decide"),
            std::string::npos)
      << text;
  // Processes that already ran pinned are not told to pin.
  ComparisonReport pinned = compare(before, after, within_run_options());
  pinned.current.pinned_cpus = "0";
  const std::string pinned_text = render_terminal(pinned, false);
  EXPECT_NE(pinned_text.find("believed; the bench processes already ran pinned (CPUs 0): quiet what else runs on "
                             "those CPUs"),
            std::string::npos)
      << pinned_text;
  EXPECT_EQ(pinned_text.find("(--pin-cpus)"), std::string::npos) << pinned_text;
}

TEST(Summary, ABenchmarkOfMoreThreadsThanItsPinnedCpusIsNoted) {
  const ResultSet before =
      set_of({bench("s/mt/threads:4", noisy(1000, 0.01, 8, 1)), bench("s/mt/threads:2", noisy(1000, 0.01, 8, 2)),
              bench("s/st", noisy(1000, 0.01, 8, 3))});
  const ResultSet after =
      set_of({bench("s/mt/threads:4", noisy(1000, 0.01, 8, 4)), bench("s/mt/threads:2", noisy(1000, 0.01, 8, 5)),
              bench("s/st", noisy(1000, 0.01, 8, 6))});
  ComparisonReport r = compare(before, after, within_run_options());
  EXPECT_EQ(render_terminal(r, false).find("pinned CPU"), std::string::npos);  // not pinned: nothing to say
  r.current.pinned_cpus = "0-1";
  const std::string text = render_terminal(r, false);
  EXPECT_NE(text.find("note: s/mt/threads:4: 4 threads on 2 pinned CPUs (CPUs 0-1): the threads take turns, so the "
                      "time measures the scheduler as much as the code. pin at least 4 CPUs for this benchmark"),
            std::string::npos)
      << text;
  r.current.pinned_cpus = "0; 1";  // one CPU a lane
  const std::string lanes = render_terminal(r, false);
  EXPECT_NE(lanes.find("up to 4 threads on 1 pinned CPU (lanes 0; 1)"), std::string::npos) << lanes;
  EXPECT_NE(lanes.find("s/mt/threads:2"), std::string::npos) << lanes;
}
