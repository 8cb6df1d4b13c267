// Baseline store: paths, atomic writes, Google Benchmark JSON output, lossless round trip through the
// loader (several process runs), split by suite.
#include "perfgate/baseline_store.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "perfgate/loader.hpp"
#include "test_support.hpp"

using namespace perfgate;
using namespace perfgate::test_support;
namespace fs = std::filesystem;

namespace {

BaselineInfo info() {
  BaselineInfo i;
  i.machine_class = "cpu-epyc-2c";
  i.date = "2026-11-22T03:00:00Z";
  i.commit = "c00d0c3";
  i.command = "perfgate baseline update --suite fixture";
  return i;
}

void expect_metric_eq(const perfgate::Metric& a, const perfgate::Metric& b, const std::string& where) {
  EXPECT_EQ(a.name, b.name) << where;
  EXPECT_EQ(a.kind, b.kind) << where;
  EXPECT_EQ(a.samples, b.samples) << where;  // bit-exact doubles
  EXPECT_EQ(a.process_run, b.process_run) << where;
}

void expect_same_benchmark(const BenchmarkResult& x, const BenchmarkResult& y) {
  EXPECT_EQ(x.name, y.name);
  EXPECT_EQ(x.raw_name, y.raw_name);
  EXPECT_EQ(x.time_kind, y.time_kind) << x.name;
  expect_metric_eq(x.time, y.time, x.name);
  expect_metric_eq(x.cpu_time, y.cpu_time, x.name);
  EXPECT_EQ(x.iterations, y.iterations) << x.name;
  ASSERT_EQ(x.counters.size(), y.counters.size()) << x.name;
  for (std::size_t k = 0; k < x.counters.size(); ++k) expect_metric_eq(x.counters[k], y.counters[k], x.name);
  EXPECT_EQ(x.error, y.error) << x.name;
  EXPECT_EQ(x.skip_reason, y.skip_reason) << x.name;
  EXPECT_EQ(x.label, y.label) << x.name;
}

// The context fields, less the perfgate.baseline.* ones that writing a baseline adds.
void expect_same_contexts(const ResultSet& a, const ResultSet& b) {
  ASSERT_EQ(a.contexts.size(), b.contexts.size());
  auto strip = [](std::map<std::string, std::string> f) {
    for (auto it = f.begin(); it != f.end();) it = it->first.rfind("perfgate.baseline.", 0) == 0 ? f.erase(it) : ++it;
    return f;
  };
  for (std::size_t k = 0; k < a.contexts.size(); ++k)
    EXPECT_EQ(strip(a.contexts[k].fields), strip(b.contexts[k].fields)) << "context " << k;
}

void expect_same_results(const ResultSet& a, const ResultSet& b) {
  ASSERT_EQ(a.benchmarks.size(), b.benchmarks.size());
  for (std::size_t i = 0; i < a.benchmarks.size(); ++i) expect_same_benchmark(a.benchmarks[i], b.benchmarks[i]);
  expect_same_contexts(a, b);
}

}  // namespace

TEST(BaselineStore, PathIsClassThenSuite) {
  EXPECT_EQ(perfgate::baseline_path("baselines", "gpu-h200-x2", "expert_gemm"),
            fs::path("baselines") / "gpu-h200-x2" / "expert_gemm.json");
  // Any suite name gets a file inside the class folder (suite_file_stem): never a path out of it.
  EXPECT_EQ(perfgate::baseline_path("baselines", "gpu-h200-x2", "../evil").parent_path(),
            fs::path("baselines") / "gpu-h200-x2");
  EXPECT_THROW((void)perfgate::baseline_path("baselines", "gpu-h200-x2", ""), perfgate::InputError);
  EXPECT_THROW((void)perfgate::baseline_path("baselines", "", "x"), perfgate::InputError);
  EXPECT_EQ(perfgate::suite_of_benchmark("lora_backward/backward/onednn/cfg:ci"), "lora_backward");
  EXPECT_EQ(perfgate::suite_of_benchmark("plain"), "plain");
}

TEST(BaselineStore, RoundTripOfSeveralProcessRunsIsLossless) {
  TempDir dir;
  const ResultSet runs =
      perfgate::load_results({data("loader/gbench_1_7_1.json"), data("loader/gbench_1_7_1_run2.json")});
  ASSERT_EQ(runs.process_runs(), 2);
  const fs::path written = perfgate::write_baseline(dir.path, "fixture", runs, info());
  EXPECT_EQ(written, dir.path / "cpu-epyc-2c" / "fixture.json");

  const ResultSet back = perfgate::load_result_file(written.string());
  expect_same_results(runs, back);
  for (const auto& c : back.contexts) {
    EXPECT_EQ(c.get("perfgate.baseline.machine"), "cpu-epyc-2c");
    EXPECT_EQ(c.get("perfgate.baseline.commit"), "c00d0c3");
    EXPECT_EQ(c.get("perfgate.baseline.date"), "2026-11-22T03:00:00Z");
    EXPECT_EQ(c.get("perfgate.baseline.command"), "perfgate baseline update --suite fixture");
    EXPECT_EQ(c.get("perfgate.baseline.process_runs"), "2");
  }
  // Writing what was read back gives the same bytes: nothing drifts through repeated updates.
  EXPECT_EQ(perfgate::to_baseline_json(back, info()), read_text(written));
}

