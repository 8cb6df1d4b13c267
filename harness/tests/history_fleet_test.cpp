// Sharding and merging (perfgate/fleet.hpp): the shard spec, the cost-balanced plan against hand-worked
// assignments, the exact filters, and the merge of recorded shards (SQLite here; the end-to-end test with
// real runs on PostgreSQL is fleet_e2e.cpp).
#include <regex>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "history_support.hpp"
#include "perfgate/fleet.hpp"
#include "perfgate/history.hpp"
#include "test_support.hpp"

namespace {

using namespace perfgate;
using namespace perfgate::test_support;
using nlohmann::json;
namespace fs = std::filesystem;

TEST(Shard, SpecIsIndexOverCount) {
  const auto s = history::parse_shard("2/3");
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(history::parse_shard("1/1").count, 1);
  for (const char* bad : {"0/3", "4/3", "a/b", "3", "1/0", "1/3x", "/3", "2/", "-1/3", ""})
    EXPECT_THROW(history::parse_shard(bad), InputError) << bad;
}

TEST(Shard, WithoutCostsTheSortedNamesAreDealtRoundRobin) {
  const auto plan = history::plan_shards({"g", "c", "a", "e", "b", "f", "d"}, {}, 3);
  EXPECT_FALSE(plan.balanced_by_cost);
  EXPECT_EQ(plan.costed, 0u);
  ASSERT_EQ(plan.shards.size(), 3u);
  EXPECT_EQ(plan.shards[0], (std::vector<std::string>{"a", "d", "g"}));
  EXPECT_EQ(plan.shards[1], (std::vector<std::string>{"b", "e"}));
  EXPECT_EQ(plan.shards[2], (std::vector<std::string>{"c", "f"}));
}

TEST(Shard, CostsBalanceTheShardsLongestFirst) {
  // By name: {a, c, e} = 12 s against {b, d, f} = 8 s. Longest first: a (10) alone, the rest (10) together.
  const std::map<std::string, double> costs = {{"a", 10}, {"b", 1}, {"c", 1}, {"d", 1}, {"e", 1}, {"f", 6}};
  const auto plan = history::plan_shards({"a", "b", "c", "d", "e", "f"}, costs, 2);
  EXPECT_TRUE(plan.balanced_by_cost);
  EXPECT_EQ(plan.costed, 6u);
  EXPECT_EQ(plan.shards[0], (std::vector<std::string>{"a"}));
  EXPECT_EQ(plan.shards[1], (std::vector<std::string>{"b", "c", "d", "e", "f"}));
  EXPECT_DOUBLE_EQ(plan.seconds[0], 10);
  EXPECT_DOUBLE_EQ(plan.seconds[1], 10);
}

TEST(Shard, RawNamesFindTheirCostAndUnknownOnesCostTheMedian) {
  // x/manual_time is x in the history; "new" has no cost and is taken to cost the median, 2.
  const std::map<std::string, double> costs = {{"x", 5}, {"y", 2}, {"z", 1}};
  const auto plan = history::plan_shards({"x/manual_time", "y", "z", "new"}, costs, 2);
  EXPECT_EQ(plan.costed, 3u);
  EXPECT_EQ(plan.shards[0], (std::vector<std::string>{"x/manual_time"}));
  EXPECT_EQ(plan.shards[1], (std::vector<std::string>{"new", "y", "z"}));
  EXPECT_DOUBLE_EQ(plan.seconds[1], 5);
}

TEST(Shard, EveryBenchmarkInExactlyOneShardAndNoEmptyShard) {
  std::vector<std::string> names;
  std::map<std::string, double> costs;
  for (int i = 0; i < 97; ++i) {
    names.push_back(fmt::format("s/b{:03d}", i));
    if (i % 3) costs[names.back()] = 0.1 * (1 + (i * 37) % 11);
  }
  const auto plan = history::plan_shards(names, costs, 5);
  std::multiset<std::string> all;
  for (const auto& s : plan.shards) {
    EXPECT_FALSE(s.empty());
    all.insert(s.begin(), s.end());
  }
  EXPECT_EQ(all, std::multiset<std::string>(names.begin(), names.end()));
  const auto [lo, hi] = std::minmax_element(plan.seconds.begin(), plan.seconds.end());
  EXPECT_LT(*hi - *lo, 1.2);  // within the largest single cost
  EXPECT_THROW(history::plan_shards({"a", "b"}, {}, 3), InputError);
}

TEST(Shard, ExactFilterMatchesOnlyItsNames) {
  const std::vector<std::string> names = {"s/walk/l1/units:20000", "s/a.b(c)"};
  const std::regex re(history::exact_filter(names), std::regex::extended);
  EXPECT_TRUE(std::regex_search("s/walk/l1/units:20000", re));
  EXPECT_TRUE(std::regex_search("s/a.b(c)", re));
  EXPECT_FALSE(std::regex_search("s/walk/l1/units:200000", re));
  EXPECT_FALSE(std::regex_search("s/aXb(c)", re));
  EXPECT_FALSE(std::regex_search("xs/walk/l1/units:20000", re));
}

// A perfgate.report/1 with one entry per (name, verdict).
std::string report(const std::vector<std::pair<std::string, std::string>>& benchmarks, int exit_code) {
  json list = json::array();
  for (const auto& [name, verdict] : benchmarks)
    list.push_back({{"name", name},
                    {"suite", "suite"},
                    {"verdict", verdict},
                    {"driver", "time"},
                    {"reason", "test"},
                    {"metrics", json::array({{{"name", "time"},
                                              {"change", verdict == "regression" ? 0.2 : 0.001},
                                              {"change_lower", 0.1},
                                              {"change_upper", 0.3}}})}});
  return json{{"schema", "perfgate.report/1"}, {"exit_code", exit_code}, {"summary", "test"}, {"benchmarks", list}}
      .dump();
}

class Merge : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!history::backend_available(history::Backend::sqlite)) GTEST_SKIP() << "built without SQLite";
    store_ = history::open_store((dir_.path / "h.db").string(), history::OpenMode::create);
  }
  // Shard `index`/3 of `commit`: its benchmarks' sessions, report and exit code.
  void record(const std::string& commit, int index, const std::vector<std::pair<std::string, std::string>>& benchmarks,
              int exit_code, const std::string& time = "2026-11-25T10:00:00Z") {
    auto r = synthetic_session(commit, time, 1, 1, 1, 1.0, static_cast<std::uint64_t>(index));
    r.info.host = fmt::format("runner{}", index);
    r.info.shard_index = index;
    r.info.shard_count = 3;
    r.info.exit_code = exit_code;
    r.report = report(benchmarks, exit_code);
    store_->record(r);
  }
  TempDir dir_;
  std::unique_ptr<history::Store> store_;
};

