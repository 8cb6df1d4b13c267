// libFuzzer target for the loader: any byte sequence must either load or raise perfgate::InputError
// with a one-line message; never crash, hang or trip a sanitizer. Whatever loads must also survive a
// round trip through the baseline writer: the written JSON loads back to the same results.
//
// Built by harness/fuzz/CMakeLists.txt when clang is available; ctest runs it briefly (label unit):
//   perfgate_loader_fuzz -seed=1 -runs=N -dict=loader.dict WORKDIR harness/fuzz/corpus
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
    if (std::memcmp(&a.samples[i], &b.samples[i], sizeof(double)) != 0) die("round trip changed a sample", where);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  perfgate::ResultSet rs;
  try {
    rs = perfgate::parse_results(text, "fuzz.json");
  } catch (const perfgate::InputError& e) {
    const std::string what = e.what();
    if (what.find('\n') != std::string::npos || what.find('\r') != std::string::npos) die("multi-line error", what);
    if (what.rfind("fuzz.json", 0) != 0) die("error does not start with the file name", what);
    return 0;
  }
  // Loaded: the index must be consistent, samples aligned.
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
  for (std::size_t i = 0; i < rs.benchmarks.size(); ++i) {
    const auto& a = rs.benchmarks[i];
    const auto& b = back.benchmarks[i];
    if (a.name != b.name || a.raw_name != b.raw_name || a.time_kind != b.time_kind || a.error != b.error ||
        a.skip_reason != b.skip_reason || a.iterations != b.iterations || a.counters.size() != b.counters.size()) {
      die("round trip changed a benchmark", a.name);
    }
    same_metric(a.time, b.time, a.name);
    same_metric(a.cpu_time, b.cpu_time, a.name);
    for (std::size_t k = 0; k < a.counters.size(); ++k) same_metric(a.counters[k], b.counters[k], a.name);
  }
  if (back.contexts.size() != std::max<std::size_t>(1, rs.contexts.size())) die("round trip changed the runs", "");
  return 0;
}