TEST(BaselineStore, RoundTripOf183FileWithSkipsAndFailures) {
  const ResultSet rs = perfgate::load_result_file(data("loader/gbench_1_8_3_handmade.json"));
  const std::string text = perfgate::to_baseline_json(rs, info());
  const ResultSet back = perfgate::parse_results(text, "mem.json");
  expect_same_results(rs, back);
  EXPECT_EQ(back.contexts[0].get("json_schema_version"), "1");
  EXPECT_EQ(back.contexts[0].get("perfgate.gpu0.name"), "NVIDIA H200");
}

TEST(BaselineStore, OutputIsGoogleBenchmarkJson) {
  const ResultSet runs =
      perfgate::load_results({data("loader/gbench_1_7_1.json"), data("loader/gbench_1_7_1_run2.json")});
  const auto doc = nlohmann::json::parse(perfgate::to_baseline_json(runs, info()));
  ASSERT_TRUE(doc["context"].is_object());
  EXPECT_EQ(doc["context"]["perfgate.baseline.process_runs"], "2");
  EXPECT_TRUE(doc["context"]["num_cpus"].is_number());  // GB's own keys keep their JSON types
  EXPECT_TRUE(doc["context"]["caches"].is_array());
  EXPECT_TRUE(doc["context"]["cpu_scaling_enabled"].is_boolean());
  ASSERT_EQ(doc["perfgate_process_runs"].size(), 2u);
  ASSERT_TRUE(doc["benchmarks"].is_array());
  std::size_t measured = 0;
  for (const auto& e : doc["benchmarks"]) {
    ASSERT_TRUE(e["name"].is_string());
    EXPECT_EQ(e["run_type"], "iteration");
    EXPECT_EQ(e["time_unit"], "ns");
    EXPECT_TRUE(e["real_time"].is_number());
    EXPECT_TRUE(e["cpu_time"].is_number());
    EXPECT_TRUE(e["iterations"].is_number_integer());
    EXPECT_TRUE(e["repetition_index"].is_number_integer());
    if (!e.value("error_occurred", false)) ++measured;
  }
  // 4 measured benchmarks x 3 repetitions x 2 runs, plus one entry per run-less failure/skip.
  EXPECT_EQ(measured, 24u);
  EXPECT_EQ(doc["benchmarks"].size(), 26u);
}

TEST(BaselineStore, WritesOneBenchmarkEntryALine) {
  const ResultSet runs =
      perfgate::load_results({data("loader/gbench_1_7_1.json"), data("loader/gbench_1_7_1_run2.json")});
  const std::string text = perfgate::to_baseline_json(runs, info());
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const auto first = std::find(lines.begin(), lines.end(), "\"benchmarks\": [");
  ASSERT_NE(first, lines.end()) << text.substr(0, 400);
  const std::vector<std::string> entries(first + 1, lines.end() - 2);
  ASSERT_EQ(entries.size(), 26u);
  for (const auto& line : entries) {
    const auto entry = nlohmann::json::parse(line.back() == ',' ? line.substr(0, line.size() - 1) : line);
    EXPECT_TRUE(entry["name"].is_string()) << line;
  }
  EXPECT_EQ(lines[lines.size() - 2], "]");
  EXPECT_EQ(lines.back(), "}");
  EXPECT_EQ(text.back(), '\n');
}

TEST(BaselineStore, BaselineOfBaselineAddsRuns) {
  TempDir dir;
  const ResultSet first = perfgate::load_result_file(data("loader/gbench_1_7_1.json"));
  const fs::path p = perfgate::write_baseline(dir.path, "fixture", first, info());
  const ResultSet merged = perfgate::load_results({p.string(), data("loader/gbench_1_7_1_run2.json")});
  EXPECT_EQ(merged.process_runs(), 2);
  perfgate::write_baseline(dir.path, "fixture", merged, info());
  const ResultSet back = perfgate::load_result_file(p.string());
  expect_same_results(merged, back);
  EXPECT_EQ(back.find("fixture/spin/lcg/n:64")->time.process_run, (std::vector<int>{0, 0, 0, 1, 1, 1}));
}

