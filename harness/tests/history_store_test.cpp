// The results history store (perfgate/history.hpp) on both backends: round trip, 8 concurrent writers,
// writers killed at random points, and bad input (corrupt, foreign, newer schema, bad URL, no server).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "history_support.hpp"
#include "perfgate/change_points.hpp"
#include "perfgate/history.hpp"
#include "perfgate/loader.hpp"
#include "test_support.hpp"

// gtest names a parameter it cannot print by its bytes ("4-byte object <00-00 00-00>"), and CMake 3.28's
// test discovery reads that text into the ctest name, which breaks the generated script: print the name.
namespace perfgate::history {
void PrintTo(Backend backend, std::ostream* os) { *os << (backend == Backend::sqlite ? "sqlite" : "postgresql"); }
}  // namespace perfgate::history

namespace {

using namespace perfgate;
using namespace perfgate::test_support;
namespace fs = std::filesystem;
using history::Backend;

// One server per test process (ctest runs each test in its own process; a whole-binary run shares it).
PostgresServer& postgres() {
  static PostgresServer server;
  return server;
}

// A fresh, empty history of the given backend for one test, with raw SQL access to check it.
class Fresh {
 public:
  explicit Fresh(Backend backend) : backend_(backend) {
    static int counter = 0;
    const std::string name = fmt::format("h{}_{}", ::getpid(), counter++);
    if (backend == Backend::sqlite) {
      url_ = (dir_.path / (name + ".db")).string();
    } else if (postgres().running()) {
      url_ = postgres().create_database(name);
      database_ = name;
    }
  }
  const std::string& url() const { return url_; }
  Backend backend() const { return backend_; }

