// perfgate history record|list|changes|noise, end to end through the CLI binary (SQLite).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "history_support.hpp"
#include "perfgate/history.hpp"
#include "test_support.hpp"

namespace {

using namespace perfgate;
using namespace perfgate::test_support;
namespace fs = std::filesystem;

class HistoryCli : public HistoryCliTest {
 protected:
  // Session k of a history where s/step gets 30% slower from session 10 on and s/flat stays.
  void record_session(const std::string& db, int k) {
    const std::string run = p(fmt::format("run{}.json", k));
    write_gbench_run(run, {{"s/flat", 1000.0}, {"s/step", k >= 10 ? 1300.0 : 1000.0}},
                     100 * static_cast<std::uint64_t>(k));
    // Recorded newest first: the order of the list must come from --time.
    const auto r =
        cli(fmt::format("history record --db {} --commit c{:02d} --branch main --time 2026-11-{:02d}T12:00:00+01:00 {}",
                        quote(db), k, 1 + k, quote(run)));
    ASSERT_EQ(r.code, 0) << r.output;
  }
};

// Six sessions with a 30% step show no change point at the default --max-p, and the command says why instead of a
// bare "0 change points"; twenty do not get the note.
TEST_F(HistoryCli, AHistoryTooShortForAChangePointSaysSo) {
  const std::string db = p("short.db");
  for (int k = 7; k < 13; ++k) record_session(db, k);
  auto r = cli("history changes --db " + quote(db) + " --markdown " + quote(p("short.md")));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("0 change points in 1 machine class\nnote: the longest series holds 6 sessions; at --max-p "
                          "0.001 a change point needs about "),
            std::string::npos)
      << r.output;
  EXPECT_NE(read_text(p("short.md")).find("Note: the longest series holds 6 sessions"), std::string::npos);
  for (int k = 0; k < 20; ++k)
    if (k < 7 || k >= 13) record_session(db, k);
  r = cli("history changes --db " + quote(db));
  EXPECT_EQ(r.output.find("note: the longest series"), std::string::npos) << r.output;
}

TEST_F(HistoryCli, RecordListAndChanges) {
  const std::string db = p("h.db");
  for (int k = 19; k >= 0; --k) record_session(db, k);

  ASSERT_EQ(cli("history list --db " + quote(db) + " --json " + quote(p("list.json")) + " --quiet").code, 0);
  const auto list = nlohmann::json::parse(read_text(p("list.json")));
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 20u);
  EXPECT_EQ(list[0]["commit"], "c00");
  EXPECT_EQ(list[0]["time"], "2026-11-01T11:00:00Z");
  EXPECT_EQ(list[0]["machine_class"], "cpu-xeon-amx-2c");  // from the files' context
  EXPECT_EQ(list[0]["branch"], "main");
  EXPECT_EQ(list[0]["host"], "runner7");
  EXPECT_EQ(list[19]["commit"], "c19");

  const auto r = cli("history changes --db sqlite:" + db + " --json " + quote(p("changes.json")) + " --markdown " +
                     quote(p("changes.md")));
  ASSERT_EQ(r.code, 0) << r.output;
  const auto changes = nlohmann::json::parse(read_text(p("changes.json")));
  ASSERT_TRUE(changes["changes"].is_array());
  // s/step: its time 30% slower, its bytes_per_second 30% slower too; s/flat: nothing.
  ASSERT_EQ(changes["changes"].size(), 2u) << changes.dump(1);
  for (const auto& c : changes["changes"]) {
    EXPECT_EQ(c["benchmark"], "s/step");
    EXPECT_EQ(c["commit"], "c10");
    EXPECT_EQ(c["commit_range"], "c09..c10");
    EXPECT_NEAR(c["change"].get<double>(), 0.30, 0.02);
    EXPECT_NEAR(c["cumulative_change"].get<double>(), 0.30, 0.02);
    EXPECT_GE(c["confidence"].get<double>(), 0.999);
    EXPECT_EQ(c["machine_class"], "cpu-xeon-amx-2c");
  }
  EXPECT_NE(read_text(p("changes.md")).find("| cpu-xeon-amx-2c | s/step | time | `c09..c10` |"), std::string::npos)
      << read_text(p("changes.md"));

  // Learned noise: s/flat over the whole window, s/step only since its change point.
  ASSERT_EQ(cli("history noise --db " + quote(db) + " --json " + quote(p("noise.json")) + " --quiet").code, 0);
  const auto noise = nlohmann::json::parse(read_text(p("noise.json")));
  EXPECT_EQ(noise["window"], 30);
  ASSERT_EQ(noise["noise"].size(), 4u);  // 2 benchmarks x (time, bytes_per_second)
  for (const auto& n : noise["noise"]) {
    const int expected_df = n["benchmark"] == "s/flat" ? 20 : 10;
    EXPECT_EQ(n["degrees_of_freedom"], expected_df) << n.dump();
    EXPECT_TRUE(n["sufficient"].get<bool>());
    EXPECT_GT(n["relative_sd"].get<double>(), 0.0005) << n.dump();  // 0.5% per repetition, medians of 3
    EXPECT_LT(n["relative_sd"].get<double>(), 0.01) << n.dump();
  }
}

