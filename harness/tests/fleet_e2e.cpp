// The fleet end to end: bench_synthetic run unsharded and as 3 shards (perfgate history shard -> perfgate run
// -> perfgate history record --shard) into one throwaway PostgreSQL server, then perfgate history merge. The
// merged report must hold exactly the unsharded run's benchmarks; a shard whose bench crashes, and a shard
// that never recorded, must make the merge exit 3 and name the shard. Its own binary: it runs real
// measurements for about a minute (RUN_SERIAL, a longer timeout).
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "history_support.hpp"
#include "perfgate/history.hpp"
#include "perfgate/model.hpp"
#include "test_support.hpp"

namespace {

using namespace perfgate;
using namespace perfgate::test_support;
using nlohmann::json;
namespace fs = std::filesystem;

json read_json(const fs::path& file) { return json::parse(test_support::read_text(file)); }

std::set<std::string> benchmark_names(const json& report) {
  std::set<std::string> out;
  for (const auto& b : report["benchmarks"]) out.insert(b["name"].get<std::string>());
  return out;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

class Fleet : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(PERFGATE_CLI_PATH) || !fs::exists(BENCH_SYNTHETIC_PATH))
      GTEST_SKIP() << "perfgate or bench_synthetic not built";
    if (!history::backend_available(history::Backend::postgresql)) GTEST_SKIP() << "built without libpq";
    if (!server_.running()) GTEST_SKIP() << "no PostgreSQL server for the test: " << server_.reason();
    url_ = server_.create_database("fleet");
    ASSERT_FALSE(url_.empty());
    ::setenv("PERFGATE_MACHINE_CLASS", "cpu-fleet-test", 1);
    ::unsetenv("PERFGATE_HISTORY");
  }
  std::string p(const std::string& name) const { return (dir_.path / name).string(); }
  ShellResult perfgate(const std::string& args, const std::string& env = "") const {
    return shell_output(env + " " + quote(PERFGATE_CLI_PATH) + " " + args);
  }
  // A short gated run of bench_synthetic (the stored baseline of the test), reports in `dir`.
  ShellResult run(const std::string& dir, const std::string& filter, const std::string& env = "") const {
    return perfgate(
        // A 100% threshold: the shards' mechanics are under test, not the verdicts, and every benchmark is then
        // judged (unchanged) however noisy two quick rounds are.
        fmt::format("run --bench {} --rounds 2 --repetitions 3 --min-time 0.01 --confirm-rounds 0 --against none "
                    "--threshold 100% --baseline-dir {} --report-dir {} --report-name perf-report{}",
                    quote(BENCH_SYNTHETIC_PATH), quote(p("baselines")), quote(p(dir)),
                    filter.empty() ? "" : " --filter " + quote(filter)),
        env);
  }
  // Shard i of 3 for `commit`: plan (from the costs recorded up to `until`, as every shard of the run does),
  // run, record; returns the run's exit code.
  int shard(int i, const std::string& commit, const std::string& until, const std::string& env = "") const {
    const std::string dir = fmt::format("{}-shard{}", commit, i);
    auto plan = perfgate(
        fmt::format("history shard --db {} --shard {}/3 --list {} --filter-out {} --names-out {} --costs-until {}",
                    quote(url_), i, quote(p("list.txt")), quote(p(dir + ".filter")), quote(p(dir + ".names")), until));
    EXPECT_EQ(plan.code, 0) << plan.output;
    const std::string filter = lines(read_text(p(dir + ".filter"))).at(0);
    const int rc = run(dir, filter, env).code;
    record(i, commit, dir, rc);
    return rc;
  }
  void record(int i, const std::string& commit, const std::string& dir, int rc) const {
    std::string files;
    for (const auto& e : fs::directory_iterator(p(dir) + "/runs")) files += " " + quote(e.path().string());
    auto r = perfgate(fmt::format("history record --db {} --commit {} --shard {}/3 --exit-code {} --report {}{}",
                                  quote(url_), commit, i, rc, quote(p(dir + "/perf-report.json")), files));
    EXPECT_EQ(r.code, 0) << r.output;
  }
  ShellResult merge(const std::string& commit) const {
    return perfgate(fmt::format("history merge --db {} --commit {} --shards 3 --json {} --markdown {} --junit {}",
                                quote(url_), commit, quote(p(commit + ".json")), quote(p(commit + ".md")),
                                quote(p(commit + ".xml"))));
  }

  TempDir dir_;
  PostgresServer server_;
  std::string url_;
};