  // SELECT returning one integer, run outside the store's code.
  long long count(const std::string& sql) const {
    if (backend_ == Backend::postgresql) {
      const auto r = postgres().psql(database_, sql);
      return r.code == 0 ? std::atoll(r.output.c_str()) : -1;
    }
    return sqlite_count(url_, sql);
  }
  // PostgreSQL: waits until the server has finished with the killed clients' connections (a client
  // killed after sending COMMIT still commits), so that counts are final.
  void settle() const {
    if (backend_ != Backend::postgresql) return;
    for (int i = 0; i < 100; ++i) {
      const auto r = postgres().psql(database_,
                                     "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                     "AND pid <> pg_backend_pid()");
      if (r.code == 0 && std::atoll(r.output.c_str()) == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  // Statements outside the store's code (to plant a newer schema or a foreign table).
  bool exec(const std::string& sql) const {
    if (backend_ == Backend::postgresql) return postgres().psql(database_, sql).code == 0;
    return sqlite_exec(url_, sql);
  }

 private:
  Backend backend_;
  TempDir dir_;
  std::string url_, database_;
};

class HistoryStore : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (!history::backend_available(GetParam())) GTEST_SKIP() << "this build has no such backend";
    if (GetParam() == Backend::postgresql && !postgres().running())
      GTEST_SKIP() << "no PostgreSQL server for the test: " << postgres().reason();
    fresh_ = std::make_unique<Fresh>(GetParam());
    ASSERT_FALSE(fresh_->url().empty());
  }
  std::unique_ptr<Fresh> fresh_;
};

std::string backend_name(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::sqlite ? "sqlite" : "postgresql";
}

// Rows a whole session of `record` leaves in the tables.
long long samples_in(const history::SessionRecord& record) {
  long long n = 0;
  for (const auto& s : record.series) n += static_cast<long long>(s.values.size());
  return n;
}

TEST_P(HistoryStore, RoundTripKeepsEverySampleAndOrdersSessionsByTime) {
  auto store = history::open_store(fresh_->url(), history::OpenMode::create);
  EXPECT_EQ(store->schema_version(), history::kSchemaVersion);
  const auto later = synthetic_session("bbb", "2026-11-21T10:00:00Z", 4, 2, 3, 1.10, 2);
  const auto earlier = synthetic_session("aaa", "2026-11-20T10:00:00+02:00", 4, 2, 3, 1.00, 1);
  const auto id_later = store->record(later);
  const auto id_earlier = store->record(earlier);

  const auto sessions = store->list_sessions();
  ASSERT_EQ(sessions.size(), 2u);
  EXPECT_EQ(sessions[0].info.commit, "aaa");  // by time, not by insertion
  EXPECT_EQ(sessions[0].info.time, "2026-11-20T08:00:00Z");
  EXPECT_EQ(sessions[1].id, id_later);
  EXPECT_EQ(sessions[0].series, 12);
  EXPECT_EQ(sessions[0].process_runs, 2);
  EXPECT_EQ(store->list_sessions({"", "", 1}).front().info.commit, "bbb");
  EXPECT_EQ(store->list_sessions({"", "aaa", 0}).size(), 1u);
  EXPECT_EQ(store->machine_classes(), std::vector<std::string>{"cpu-test-2c"});

  const auto loaded = store->load_session(id_earlier);
  ASSERT_TRUE(loaded.has_value());
  ASSERT_EQ(loaded->series.size(), earlier.series.size());
  for (std::size_t i = 0; i < earlier.series.size(); ++i) {
    EXPECT_EQ(loaded->series[i].benchmark, earlier.series[i].benchmark);
    EXPECT_EQ(loaded->series[i].metric, earlier.series[i].metric);
    EXPECT_EQ(loaded->series[i].kind, earlier.series[i].kind);
    EXPECT_EQ(loaded->series[i].values, earlier.series[i].values);  // exact: doubles round-trip
    EXPECT_EQ(loaded->series[i].process_run, earlier.series[i].process_run);
  }
  ASSERT_EQ(loaded->process_runs.size(), 2u);
  EXPECT_EQ(loaded->process_runs[1].source_file, "run1.json");
  EXPECT_EQ(loaded->process_runs[1].fields.at("host_name"), "testhost");
  EXPECT_FALSE(store->load_session(id_later + 1000).has_value());

  const auto h = store->class_history("cpu-test-2c");
  ASSERT_EQ(h.series.size(), 12u);
  ASSERT_EQ(h.series[0].points.size(), 2u);
  EXPECT_EQ(h.series[0].points[0].session_id, id_earlier);
  EXPECT_DOUBLE_EQ(h.series[0].points[0].median, earlier.series[0].median);
  const auto one = store->series({"cpu-test-2c", h.series[0].key.benchmark, h.series[0].key.metric, MetricKind::info});
  EXPECT_EQ(one.key.kind, h.series[0].key.kind);
  ASSERT_EQ(one.points.size(), 2u);
  EXPECT_EQ(one.points[0].session_id, id_earlier);
  EXPECT_DOUBLE_EQ(one.points[1].median, h.series[0].points[1].median);
  EXPECT_EQ(one.points[1].samples, 6);
  const auto last = store->series(one.key, 1);
  ASSERT_EQ(last.points.size(), 1u);
  EXPECT_EQ(last.points[0].session_id, id_later);
  EXPECT_TRUE(store->series({"cpu-test-2c", "no/such", "time", MetricKind::latency}).points.empty());
  const auto window = store->class_history("cpu-test-2c", 1);
  ASSERT_EQ(window.sessions.size(), 1u);
  EXPECT_EQ(window.series[0].points.size(), 1u);
  EXPECT_EQ(window.series[0].points[0].session_id, id_later);
}

TEST_P(HistoryStore, EightConcurrentWritersLoseNothing) {
  constexpr int kWriters = 8, kSessionsEach = 5;
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // The child never returns into gtest, and leaves with _exit (no static destructors: the server stays up).
      int code = 0;
      try {
        auto store = history::open_store(fresh_->url(), history::OpenMode::create);
        for (int k = 0; k < kSessionsEach; ++k)
          store->record(synthetic_session(fmt::format("w{}-{}", w, k),
                                          fmt::format("2026-11-20T10:{:02d}:{:02d}Z", w, k), 50, 2, 3, 1.0,
                                          (static_cast<std::uint64_t>(w) * 100) + static_cast<std::uint64_t>(k)));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d: %s\n", w, e.what());
        code = 1;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer failed";
  }
  auto store = history::open_store(fresh_->url());
  const auto sessions = store->list_sessions();
  ASSERT_EQ(sessions.size(), static_cast<std::size_t>(kWriters * kSessionsEach));
  std::set<std::string> commits;
  for (const auto& s : sessions) commits.insert(s.info.commit);
  EXPECT_EQ(commits.size(), sessions.size());
  const long long per_session = samples_in(synthetic_session("x", "2026-11-20", 50, 2, 3, 1.0, 0));
  EXPECT_EQ(fresh_->count("SELECT count(*) FROM samples"),
            static_cast<long long>(kWriters) * kSessionsEach * per_session);
  EXPECT_EQ(fresh_->count("SELECT count(*) FROM series"), 150);  // each series created once
  EXPECT_EQ(fresh_->count("SELECT count(*) FROM session_medians"), kWriters * kSessionsEach * 150);
}

TEST_P(HistoryStore, WriterKilledAtRandomPointsLeavesEachSessionWholeOrAbsent) {
  const auto record = synthetic_session("kill", "2026-11-20T10:00:00Z", 200, 3, 3, 1.0, 7);
  const long long per_session = samples_in(record);
  // How long one open + record takes here (after the schema exists), so that the kills land anywhere
  // inside it.
  history::open_store(fresh_->url(), history::OpenMode::create)->record(record);
  const auto t0 = std::chrono::steady_clock::now();
  history::open_store(fresh_->url(), history::OpenMode::create)->record(record);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  stats::SplitMix64 rng(20261125);
  constexpr int kKills = 30;
  int killed = 0;
  for (int i = 0; i < kKills; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        history::open_store(fresh_->url(), history::OpenMode::create)->record(record);
      } catch (...) { ::_exit(1); }
      ::_exit(0);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(rng.uniform() * 1.2 * seconds));
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    killed += WIFSIGNALED(status) ? 1 : 0;
    if (WIFEXITED(status)) { EXPECT_EQ(WEXITSTATUS(status), 0); }
  }
  RecordProperty("killed_mid_way_or_before", killed);
  EXPECT_GT(killed, 0);