TEST_F(Merge, ThreeShardsGiveOneReportAndTheWorstExitCode) {
  record("abc", 1, {{"suite/a", "unchanged"}, {"suite/b", "unchanged"}}, 0);
  record("abc", 2, {{"suite/c", "regression"}, {"suite/d", "noisy"}}, 1);
  record("abc", 3, {{"suite/e", "improvement"}}, 0);
  record("other", 2, {{"suite/z", "failed"}}, 3);  // another commit does not count
  const auto m = history::merge_shards(*store_, "abc", 3);
  EXPECT_EQ(m.exit_code, 1);
  EXPECT_TRUE(m.problems.empty());
  std::set<std::string> names;
  for (const auto& b : m.benchmarks) names.insert(b["name"].get<std::string>());
  EXPECT_EQ(names, (std::set<std::string>{"suite/a", "suite/b", "suite/c", "suite/d", "suite/e"}));
  EXPECT_EQ(m.benchmarks[0]["name"], "suite/c");  // the regression leads
  EXPECT_EQ(m.benchmarks[0]["shard"], 2);
  EXPECT_EQ(m.counts.at("unchanged"), 2);
  const std::string md = history::merge_markdown(m, "h.db");
  EXPECT_EQ(md.rfind("## perfgate merge: FAIL -- 3 shards, 5 benchmarks", 0), 0u) << md;
  EXPECT_NE(md.find("| **regression** | `suite/c` | 2 | time | +20.0% | [+10.0%, +30.0%]"), std::string::npos) << md;
  const std::string junit = history::merge_junit(m);
  EXPECT_NE(junit.find("tests=\"5\" failures=\"1\" errors=\"0\""), std::string::npos) << junit;
  EXPECT_NE(junit.find("name=\"suite/c\"><failure"), std::string::npos) << junit;
}

TEST_F(Merge, AMissingShardExitsThreeAndIsNamed) {
  record("abc", 1, {{"suite/a", "unchanged"}}, 0);
  record("abc", 3, {{"suite/e", "unchanged"}}, 0);
  const auto m = history::merge_shards(*store_, "abc", 3);
  EXPECT_EQ(m.exit_code, 3);
  ASSERT_EQ(m.problems.size(), 1u);
  EXPECT_NE(m.problems[0].find("shard 2/3: no session recorded"), std::string::npos) << m.problems[0];
  const std::string junit = history::merge_junit(m);
  EXPECT_NE(junit.find("name=\"shard 2/3\"><error"), std::string::npos) << junit;
  EXPECT_NE(history::merge_markdown(m, "h.db").find("| 2 | | | | | **missing** |"), std::string::npos);
}

TEST_F(Merge, ACrashedShardExitsThreeEvenBesideARegression) {
  record("abc", 1, {{"suite/a", "regression"}}, 1);
  record("abc", 2, {{"suite/c", "failed"}, {"suite/d", "unchanged"}}, 3);
  record("abc", 3, {{"suite/e", "unchanged"}}, 0);
  const auto m = history::merge_shards(*store_, "abc", 3);
  EXPECT_EQ(m.exit_code, 3);
  ASSERT_EQ(m.problems.size(), 1u);
  EXPECT_NE(m.problems[0].find("shard 2/3: crashed"), std::string::npos) << m.problems[0];
  EXPECT_NE(m.problems[0].find("runner2"), std::string::npos) << m.problems[0];
}

TEST_F(Merge, TheLatestRunOfAShardCountsAndOverlapsAreProblems) {
  record("abc", 1, {{"suite/a", "unchanged"}}, 0);
  record("abc", 2, {{"suite/b", "failed"}}, 3, "2026-11-25T09:00:00Z");     // an earlier try that crashed
  record("abc", 2, {{"suite/b", "unchanged"}}, 0, "2026-11-25T11:00:00Z");  // the re-run
  record("abc", 3, {{"suite/c", "unchanged"}}, 0);
  EXPECT_EQ(history::merge_shards(*store_, "abc", 3).exit_code, 0);
  record("abc", 3, {{"suite/a", "unchanged"}}, 0, "2026-11-25T12:00:00Z");
  const auto m = history::merge_shards(*store_, "abc", 3);
  ASSERT_EQ(m.problems.size(), 1u);
  EXPECT_NE(m.problems[0].find("suite/a is in shard 1/3 and shard 3/3"), std::string::npos) << m.problems[0];
}

TEST_F(Merge, EveryShardSkippedIsSkipped) {
  for (int i = 1; i <= 3; ++i) record("abc", i, {{fmt::format("suite/{}", i), "skipped"}}, 77);
  EXPECT_EQ(history::merge_shards(*store_, "abc", 3).exit_code, 77);
}

}  // namespace
