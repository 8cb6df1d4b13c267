// Record-only runs: the session's summary (summarise_record) of a measurement and the reporters that print
// it (render_record_markdown / render_record_json), on a constructed measurement with known values.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "perfgate/report.hpp"
#include "perfgate/session.hpp"
#include "test_support.hpp"

namespace {

// One side, suite "s": s/a over two process runs (medians 10 and 20 ns), s/b failed without samples.
perfgate::MeasureResult measurement() {
  perfgate::ResultSet rs;
  for (int run = 0; run < 2; ++run) {
    perfgate::RunContext c;
    c.fields["perfgate.git_commit"] = "abc123";
    c.fields["perfgate.build_type"] = "Release";
    rs.contexts.push_back(c);
  }
  perfgate::BenchmarkResult a = perfgate::test_support::bench("s/a", {10, 10, 20, 20});
  a.time.process_run = {0, 0, 1, 1};
  perfgate::BenchmarkResult b = perfgate::test_support::bench("s/b", {});
  b.error = "wrong result";
  rs.benchmarks = {a, b};
  perfgate::SideResult side;
  side.label = "current";
  side.processes = 2;
  side.repetitions = 4;
  side.suites.emplace("s", rs);
  side.failures.push_back({"current", "s", "/x/bench_s", 1, "exit code 3", "s/b: wrong result", {"s/b"}});
  perfgate::MeasureResult m;
  m.sides.push_back(side);
  m.wall_seconds = 1.5;
  m.seed = 42;
  m.notes = {"a note"};
  return m;
}

}  // namespace

TEST(Record, SummaryHoldsMedianAndSpreads) {
  const perfgate::RecordReport r = perfgate::summarise_record(measurement());
  ASSERT_EQ(r.sides.size(), 1u);
  ASSERT_EQ(r.sides[0].suites.size(), 1u);
  const perfgate::RecordedSuite& s = r.sides[0].suites[0];
  EXPECT_EQ(s.commit, "abc123");
  EXPECT_EQ(s.process_runs, 2);
  ASSERT_EQ(s.benchmarks.size(), 2u);
  EXPECT_DOUBLE_EQ(s.benchmarks[0].median, 15);
  EXPECT_EQ(s.benchmarks[0].runs, 2);
  EXPECT_DOUBLE_EQ(s.benchmarks[0].within_cv, 0);                        // each run is constant
  EXPECT_DOUBLE_EQ(s.benchmarks[0].between_spread, (20.0 - 10.0) / 15);  // (max - min) run median / median
  EXPECT_EQ(s.benchmarks[1].status, "failed: wrong result");
}

TEST(Record, MarkdownAndJsonPrintTheSummary) {
  const perfgate::RecordReport r = perfgate::summarise_record(measurement());
  const std::string md = perfgate::render_record_markdown(r, "perfgate run (record only)");
  EXPECT_EQ(md.rfind("# perfgate run (record only)\n\n**Recorded 2 benchmark(s), no comparison (record only); 1 "
                     "process failure(s).**\n\n1.5 s wall, seed 42.\n\n## s\n\nCommit `abc123`, build type Release, 2 "
                     "process run(s).\n\n",
                     0),
            0u)
      << md;
  EXPECT_NE(md.find("| s/a | 4 | 2 | 15.0 ns | 0.0% | 66.7% | ok |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("- FAILED s [current] round 1: exit code 3: s/b: wrong result\n- a note\n"), std::string::npos)
      << md;
  const auto j = nlohmann::json::parse(perfgate::render_record_json(r));
  EXPECT_EQ(j["kind"], "perfgate.measurement");
  EXPECT_EQ(j["seed"], 42);
  EXPECT_EQ(j["sides"][0]["suites"]["s"][0]["median_ns"], 15.0);
  EXPECT_TRUE(j["sides"][0]["suites"]["s"][1]["median_ns"].is_null());
  EXPECT_EQ(j["sides"][0]["failures"][0]["benchmarks"][0], "s/b");
}
