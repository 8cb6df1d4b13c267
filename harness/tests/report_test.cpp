// Reports: golden Markdown/JSON files, escaping, summary lines that never read as a pass on failure,
// and the `perfgate compare` / `perfgate baseline update` CLI end to end on small generated files.
//
// Regenerate the golden files after an intended change:
//   PERFGATE_UPDATE_GOLDEN=1 build/<dir>/harness/tests/perfgate_harness_tests --gtest_filter='Golden*'
// and review the diff of harness/tests/data/golden/.
#include "perfgate/report.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "perfgate/baseline_store.hpp"
#include "perfgate/compare.hpp"
#include "perfgate/host_identity.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/stats.hpp"
#include "test_support.hpp"

using namespace perfgate;
using perfgate::test_support::bench;
using perfgate::test_support::gbench_context;
using perfgate::test_support::gbench_repetition;
using perfgate::test_support::metric;
using perfgate::test_support::noisy;
using perfgate::test_support::read_text;
using perfgate::test_support::result_set;
using perfgate::test_support::shell_output;
using perfgate::test_support::ShellResult;
using perfgate::test_support::TempDir;
using perfgate::test_support::within_run_options;
namespace fs = std::filesystem;

namespace {

ResultSet set_of(std::vector<BenchmarkResult> benches, const std::string& commit, const std::string& date) {
  RunContext c;
  c.source_file = "run-" + commit + ".json";
  c.fields = {{"perfgate.git_commit", commit},
              {"date", date},
              {"host_name", "ci-runner-1"},
              {"perfgate.machine_class", "cpu-xeon-amx-2c"},
              {"perfgate.suite", "lora_backward"},
              {"perfgate.nvtx_ranges", "backward_only, forward_only"},
              {"executable", "bin/bench_lora_backward"}};
  return result_set(std::move(c), std::move(benches));
}

// A fixed comparison exercising every verdict, phases, rates, % of ceiling and hostile names.
ComparisonReport golden_report() {
  std::vector<BenchmarkResult> base, cur;
  auto pair = [&](BenchmarkResult b, BenchmarkResult c) {
    base.push_back(std::move(b));
    cur.push_back(std::move(c));
  };
  {
    BenchmarkResult b = bench("lora_backward/backward/loop/cfg:ci", noisy(340e6, 0.01, 12, 1));
    BenchmarkResult c = bench("lora_backward/backward/loop/cfg:ci", noisy(395e6, 0.01, 12, 2));
    b.counters = {metric("FLOP/s", MetricKind::rate, noisy(6.1e11, 0.01, 12, 3)),
                  metric("pct.amx_peak", MetricKind::info, noisy(32, 0.01, 12, 4)),
                  metric("phase.D1", MetricKind::phase, noisy(5.7, 0.01, 12, 5)),
                  metric("phase.D4", MetricKind::phase, noisy(72.4, 0.01, 12, 6))};
    c.counters = {metric("FLOP/s", MetricKind::rate, noisy(5.3e11, 0.01, 12, 7)),
                  metric("pct.amx_peak", MetricKind::info, noisy(27.5, 0.01, 12, 8)),
                  metric("phase.D1", MetricKind::phase, noisy(5.7, 0.01, 12, 9)),
                  metric("phase.D4", MetricKind::phase, noisy(126, 0.01, 12, 10))};
    pair(std::move(b), std::move(c));
  }
  pair(bench("lora_backward/forward/onednn/cfg:ci", noisy(130e6, 0.01, 12, 11)),
       bench("lora_backward/forward/onednn/cfg:ci", noisy(96e6, 0.01, 12, 12)));
  pair(bench("lora_backward/forward/loop/cfg:ci", noisy(2.2e6, 0.01, 12, 13)),
       bench("lora_backward/forward/loop/cfg:ci", noisy(2.21e6, 0.01, 12, 14)));
  pair(bench("lora_backward/silu/noisy", noisy(50e3, 0.2, 12, 15)),
       bench("lora_backward/silu/noisy", noisy(60e3, 0.2, 12, 16)));
  // Hostile name: pipe, backticks, HTML, ampersand, newline.
  const std::string hostile = "lora_backward/odd|name/`tick`/<b>&amp;\nline2";
  pair(bench(hostile, noisy(1e3, 0.01, 12, 17)), bench(hostile, noisy(1e3, 0.01, 12, 18)));
  base.push_back(bench("lora_backward/removed", noisy(1e3, 0.01, 12, 19)));
  BenchmarkResult failed = bench("lora_backward/backward/onednn/cfg:ci", {});
  failed.error = "relative L2 error 3.2e-01 > 1e-02 | check `grad_A`";
  base.push_back(bench("lora_backward/backward/onednn/cfg:ci", noisy(100e6, 0.01, 12, 20)));
  cur.push_back(failed);
  BenchmarkResult skipped = bench("lora_backward/backward/amx/cfg:ci", {});
  skipped.skip_reason = "no AMX on this CPU";
  cur.push_back(skipped);
  cur.push_back(bench("lora_backward/brand_new", noisy(1e3, 0.01, 12, 21)));
  CompareOptions o;
  o.noise.run_noise_df = 0;     // within-run analysis: the golden file shows the rule's plain form
  o.noise.common_mode = false;  // (the fixture changes most of its benchmarks on purpose)
  auto r = compare(set_of(base, "abc1234", "2026-11-21T10:00:00+00:00"),
                   set_of(cur, "def5678", "2026-11-22T10:00:00+00:00"), o);
  r.baseline.machine_class = "cpu-xeon-amx-2c";
  r.current.machine_class = "cpu-xeon-amx-2c";
  return r;
}

void check_golden(const std::string& name, const std::string& actual) {
  const fs::path path = fs::path(PERFGATE_TEST_DATA_DIR) / "golden" / name;
  const char* update = std::getenv("PERFGATE_UPDATE_GOLDEN");
  if (update && *update && std::string(update) != "0") {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << actual;
    GTEST_SKIP() << "regenerated " << path;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " missing; run with PERFGATE_UPDATE_GOLDEN=1";
  const std::string expected = read_text(path);
  if (path.extension() == ".json") {
    // The JSON report is compared as data, keys in order (ordered_json): its whitespace and number
    // spelling are the writer's business, its keys and values are the schema's.
    EXPECT_EQ(nlohmann::ordered_json::parse(actual), nlohmann::ordered_json::parse(expected))
        << "report differs from " << path << " (regenerate with PERFGATE_UPDATE_GOLDEN=1 if the change is intended)";
    return;
  }
  EXPECT_EQ(actual, expected) << "report differs from " << path
                              << " (regenerate with PERFGATE_UPDATE_GOLDEN=1 if the change is intended)";
}

ReportOptions golden_options() {
  ReportOptions o;
  o.title = "lora_backward";
  o.command = "perfgate compare baselines/cpu-xeon-amx-2c/lora_backward.json current.json";
  return o;
}

}  // namespace

TEST(Golden, Markdown) { check_golden("report.md", render_markdown(golden_report(), golden_options())); }
TEST(Golden, Summary) { check_golden("summary.md", render_summary(golden_report(), golden_options())); }
TEST(Golden, Json) { check_golden("report.json", render_json(golden_report(), golden_options())); }
TEST(Golden, TerminalWithoutColour) {
  const std::string t = render_terminal(golden_report(), false, golden_options());
  EXPECT_EQ(t.find('\033'), std::string::npos);
  EXPECT_NE(render_terminal(golden_report(), true, golden_options()).find("\033[1;31m"), std::string::npos);
  check_golden("report.txt", t);
}

TEST(Report, GoldenReportHasEveryVerdictAndFailsFirst) {
  const auto r = golden_report();
  EXPECT_EQ(r.counts.failed, 1);
  EXPECT_EQ(r.counts.regression, 1);
  EXPECT_EQ(r.counts.improvement, 1);
  EXPECT_EQ(r.counts.noisy, 1);
  EXPECT_EQ(r.counts.missing, 1);
  EXPECT_EQ(r.counts.new_benchmark, 1);
  EXPECT_EQ(r.counts.skipped, 1);
  EXPECT_EQ(r.counts.unchanged, 2);
  EXPECT_EQ(r.exit_code, 3);
  const std::string md = render_markdown(r, golden_options());
  // The very first line is the outcome.
  EXPECT_EQ(md.rfind("## perfgate lora\\_backward: FAIL: 1 benchmark failed, 1 regression", 0), 0u)
      << md.substr(0, 200);
  EXPECT_NE(md.find("phase.D4"), std::string::npos);    // the phase that drove the regression
  EXPECT_NE(md.find("amx\\_peak"), std::string::npos);  // % of ceiling column
  EXPECT_NE(md.find("```mermaid\nxychart-beta"), std::string::npos);
  // A CPU benchmark gets CPU profilers (its NVTX ranges through nsys), never ncu.
  EXPECT_NE(md.find("perf stat -e task-clock"), std::string::npos);
  EXPECT_NE(md.find("nsys profile --trace=nvtx,osrt"), std::string::npos);
  EXPECT_EQ(md.find("ncu "), std::string::npos);
  EXPECT_NE(md.find("'--benchmark_filter=^lora_backward/backward/loop/cfg:ci/manual_time$' --benchmark_repetitions=20"),
            std::string::npos);
  EXPECT_NE(md.find("abc1234"), std::string::npos);
  EXPECT_NE(md.find("def5678"), std::string::npos);
  const auto j = nlohmann::json::parse(render_json(r, golden_options()));
  EXPECT_EQ(j["outcome"], "FAIL");
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_EQ(j["benchmarks"][0]["verdict"], "failed");
  EXPECT_EQ(j["benchmarks"][1]["verdict"], "regression");
  EXPECT_EQ(j["benchmarks"][1]["driver"], "phase.D4");
}

// A regressed benchmark's own counters (Google Benchmark user counters) are listed where they moved, the largest
// change first and at most 8 a benchmark, with their direction in words; an unchanged benchmark's are not.
TEST(Report, TheCountersOfAChangedBenchmarkAreListedLargestChangeFirst) {
  ComparisonReport r = golden_report();
  auto counter = [](const std::string& name, double change) {
    MetricComparison m;
    m.name = name;
    m.kind = MetricKind::info;
    m.baseline_median = 100;
    m.current_median = 100 * (1 + change);
    m.change = change;
    return m;
  };
  for (auto& b : r.benchmarks) {
    if (b.verdict == Verdict::regression) {
      for (int i = 0; i <= 10; ++i) b.metrics.push_back(counter(fmt::format("user.c{:02d}", i), 0.01 * i));
      b.metrics.push_back(counter("user.fell", -0.095));
    }
    if (b.verdict == Verdict::unchanged) b.metrics.push_back(counter("user.quiet", 0.5));
  }
  const std::string md = render_markdown(r, golden_options());
  const auto section = md.find("## Counters of the changed benchmarks");
  ASSERT_NE(section, std::string::npos) << md;
  const std::string text = md.substr(section, md.find("</details>", section) - section);
  EXPECT_NE(text.find("| <code>user.c10</code> | 100 | 110 | 10.0% larger | information, not gated |"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("<code>user.fell</code> | 100 | 90.5 | 9.5% smaller"), std::string::npos) << text;
  EXPECT_LT(text.find("user.c10"), text.find("user.fell"));
  EXPECT_LT(text.find("user.fell"), text.find("user.c09"));
  // With the benchmark's FLOP/s and pct.amx_peak (13-15%), user.c06 is the 8th that moved most.
  EXPECT_NE(text.find("user.c06"), std::string::npos) << text;
  EXPECT_EQ(text.find("user.c05"), std::string::npos) << text;
  EXPECT_EQ(text.find("user.c00"), std::string::npos) << text;  // did not move
  EXPECT_EQ(text.find("user.quiet"), std::string::npos) << text;

  // The terminal's -v says the same on one line a benchmark, the 4 that moved most.
  ReportOptions verbose = golden_options();
  verbose.verbose = true;
  const std::string t = render_terminal(r, false, verbose);
  const auto lines = t.find("counters that moved");
  ASSERT_NE(lines, std::string::npos) << t;
  const std::string line = t.substr(t.find('\n', lines) + 1, t.find('\n', t.find('\n', lines) + 1) - lines);
  EXPECT_NE(line.find("user.c10 10.0% larger (100 -> 110)"), std::string::npos) << line;
  EXPECT_LT(line.find("user.c10"), line.find("user.fell 9.5% smaller (100 -> 90.5)")) << line;
  EXPECT_EQ(line.find("user.c07"), std::string::npos) << line;
  EXPECT_EQ(t.find("user.quiet"), std::string::npos) << t;
  EXPECT_EQ(render_terminal(r, false, golden_options()).find("counters that moved"), std::string::npos);
}

// A benchmark registered with its own Repetitions(N) ignores --benchmark_repetitions, so its re-run line says so
// instead of passing a flag that would not take effect.
TEST(Report, AReproduceLineDoesNotPassRepetitionsABenchmarkSetsItself) {
  ComparisonReport r = golden_report();
  BenchmarkComparison* regressed = nullptr;
  for (auto& b : r.benchmarks)
    if (b.verdict == Verdict::regression) regressed = &b;
  ASSERT_NE(regressed, nullptr);
  regressed->raw_name = "BM_Own/repeats:4";
  const std::string md = render_markdown(r, golden_options());
  EXPECT_NE(md.find("# Repetitions(4) in its registration sets the repetitions; --benchmark_repetitions does not\n"
                    "'bin/bench_lora_backward' '--benchmark_filter=^BM_Own/repeats:4$'\n"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("'--benchmark_filter=^BM_Own/repeats:4$' --benchmark_repetitions=20"), std::string::npos);
}

// A side of many result files (a relative gate's raw runs) is counted in the side table, not listed: the list would
// take more of the report than its results. A few files are listed in full; the JSON report lists every one.
TEST(Report, ManyResultFilesAreCountedNotListed) {
  ComparisonReport r = golden_report();
  r.baseline.files.clear();
  for (int i = 1; i <= 20; ++i) r.baseline.files.push_back(fmt::format("raw/relative/ref.r{}.json", i));
  r.current.files = {"raw/cur.r1.json", "other/cur.r2.json", "cur.r3.json", "cur.r4.json"};
  const std::string md = render_markdown(r, golden_options());
  EXPECT_NE(md.find("| files | 20 files in raw/relative: ref.r1.json ... ref.r20.json (every path in the JSON report) "
                    "| 4 files: raw/cur.r1.json ... cur.r4.json (every path in the JSON report) |"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("ref.r7.json"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(render_json(r, golden_options()))["baseline"]["files"].size(), 20u);
  r.current.files = {"a.json", "b.json", "c.json"};
  EXPECT_NE(render_markdown(r, golden_options()).find("| a.json, b.json, c.json |"), std::string::npos);
}

// The report written when no comparison could be made: valid JSON whatever bytes the message holds
// (quotes, control characters and invalid UTF-8 come from file names and bench output).
TEST(Report, ErrorJsonIsValidForAnyMessage) {
  const std::string message = "ERROR: \"a\\b.json\": cannot open\n\x01 \xff (exit 2)";
  const auto j = nlohmann::json::parse(render_json_error(message));
  EXPECT_EQ(j["schema"], "perfgate.report/1");
  EXPECT_EQ(j["outcome"], "ERROR");
  EXPECT_EQ(j["exit_code"], 2);
  EXPECT_EQ(j["summary"], "ERROR: \"a\\b.json\": cannot open\n\x01 \xef\xbf\xbd (exit 2)");
  EXPECT_TRUE(j["benchmarks"].empty());
}

TEST(Report, SummaryNeverReadsAsPassWhenSomethingWentWrong) {
  ComparisonReport r;
  r.counts.failed = 1;
  r.counts.unchanged = 10;
  r.exit_code = exit_code_for(r.counts);
  EXPECT_EQ(summary_line(r).rfind("FAIL", 0), 0u);
  r = {};
  r.counts.new_benchmark = 3;
  r.exit_code = exit_code_for(r.counts);
  EXPECT_EQ(summary_line(r).rfind("ERROR", 0), 0u);
  EXPECT_EQ(render_markdown(r).find("PASS"), std::string::npos);
  r = {};
  r.counts.skipped = 3;
  r.exit_code = exit_code_for(r.counts);
  EXPECT_EQ(summary_line(r).rfind("SKIPPED", 0), 0u);
  r = {};
  r.counts.unchanged = 3;
  r.counts.judged = 3;
  r.counts.noisy = 1;
  r.exit_code = exit_code_for(r.counts);
  EXPECT_EQ(summary_line(r).rfind("PASS: no regression (1 too noisy to judge)", 0), 0u);
  // Compared, but nothing judged: never a pass.
  r.counts.judged = 0;
  r.exit_code = exit_code_for(r.counts);
  EXPECT_EQ(r.exit_code, 77);
  EXPECT_EQ(summary_line(r).rfind("NOT JUDGED: none of 4 compared benchmarks", 0), 0u) << summary_line(r);
}

TEST(Escaping, MarkdownCells) {
  EXPECT_EQ(escape_markdown("a|b"), "a\\|b");
  EXPECT_EQ(escape_markdown("`x`"), "\\`x\\`");
  EXPECT_EQ(escape_markdown("<script>&"), "&lt;script&gt;&amp;");
  EXPECT_EQ(escape_markdown("l1\nl2\r\nl3"), "l1<br>l2<br>l3");
  EXPECT_EQ(escape_markdown("a_b*c[d]~#\\"), "a\\_b\\*c\\[d\\]\\~\\#\\\\");
  EXPECT_EQ(escape_markdown(std::string("bell\x07")), "bell");
  // A table row built from a hostile name still has exactly the table's column separators.
  const std::string cell = escape_markdown("x|y|z\n|w");
  std::size_t unescaped_pipes = 0;
  for (std::size_t i = 0; i < cell.size(); ++i)
    if (cell[i] == '|' && (i == 0 || cell[i - 1] != '\\')) ++unescaped_pipes;
  EXPECT_EQ(unescaped_pipes, 0u);
  EXPECT_EQ(cell.find('\n'), std::string::npos);
}

TEST(Escaping, CodeBlocksShellAndRegex) {
  EXPECT_EQ(markdown_code_block("a ``` b", "sh"), "````sh\na ``` b\n````\n");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(regex_escape("a/b:1.5(x)[y]+*?|^$\\"), "a/b:1\\.5\\(x\\)\\[y\\]\\+\\*\\?\\|\\^\\$\\\\");
  const std::string md = render_markdown(golden_report(), golden_options());
  // The hostile benchmark name never appears raw.
  EXPECT_EQ(md.find("odd|name"), std::string::npos);
  EXPECT_EQ(md.find("<b>"), std::string::npos);
  EXPECT_NE(md.find("odd\\|name/\\`tick\\`/&lt;b&gt;&amp;amp;&lt;U+000A&gt;line2"), std::string::npos);
}

TEST(Format, MetricValues) {
  EXPECT_EQ(format_metric_value(MetricKind::latency, "time", 1234.0), "1.23 us");
  EXPECT_EQ(format_metric_value(MetricKind::latency, "time", 341.6e6), "342 ms");
  EXPECT_EQ(format_metric_value(MetricKind::phase, "phase.D4", 72.4), "72.4 ms");
  EXPECT_EQ(format_metric_value(MetricKind::rate, "FLOP/s", 831e12), "831 TFLOP/s");
  EXPECT_EQ(format_metric_value(MetricKind::rate, "bytes_per_second", 55.2e9), "55.2 GB/s");
  EXPECT_EQ(format_metric_value(MetricKind::info, "pct.hbm", 41.25), "41.2%");
}

// The one duration formatter: metric values (ns), wall times and progress ETAs (seconds).
TEST(Format, Durations) {
  using std::chrono::duration;
  EXPECT_EQ(format_duration(duration<double, std::nano>(812.0)), "812 ns");
  EXPECT_EQ(format_duration(duration<double, std::nano>(999.7)), "1.00 us");  // never "1000 ns"
  EXPECT_EQ(format_duration(duration<double, std::nano>(-12.34e6)), "-12.3 ms");
  EXPECT_EQ(format_duration(duration<double>(1.5)), "1.50 s");
  EXPECT_EQ(format_duration(duration<double>(59.4)), "59.4 s");
  EXPECT_EQ(format_duration(duration<double>(59.6)), "1m00s");
  EXPECT_EQ(format_duration(duration<double>(185)), "3m05s");
  EXPECT_EQ(format_duration(duration<double>(3725)), "1h02m");
  EXPECT_EQ(format_duration(duration<double>(-185)), "-3m05s");
  EXPECT_EQ(format_duration(duration<double>(std::nan(""))), "n/a");
}

// ---- CLI end to end --------------------------------------------------------------------------------
namespace {

ShellResult run_cli(const std::string& args) { return shell_output(std::string(PERFGATE_CLI_PATH) + " " + args); }

// A small Google Benchmark JSON file: each benchmark with `reps` repetitions around its center.
void write_gbench(const fs::path& file, const std::vector<std::pair<std::string, double>>& benches, int reps,
                  std::uint64_t seed, double sd = 0.01) {
  nlohmann::json j;
  j["context"] = gbench_context("test");
  j["context"]["perfgate.git_commit"] = "feedbeef";
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& [name, center] : benches) {
    const auto samples = noisy(center, sd, reps, seed++);
    for (int i = 0; i < reps; ++i)
      arr.push_back(gbench_repetition(name + "/manual_time", reps, i, samples[static_cast<std::size_t>(i)]));
  }
  j["benchmarks"] = arr;
  std::ofstream(file) << j.dump(1);
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(PERFGATE_CLI_PATH)) GTEST_SKIP() << "perfgate CLI not built: " << PERFGATE_CLI_PATH;
    dir_ = fs::temp_directory_path() / ("perfgate_stats_cli_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    ::unsetenv("PERFGATE_MACHINE_CLASS");
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  std::string p(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

}  // namespace

// perfgate --version as every other tool answers it, and no subcommand at all is still a usage error.
TEST_F(Cli, VersionFlagAndMissingSubcommand) {
  const auto version = run_cli("--version");
  EXPECT_EQ(version.code, 0) << version.output;
  EXPECT_EQ(version.output.rfind("perfgate ", 0), 0u) << version.output;
  EXPECT_EQ(run_cli("version").output, version.output);
  const auto none = run_cli("");
  EXPECT_EQ(none.code, 2) << none.output;
  EXPECT_NE(none.output.find("A subcommand is required"), std::string::npos) << none.output;
}

// Google Benchmark's flags typed to a runner command: each named with perfgate's option that sets it, or how to
// pass it through; compare, which runs nothing, gets no such hint.
TEST_F(Cli, GoogleBenchmarkFlagsToTheRunnerNamePerfgatesOption) {
  const auto r = run_cli(
      "run --benchmark_repetitions=3 --benchmark_min_time=0.5s --benchmark_min_time=100x "
      "--benchmark_out=x.json --benchmark_counters_tabular=true");
  EXPECT_EQ(r.code, 2) << r.output;
  for (const char* hint : {"--benchmark_repetitions=3 is perfgate's --repetitions 3",
                           "--benchmark_min_time=0.5s is perfgate's --min-time 0.5",
                           "--benchmark_min_time=100x is an iteration count, and perfgate's --min-time is seconds: "
                           "--bench-arg=--benchmark_min_time=100x passes it",
                           "--benchmark_out=x.json is not for perfgate's runner: perfgate writes each process's JSON",
                           "--benchmark_counters_tabular=true is not one of perfgate's options: "
                           "--bench-arg=--benchmark_counters_tabular=true passes it"})
    EXPECT_NE(r.output.find(hint), std::string::npos) << hint << "\n" << r.output;
  const auto spaced = run_cli("ab --benchmark_repetitions 5");
  EXPECT_EQ(spaced.code, 2) << spaced.output;
  EXPECT_NE(spaced.output.find("--benchmark_repetitions is perfgate's --repetitions 5"), std::string::npos)
      << spaced.output;
  const auto compare = run_cli("compare a.json b.json --benchmark_repetitions=3");
  EXPECT_EQ(compare.code, 2) << compare.output;
  EXPECT_EQ(compare.output.find("perfgate's --repetitions"), std::string::npos) << compare.output;
}

// The runner commands' many options read by purpose: --help lists them under headings, each option under its own.
TEST_F(Cli, RunnerHelpGroupsTheOptionsByPurpose) {
  const auto help = run_cli("run --help").output;
  std::size_t last = 0;
  for (const char* heading : {"\nMeasuring:\n", "\nReports:\n", "\nThe rule:\n",
                              "\nExtra rounds for undecided benchmarks:\n", "\nBaselines and learned noise:\n",
                              "\nThe confirm step:\n", "\nThe reference build (--against):\n", "\n--explain:\n"}) {
    const std::size_t at = help.find(heading);
    ASSERT_NE(at, std::string::npos) << heading << help;
    EXPECT_GT(at, last) << heading;
    last = at;
  }
  const auto under = [&](const std::string& option, const std::string& heading) {
    const std::size_t h = help.find("\n" + heading + ":\n"), o = help.find("\n  " + option);
    const std::size_t next = help.find(":\n", h + heading.size() + 3);
    return h != std::string::npos && o > h && (next == std::string::npos || o < help.rfind("\n", next));
  };
  EXPECT_TRUE(under("--rounds", "Measuring")) << help;
  EXPECT_TRUE(under("--summary", "Reports")) << help;
  EXPECT_TRUE(under("--threshold", "The rule")) << help;
  EXPECT_TRUE(under("--update-baseline", "Baselines and learned noise")) << help;
  EXPECT_TRUE(under("--against-rounds", "The reference build (--against)")) << help;
  const auto compare = run_cli("compare --help").output;
  EXPECT_NE(compare.find("\nThe rule:\n"), std::string::npos) << compare;
}

TEST_F(Cli, CompareExitCodesAndReports) {
  write_gbench(p("base.json"), {{"s/a", 1000}, {"s/b", 2000}}, 12, 1);
  write_gbench(p("same.json"), {{"s/a", 1000}, {"s/b", 2000}}, 12, 100);
  write_gbench(p("slow.json"), {{"s/a", 1000}, {"s/b", 4000}}, 12, 200);
  write_gbench(p("other.json"), {{"s/x", 1000}}, 12, 300);
  auto r = run_cli("compare " + p("base.json") + " " + p("same.json") + " --run-noise-df 0 -q");
  EXPECT_EQ(r.code, 0) << r.output;
  r = run_cli("compare " + p("base.json") + " " + p("slow.json") + " --markdown " + p("r.md") + " --json " +
              p("r.json"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("regression"), std::string::npos);
  EXPECT_EQ(read_text(p("r.md")).rfind("## perfgate compare: FAIL: 1 regression", 0), 0u);
  EXPECT_EQ(nlohmann::json::parse(read_text(p("r.json")))["exit_code"], 1);
  // No name in common: nothing could be compared.
  r = run_cli("compare " + p("base.json") + " " + p("other.json") + " -q");
  EXPECT_EQ(r.code, 2) << r.output;
  // Bad input: a missing file is one line, exit 2, and the reports say ERROR (never a stale pass).
  r = run_cli("compare " + p("base.json") + " " + p("nope.json") + " --markdown " + p("r.md") + " --json " +
              p("r.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("nope.json"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_EQ(read_text(p("r.md")).rfind("## perfgate compare: ERROR", 0), 0u);
  EXPECT_EQ(nlohmann::json::parse(read_text(p("r.json")))["outcome"], "ERROR");
  // Usage errors.
  EXPECT_EQ(run_cli("compare " + p("base.json")).code, 2);
  EXPECT_EQ(run_cli("compare " + p("base.json") + " " + p("same.json") + " --threshold banana").code, 2);
  // Several files per side with comma lists and repeated flags.
  r = run_cli("compare " + p("base.json") + "," + p("same.json") + " --current " + p("slow.json") + " -q");
  EXPECT_EQ(r.code, 1) << r.output;
}

// --summary writes the summary beside the full report and links it; -v puts every row in the terminal; a comparison
// that cannot be made leaves an ERROR summary, never a stale one.
TEST_F(Cli, CompareWritesTheSummary) {
  write_gbench(p("base.json"), {{"s/a", 1000}, {"s/b", 2000}}, 12, 1);
  write_gbench(p("slow.json"), {{"s/a", 1000}, {"s/b", 4000}}, 12, 200);
  fs::create_directories(dir_ / "out");
  auto r = run_cli("compare " + p("base.json") + " " + p("slow.json") + " --markdown " + p("out/full.md") +
                   " --summary " + p("out/summary.md") + " --dashboard-link https://dash.example/ --run-noise-df 0");
  EXPECT_EQ(r.code, 1) << r.output;
  const std::string summary = read_text(p("out/summary.md"));
  EXPECT_EQ(summary.rfind("## perfgate compare: FAIL: 1 regression", 0), 0u) << summary;
  EXPECT_NE(summary.find("[Full report](full.md) · [Dashboard](https://dash.example/)"), std::string::npos) << summary;
  EXPECT_NE(summary.find("- <code>s/b</code>: time 99."), std::string::npos)
      << summary;                                                             // 2000 ns -> 4000 ns, noisy samples
  EXPECT_EQ(summary.find("<code>s/a</code>"), std::string::npos) << summary;  // unchanged: only in the full report
  EXPECT_EQ(r.output.rfind("FAIL: 1 regression", 0), 0u) << r.output;         // the terminal: the verdict first
  EXPECT_EQ(r.output.find("s/a"), std::string::npos) << r.output;
  r = run_cli("compare " + p("base.json") + " " + p("slow.json") + " -v --run-noise-df 0");
  EXPECT_NE(r.output.find("s/a"), std::string::npos) << r.output;
  r = run_cli("compare " + p("base.json") + " " + p("nope.json") + " --summary " + p("out/summary.md"));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(read_text(p("out/summary.md")).rfind("## perfgate compare: ERROR", 0), 0u);
}

// The library reads no environment: the CLI turns PERFGATE_MAX_INPUT_BYTES into the loader's size limit.
TEST_F(Cli, MaxInputBytesComesFromTheEnvironment) {
  write_gbench(p("base.json"), {{"s/a", 1000}}, 12, 1);
  const std::string args = "compare " + p("base.json") + " " + p("base.json") + " -q";
  EXPECT_EQ(run_cli(args).code, 77);  // one run per side: compared, not judged
  auto r = shell_output("PERFGATE_MAX_INPUT_BYTES=100 " + std::string(PERFGATE_CLI_PATH) + " " + args);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("above the"), std::string::npos) << r.output;
  r = shell_output("PERFGATE_MAX_INPUT_BYTES=lots " + std::string(PERFGATE_CLI_PATH) + " " + args);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("PERFGATE_MAX_INPUT_BYTES: not a positive byte count: 'lots'"), std::string::npos)
      << r.output;
}

// A report that cannot be written is the environment's problem, said as an error naming the file the user gave
// (exit 2), not as "internal error" naming perfgate's temporary file.
TEST_F(Cli, AReportThatCannotBeWrittenIsAnErrorNamingItsFile) {
  write_gbench(p("base.json"), {{"s/a", 1000}}, 12, 1);
  fs::create_directories(p("ro"));
  std::ofstream(p("ro/plain")) << "a file where a folder should be";
  auto r = run_cli("compare " + p("base.json") + " " + p("base.json") + " -q --markdown " + p("ro/plain/r.md"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("perfgate: error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ro/plain"), std::string::npos) << r.output;
}

TEST_F(Cli, MachineMismatchIsRefusedUnlessAllowed) {
  write_gbench(p("base.json"), {{"s/a", 1000}}, 12, 1);
  write_gbench(p("cur.json"), {{"s/a", 1000}}, 12, 2);
  auto j = nlohmann::json::parse(read_text(p("cur.json")));
  j["context"]["perfgate.cpu_model"] = "AMD EPYC 9654";
  j["context"]["perfgate.amx"] = "no";
  std::ofstream(p("cur.json")) << j.dump();
  auto r = run_cli("compare " + p("base.json") + " " + p("cur.json") + " -q");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("machine class"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("; not compared (--allow-machine-mismatch compares anyway)"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("--allow-machine-mismatch"), r.output.rfind("--allow-machine-mismatch")) << r.output;
  r = run_cli("compare " + p("base.json") + " " + p("cur.json") + " -q --allow-machine-mismatch");
  EXPECT_EQ(r.code, 77) << r.output;  // compared (one run per side: not judged), not refused
}

// compare --paired re-judges two builds of one session (perfgate ab's run files): a benchmark of one side only is a
// difference of the builds, not a baseline to update.
TEST_F(Cli, PairedFilesAreTwoBuilds) {
  write_gbench(p("before.json"), {{"s/a", 1000}, {"s/gone", 1000}}, 12, 1);
  write_gbench(p("after.json"), {{"s/a", 1000}, {"s/added", 1000}}, 12, 2);
  auto r = run_cli("compare --paired " + p("before.json") + " " + p("after.json"));
  EXPECT_NE(r.output.find("1 missing (s/gone): only the baseline build has it\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 new (s/added): only the current build has it\n"), std::string::npos) << r.output;
  r = run_cli("compare " + p("before.json") + " " + p("after.json"));
  EXPECT_NE(r.output.find("1 missing (s/gone): in the baseline, not in the current run"), std::string::npos)
      << r.output;
}

TEST_F(Cli, ThresholdsJsonNextToTheBaseline) {
  fs::create_directories(dir_ / "cls");
  write_gbench(p("cls/s.json"), {{"s/a", 1000}}, 12, 1, 0.002);
  write_gbench(p("cur.json"), {{"s/a", 1030}}, 12, 2, 0.002);
  // +3% with 0.2% noise: unchanged at the default 5%, a regression at 1% from thresholds.json.
  EXPECT_EQ(run_cli("compare " + p("cls/s.json") + " " + p("cur.json") + " -q --run-noise-df 0").code, 0);
  std::ofstream(p("cls/thresholds.json")) << R"({"suites": {"s": 0.01}, "run_noise_df": 0})";
  EXPECT_EQ(run_cli("compare " + p("cls/s.json") + " " + p("cur.json") + " -q").code, 1);
  EXPECT_EQ(run_cli("compare " + p("cls/s.json") + " " + p("cur.json") + " -q --threshold 0.05").code, 0);
  std::ofstream(p("cls/thresholds.json")) << R"({"suites": {"s": "1%"}, "run_noise_df": 0})";  // a percentage
  EXPECT_EQ(run_cli("compare " + p("cls/s.json") + " " + p("cur.json") + " -q").code, 1);
  std::ofstream(p("cls/thresholds.json")) << R"({"suites": {"s": "one percent"}})";
  const auto r = run_cli("compare " + p("cls/s.json") + " " + p("cur.json") + " -q");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("thresholds.json"), std::string::npos) << r.output;
  std::ofstream(p("cls/thresholds.json")) << R"({"default": 5})";  // meant as 5%, read as 500%: refused
  const auto bare = run_cli("compare " + p("cls/s.json") + " " + p("cur.json") + " -q");
  EXPECT_EQ(bare.code, 2);
  EXPECT_NE(bare.output.find("field 'default': 5 would be 500%"), std::string::npos) << bare.output;
}

// --threshold 1% is 0.01; a bare --threshold 5 (meant as 5%, read as 500%) is refused with the two ways to write it.
TEST_F(Cli, RelativeFlagsTakeAPercentAndRefuseABareNumberOfOneOrMore) {
  write_gbench(p("base.json"), {{"s/a", 1000}}, 12, 1, 0.002);
  write_gbench(p("cur.json"), {{"s/a", 1030}}, 12, 2, 0.002);
  const std::string args = "compare " + p("base.json") + " " + p("cur.json") + " -q --no-config --run-noise-df 0";
  EXPECT_EQ(run_cli(args + " --threshold 1%").code, 1);  // +3% against 1%
  EXPECT_EQ(run_cli(args + " --threshold 5%").code, 0);
  EXPECT_EQ(run_cli(args + " --threshold 0.01").code, 1);
  const auto bare = run_cli(args + " --threshold 5");
  EXPECT_EQ(bare.code, 2);
  EXPECT_NE(bare.output.find("--threshold: 5 would be 500%: the value is relative (0.05 = 5%); write 0.05 or 5%"),
            std::string::npos)
      << bare.output;
  EXPECT_EQ(run_cli(args + " --threshold 500%").code, 0);  // meant: said so
  const auto noise = run_cli(args + " --run-noise 2");
  EXPECT_EQ(noise.code, 2);
  EXPECT_NE(noise.output.find("--run-noise: 2 would be 200%"), std::string::npos) << noise.output;
  const auto word = run_cli(args + " --session-noise 2pct");
  EXPECT_EQ(word.code, 2);
  EXPECT_NE(word.output.find("'2pct' is not a number"), std::string::npos) << word.output;
}

// Files named as CI definitions and shells name them: a quoted pattern is the files it matches; a pattern that
// matches none, a folder, and a pattern the shell expanded into many arguments are errors that say what to write.
TEST_F(Cli, ComparePatternsFoldersAndExpandedPatterns) {
  fs::create_directories(dir_ / "before");
  for (int i = 1; i <= 3; ++i) {
    write_gbench(p("before/r" + std::to_string(i) + ".json"), {{"s/a", 1000}}, 6, 10 + i, 0.002);
    write_gbench(p("after" + std::to_string(i) + ".json"), {{"s/a", 1300}}, 6, 20 + i, 0.002);
  }
  const auto quoted = run_cli("compare '" + p("before/r*.json") + "' '" + p("after?.json") + "' -q --no-config");
  EXPECT_EQ(quoted.code, 1) << quoted.output;  // +30% over three process runs a side
  const auto none = run_cli("compare '" + p("before/x*.json") + "' " + p("after1.json") + " -q");
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.output.find("before/x*.json: no file matches this pattern"), std::string::npos) << none.output;
  const auto folder = run_cli("compare " + p("before") + " " + p("after1.json") + " -q");
  EXPECT_EQ(folder.code, 2);
  EXPECT_NE(folder.output.find("is a directory, not a results file: name its files (3 .json there: r1.json, ...)"),
            std::string::npos)
      << folder.output;
  const auto expanded = run_cli("compare " + p("before/r*.json") + " " + p("after*.json") + " -q");
  EXPECT_EQ(expanded.code, 2);
  EXPECT_NE(expanded.output.find("not 6 arguments (a pattern the shell expanded? quote it"), std::string::npos)
      << expanded.output;
}

TEST_F(Cli, BaselineUpdateWritesAComparableBaseline) {
  write_gbench(p("run1.json"), {{"s/a", 1000}, {"s/b", 2000}}, 8, 1);
  write_gbench(p("run2.json"), {{"s/a", 1010}, {"s/b", 1990}}, 8, 50);
  auto r = run_cli("baseline update --suite s --from " + p("run1.json") + " " + p("run2.json") + " --baseline-dir " +
                   p("baselines") + " --machine-class test-class");
  ASSERT_EQ(r.code, 0) << r.output;
  const fs::path stored = dir_ / "baselines" / "test-class" / "s.json";
  ASSERT_TRUE(fs::exists(stored)) << r.output;
  // The stored baseline compares against a new run (two process runs: between-run analysis).
  write_gbench(p("cur.json"), {{"s/a", 1000}, {"s/b", 2000}}, 8, 99);
  r = run_cli("compare " + stored.string() + " " + p("cur.json") + " --allow-machine-mismatch --json " + p("r.json") +
              " -q --run-noise-df 0");
  EXPECT_EQ(r.code, 0) << r.output;
  const auto j = nlohmann::json::parse(read_text(p("r.json")));
  EXPECT_EQ(j["baseline"]["process_runs"], 2);
  // Unknown suite, missing --from: exit 2.
  EXPECT_EQ(run_cli("baseline update --suite nope --from " + p("run1.json") + " --baseline-dir " + p("baselines")).code,
            2);
  EXPECT_EQ(run_cli("baseline update --suite s --baseline-dir " + p("baselines")).code, 2);
}

// A plain Google Benchmark binary's own JSON (--benchmark_out, no perfgate in between) is stored under the binary's
// name, the suite compare reports it as, whatever its benchmarks' names.
TEST_F(Cli, BaselineUpdateTakesAPlainBinarysOwnFileByTheBinarysName) {
  for (const char* run : {"run1.json", "run2.json"}) {
    write_gbench(p(run), {{"BM_Sort/1024", 1000}, {"BM_Copy", 2000}}, 5, run[3] == '1' ? 1 : 40);
    auto j = nlohmann::json::parse(read_text(p(run)));
    j["context"]["executable"] = "/home/me/build/my_bench";
    j["context"].erase("perfgate.suite");
    std::ofstream(p(run)) << j.dump(1);
  }
  const std::string from = " --from " + p("run1.json") + " " + p("run2.json");
  auto r =
      run_cli("baseline update --suite my_bench --machine-class test-class --baseline-dir " + p("baselines") + from);
  ASSERT_EQ(r.code, 0) << r.output;
  const fs::path stored = dir_ / "baselines" / "test-class" / "my_bench.json";
  ASSERT_TRUE(fs::exists(stored)) << r.output;
  EXPECT_EQ(perfgate::load_result_file(stored.string()).benchmarks.size(), 2u);
  r = run_cli("baseline update --suite BM_Sort --machine-class test-class --baseline-dir " + p("baselines") + from);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("no benchmark of suite 'BM_Sort' in the given runs (suites present: my_bench)"),
            std::string::npos)
      << r.output;
}

// The run file `file` as recorded on a CPU of `signature` (perfgate.cpu_signature in its context).
void set_cpu_signature(const fs::path& file, const std::string& signature) {
  auto j = nlohmann::json::parse(read_text(file));
  j["context"]["perfgate.cpu_signature"] = signature;
  std::ofstream(file) << j.dump(1);
}

std::string stored_cpu_signature(const fs::path& file) {
  return nlohmann::json::parse(read_text(file))["context"].value("perfgate.cpu_signature", "");
}

// A thresholds file given for a comparison whose entry applies to nothing (a typo) says so in the terminal's notes,
// and a suites entry by the report's suite name applies.
TEST_F(Cli, CompareNamesAThresholdsEntryThatAppliesToNothing) {
  write_gbench(p("b.json"), {{"s/a", 1000}, {"s/b", 2000}}, 8, 1);
  write_gbench(p("c.json"), {{"s/a", 1000}, {"s/b", 2000}}, 8, 2);
  std::ofstream(p("t.json")) << R"({"benchmarks": {"s/aa": "10%", "s/b": "9%"}, "suites": {"s": "8%"}})";
  auto r =
      run_cli("compare " + p("b.json") + " " + p("c.json") + " --config " + p("t.json") + " --json " + p("r.json"));
  EXPECT_NE(r.output.find("note: benchmarks 's/aa': in " + p("t.json") +
                          ": applies to no compared benchmark, so its threshold is not used"),
            std::string::npos)
      << r.output;
  const auto j = nlohmann::json::parse(read_text(p("r.json")));
  for (const auto& b : j["benchmarks"])
    EXPECT_DOUBLE_EQ(b["threshold"].get<double>(), b["name"] == "s/b" ? 0.09 : 0.08) << b["name"];
  std::ofstream(p("t.json")) << R"({"benchmarks": {"s/a": "10%"}})";
  r = run_cli("compare " + p("b.json") + " " + p("c.json") + " --config " + p("t.json"));
  EXPECT_EQ(r.output.find("applies to no compared benchmark"), std::string::npos) << r.output;
}

// A plain binary's own JSON, as its --benchmark_out writes it: no perfgate key, Google Benchmark's host facts.
void make_plain(const fs::path& file, const std::string& host, int cpus) {
  auto j = nlohmann::json::parse(read_text(file));
  for (const char* key : {"perfgate.cpu_model", "perfgate.cpu_cores", "perfgate.amx", "perfgate.git_commit"})
    j["context"].erase(key);
  j["context"]["host_name"] = host;
  j["context"]["num_cpus"] = cpus;
  std::ofstream(file) << j.dump(1);
}

// `baseline update` of a plain binary's own JSON: written on this host, it gets this host's CPU facts, as `perfgate
// run` gives the binary's runs, so the baseline lands where `perfgate run` looks here; written on another host, its
// class cannot be known here (exit 2, naming the field), unless --machine-class gives it.
TEST_F(Cli, BaselineUpdateOfAPlainBinarysJsonFilesItUnderThisHostsClassOnlyWhenWrittenHere) {
  const perfgate::HostIdentity here = perfgate::this_host();
  write_gbench(p("here.json"), {{"s/a", 1000}}, 5, 1);
  make_plain(p("here.json"), here.name, here.cpus);
  auto r = run_cli("baseline update --suite s --from " + p("here.json") + " --baseline-dir " + p("baselines"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("here.json records no CPU facts (a plain Google Benchmark binary's own JSON), written on "
                          "this host: recorded with this host's CPU"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("cpu-unknown"), std::string::npos) << r.output;
  const auto stored = nlohmann::json::parse(read_text(
      r.output.substr(r.output.find("wrote ") + 6, r.output.find(" (1 benchmarks") - r.output.find("wrote ") - 6)));
  EXPECT_FALSE(stored["context"].value("perfgate.cpu_model", "").empty()) << stored["context"].dump();
  EXPECT_NE(stored["context"].value("perfgate.run.host_facts", "").find("perfgate baseline update"), std::string::npos);

  write_gbench(p("there.json"), {{"s/a", 1000}}, 5, 2);
  make_plain(p("there.json"), here.name + "-elsewhere", here.cpus);
  r = run_cli("baseline update --suite s --from " + p("there.json") + " --baseline-dir " + p("other"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("there.json: field 'context.host_name': written on host '" + here.name +
                          "-elsewhere', not this one"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("Give --machine-class CLASS"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "other")) << "nothing written";
  r = run_cli("baseline update --suite s --from " + p("there.json") + " --baseline-dir " + p("other") +
              " --machine-class cpu-xeon-amx-16c");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir_ / "other" / "cpu-xeon-amx-16c" / "s.json")) << r.output;
}

// The baseline update above files a plain binary's JSON with this host's CPU facts; the same binary's JSON written
// here later, compared against it, takes them too (a run note says so) instead of reading as another machine class.
// JSON written on another host stays as it is, and the classes still differ.
TEST_F(Cli, CompareOfAPlainBinarysJsonAgainstItsStoredBaselineWrittenHereFindsOneClass) {
  const perfgate::HostIdentity here = perfgate::this_host();
  write_gbench(p("here.json"), {{"s/a", 1000}}, 5, 1);
  make_plain(p("here.json"), here.name, here.cpus);
  ASSERT_EQ(run_cli("baseline update --suite s --from " + p("here.json") + " --baseline-dir " + p("baselines")).code,
            0);
  fs::path stored;
  for (const auto& entry : fs::recursive_directory_iterator(dir_ / "baselines"))
    if (entry.path().filename() == "s.json") stored = entry.path();
  ASSERT_FALSE(stored.empty());
  write_gbench(p("later.json"), {{"s/a", 1000}}, 5, 2);
  make_plain(p("later.json"), here.name, here.cpus);
  auto r = run_cli("compare " + stored.string() + " " + p("later.json") + " -v");
  EXPECT_NE(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("later.json records no CPU facts (a plain Google Benchmark binary's own JSON) and was "
                          "written on this host: compared with this host's CPU"),
            std::string::npos)
      << r.output;
  write_gbench(p("there.json"), {{"s/a", 1000}}, 5, 3);
  make_plain(p("there.json"), here.name + "-elsewhere", here.cpus);
  r = run_cli("compare " + stored.string() + " " + p("there.json"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("machine class mismatch"), std::string::npos) << r.output;
  // Two plain files of this host agree as they are: nothing is added.
  r = run_cli("compare " + p("here.json") + " " + p("later.json") + " -v");
  EXPECT_EQ(r.output.find("compared with this host's CPU"), std::string::npos) << r.output;
}

TEST_F(Cli, BaselineUpdateKeepsTheBaselineOfAnotherCpuGeneration) {
  const std::string zen5 = "AuthenticAMD family 26 model 2";
  const std::string zen4 = "AuthenticAMD family 25 model 17";
  const std::string update =
      "baseline update --suite s --machine-class cpu-epyc-avx512-2c --baseline-dir " + p("baselines") + " --from ";
  write_gbench(p("zen5.json"), {{"s/a", 1000}}, 8, 1);
  set_cpu_signature(p("zen5.json"), zen5);
  ASSERT_EQ(run_cli(update + p("zen5.json")).code, 0);
  write_gbench(p("zen4.json"), {{"s/a", 1300}}, 8, 2);
  set_cpu_signature(p("zen4.json"), zen4);
  auto r = run_cli(update + p("zen4.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  const fs::path class_level = dir_ / "baselines" / "cpu-epyc-avx512-2c" / "s.json";
  const fs::path own = dir_ / "baselines" / "cpu-epyc-avx512-2c" / "amd-family25-model17" / "s.json";
  EXPECT_NE(r.output.find(own.string()), std::string::npos) << r.output;
  EXPECT_EQ(stored_cpu_signature(class_level), zen5);
  EXPECT_EQ(stored_cpu_signature(own), zen4);
  // --append adds to this generation's runs, never to the other generation's.
  write_gbench(p("zen4b.json"), {{"s/a", 1310}}, 8, 3);
  set_cpu_signature(p("zen4b.json"), zen4);
  r = run_cli(update + p("zen4b.json") + " --append");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("2 process runs"), std::string::npos) << r.output;
  EXPECT_EQ(perfgate::load_result_file(class_level.string()).process_runs(), 1);
  // The class level's own generation still replaces the class level.
  r = run_cli(update + p("zen5.json"));
  EXPECT_NE(r.output.find(class_level.string()), std::string::npos) << r.output;
}

// The main job's report spans several suites, and on a CPU runner most GPU benchmarks skip: one summary
// with the skips grouped by reason, then one results table per suite without the skips.
TEST(Report, SeveralSuitesGetASummaryAndOneTableEach) {
  std::vector<BenchmarkResult> base, cur;
  base.push_back(bench("lora_backward/backward/onednn/cfg:ci", noisy(3e6, 0.01, 12, 40)));
  cur.push_back(bench("lora_backward/backward/onednn/cfg:ci", noisy(3.6e6, 0.01, 12, 41)));
  for (const char* gib : {"22.4", "22.6"}) {
    BenchmarkResult big = bench(fmt::format("lora_backward/backward/onednn/cfg:deepseek-v3/m{}", gib), {});
    big.skip_reason = fmt::format("config deepseek-v3 needs ~64.2 GiB of memory, {} GiB available", gib);
    base.push_back(big);
    cur.push_back(big);
  }
  base.push_back(bench("synthetic/chain", noisy(1e3, 0.01, 12, 42)));
  cur.push_back(bench("synthetic/chain", noisy(1e3, 0.01, 12, 43)));
  for (const char* name : {"transfers/h2d", "transfers/d2h", "transfers/peer"}) {
    BenchmarkResult gpu = bench(name, {});
    gpu.skip_reason = "no usable GPU";
    base.push_back(gpu);
    cur.push_back(gpu);
  }
  CompareOptions o;
  o.noise.run_noise_df = 0;
  const auto r = compare(set_of(base, "a", "2026-11-23"), set_of(cur, "b", "2026-11-23"), o);
  const std::string md = render_markdown(r, golden_options());
  const auto at = [&](const std::string& s) { return md.find(s); };
  ASSERT_NE(at("### Per suite"), std::string::npos) << md;
  EXPECT_LT(at("### Per suite"), at("## Results"));
  EXPECT_NE(at("| <code>lora\\_backward</code> | 3 | 0 | **1** | 0 | 0 | 0 | 2 |"), std::string::npos) << md;
  EXPECT_NE(at("| <code>transfers</code> | 3 | 0 | 0 | 0 | 0 | 0 | 3 |"), std::string::npos) << md;
  EXPECT_NE(at("| **all** | 7 |"), std::string::npos) << md;
  // The summary's "not judged" names each skip reason once, with its suites; the list below folds the names.
  EXPECT_NE(at("- **3 skipped** (<code>transfers/d2h</code>, <code>transfers/h2d</code>, <code>transfers/peer</code>): "
               "no usable GPU"),
            std::string::npos)
      << md;
  // Reasons that differ only in numbers are one group; the names are folded under it.
  EXPECT_NE(at("<code>lora\\_backward</code>: 2 benchmarks: config deepseek-v3 needs \\~64.2 GiB of memory, 22.4 GiB"),
            std::string::npos)
      << md;
  EXPECT_NE(at("<code>transfers</code>: 3 benchmarks: no usable GPU"), std::string::npos) << md;
  // One table per suite; the all-skipped suite says so; skipped rows are not in any table.
  EXPECT_NE(at("### <code>lora\\_backward</code>"), std::string::npos);
  EXPECT_NE(at("### <code>synthetic</code>"), std::string::npos);
  EXPECT_NE(at("### <code>transfers</code>\n\nEvery benchmark of this suite was skipped"), std::string::npos) << md;
  EXPECT_EQ(at("| skipped | <code>"), std::string::npos) << md;
  EXPECT_NE(at("| 1 | **regression** | <code>lora\\_backward/backward/onednn/cfg:ci</code>"), std::string::npos) << md;
  EXPECT_NE(at("| 2 | unchanged | <code>synthetic/chain</code>"), std::string::npos) << md;
}

// A bench's label (State::SetLabel) is read with its repetitions (the last one set wins), kept by a stored
// baseline, and listed in the report with the baseline's beside it when they differ.
TEST(Report, LabelsAreReadStoredAndListed) {
  TempDir dir;
  const auto write_run = [&](const std::string& file, const std::vector<std::string>& labels) {
    nlohmann::json j{{"context", gbench_context("h")}, {"benchmarks", nlohmann::json::array()}};
    for (int k = 0; k < static_cast<int>(labels.size()); ++k) {
      auto rep = gbench_repetition("s/layer/zipf", static_cast<int>(labels.size()), k, 100.0 + k);
      if (!labels[static_cast<std::size_t>(k)].empty()) rep["label"] = labels[static_cast<std::size_t>(k)];
      j["benchmarks"].push_back(rep);
    }
    j["benchmarks"].push_back(gbench_repetition("s/plain", 1, 0, 50.0));
    std::ofstream((dir.path / file).string()) << j.dump();
    return (dir.path / file).string();
  };
  const ResultSet base = perfgate::load_result_file(
      write_run("base.json", {"straggler GPU 1: 1.20x the mean", "straggler GPU 2: 1.56x the mean", ""}));
  ASSERT_EQ(base.find("s/layer/zipf")->label, "straggler GPU 2: 1.56x the mean");
  EXPECT_TRUE(base.find("s/plain")->label.empty());

  perfgate::BaselineInfo info;
  info.machine_class = "cpu-xeon-amx-2c";
  const auto stored = perfgate::load_result_file(perfgate::write_baseline(dir.path, "s", base, info).string());
  EXPECT_EQ(stored.find("s/layer/zipf")->label, "straggler GPU 2: 1.56x the mean");

  const ResultSet cur = perfgate::load_result_file(write_run("cur.json", {"straggler GPU 0: 1.31x the mean"}));
  const std::string md = render_markdown(compare(stored, cur, within_run_options()));
  EXPECT_NE(md.find("## Labels\n\n- <code>s/layer/zipf</code>: straggler GPU 0: 1.31x the mean (baseline: straggler "
                    "GPU 2: 1.56x the mean)\n\n"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("<code>s/plain</code>:"), std::string::npos);
}
