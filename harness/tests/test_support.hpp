// Helpers shared by the harness unit tests (header-only; not a test source itself, so the *_test.cpp
// glob in CMakeLists.txt leaves it out).
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "perfgate/model.hpp"
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

}  // namespace perfgate::test_support
