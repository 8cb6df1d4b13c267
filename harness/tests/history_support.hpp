// Helpers of the history tests (header-only, not a test source): synthetic sessions, raw SQL against
// both backends, and a throwaway PostgreSQL server.
#pragma once

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#ifdef PERFGATE_TEST_HAVE_SQLITE
#include <sqlite3.h>
#endif

#include "perfgate/history.hpp"
#include "perfgate/stats.hpp"
#include "synthetic_history.hpp"
#include "test_support.hpp"

namespace perfgate::test_support {

// One process run of a CPU suite "s" as Google Benchmark JSON: each benchmark 3 repetitions around its center
// (relative SD `sd`), with a rate; `context` entries are added to (or replace) the default context of a 2-core
// AMX Xeon runner.
inline void write_gbench_run(const std::filesystem::path& file,
                             const std::vector<std::pair<std::string, double>>& benches, std::uint64_t seed,
                             const nlohmann::json& context = nlohmann::json::object(), double sd = 0.005) {
  nlohmann::json j;
  j["context"] = gbench_context("runner7");
  for (auto it = context.begin(); it != context.end(); ++it) j["context"][it.key()] = it.value();
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& [name, center] : benches) {
    const auto samples = noisy(center, sd, 3, seed++);
    for (int i = 0; i < 3; ++i) {
      const double time = samples[static_cast<std::size_t>(i)];
      auto repetition = gbench_repetition(name, 3, i, time);
      repetition["bytes_per_second"] = 1e12 / time;
      arr.push_back(std::move(repetition));
    }
  }
  j["benchmarks"] = arr;
  std::ofstream(file) << j.dump(1);
}

// A session of `benchmarks` benchmarks with a time, a rate and a phase each, `runs` process runs of
// `reps` repetitions; values around `scale` times a per-benchmark level.
inline history::SessionRecord synthetic_session(const std::string& commit, const std::string& time, int benchmarks,
                                                int runs, int reps, double scale, std::uint64_t seed,
                                                const std::string& machine_class = "cpu-test-2c") {
  history::SessionRecord r;
  r.info.machine_class = machine_class;
  r.info.commit = commit;
  r.info.time = history::normalise_iso8601(time);
  r.info.host = "testhost";
  r.info.perfgate_version = "test";
  for (int p = 0; p < runs; ++p) r.process_runs.push_back({fmt::format("run{}.json", p), {{"host_name", "testhost"}}});
  stats::SplitMix64 rng(seed);
  for (int b = 0; b < benchmarks; ++b) {
    const std::string name = fmt::format("suite/bench{:04d}", b);
    const double level = 1000.0 * (1 + b % 7) * scale;
    add_synthetic_series(r, name, runs, reps, [&] { return level * (1 + 0.01 * rng.normal()); });
  }
  return r;
}

// SQL statements on an SQLite history, run outside the store's code (to plant a newer schema or a foreign
// table); false when they fail or the tests were built without SQLite.
inline bool sqlite_exec(const std::string& file, const std::string& sql) {
#ifdef PERFGATE_TEST_HAVE_SQLITE
  sqlite3* db = nullptr;
  const bool ok = sqlite3_open(file.c_str(), &db) == SQLITE_OK &&
                  sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
  sqlite3_close(db);
  return ok;
#else
  (void)file;
  (void)sql;
  return false;
#endif
}

// A SELECT returning one integer from an existing SQLite history, run outside the store's code; -1 when it
// fails or the tests were built without SQLite.
inline long long sqlite_count(const std::string& file, const std::string& sql) {
#ifdef PERFGATE_TEST_HAVE_SQLITE
  sqlite3* db = nullptr;
  long long v = -1;
  if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
      v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return v;
#else
  (void)file;
  (void)sql;
  return -1;
#endif
}