  fresh_->settle();
  auto store = history::open_store(fresh_->url());
  const long long sessions = static_cast<long long>(store->list_sessions().size());
  std::printf("%d writers killed, %d finished; %lld sessions in the history (two recorded before)\n", killed,
              kKills - killed, sessions);
  // Some kills must have landed before the commit, or the test proves nothing.
  EXPECT_LT(sessions, 2 + kKills);
  EXPECT_GE(sessions, 2);
  EXPECT_EQ(fresh_->count("SELECT count(*) FROM samples"), sessions * per_session);
  EXPECT_EQ(fresh_->count("SELECT count(*) FROM session_medians"),
            sessions * static_cast<long long>(record.series.size()));
  EXPECT_EQ(fresh_->count("SELECT count(*) FROM process_runs"), sessions * 3);
  EXPECT_EQ(fresh_->count("SELECT count(*) FROM samples WHERE session_id NOT IN (SELECT id FROM sessions)"), 0);
  if (GetParam() == Backend::sqlite) {
#ifdef PERFGATE_TEST_HAVE_SQLITE
    EXPECT_EQ(fresh_->count("SELECT count(*) FROM pragma_integrity_check WHERE integrity_check <> 'ok'"), 0);
#endif
  }
  // And it still takes writes.
  store->record(record);
  EXPECT_EQ(static_cast<long long>(store->list_sessions().size()), sessions + 1);
}

TEST_P(HistoryStore, NewerSchemaIsRefusedAndNothingIsWritten) {
  history::open_store(fresh_->url(), history::OpenMode::create)
      ->record(synthetic_session("a", "2026-11-20", 2, 1, 2, 1, 1));
  ASSERT_TRUE(fresh_->exec("UPDATE schema_version SET version = 99"));
  try {
    auto store = history::open_store(fresh_->url(), history::OpenMode::create);
    ADD_FAILURE() << "a schema version 99 database was opened";
  } catch (const history::HistoryError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("schema version 99 is newer"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
  EXPECT_EQ(fresh_->count("SELECT count(*) FROM sessions"), 1);
}

TEST_P(HistoryStore, ForeignDatabaseIsRefusedAndLeftAlone) {
  ASSERT_TRUE(fresh_->exec("CREATE TABLE sessions (x INTEGER); INSERT INTO sessions VALUES (42)"));
  const auto bytes_before = GetParam() == Backend::sqlite ? read_text(fresh_->url()) : std::string();
  for (auto mode : {history::OpenMode::create, history::OpenMode::existing_only}) {
    try {
      history::open_store(fresh_->url(), mode);
      ADD_FAILURE() << "a foreign database was opened";
    } catch (const history::HistoryError& e) {
      EXPECT_NE(std::string(e.what()).find("not a perfgate history"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(fresh_->count("SELECT count(*) FROM sessions"), 1);
  EXPECT_EQ(fresh_->count("SELECT x FROM sessions"), 42);
  if (GetParam() == Backend::sqlite) { EXPECT_EQ(read_text(fresh_->url()), bytes_before); }
}

TEST_P(HistoryStore, ReadersRefuseAHistoryThatDoesNotExist) {
  EXPECT_THROW(history::open_store(fresh_->url(), history::OpenMode::existing_only), history::HistoryError);
  if (GetParam() == Backend::sqlite) { EXPECT_FALSE(fs::exists(fresh_->url())); }
}

// Schema 2 keeps what a sharded run needs (shard, exit code, report, costs) and each median's spread.
TEST_P(HistoryStore, SchemaTwoKeepsShardExitCodeReportCostsAndSpread) {
  auto store = history::open_store(fresh_->url(), history::OpenMode::create);
  auto record = synthetic_session("c1", "2026-11-25T10:00:00Z", 2, 3, 4, 1.0, 7);
  record.info.shard_index = 2;
  record.info.shard_count = 3;
  record.info.exit_code = 1;
  record.report = R"({"schema": "perfgate.report/1", "benchmarks": []})";
  record.costs = {{"suite/bench0000", 0.25}, {"suite/bench0001", 1.5}};
  const auto id = store->record(record);
  auto later = synthetic_session("c2", "2026-11-25T11:00:00Z", 1, 3, 4, 1.0, 8);
  later.costs = {{"suite/bench0000", 0.5}};
  const auto id2 = store->record(later);

  const auto sessions = store->list_sessions();
  ASSERT_EQ(sessions.size(), 2u);
  EXPECT_EQ(sessions[0].info.shard_index, 2);
  EXPECT_EQ(sessions[0].info.shard_count, 3);
  EXPECT_EQ(sessions[0].info.exit_code, 1);
  EXPECT_EQ(sessions[1].info.shard_count, 0);
  EXPECT_EQ(sessions[1].info.exit_code, -1);
  EXPECT_EQ(store->session_report(id), record.report);
  EXPECT_EQ(store->session_report(id2), "");
  // The latest cost of each benchmark.
  constexpr double kAll = std::numeric_limits<double>::infinity();
  EXPECT_EQ(store->benchmark_costs("", kAll),
            (std::map<std::string, double>{{"suite/bench0000", 0.5}, {"suite/bench0001", 1.5}}));
  EXPECT_TRUE(store->benchmark_costs("no-such-class", kAll).empty());
  // Only sessions up to the cutoff: the first one's costs.
  EXPECT_EQ(store->benchmark_costs("cpu-test-2c", history::iso8601_to_unix("2026-11-25T10:30:00Z")),
            (std::map<std::string, double>{{"suite/bench0000", 0.25}, {"suite/bench0001", 1.5}}));
  EXPECT_TRUE(store->benchmark_costs("", history::iso8601_to_unix("2026-11-25T09:00:00Z")).empty());

  // The spread of each median: the lowest and highest process-run median, computed here independently.
  const auto h = store->class_history("cpu-test-2c");
  for (const auto& series : record.series) {
    std::vector<double> run_medians;
    for (int run = 0; run < 3; ++run) {
      std::vector<double> v;
      for (std::size_t i = 0; i < series.values.size(); ++i)
        if (series.process_run[i] == run) v.push_back(series.values[i]);
      std::sort(v.begin(), v.end());
      run_medians.push_back((v[1] + v[2]) / 2);  // 4 repetitions
    }
    const auto it = std::find_if(h.series.begin(), h.series.end(), [&](const history::Series& s) {
      return s.key.benchmark == series.benchmark && s.key.metric == series.metric;
    });
    ASSERT_NE(it, h.series.end());
    EXPECT_DOUBLE_EQ(it->points.front().low, *std::min_element(run_medians.begin(), run_medians.end()));
    EXPECT_DOUBLE_EQ(it->points.front().high, *std::max_element(run_medians.begin(), run_medians.end()));
    const auto one = store->series(it->key);
    ASSERT_FALSE(one.points.empty());
    EXPECT_DOUBLE_EQ(one.points.front().low, it->points.front().low);
    EXPECT_DOUBLE_EQ(one.points.front().high, it->points.front().high);
  }
}

// A schema-1 history (the version 2 additions dropped by hand) is migrated on open: the spread of every
// stored median is filled from its samples by SQL, and must equal what a fresh record computes in C++.
TEST_P(HistoryStore, MigratesSchemaOneAndFillsTheSpreadFromTheSamples) {
  std::vector<history::SeriesPoint> before;
  {
    auto store = history::open_store(fresh_->url(), history::OpenMode::create);
    store->record(synthetic_session("c1", "2026-11-25T10:00:00Z", 3, 3, 4, 1.0, 11));  // even repetitions
    store->record(synthetic_session("c2", "2026-11-25T11:00:00Z", 3, 2, 3, 1.1, 12));  // odd repetitions
    for (const auto& s : store->class_history("cpu-test-2c").series)
      before.insert(before.end(), s.points.begin(), s.points.end());
  }
  ASSERT_TRUE(fresh_->exec("DROP INDEX sessions_by_commit"));
  for (const char* column : {"shard_index", "shard_count", "exit_code", "report"})
    ASSERT_TRUE(fresh_->exec(fmt::format("ALTER TABLE sessions DROP COLUMN {}", column))) << column;
  ASSERT_TRUE(fresh_->exec("ALTER TABLE session_medians DROP COLUMN low"));
  ASSERT_TRUE(fresh_->exec("ALTER TABLE session_medians DROP COLUMN high"));
  ASSERT_TRUE(fresh_->exec("DROP TABLE benchmark_costs"));
  ASSERT_TRUE(fresh_->exec("ALTER TABLE series DROP COLUMN suite"));
  ASSERT_TRUE(fresh_->exec("UPDATE schema_version SET version = 1"));
  ASSERT_EQ(fresh_->count("SELECT max(version) FROM schema_version"), 1);

  auto store = history::open_store(fresh_->url(), history::OpenMode::existing_only);
  EXPECT_EQ(store->schema_version(), history::kSchemaVersion);
  EXPECT_EQ(fresh_->count("SELECT count(*) FROM schema_version"), 1);
  std::vector<history::SeriesPoint> after;
  for (const auto& s : store->class_history("cpu-test-2c").series)
    after.insert(after.end(), s.points.begin(), s.points.end());
  ASSERT_EQ(after.size(), before.size());
  ASSERT_EQ(after.size(), 2u * 3u * 3u);
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_NEAR(after[i].low, before[i].low, 1e-9 * before[i].low) << i;
    EXPECT_NEAR(after[i].high, before[i].high, 1e-9 * before[i].high) << i;
    EXPECT_LT(after[i].low, after[i].high) << i;
  }
  const auto sessions = store->list_sessions();
  ASSERT_EQ(sessions.size(), 2u);
  EXPECT_EQ(sessions[0].info.shard_count, 0);
  EXPECT_EQ(sessions[0].info.exit_code, -1);
  EXPECT_TRUE(store->benchmark_costs("", std::numeric_limits<double>::infinity()).empty());
  // A series stored without its suite reads as suite_of_benchmark of its name.
  for (const auto& s : store->class_history("cpu-test-2c").series) EXPECT_EQ(s.suite, "suite") << s.key.benchmark;
  // And it takes the current schema's writes.
  auto record = synthetic_session("c3", "2026-11-25T12:00:00Z", 1, 1, 1, 1.0, 13);
  record.costs = {{"suite/bench0000", 2.0}};
  store->record(record);
  EXPECT_EQ(store->benchmark_costs("", std::numeric_limits<double>::infinity()).at("suite/bench0000"), 2.0);
}

// A plain Google Benchmark binary's benchmarks (BM_F0, BM_F1, ...: every name its own family) are one suite named
// after the binary, so that their sessions' common mode is found as the binary's, as the gate reports them.
TEST_P(HistoryStore, APlainBinarysBenchmarksAreOneSuiteWhoseCommonModeIsFound) {
  TempDir dir;
  auto store = history::open_store(fresh_->url(), history::OpenMode::create);
  const nlohmann::json context = {{"executable", "/opt/build/my_bench"}, {"perfgate.suite", ""}};
  for (int session = 0; session < 24; ++session) {
    std::vector<std::pair<std::string, double>> benches;
    for (int b = 0; b < 12; ++b)  // the machine drifts 10% slower from session 12
      benches.emplace_back(fmt::format("BM_F{}", b), 1000.0 * (1 + b) * (session >= 12 ? 1.10 : 1.0));
    const fs::path file = dir.path / fmt::format("run{}.json", session);
    write_gbench_run(file, benches, 100 + static_cast<std::uint64_t>(session) * 20, context);
    history::SessionInfo info;
    info.machine_class = "cpu-test-2c";
    info.commit = fmt::format("c{}", session);
    info.time = fmt::format("2026-11-20T10:{:02d}:00Z", session);
    store->record(history::make_session_record(load_results({file.string()}), info));
  }
  const auto h = store->class_history("cpu-test-2c");
  ASSERT_FALSE(h.series.empty());
  for (const auto& s : h.series) EXPECT_EQ(s.suite, "my_bench") << s.key.benchmark << " " << s.key.metric;
  EXPECT_EQ(store->series({"cpu-test-2c", "BM_F3", "time"}).suite, "my_bench");
  EXPECT_EQ(store->load_session(h.sessions.front().id)->series.front().suite, "my_bench");
  const auto changes = history::find_changes(h);
  ASSERT_FALSE(changes.empty());
  for (const auto& c : changes) {
    EXPECT_EQ(c.key.benchmark, "my_bench/*") << c.key.benchmark << " " << c.key.metric;
    EXPECT_EQ(c.commit, "c12");
  }

  // A later recording that names another suite moves the series there; one that names none leaves it.
  auto renamed = synthetic_session("r1", "2026-11-21T10:00:00Z", 1, 1, 3, 1.0, 7);
  for (auto& s : renamed.series) s.suite = "renamed";
  store->record(renamed);
  auto unnamed = synthetic_session("r2", "2026-11-21T11:00:00Z", 1, 1, 3, 1.0, 8);
  store->record(unnamed);
  for (const auto& s : store->class_history("cpu-test-2c").series) {
    if (s.key.benchmark == "suite/bench0000") {
      EXPECT_EQ(s.suite, "renamed") << s.key.metric;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, HistoryStore, ::testing::Values(Backend::sqlite, Backend::postgresql), backend_name);

// ---- SQLite files that are not histories ----------------------------------------------------------

class SqliteBadFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!history::backend_available(Backend::sqlite)) GTEST_SKIP() << "built without SQLite";
  }
  TempDir dir_;
};

TEST_F(SqliteBadFiles, GarbageFileIsRefusedUnchanged) {
  const auto file = dir_.path / "garbage.db";
  std::string garbage(8192, '\0');
  stats::SplitMix64 rng(3);
  for (auto& c : garbage) c = static_cast<char>(rng.below(256));
  std::ofstream(file, std::ios::binary) << garbage;
  for (auto mode : {history::OpenMode::create, history::OpenMode::existing_only}) {
    try {
      history::open_store(file.string(), mode);
      ADD_FAILURE() << "garbage opened";
    } catch (const history::HistoryError& e) {
      EXPECT_EQ(std::string(e.what()), file.string() + ": not a readable SQLite history: file is not a database");
    }
  }
  EXPECT_EQ(read_text(file), garbage);
  EXPECT_FALSE(fs::exists(file.string() + "-wal"));
}

TEST_F(SqliteBadFiles, CorruptPagesGiveAnErrorNamingTheFile) {
  const auto file = dir_.path / "corrupt.db";
  {
    auto store = history::open_store(file.string(), history::OpenMode::create);
    for (int i = 0; i < 3; ++i)
      store->record(synthetic_session(fmt::format("c{}", i), fmt::format("2026-11-2{}", i), 50, 2, 3, 1, 1));
  }  // closing the last connection checkpoints the WAL into the file
  std::string bytes = read_text(file);
  ASSERT_GT(bytes.size(), 3 * 4096u);
  for (std::size_t i = 4096; i < bytes.size(); ++i) bytes[i] = static_cast<char>(0xA5);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  try {
    auto store = history::open_store(file.string());
    store->list_sessions();
    store->class_history("cpu-test-2c");
    ADD_FAILURE() << "a corrupt history was read without an error";
  } catch (const history::HistoryError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(file.string() + ": ", 0), 0u) << e.what();
  }
}

TEST(HistoryUrl, FormsAndRefusals) {
  EXPECT_EQ(history::parse_history_url("h.db").backend, Backend::sqlite);
  EXPECT_EQ(history::parse_history_url("sqlite:/tmp/h.db").target, "/tmp/h.db");
  EXPECT_EQ(history::parse_history_url("sqlite:///tmp/h.db").target, "/tmp/h.db");
  const auto pg = history::parse_history_url("postgresql:///perf?host=/tmp/s&port=5433");
  EXPECT_EQ(pg.backend, Backend::postgresql);
  EXPECT_EQ(pg.target, "postgresql:///perf?host=/tmp/s&port=5433");
  EXPECT_EQ(history::parse_history_url("postgres://ci:hunter2@db.example/perf").display,
            "postgres://ci:***@db.example/perf");
  EXPECT_THROW(history::parse_history_url(""), history::HistoryError);
  EXPECT_THROW(history::parse_history_url("sqlite:"), history::HistoryError);
  EXPECT_THROW(history::parse_history_url("mysql://db/perf"), history::HistoryError);
}

TEST(HistoryPostgres, UnreachableServerAndBadUrlAreOneLineErrors) {
  if (!history::backend_available(Backend::postgresql)) GTEST_SKIP() << "built without libpq";
  TempDir dir;  // a socket folder with no server behind it
  const std::string url = fmt::format("postgresql:///perf?host={}&port=5999", dir.path.string());
  try {
    history::open_store(url, history::OpenMode::create);
    ADD_FAILURE() << "connected to nothing";
  } catch (const history::HistoryError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(url + ": cannot connect to the history server: ", 0), 0u) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_THROW(history::open_store("postgresql://u:pw@localhost:notaport/perf"), history::HistoryError);
}

TEST(HistoryTime, NormalisesIso8601ToUtc) {
  EXPECT_EQ(history::normalise_iso8601("2026-11-25T09:30:00+01:00"), "2026-11-25T08:30:00Z");
  EXPECT_EQ(history::normalise_iso8601("2026-11-25 08:30:00Z"), "2026-11-25T08:30:00Z");
  EXPECT_EQ(history::normalise_iso8601("2026-11-25"), "2026-11-25T00:00:00Z");
  EXPECT_EQ(history::normalise_iso8601("2026-11-25T08:30:00.25-0030"), "2026-11-25T09:00:00.250000Z");
  EXPECT_EQ(history::normalise_iso8601("2024-02-29T23:59:59Z"), "2024-02-29T23:59:59Z");
  EXPECT_DOUBLE_EQ(history::iso8601_to_unix("1970-01-02T00:00:00Z"), 86400.0);
  for (const char* bad : {"yesterday", "2026-13-01", "2026-11-25T25:00", "2026-11-25T10:00:00+", "2026-11-25junk"})
    EXPECT_THROW(history::normalise_iso8601(bad), InputError) << bad;
}

}  // namespace
