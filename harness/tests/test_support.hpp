// Helpers shared by the harness unit tests (header-only; not a test source itself, so the *_test.cpp
// glob in CMakeLists.txt leaves it out).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "perfgate/compare.hpp"
#include "perfgate/model.hpp"
#include "perfgate/runner.hpp"
#include "perfgate/stats.hpp"

namespace perfgate::test_support {

// Path of a file under harness/tests/data/.
inline std::string data(const std::string& rel) { return std::string(PERFGATE_TEST_DATA_DIR) + "/" + rel; }

// Whole file as bytes ("" when it cannot be read).
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh, empty temporary folder per test, removed afterwards.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("perfgate_harness_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// Samples around `center` with relative log-normal noise `sd`, reproducible.
inline std::vector<double> noisy(double center, double sd, int n, std::uint64_t seed) {
  stats::SplitMix64 rng(seed);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = center * std::exp(sd * rng.normal());
  return v;
}

inline Metric metric(const std::string& name, MetricKind kind, const std::vector<double>& samples, int run = 0) {
  Metric m;
  m.name = name;
  m.kind = kind;
  m.samples = samples;
  m.process_run.assign(samples.size(), run);
  return m;
}

// A benchmark timed by manual time (GPU style) with the given per-iteration times.
inline BenchmarkResult bench(const std::string& name, const std::vector<double>& times) {
  BenchmarkResult b;
  b.name = name;
  b.raw_name = name + "/manual_time";
  b.time_kind = "manual_time";
  b.time = metric("time", MetricKind::latency, times);
  return b;
}

// One process run's results: `context` as its context, the benchmarks indexed by name.
inline ResultSet result_set(RunContext context, std::vector<BenchmarkResult> benches) {
  ResultSet rs;
  rs.contexts.push_back(std::move(context));
  for (auto& b : benches) {
    rs.index[b.name] = rs.benchmarks.size();
    rs.benchmarks.push_back(std::move(b));
  }
  return rs;
}

// `benches` as read from `runs` process runs, files run0.json, run1.json, ... (contexts without marks).
inline ResultSet set_of(std::vector<BenchmarkResult> benches, int runs = 1) {
  ResultSet rs;
  for (int r = 0; r < runs; ++r) {
    RunContext c;
    c.source_file = "run" + std::to_string(r) + ".json";
    rs.contexts.push_back(c);
  }
  for (auto& b : benches) {
    rs.index[b.name] = rs.benchmarks.size();
    rs.benchmarks.push_back(std::move(b));
  }
  return rs;
}

// One process run of `benches` read from "run.json", whose context marks the benchmarks matching `pattern`
// under `key` (a suite's marks: compute-bound, host-dependent); no mark when `pattern` is empty.
inline ResultSet marked_run(std::vector<BenchmarkResult> benches, const std::string& key = "",
                            const std::string& pattern = "") {
  RunContext c;
  c.source_file = "run.json";
  if (!pattern.empty()) c.fields[key] = pattern;
  return result_set(std::move(c), std::move(benches));
}

// The options of a pure within-run analysis: no between-run prior, no removal of a suite's common drift.
inline CompareOptions within_run_options() {
  CompareOptions o;
  o.noise.run_noise_df = 0;
  o.noise.common_mode = false;
  return o;
}

// The context of a Google Benchmark JSON file of suite "s" from a 2-core AMX Xeon runner named `host`.
inline nlohmann::json gbench_context(const std::string& host) {
  return {{"date", "2026-11-22T00:00:00+00:00"},
          {"host_name", host},
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
}

// Repetition `index` of `reps` of the benchmark `run_name` in a Google Benchmark JSON file: 100 iterations
// of `time` ns each.
inline nlohmann::json gbench_repetition(const std::string& run_name, int reps, int index, double time) {
  return {{"name", run_name},
          {"family_index", 0},
          {"per_family_instance_index", 0},
          {"run_name", run_name},
          {"run_type", "iteration"},
          {"repetitions", reps},
          {"repetition_index", index},
          {"threads", 1},
          {"iterations", 100},
          {"real_time", time},
          {"cpu_time", time},
          {"time_unit", "ns"}};
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

// `s` single-quoted for the shell.
inline std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A shell script standing in for a Google Benchmark binary, written to dir/bench_fake: it lists `names` for
// --benchmark_list_tests=true and exits; otherwise it sets $out to its --benchmark_out path and runs `body`.
inline std::filesystem::path write_fake_bench(const std::filesystem::path& dir, const std::vector<std::string>& names,
                                              const std::string& body) {
  const std::filesystem::path bench = dir / "bench_fake";
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : "\\n") + n;
  std::ofstream(bench) << "#!/bin/sh\n"
                          "out=\n"
                          "for a in \"$@\"; do\n"
                          "  [ \"$a\" = --benchmark_list_tests=true ] && { printf '"
                       << list
                       << "\\n'; exit 0; }\n"
                          "  case \"$a\" in --benchmark_out=*) out=\"${a#--benchmark_out=}\";; esac\n"
                          "done\n"
                       << body;
  std::filesystem::permissions(bench, std::filesystem::perms::owner_all);
  return bench;
}

// Options of a measurement of fake benches: `rounds` rounds of one repetition, raw output under dir/raw, no git.
inline MeasureOptions fake_measure_options(const std::filesystem::path& dir, int rounds, std::uint64_t seed) {
  MeasureOptions o;
  o.rounds = rounds;
  o.repetitions = 1;
  o.seed = seed;
  o.work_dir = dir / "raw";
  o.environment.git_commit = "0123abc";  // no git asked
  return o;
}

}  // namespace perfgate::test_support
