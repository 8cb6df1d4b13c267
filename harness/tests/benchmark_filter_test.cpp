// perfgate/benchmark_filter.hpp: Google Benchmark's filter rule, and dropping what a filter did not select.
#include "perfgate/benchmark_filter.hpp"

#include <gtest/gtest.h>

namespace {

using perfgate::BenchmarkFilter;

perfgate::ResultSet baseline_of(const std::vector<std::string>& raw_names) {
  perfgate::ResultSet rs;
  for (const auto& raw : raw_names) {
    perfgate::BenchmarkResult b;
    b.raw_name = raw;
    b.name = perfgate::normalise_benchmark_name(raw);
    rs.index.emplace(b.name, rs.benchmarks.size());
    rs.benchmarks.push_back(b);
  }
  return rs;
}

}  // namespace

TEST(BenchmarkFilter, SearchesAnywhereInTheRawName) {
  const BenchmarkFilter f("bucketed/shape:small");
  EXPECT_TRUE(f.selects("expert_gemm/ffn/bucketed/shape:small/tokens:128/manual_time"));
  EXPECT_FALSE(f.selects("expert_gemm/ffn/bucketed/shape:deepseek-v3/tokens:128/manual_time"));
  EXPECT_FALSE(f.selects_everything());
}

TEST(BenchmarkFilter, ExtendedRegexAnchorsAndAlternatives) {
  const BenchmarkFilter f("^expert_gemm/(calibration/|ffn/(overlap|bucketed)/)");
  EXPECT_TRUE(f.selects("expert_gemm/calibration/copy/manual_time"));
  EXPECT_TRUE(f.selects("expert_gemm/ffn/overlap/shape:small/manual_time"));
  EXPECT_FALSE(f.selects("expert_gemm/ffn/per_expert/shape:small/manual_time"));
  EXPECT_FALSE(f.selects("x/expert_gemm/calibration/copy"));  // ^ anchors
  // The suffix Google Benchmark adds is part of the name it matches.
  EXPECT_TRUE(BenchmarkFilter("manual_time$").selects("a/b/manual_time"));
}

TEST(BenchmarkFilter, LeadingMinusNegates) {
  const BenchmarkFilter f("-pageable");
  EXPECT_FALSE(f.selects("transfers/h2d/pageable/bytes:4"));
  EXPECT_TRUE(f.selects("transfers/h2d/pinned/bytes:4"));
}

TEST(BenchmarkFilter, EmptyAllAndInvalidSelectEverything) {
  for (const char* spec : {"", "all", "(unclosed"}) {
    const BenchmarkFilter f(spec);
    EXPECT_TRUE(f.selects_everything()) << spec;
    EXPECT_TRUE(f.selects("anything/at/all")) << spec;
  }
}

TEST(DropUnselected, RemovesWhatTheFilterLeavesOutAndKeepsTheIndexRight) {
  auto rs = baseline_of({"s/a/x/manual_time", "s/b/x/manual_time", "s/a/y/manual_time", "s/c/manual_time"});
  EXPECT_EQ(perfgate::drop_unselected(rs, BenchmarkFilter("^s/a/")), 2);
  ASSERT_EQ(rs.benchmarks.size(), 2u);
  ASSERT_NE(rs.find("s/a/x"), nullptr);
  ASSERT_NE(rs.find("s/a/y"), nullptr);
  EXPECT_EQ(rs.find("s/a/y")->raw_name, "s/a/y/manual_time");
  EXPECT_EQ(rs.find("s/b/x"), nullptr);
  EXPECT_EQ(rs.find("s/c"), nullptr);
}

TEST(DropUnselected, EverythingFilterKeepsAll) {
  auto rs = baseline_of({"s/a", "s/b"});
  EXPECT_EQ(perfgate::drop_unselected(rs, BenchmarkFilter("")), 0);
  EXPECT_EQ(rs.benchmarks.size(), 2u);
}

TEST(UnselectedNote, OneLineWithTheFilterShortened) {
  EXPECT_EQ(perfgate::unselected_note(1, "^a"), "1 baseline benchmark not selected (filter '^a')");
  EXPECT_EQ(perfgate::unselected_note(12, std::string(150, 'x'), 10),
            "12 baseline benchmarks not selected (filter 'xxxxxxxxxx...')");
}
