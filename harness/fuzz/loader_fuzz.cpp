// libFuzzer target for the loader: any byte sequence must either load or raise perfgate::InputError
// with a one-line message; never crash, hang or trip a sanitizer. Whatever loads must also survive a
// round trip through the baseline writer: the written JSON loads back to the same results.
//
// Built by harness/fuzz/CMakeLists.txt when clang is available; ctest runs it briefly (label unit):
//   perfgate_loader_fuzz -seed=1 -runs=N -dict=loader.dict WORKDIR harness/fuzz/corpus
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "perfgate/baseline_store.hpp"
#include "perfgate/loader.hpp"

namespace {

[[noreturn]] void die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "loader_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

void same_metric(const perfgate::Metric& a, const perfgate::Metric& b, const std::string& where) {
  if (a.name != b.name || a.kind != b.kind || a.process_run != b.process_run || a.samples.size() != b.samples.size()) {
    die("round trip changed a metric", where + " " + a.name);
  }
  for (std::size_t i = 0; i < a.samples.size(); ++i) {
    // Bit-exact: the writer must not round a sample, and NaN or -0 must come back as written.
    if (std::bit_cast<std::uint64_t>(a.samples[i]) != std::bit_cast<std::uint64_t>(b.samples[i]))
      die("round trip changed a sample", where);
  }
}

// A rejected input: one line that starts with the file name.
void check_error_message(const perfgate::InputError& e) {
  const std::string what = e.what();
  if (what.find('\n') != std::string::npos || what.find('\r') != std::string::npos) die("multi-line error", what);
  if (what.rfind("fuzz.json", 0) != 0) die("error does not start with the file name", what);
}

// An accepted input: the index is consistent and the samples aligned.
void check_loaded(const perfgate::ResultSet& rs) {
  if (rs.index.size() != rs.benchmarks.size()) die("index size", "");
  for (const auto& b : rs.benchmarks) {
    if (b.time.samples.size() != b.time.process_run.size() || b.cpu_time.samples.size() != b.time.samples.size() ||
        b.iterations.size() != b.time.samples.size()) {
      die("unaligned samples", b.name);
    }
    if (!b.error && !b.skip_reason && b.time.samples.empty()) die("measured benchmark without samples", b.name);
    for (double t : b.time.samples) {
      if (!(t > 0)) die("non-positive time accepted", b.name);
    }
    for (const auto& c : b.counters) {
      if (c.samples.size() != c.process_run.size()) die("unaligned counter", b.name + " " + c.name);
    }
  }
}

void same_benchmark(const perfgate::BenchmarkResult& a, const perfgate::BenchmarkResult& b) {
  if (a.name != b.name || a.raw_name != b.raw_name || a.time_kind != b.time_kind || a.error != b.error ||
      a.skip_reason != b.skip_reason || a.iterations != b.iterations || a.counters.size() != b.counters.size()) {
    die("round trip changed a benchmark", a.name);
  }
  same_metric(a.time, b.time, a.name);
  same_metric(a.cpu_time, b.cpu_time, a.name);
  for (std::size_t k = 0; k < a.counters.size(); ++k) same_metric(a.counters[k], b.counters[k], a.name);
}

// An accepted input written as a baseline loads back to the same results.
void check_round_trip(const perfgate::ResultSet& rs) {
  perfgate::BaselineInfo info;
  info.machine_class = "fuzz-class";
  info.date = "2026-11-22T00:00:00Z";
  info.commit = "fuzz";
  info.command = "fuzz";
  const std::string written = perfgate::to_baseline_json(rs, info);
  perfgate::ResultSet back;
  try {
    back = perfgate::parse_results(written, "roundtrip.json");
  } catch (const perfgate::InputError& e) { die("baseline written from accepted input does not load", e.what()); }
  if (back.benchmarks.size() != rs.benchmarks.size()) die("round trip changed the benchmark count", "");
  for (std::size_t i = 0; i < rs.benchmarks.size(); ++i) same_benchmark(rs.benchmarks[i], back.benchmarks[i]);
  if (back.contexts.size() != std::max<std::size_t>(1, rs.contexts.size())) die("round trip changed the runs", "");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  perfgate::ResultSet rs;
  try {
    rs = perfgate::parse_results(text, "fuzz.json");
  } catch (const perfgate::InputError& e) {
    check_error_message(e);
    return 0;
  }
  check_loaded(rs);
  check_round_trip(rs);
  return 0;
}
