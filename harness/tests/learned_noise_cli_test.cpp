// The gate with learned noise, end to end through the CLI binary: `perfgate compare --history`, PERFGATE_HISTORY,
// the noise.json snapshot written by `perfgate baseline update --history` and picked up beside the baseline,
// `history record` splitting a run of two machine classes into two sessions, and bad input.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "history_support.hpp"
#include "perfgate/history.hpp"
#include "test_support.hpp"

namespace {

using namespace perfgate;
using namespace perfgate::test_support;
namespace fs = std::filesystem;

class LearnedNoiseCli : public HistoryCliTest {
 protected:
  // 12 sessions: s/quiet moves 0.3% between sessions, s/wild 15% (seeded, reproducible).
  void record_history(const std::string& db) {
    stats::SplitMix64 rng(2026);
    for (int k = 0; k < 12; ++k) {
      const std::string run = p(fmt::format("h{}.json", k));
      write_gbench_run(
          run, {{"s/quiet", 1000 * std::exp(0.003 * rng.normal())}, {"s/wild", 1000 * std::exp(0.15 * rng.normal())}},
          10 * static_cast<std::uint64_t>(k), nlohmann::json::object(), 0.001);
      ASSERT_EQ(cli(fmt::format("history record --db {} --commit c{:02d} --time 2026-11-{:02d}T12:00:00Z {}", quote(db),
                                k, 1 + k, quote(run)))
                    .code,
                0);
    }
  }
  // A 3-run baseline at 1000 and a current run with s/quiet +8% and s/wild +25%.
  void write_sides(const std::string& base_prefix) {
    for (int r = 0; r < 3; ++r)
      write_gbench_run(p(fmt::format("{}{}.json", base_prefix, r)), {{"s/quiet", 1000}, {"s/wild", 1000}},
                       500 + static_cast<std::uint64_t>(r), nlohmann::json::object(), 0.001);
    for (int r = 0; r < 3; ++r)
      write_gbench_run(p(fmt::format("cur{}.json", r)), {{"s/quiet", 1080}, {"s/wild", 1250}},
                       600 + static_cast<std::uint64_t>(r), nlohmann::json::object(), 0.001);
  }
  std::map<std::string, std::string> verdicts(const std::string& json_file) const {
    const auto j = nlohmann::json::parse(read_text(json_file));
    std::map<std::string, std::string> out;
    for (const auto& b : j["benchmarks"]) out[b["name"]] = b["verdict"];
    return out;
  }
  std::string files(const std::string& prefix) const {
    return p(prefix + "0.json") + "," + p(prefix + "1.json") + "," + p(prefix + "2.json");
  }
};

TEST_F(LearnedNoiseCli, HistorySnapshotAndPrior) {
  const std::string db = p("h.db");
  record_history(db);
  write_sides("base");
  const std::string cmp = "compare " + quote(files("base")) + " " + quote(files("cur")) + " --quiet --json ";

  // The class prior alone: the quiet +8% is only noisy, the wild +25% drift is a regression (exit 1).
  auto r = cli(cmp + quote(p("prior.json")));
  EXPECT_EQ(r.code, 1) << r.output;
  auto v = verdicts(p("prior.json"));
  EXPECT_EQ(v["s/quiet"], "noisy");
  EXPECT_EQ(v["s/wild"], "regression");

  // With the history: the quiet change is found, the wild drift is not a regression.
  std::string err;
  r = cli(cmp + quote(p("history.json")) + " --history " + quote(db), &err);
  EXPECT_EQ(r.code, 1) << r.output << err;
  v = verdicts(p("history.json"));
  EXPECT_EQ(v["s/quiet"], "regression");
  EXPECT_NE(v["s/wild"], "regression");
  const auto j = nlohmann::json::parse(read_text(p("history.json")));
  for (const auto& b : j["benchmarks"]) {
    EXPECT_TRUE(b["metrics"][0]["learned_noise"].get<bool>()) << b.dump();
    EXPECT_TRUE(b["detectable_change"].is_number()) << b.dump();
  }

  // PERFGATE_HISTORY is the default; --no-learned-noise switches it off.
  r = cli(cmp + quote(p("env.json")), nullptr, "PERFGATE_HISTORY=" + quote(db));
  EXPECT_EQ(verdicts(p("env.json")), v);
  r = cli(cmp + quote(p("off.json")) + " --no-learned-noise", nullptr, "PERFGATE_HISTORY=" + quote(db));
  EXPECT_EQ(verdicts(p("off.json"))["s/quiet"], "noisy");

  // The reviewed snapshot: baseline update --history writes <class>/noise.json; a baseline there picks it up.
  const std::string root = p("baselines");
  r = cli("baseline update --history " + quote(db) + " --baseline-dir " + quote(root));
  ASSERT_EQ(r.code, 0) << r.output;
  const fs::path snapshot = fs::path(root) / "cpu-xeon-amx-2c" / "noise.json";
  ASSERT_TRUE(fs::exists(snapshot)) << r.output;
  for (int k = 0; k < 3; ++k)
    fs::copy_file(p(fmt::format("base{}.json", k)), snapshot.parent_path() / fmt::format("base{}.json", k));
  const std::string stored = (snapshot.parent_path() / "base0.json").string() + "," +
                             (snapshot.parent_path() / "base1.json").string() + "," +
                             (snapshot.parent_path() / "base2.json").string();
  r = cli("compare " + quote(stored) + " " + quote(files("cur")) + " --quiet --json " + quote(p("snap.json")) +
          " --markdown " + quote(p("snap.md")));
  EXPECT_EQ(verdicts(p("snap.json")), v);
  const std::string md = read_text(p("snap.md"));
  EXPECT_NE(md.find("cpu-xeon-amx-2c/noise.json"), std::string::npos) << md;  // the note names the snapshot used
  EXPECT_NE(md.find("| detectable |"), std::string::npos) << md;
}

// `compare --across-hosts` applies the pass `perfgate run` applies against a stored baseline from another machine:
// a benchmark the suite marks host-dependent is reported, not gated.
TEST_F(LearnedNoiseCli, AcrossHostsReportsHostDependentBenchmarks) {
  const nlohmann::json mark = {{"perfgate.host_dependent", "s/wild"}};
  for (int r = 0; r < 3; ++r) {
    write_gbench_run(p(fmt::format("base{}.json", r)), {{"s/quiet", 1000}, {"s/wild", 1000}},
                     500 + static_cast<std::uint64_t>(r), mark, 0.001);
    write_gbench_run(p(fmt::format("cur{}.json", r)), {{"s/quiet", 1000}, {"s/wild", 1250}},
                     600 + static_cast<std::uint64_t>(r), mark, 0.001);
  }
  // A quiet class's prior (1%): three runs a side then judge s/quiet to the 5% threshold.
  const std::string cmp =
      "compare " + quote(files("base")) + " " + quote(files("cur")) + " --run-noise 0.01 --quiet --json ";
  EXPECT_EQ(cli(cmp + quote(p("plain.json"))).code, 1);
  EXPECT_EQ(verdicts(p("plain.json"))["s/wild"], "regression");
  EXPECT_EQ(cli(cmp + quote(p("across.json")) + " --across-hosts").code, 0);
  EXPECT_EQ(verdicts(p("across.json"))["s/wild"], "noisy");
  EXPECT_EQ(verdicts(p("across.json"))["s/quiet"], "unchanged");
}

TEST_F(LearnedNoiseCli, BadHistoryAndSnapshotExitTwoWithOneLine) {
  write_sides("base");
  const std::string cmp = "compare " + quote(files("base")) + " " + quote(files("cur")) + " --quiet";
  std::string err;
  auto r = cli(cmp + " --history bogus://x", &err);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  std::ofstream(p("bad_noise.json"))
      << R"({"perfgate_noise": 1, "machine_class": "cpu-xeon-amx-2c", "bands": [{"benchmark": "s/quiet"}]})";
  r = cli(cmp + " --noise " + quote(p("bad_noise.json")), &err);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(err.find("bad_noise.json"), std::string::npos) << err;
  EXPECT_NE(err.find("bands[0].metric"), std::string::npos) << err;
  // A snapshot of another class is not used: the prior judges and a note says why.
  std::ofstream(p("other.json")) << R"({"perfgate_noise": 1, "machine_class": "gpu-h100-x1", "bands": []})";
  r = cli(cmp + " --noise " + quote(p("other.json")) + " --markdown " + quote(p("other.md")), &err);
  EXPECT_EQ(r.code, 1) << err;
  EXPECT_NE(read_text(p("other.md")).find("is of class gpu-h100-x1"), std::string::npos);
}

// The same gate with the history on a PostgreSQL server (a throwaway one, started by the test).
TEST_F(LearnedNoiseCli, PostgresHistoryGatesLikeSqlite) {
  if (!history::backend_available(history::Backend::postgresql)) GTEST_SKIP() << "built without libpq";
  PostgresServer server;
  if (!server.running()) GTEST_SKIP() << server.reason();
  const std::string pg = server.create_database("gate");
  ASSERT_FALSE(pg.empty());
  const std::string db = p("h.db");
  record_history(db);
  record_history(pg);
  write_sides("base");
  const std::string cmp = "compare " + quote(files("base")) + " " + quote(files("cur")) + " --quiet --json ";
  std::string err;
  ASSERT_EQ(cli(cmp + quote(p("sqlite.json")) + " --history " + quote(db), &err).code, 1) << err;
  ASSERT_EQ(cli(cmp + quote(p("pg.json")) + " --history " + quote(pg), &err).code, 1) << err;
  EXPECT_EQ(verdicts(p("pg.json")), verdicts(p("sqlite.json")));
  EXPECT_EQ(verdicts(p("pg.json"))["s/quiet"], "regression");
}

// One recording of runs from two machine classes (a GPU host's CPU and GPU suites): one session per class.
TEST_F(LearnedNoiseCli, RecordSplitsRunsByClass) {
  write_gbench_run(p("cpu.json"), {{"s/a", 100}}, 1);
  write_gbench_run(p("other.json"), {{"t/a", 100}}, 2,
                   {{"perfgate.cpu_model", "AMD EPYC Test"},
                    {"perfgate.amx", "no"},
                    {"perfgate.suite", "t"},
                    {"perfgate.cpu_signature", "AuthenticAMD family 25 model 17"}});
  const std::string db = p("two.db");
  auto r =
      cli("history record --db " + quote(db) + " --commit abc " + quote(p("cpu.json")) + " " + quote(p("other.json")));
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_EQ(cli("history list --db " + quote(db) + " --quiet --json " + quote(p("list.json"))).code, 0);
  const auto list = nlohmann::json::parse(read_text(p("list.json")));
  ASSERT_EQ(list.size(), 2u);
  std::set<std::string> classes;
  for (const auto& s : list) classes.insert(s["machine_class"].get<std::string>());
  EXPECT_TRUE(classes.count("cpu-xeon-amx-2c")) << list.dump();
  // A CPU class with a CPU signature carries its generation.
  EXPECT_TRUE(classes.count("cpu-epyc-2c.amd-family25-model17")) << list.dump();
}

}  // namespace