TEST_F(HistoryCli, DatabaseComesFromPerfgateHistoryAndClassCanBeGiven) {
  const std::string db = p("env.db");
  write_gbench_run(p("r.json"), {{"s/a", 100.0}}, 1);
  ASSERT_EQ(cli("history record --commit abc --machine-class my-class " + quote(p("r.json")), nullptr,
                "PERFGATE_HISTORY=" + quote(db))
                .code,
            0);
  ASSERT_EQ(cli("history list --json " + quote(p("l.json")), nullptr, "PERFGATE_HISTORY=" + quote(db)).code, 0);
  const auto list = nlohmann::json::parse(read_text(p("l.json")));
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["machine_class"], "my-class");
  std::string err;
  EXPECT_EQ(cli("history list", &err).code, 2);
  EXPECT_NE(err.find("no history given"), std::string::npos) << err;
  // --history, the name perfgate run gives the same URL, and a table whose columns hold a long class.
  ASSERT_EQ(cli("history record --commit def --machine-class cpu-xeon-avx512-1c.intel-family6-model207 --history " +
                quote(db) + " " + quote(p("r.json")))
                .code,
            0);
  const auto listed = cli("history list --history " + quote(db));
  ASSERT_EQ(listed.code, 0) << listed.output;
  std::istringstream rows(listed.output);
  std::string header, first, second;
  std::getline(rows, header);
  std::getline(rows, first);
  std::getline(rows, second);
  const std::size_t column = header.find("commit");
  ASSERT_NE(column, std::string::npos) << listed.output;
  EXPECT_EQ(first.find("abc"), column) << listed.output;
  EXPECT_EQ(second.find("def"), column) << listed.output;
}

// Exit 2, one line on stderr that names the database, and nothing written.
void expect_refused(const ShellResult& r, const std::string& err, const std::string& names) {
  EXPECT_EQ(r.code, 2) << r.output << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find(names), std::string::npos) << err;
}

TEST_F(HistoryCli, BadHistoriesExitTwoWithOneLineAndWriteNothing) {
  write_gbench_run(p("r.json"), {{"s/a", 100.0}}, 1);
  const std::string run = quote(p("r.json"));
  std::string err;

  expect_refused(cli("history record --db mysql://db/perf --commit a " + run, &err), err, "mysql://db/perf");

  const std::string garbage = p("garbage.db");
  std::ofstream(garbage) << "this is not a database, just text that is long enough to have a header........";
  const std::string before = read_text(garbage);
  expect_refused(cli("history record --db " + quote(garbage) + " --commit a " + run, &err), err, garbage);
  EXPECT_EQ(read_text(garbage), before);

#ifdef PERFGATE_TEST_HAVE_SQLITE
  const std::string newer = p("newer.db");
  ASSERT_EQ(cli("history record --db " + quote(newer) + " --commit a " + run).code, 0);
  const int next = history::kSchemaVersion + 1;
  ASSERT_TRUE(sqlite_exec(newer, fmt::format("UPDATE schema_version SET version = {}", next)));
  expect_refused(cli("history record --db " + quote(newer) + " --commit b " + run, &err), err,
                 fmt::format("schema version {} is newer", next));
  EXPECT_NE(err.find(newer), std::string::npos) << err;
  EXPECT_EQ(sqlite_count(newer, "SELECT count(*) FROM sessions"), 1);  // nothing written
#endif
  const std::string missing = p("missing.db");
  expect_refused(cli("history list --db " + quote(missing), &err), err, missing);
  EXPECT_FALSE(fs::exists(missing));

  expect_refused(cli("history changes --db " + quote("postgresql:///perf?host=" + p("nosock") + "&port=5999"), &err),
                 err, "postgresql:///perf?host=");
  expect_refused(cli("history record --db " + quote(p("new.db")) + " --commit a --time yesterday " + run, &err), err,
                 "yesterday");
  EXPECT_FALSE(fs::exists(p("new.db")));
}

}  // namespace
