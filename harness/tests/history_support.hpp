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

#include "perfgate/history.hpp"
#include "perfgate/stats.hpp"
#include "test_support.hpp"

namespace perfgate::test_support {

// One process run of a CPU suite "s" as Google Benchmark JSON: each benchmark 3 repetitions around its center
// (relative SD `sd`), with a rate; `context` entries are added to (or replace) the default context of a 2-core
// AMX Xeon runner.
inline void write_gbench_run(const std::filesystem::path& file,
                             const std::vector<std::pair<std::string, double>>& benches, std::uint64_t seed,
                             const nlohmann::json& context = nlohmann::json::object(), double sd = 0.005) {
  nlohmann::json j;
  j["context"] = {{"date", "2026-11-22T00:00:00+00:00"},
                  {"host_name", "runner7"},
                  {"executable", "bin/bench_s"},
                  {"num_cpus", 2},
                  {"mhz_per_cpu", 2000},
                  {"cpu_scaling_enabled", false},
                  {"caches", nlohmann::json::array()},
                  {"library_build_type", "release"},
                  {"perfgate.cpu_model", "Intel(R) Xeon(R) Test"},
                  {"perfgate.cpu_cores", "2"},
                  {"perfgate.amx", "yes"},
                  {"perfgate.suite", "s"}};
  for (auto it = context.begin(); it != context.end(); ++it) j["context"][it.key()] = it.value();
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& [name, center] : benches) {
    const auto samples = noisy(center, sd, 3, seed++);
    for (int i = 0; i < 3; ++i)
      arr.push_back({{"name", name},
                     {"family_index", 0},
                     {"per_family_instance_index", 0},
                     {"run_name", name},
                     {"run_type", "iteration"},
                     {"repetitions", 3},
                     {"repetition_index", i},
                     {"threads", 1},
                     {"iterations", 100},
                     {"real_time", samples[static_cast<std::size_t>(i)]},
                     {"cpu_time", samples[static_cast<std::size_t>(i)]},
                     {"time_unit", "ns"},
                     {"bytes_per_second", 1e12 / samples[static_cast<std::size_t>(i)]}});
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
    const std::pair<const char*, MetricKind> metrics[] = {
        {"bytes_per_second", MetricKind::rate}, {"phase.main", MetricKind::phase}, {"time", MetricKind::latency}};
    for (const auto& [metric, kind] : metrics) {
      history::SeriesSamples s;
      s.benchmark = name;
      s.metric = metric;
      s.kind = kind;
      for (int p = 0; p < runs; ++p)
        for (int k = 0; k < reps; ++k) {
          const double v = level * (1 + 0.01 * rng.normal());
          s.process_run.push_back(p);
          s.values.push_back(kind == MetricKind::rate ? 1e12 / v : v);
        }
      std::vector<double> copy = s.values;
      s.median = stats::median_inplace(copy);
      r.series.push_back(std::move(s));
    }
  }
  return r;
}

// Runs a shell command; returns its exit status (-1 when it did not exit normally).
inline int shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Output of a shell command (stdout and stderr) and its exit status.
struct ShellResult {
  int code = -1;
  std::string output;
};
inline ShellResult shell_output(const std::string& command) {
  ShellResult r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
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