// A private PostgreSQL server for one test process: initdb into a fresh folder under /tmp, listening
// only on a Unix socket in that folder, stopped and removed by the destructor. As root (CI) the server
// runs as the `postgres` user, because initdb refuses root. `reason` says why it could not start.
class PostgresServer {
 public:
  PostgresServer() {
    bin_ = find_bin_dir();
    if (bin_.empty()) {
      reason_ = "no PostgreSQL server binaries (initdb) under /usr/lib/postgresql/*/bin";
      return;
    }
    as_ = ::geteuid() == 0 ? "runuser -u postgres -- " : "";
    if (::geteuid() == 0 && shell("id postgres > /dev/null 2>&1") != 0) {
      reason_ = "running as root and there is no postgres user to run the server";
      return;
    }
    char tmpl[] = "/tmp/perfgate_pg_XXXXXX";
    if (!::mkdtemp(tmpl)) {
      reason_ = "cannot create a temporary folder";
      return;
    }
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0777);
    if (::geteuid() == 0) shell("chown postgres " + quote(dir_));
    port_ = 20000 + static_cast<int>(::getpid() % 20000);
    const std::string data = dir_ + "/data";
    if (shell(as_ + quote(bin_ + "/initdb") + " -D " + quote(data) + " -A trust -U postgres -E UTF8 --no-sync > " +
              quote(dir_ + "/initdb.log") + " 2>&1") != 0) {
      reason_ = "initdb failed (see " + dir_ + "/initdb.log)";
      return;
    }
    const std::string options =
        fmt::format("-c listen_addresses='' -k {} -p {} -c fsync=off -c max_connections=40", dir_, port_);
    if (shell(as_ + quote(bin_ + "/pg_ctl") + " -D " + quote(data) + " -o " + quote(options) + " -w -t 30 -l " +
              quote(dir_ + "/server.log") + " start > /dev/null 2>&1") != 0) {
      reason_ = "pg_ctl start failed (see " + dir_ + "/server.log)";
      return;
    }
    running_ = true;
  }
  ~PostgresServer() {
    if (running_)
      shell(as_ + quote(bin_ + "/pg_ctl") + " -D " + quote(dir_ + "/data") + " -m immediate -w stop > /dev/null 2>&1");
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  bool running() const { return running_; }
  const std::string& reason() const { return reason_; }

  // A fresh database of its own for each caller.
  std::string create_database(const std::string& name) {
    if (psql("postgres", "CREATE DATABASE " + name).code != 0) return {};
    return url(name);
  }
  std::string url(const std::string& database) const {
    return fmt::format("postgresql:///{}?host={}&port={}&user=postgres", database, dir_, port_);
  }
  // Runs SQL through psql (unaligned, tuples only).
  ShellResult psql(const std::string& database, const std::string& sql) const {
    return shell_output(fmt::format("{} -X -q -t -A -h {} -p {} -U postgres -d {} -c {}", quote(bin_ + "/psql"),
                                    quote(dir_), port_, database, quote(sql)));
  }

 private:
  static std::string find_bin_dir() {
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/usr/lib/postgresql", ec))
      if (std::filesystem::exists(entry.path() / "bin" / "initdb")) found.push_back((entry.path() / "bin").string());
    std::sort(found.begin(), found.end());
    return found.empty() ? std::string() : found.back();
  }

  std::string bin_, as_, dir_, reason_;
  int port_ = 0;
  bool running_ = false;
};

// The base of the tests that run the perfgate CLI against an SQLite history: skips without the CLI or SQLite,
// a fresh folder, `p(name)` inside it and `cli(args)` with stderr kept.
class HistoryCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(PERFGATE_CLI_PATH)) GTEST_SKIP() << "perfgate CLI not built: " << PERFGATE_CLI_PATH;
    if (!history::backend_available(history::Backend::sqlite)) GTEST_SKIP() << "built without SQLite";
    ::unsetenv("PERFGATE_MACHINE_CLASS");
    ::unsetenv("PERFGATE_HISTORY");
  }
  std::string p(const std::string& name) const { return (dir_.path / name).string(); }
  // Runs `perfgate ARGS`; stderr goes to a file, returned in `err`.
  ShellResult cli(const std::string& args, std::string* err = nullptr, const std::string& env = "") const {
    const std::string err_file = p("stderr.txt");
    auto r = shell_output("(" + env + " " + quote(PERFGATE_CLI_PATH) + " " + args + " 2> " + quote(err_file) + ")");
    if (err) *err = read_text(err_file);
    return r;
  }
  TempDir dir_;
};

}  // namespace perfgate::test_support