TEST(BaselineStore, AtomicWriteReplacesAndLeavesNoTemporaries) {
  TempDir dir;
  const fs::path target = dir.path / "sub" / "x.json";
  perfgate::write_file_atomically(target, "first\n");
  EXPECT_EQ(read_text(target), "first\n");
  perfgate::write_file_atomically(target, "second\n");
  EXPECT_EQ(read_text(target), "second\n");
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(target.parent_path())) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "x.json");
  }
  EXPECT_EQ(entries, 1u);
}

TEST(BaselineStore, FailedWriteKeepsOldFileAndCleansUp) {
  TempDir dir;
  // The target is a non-empty directory: rename() must fail, the temporary must go away.
  const fs::path target = dir.path / "busy.json";
  fs::create_directories(target / "inside");
  EXPECT_THROW(perfgate::write_file_atomically(target, "data"), std::system_error);
  EXPECT_TRUE(fs::is_directory(target));
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "busy.json");
  }
  EXPECT_EQ(entries, 1u);
  // A parent that is a file: creating the folder fails.
  { std::ofstream(dir.path / "plain") << "x"; }
  EXPECT_THROW(perfgate::write_file_atomically(dir.path / "plain" / "y.json", "data"), std::exception);
}

TEST(BaselineStore, SplitBySuiteKeepsTheRightRuns) {
  const ResultSet rs =
      perfgate::load_results({data("loader/gbench_1_7_1.json"), data("loader/gbench_1_8_3_handmade.json"),
                              data("loader/gbench_1_7_1_run2.json")});
  const auto parts = perfgate::split_by_suite(rs);
  // fixture and expert_gemm: a file's benchmarks go to the suite its runs name, as reports file them, and the
  // handmade file (perfgate.suite expert_gemm) holds two transfers benchmarks besides its own.
  ASSERT_EQ(parts.size(), 2u);
  const ResultSet& fixture = parts.at("fixture");
  EXPECT_EQ(fixture.process_runs(), 2);
  EXPECT_EQ(fixture.benchmarks.size(), 6u);
  EXPECT_EQ(fixture.find("fixture/spin/lcg/n:64")->time.process_run, (std::vector<int>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(fixture.contexts[1].source_file, data("loader/gbench_1_7_1_run2.json"));
  const ResultSet& gemm = parts.at("expert_gemm");
  EXPECT_EQ(gemm.process_runs(), 1);
  EXPECT_EQ(gemm.benchmarks.size(), 5u);
  EXPECT_EQ(gemm.find("expert_gemm/forward/cublas_loop/tokens:128")->time.process_run, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_NE(gemm.find("transfers/h2d/pinned/bytes:268435456"), nullptr);
  for (const auto& [suite, part] : parts) {
    for (std::size_t i = 0; i < part.benchmarks.size(); ++i) EXPECT_EQ(part.index.at(part.benchmarks[i].name), i);
  }
}

// perfgate run files a plain Google Benchmark binary's runs under the binary's name (perfgate.suite), while the
// benchmarks' names carry suites of their own (BM_Sort): split_by_suite, and so `baseline update --suite <binary>`,
// takes them by that name, as reports file them.
TEST(BaselineStore, RunsNamingASuiteKeepTheirBenchmarksWhateverTheirNames) {
  auto run_of = [](const std::string& suite, const std::string& file) {
    RunContext c;
    c.source_file = file;
    c.fields["perfgate.suite"] = suite;
    return c;
  };
  BenchmarkResult sort = bench("BM_Sort/1024", {10, 11, 12, 13});
  sort.time.process_run = {1, 1, 2, 2};
  sort.source_file = "mybin.current.json";
  BenchmarkResult other = bench("BM_Other", {5, 6});
  other.time.process_run = {0, 0};
  other.source_file = "other.json";
  BenchmarkResult failed;
  failed.name = failed.raw_name = "BM_NeedsDevice";
  failed.error = "no device";
  failed.source_file = "mybin.current.json";
  ResultSet rs = set_of({sort, other, failed}, 0);
  rs.contexts = {run_of("other", "other.json"), run_of("mybin", "mybin.current.json"),
                 run_of("mybin", "mybin.current.json")};

  const auto parts = perfgate::split_by_suite(rs);
  ASSERT_EQ(parts.count("mybin"), 1u);
  const ResultSet& mine = parts.at("mybin");
  EXPECT_EQ(mine.process_runs(), 2);
  ASSERT_EQ(mine.benchmarks.size(), 2u);
  EXPECT_EQ(mine.find("BM_Sort/1024")->time.process_run, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_TRUE(mine.find("BM_NeedsDevice") != nullptr);  // failed: no sample, but reported by the binary's file
  EXPECT_EQ(mine.find("BM_Other"), nullptr);
  EXPECT_EQ(parts.count("BM_Sort"), 0u);  // a name's suite, named by no run
  EXPECT_EQ(parts.at("other").benchmarks.size(), 1u);
}