TEST_F(Fleet, ThreeShardsMergeToTheUnshardedSetAndACrashOrAMissingShardExitsThree) {
  // The stored baseline, then the unsharded run.
  auto r = perfgate(
      fmt::format("run --bench {} --rounds 2 --repetitions 3 --min-time 0.01 --update-baseline --baseline-dir {} "
                  "--report-dir {}",
                  quote(BENCH_SYNTHETIC_PATH), quote(p("baselines")), quote(p("record"))));
  ASSERT_EQ(r.code, 0) << r.output;
  r = run("unsharded", "");
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.output;
  const auto unsharded = benchmark_names(read_json(p("unsharded/perf-report.json")));
  ASSERT_EQ(unsharded.size(), 7u);  // 6 and the calibration

  // Every benchmark of the suite, as the shards list them.
  r = shell_output(quote(BENCH_SYNTHETIC_PATH) + " --benchmark_list_tests=true");
  ASSERT_EQ(r.code, 0) << r.output;
  std::ofstream(p("list.txt")) << r.output;
  ASSERT_EQ(lines(r.output).size(), 7u) << r.output;

  // No cost in the history yet: the split is by name.
  r = perfgate(fmt::format("history shard --db {} --shard 1/3 --list {} --plan-json {}", quote(url_),
                           quote(p("list.txt")), quote(p("plan0.json"))));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(read_json(p("plan0.json"))["balanced_by_cost"].get<bool>());

  std::vector<int> codes;
  const std::string before_abc = history::now_iso8601();
  for (int i = 1; i <= 3; ++i) codes.push_back(shard(i, "abc", before_abc));
  r = merge("abc");
  const int expected = *std::max_element(codes.begin(), codes.end()) == 1 ? 1 : 0;
  EXPECT_EQ(r.code, expected) << r.output;
  const json merged = read_json(p("abc.json"));
  EXPECT_EQ(benchmark_names(merged), unsharded);
  EXPECT_EQ(merged["benchmarks"].size(), unsharded.size());  // none twice
  EXPECT_NE(read_text(p("abc.md")).find("## perfgate merge: "), std::string::npos);
  EXPECT_NE(read_text(p("abc.xml")).find("<testsuites name=\"perfgate\" tests=\"7\""), std::string::npos);

  // The shards recorded their costs: the next plan balances by them and still covers every benchmark.
  std::set<std::string> covered;
  for (int i = 1; i <= 3; ++i) {
    r = perfgate(fmt::format("history shard --db {} --shard {}/3 --list {} --plan-json {} --names-out {}", quote(url_),
                             i, quote(p("list.txt")), quote(p("plan1.json")), quote(p("names1.txt"))));
    ASSERT_EQ(r.code, 0) << r.output;
    for (const auto& n : lines(read_text(p("names1.txt")))) EXPECT_TRUE(covered.insert(n).second) << n;
  }
  EXPECT_TRUE(read_json(p("plan1.json"))["balanced_by_cost"].get<bool>());
  EXPECT_EQ(read_json(p("plan1.json"))["costed"], 7);
  EXPECT_EQ(covered.size(), 7u);

  // A bench of shard 2 crashes: the merge exits 3 and names the shard.
  const std::string before_def = history::now_iso8601();
  shard(1, "def", before_def);
  r = perfgate(fmt::format("history shard --db {} --shard 2/3 --list {} --names-out {} --costs-until {}", quote(url_),
                           quote(p("list.txt")), quote(p("def2.names")), before_def));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string crash = lines(read_text(p("def2.names"))).at(0);
  EXPECT_EQ(
      shard(2, "def", before_def, "PERFGATE_SYNTHETIC_CRASH=" + quote("^" + normalise_benchmark_name(crash) + "$")), 3);
  shard(3, "def", before_def);
  r = merge("def");
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_NE(r.output.find("shard 2/3: crashed"), std::string::npos) << r.output;

  // Shard 2 never recorded: exit 3, named.
  record(1, "ghi", "abc-shard1", codes[0]);
  record(3, "ghi", "abc-shard3", codes[2]);
  r = merge("ghi");
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_NE(r.output.find("shard 2/3: no session recorded"), std::string::npos) << r.output;
}

}  // namespace
