// Loader: real Google Benchmark 1.7.1 output, a hand-made 1.8.3-style file, merging of process runs,
// and every bad-input case (fixtures in data/bad/, made by data/bad/make_bad_fixtures.py).
#include "perfgate/loader.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace fs = std::filesystem;
using perfgate::InputError;
using perfgate::MetricKind;

using perfgate::test_support::data;
using perfgate::test_support::read_text;
using perfgate::test_support::TempDir;

namespace {

double unit_factor(const std::string& unit) {
  if (unit == "ns") return 1.0;
  if (unit == "us") return 1e3;
  if (unit == "ms") return 1e6;
  return 1e9;
}

// Where the samples of process run `run` sit in a benchmark's metrics.
std::vector<std::size_t> positions_of_run(const perfgate::BenchmarkResult& b, int run) {
  std::vector<std::size_t> positions;
  for (std::size_t k = 0; k < b.time.process_run.size(); ++k) {
    if (b.time.process_run[k] == run) positions.push_back(k);
  }
  return positions;
}

// Every numeric field Google Benchmark does not define is a counter with this entry's value at sample k.
void expect_counters_match(const nlohmann::json& e, const perfgate::BenchmarkResult& b, std::size_t k) {
  static const std::set<std::string> gb = {"family_index", "per_family_instance_index",
                                           "repetitions",  "repetition_index",
                                           "threads",      "iterations",
                                           "real_time",    "cpu_time"};
  for (const auto& [key, value] : e.items()) {
    if (!value.is_number() || gb.count(key) != 0) continue;
    const perfgate::Metric* m = b.counter(key);
    ASSERT_NE(m, nullptr) << b.name << " " << key;
    EXPECT_DOUBLE_EQ(m->samples[k], value.get<double>()) << b.name << " " << key;
  }
}

// Sample k of a benchmark against one per-repetition entry: real_time (in ns), cpu_time, iterations, counters.
void expect_sample_matches(const nlohmann::json& e, const perfgate::BenchmarkResult& b, std::size_t k) {
  const double f = unit_factor(e["time_unit"].get<std::string>());
  EXPECT_DOUBLE_EQ(b.time.samples[k], e["real_time"].get<double>() * f) << b.name;
  EXPECT_DOUBLE_EQ(b.cpu_time.samples[k], e["cpu_time"].get<double>() * f) << b.name;
  EXPECT_EQ(b.iterations[k], e["iterations"].get<long long>()) << b.name;
  expect_counters_match(e, b, k);
}

// Cross-checks a loaded file against an independent reading of the same JSON (nlohmann): every
// per-repetition entry's real_time (in ns), cpu_time, iterations and counters, in order.
void expect_matches_independent_reading(const std::string& file, const perfgate::ResultSet& rs, int run = 0) {
  const auto doc = nlohmann::json::parse(read_text(file));
  std::map<std::string, std::size_t> seen;  // normalised name -> samples checked so far
  std::size_t entries = 0;
  for (const auto& e : doc["benchmarks"]) {
    if (e.value("run_type", "iteration") != "iteration") continue;
    if (e.value("error_occurred", false) || e.value("skipped", false)) continue;
    const std::string name = perfgate::normalise_benchmark_name(e["name"].get<std::string>());
    const perfgate::BenchmarkResult* b = rs.find(name);
    ASSERT_NE(b, nullptr) << name;
    const std::vector<std::size_t> positions = positions_of_run(*b, run);
    const std::size_t j = seen[name]++;
    ASSERT_LT(j, positions.size()) << name;
    expect_sample_matches(e, *b, positions[j]);
    ++entries;
  }
  EXPECT_GT(entries, 0u);
}

}  // namespace

TEST(Loader, ReadsRealGoogleBenchmark171Output) {
  const std::string file = data("loader/gbench_1_7_1.json");
  const perfgate::ResultSet rs = perfgate::load_result_file(file);
  ASSERT_EQ(rs.process_runs(), 1);
  EXPECT_EQ(rs.contexts[0].get("perfgate.suite"), "fixture");
  EXPECT_EQ(rs.contexts[0].get("num_cpus"), "2");
  EXPECT_EQ(rs.contexts[0].source_file, file);
  ASSERT_EQ(rs.benchmarks.size(), 6u);
  expect_matches_independent_reading(file, rs);

  const auto* spin = rs.find("fixture/spin/lcg/n:64");
  ASSERT_NE(spin, nullptr);
  EXPECT_EQ(spin->time_kind, "real_time");
  EXPECT_EQ(spin->time.kind, MetricKind::latency);
  EXPECT_EQ(spin->time.samples.size(), 3u);
  EXPECT_FALSE(spin->error);
  EXPECT_FALSE(spin->skip_reason);
  ASSERT_EQ(spin->counters.size(), 4u);  // sorted by name
  EXPECT_EQ(spin->counters[0].name, "bytes_per_second");
  EXPECT_EQ(spin->counters[0].kind, MetricKind::rate);
  EXPECT_EQ(spin->counter("ops/s")->kind, MetricKind::rate);
  EXPECT_EQ(spin->counter("phase.mix")->kind, MetricKind::phase);
  EXPECT_EQ(spin->counter("pct.peak")->kind, MetricKind::info);

  // The same work reported in ms is normalised to ns: both medians within a factor of 3.
  const auto* ms = rs.find("fixture/spin/lcg/n:64/unit:ms");
  ASSERT_NE(ms, nullptr);
  EXPECT_GT(ms->time.samples[0], spin->time.samples[0] / 3);
  EXPECT_LT(ms->time.samples[0], spin->time.samples[0] * 3);

  const auto* manual = rs.find("fixture/copy/manual");
  ASSERT_NE(manual, nullptr);
  EXPECT_EQ(manual->raw_name, "fixture/copy/manual/manual_time");
  EXPECT_EQ(manual->time_kind, "manual_time");
  for (double t : manual->time.samples) EXPECT_NEAR(t, 2000.0, 1.0);  // SetIterationTime(2e-6), unit us

  EXPECT_NE(rs.find("fixture/spin/threads/threads:2"), nullptr);  // /threads:N changes the work: kept

  const auto* fails = rs.find("fixture/check/fails");
  ASSERT_NE(fails, nullptr);
  ASSERT_TRUE(fails->error);
  EXPECT_EQ(*fails->error, "wrong result: max relative error 0.5 > 1e-3");
  EXPECT_FALSE(fails->skip_reason);
  EXPECT_TRUE(fails->time.samples.empty());

  const auto* skips = rs.find("fixture/peer/skips");
  ASSERT_NE(skips, nullptr);
  ASSERT_TRUE(skips->skip_reason);
  EXPECT_EQ(*skips->skip_reason, "needs 2 GPUs, found 0");
  EXPECT_FALSE(skips->error);
}

// Google Benchmark puts /threads:N after the time type (make_name_suffixes_fixture.cpp): "BM_Sum/4096/real_time/
// threads:2" is "BM_Sum/4096/threads:2", as "BM_Sum/4096/real_time" alone would be "BM_Sum/4096".
TEST(Loader, RemovesTheTimeTypeBeforeTheThreadCount) {
  const std::string file = data("loader/gbench_1_7_1_name_suffixes.json");
  const perfgate::ResultSet rs = perfgate::load_result_file(file);
  std::vector<std::string> names;
  for (const auto& b : rs.benchmarks) names.push_back(b.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"BM_Sum/16384", "BM_Sum/4096/threads:1", "BM_Sum/4096/threads:2",
                                             "sum with space/and:colon/256"}));
  const auto* two = rs.find("BM_Sum/4096/threads:2");
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->raw_name, "BM_Sum/4096/real_time/threads:2");
  EXPECT_EQ(two->time.samples.size(), 2u);
  expect_matches_independent_reading(file, rs);
}

TEST(NormaliseBenchmarkName, KeepsTheThreadCountAfterTheSuffixes) {
  using perfgate::normalise_benchmark_name;
  EXPECT_EQ(normalise_benchmark_name("x/8/manual_time/threads:4"), "x/8/threads:4");
  EXPECT_EQ(normalise_benchmark_name("x/8/iterations:10/repeats:3/process_time/real_time/threads:2"), "x/8/threads:2");
  EXPECT_EQ(normalise_benchmark_name("x/8/threads:2"), "x/8/threads:2");
  EXPECT_EQ(normalise_benchmark_name("x/threads:2/real_time"), "x/threads:2");  // a name's own "threads:2"
  EXPECT_EQ(normalise_benchmark_name("threads:2"), "threads:2");
  EXPECT_EQ(perfgate::time_kind_of_name("x/8/manual_time/threads:4"), "manual_time");
  EXPECT_EQ(perfgate::time_kind_of_name("x/8/manual_time"), "manual_time");
  EXPECT_EQ(perfgate::time_kind_of_name("x/8/real_time/threads:4"), "real_time");
  EXPECT_EQ(perfgate::time_kind_of_name("x/threads:4"), "real_time");
}

TEST(Loader, ReadsRandomlyInterleavedRepetitions) {
  const std::string file = data("loader/gbench_1_7_1_interleaved.json");
  const perfgate::ResultSet rs = perfgate::load_result_file(file);
  ASSERT_EQ(rs.benchmarks.size(), 6u);
  for (const auto& b : rs.benchmarks) {
    if (!b.error && !b.skip_reason) { EXPECT_EQ(b.time.samples.size(), 2u) << b.name; }
  }
  expect_matches_independent_reading(file, rs);
}

TEST(Loader, ReadsHandMadeGoogleBenchmark183File) {
  const std::string file = data("loader/gbench_1_8_3_handmade.json");
  const perfgate::ResultSet rs = perfgate::load_result_file(file);
  ASSERT_EQ(rs.benchmarks.size(), 5u);
  expect_matches_independent_reading(file, rs);
  EXPECT_EQ(rs.contexts[0].get("json_schema_version"), "1");
  EXPECT_EQ(rs.contexts[0].get("caches").front(), '[');

  const auto* gemm = rs.find("expert_gemm/forward/cublas_loop/tokens:128");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->time_kind, "manual_time");
  ASSERT_EQ(gemm->time.samples.size(), 4u);
  EXPECT_DOUBLE_EQ(gemm->time.samples[0], 812.5e3);  // us -> ns
  EXPECT_EQ(gemm->counter("FLOP/s")->kind, MetricKind::rate);
  EXPECT_EQ(gemm->counter("phase.gate_up")->kind, MetricKind::phase);
  EXPECT_EQ(gemm->counter("pct.hbm")->kind, MetricKind::info);

  const auto* h2d = rs.find("transfers/h2d/pinned/bytes:268435456");
  ASSERT_NE(h2d, nullptr);
  EXPECT_DOUBLE_EQ(h2d->time.samples[1], 4.861e6);  // ms -> ns

  const auto* peer = rs.find("transfers/peer/gpu0_gpu1/bytes:268435456");
  ASSERT_NE(peer, nullptr);
  ASSERT_TRUE(peer->skip_reason);  // 1.8 "skipped": true
  EXPECT_EQ(*peer->skip_reason, "peer access unavailable between GPU 0 and GPU 1");

  const auto* fp8 = rs.find("expert_gemm/forward/fp8/tokens:128");
  ASSERT_NE(fp8, nullptr);
  ASSERT_TRUE(fp8->skip_reason);  // 1.8 skip without the "skipped: " prefix
  EXPECT_EQ(*fp8->skip_reason, "FP8 GEMM needs cuBLASLt 12.x");

  const auto* grouped = rs.find("expert_gemm/forward/grouped/tokens:128");
  ASSERT_NE(grouped, nullptr);
  ASSERT_TRUE(grouped->error);
  EXPECT_FALSE(grouped->skip_reason);
}

TEST(Loader, MergesProcessRunsOfOneBinary) {
  const std::string a = data("loader/gbench_1_7_1.json");
  const std::string b = data("loader/gbench_1_7_1_run2.json");
  const perfgate::ResultSet rs = perfgate::load_results({a, b});
  ASSERT_EQ(rs.process_runs(), 2);
  EXPECT_EQ(rs.contexts[0].source_file, a);
  EXPECT_EQ(rs.contexts[1].source_file, b);
  ASSERT_EQ(rs.benchmarks.size(), 6u);
  const auto* spin = rs.find("fixture/spin/lcg/n:64");
  ASSERT_NE(spin, nullptr);
  ASSERT_EQ(spin->time.samples.size(), 6u);
  EXPECT_EQ(spin->time.process_run, (std::vector<int>{0, 0, 0, 1, 1, 1}));
  for (const auto& c : spin->counters) EXPECT_EQ(c.process_run, spin->time.process_run) << c.name;
  EXPECT_EQ(spin->cpu_time.process_run, spin->time.process_run);
  EXPECT_EQ(spin->iterations.size(), 6u);
  expect_matches_independent_reading(a, rs, 0);
  expect_matches_independent_reading(b, rs, 1);
  EXPECT_TRUE(rs.find("fixture/check/fails")->error);
}

TEST(Loader, MergesSeveralBinaries) {
  const perfgate::ResultSet rs =
      perfgate::load_results({data("loader/gbench_1_7_1.json"), data("loader/gbench_1_8_3_handmade.json")});
  EXPECT_EQ(rs.process_runs(), 2);
  EXPECT_EQ(rs.benchmarks.size(), 11u);
  EXPECT_EQ(rs.find("expert_gemm/forward/cublas_loop/tokens:128")->time.process_run, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(rs.find("fixture/spin/lcg/n:64")->time.process_run, (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(rs.index.size(), rs.benchmarks.size());
  for (std::size_t i = 0; i < rs.benchmarks.size(); ++i) EXPECT_EQ(rs.index.at(rs.benchmarks[i].name), i);
}

namespace {

// The InputError that merging the run `b` (b.json) into the run `a` (a.json) throws; a test failure when they
// merge.
InputError merge_refusal(const std::string& a, const std::string& b) {
  perfgate::ResultSet rs = perfgate::parse_results(a, "a.json");
  try {
    perfgate::merge_results(rs, perfgate::parse_results(b, "b.json"));
  } catch (const InputError& e) { return e; }
  ADD_FAILURE() << "merged " << a << " and " << b;
  return InputError("", "", "", "");
}

}  // namespace

TEST(Loader, MergeRefusesManualAgainstRealTime) {
  const std::string a = R"({"context": {}, "benchmarks": [
    {"name": "s/x", "run_type": "iteration", "repetitions": 1, "repetition_index": 0, "iterations": 5,
     "real_time": 10, "cpu_time": 9, "time_unit": "ns"}]})";
  const std::string b = R"({"context": {}, "benchmarks": [
    {"name": "s/x/manual_time", "run_type": "iteration", "repetitions": 1, "repetition_index": 0, "iterations": 5,
     "real_time": 10, "cpu_time": 9, "time_unit": "ns"}]})";
  const InputError e = merge_refusal(a, b);
  EXPECT_EQ(e.file, "b.json");
  EXPECT_EQ(e.benchmark, "s/x/manual_time");
}

TEST(Loader, MergeRefusesDifferentCounterSets) {
  const std::string a = R"({"context": {}, "benchmarks": [
    {"name": "s/x", "repetitions": 1, "repetition_index": 0, "iterations": 5, "real_time": 10, "cpu_time": 9,
     "time_unit": "ns", "phase.a": 1}]})";
  const std::string b = R"({"context": {}, "benchmarks": [
    {"name": "s/x", "repetitions": 1, "repetition_index": 0, "iterations": 5, "real_time": 10, "cpu_time": 9,
     "time_unit": "ns", "phase.b": 1}]})";
  const InputError e = merge_refusal(a, b);
  EXPECT_EQ(e.benchmark, "s/x");
  EXPECT_TRUE(e.field == "phase.a" || e.field == "phase.b") << e.field;
}

// A user counter written as NaN (a rate over a zero count) in one repetition: the file loads, that counter is left
// out of that benchmark in every repetition, the benchmark's times and its other counters stay, and a note names both.
TEST(Loader, LeavesOutACounterThatIsNaNInARepetition) {
  const perfgate::ResultSet rs = perfgate::load_result_file(data("loader/non_finite_counter.json"));
  const auto* a = rs.find("fixture/a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->time.samples, (std::vector<double>{100.0, 101.0, 102.0}));
  EXPECT_EQ(a->counter("phase.a"), nullptr);
  ASSERT_NE(a->counter("bytes/s"), nullptr);
  EXPECT_EQ(a->counter("bytes/s")->samples.size(), 3u);
  EXPECT_EQ(a->non_finite_counters, (std::set<std::string>{"phase.a"}));
  const auto* b = rs.find("fixture/b");
  ASSERT_NE(b, nullptr);
  ASSERT_NE(b->counter("phase.a"), nullptr);  // finite in every repetition of fixture/b
  EXPECT_TRUE(b->non_finite_counters.empty());
  ASSERT_EQ(rs.load_notes.size(), 1u);
  EXPECT_NE(rs.load_notes[0].text.find("counter 'phase.a' of 'fixture/a' is NaN or infinite"), std::string::npos)
      << rs.load_notes[0].text;
}

// Two process runs of one side, the counter non-finite in one of them: it is left out of the benchmark in both, so
// the runs still merge (a counter in one run and not the other is refused: MergeRefusesDifferentCounterSets).
TEST(Loader, ACounterNonFiniteInOneProcessRunIsLeftOutOfAll) {
  const std::string finite = R"({"context": {}, "benchmarks": [
    {"name": "s/x", "repetitions": 1, "repetition_index": 0, "iterations": 5, "real_time": 10, "cpu_time": 9,
     "time_unit": "ns", "hit_rate": 0.5, "bytes": 64}]})";
  const std::string non_finite = R"({"context": {}, "benchmarks": [
    {"name": "s/x", "repetitions": 1, "repetition_index": 0, "iterations": 5, "real_time": 11, "cpu_time": 9,
     "time_unit": "ns", "hit_rate": -nan, "bytes": 64}]})";
  for (const bool non_finite_first : {false, true}) {
    perfgate::ResultSet rs = perfgate::parse_results(non_finite_first ? non_finite : finite, "a.json");
    perfgate::merge_results(rs, perfgate::parse_results(non_finite_first ? finite : non_finite, "b.json"));
    const auto* x = rs.find("s/x");
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(x->time.samples.size(), 2u);
    EXPECT_EQ(x->counter("hit_rate"), nullptr) << non_finite_first;
    ASSERT_NE(x->counter("bytes"), nullptr);
    EXPECT_EQ(x->counter("bytes")->samples.size(), 2u);
    EXPECT_TRUE(x->non_finite_counters.contains("hit_rate"));
  }
}

// One line, FILE: benchmark: field: detail; an error without a file is about the command line and starts with the flag
// or the arguments it names, not with "<input>" where a file would stand.
TEST(InputErrorLine, NamesFileBenchmarkAndFieldOrTheFlag) {
  EXPECT_STREQ(InputError("run.json", "s/a", "real_time", "missing").what(),
               "run.json: benchmark 's/a': field 'real_time': missing");
  EXPECT_STREQ(InputError("t.json", "", "default", "must be a number").what(),
               "t.json: field 'default': must be a number");
  EXPECT_STREQ(InputError("", "", "--suite", "which suite's baseline to store").what(),
               "--suite: which suite's baseline to store");
  EXPECT_STREQ(InputError("", "", "", "no results file given").what(), "no results file given");
  EXPECT_STREQ(InputError("a.json", "", "", "line one\nline two").what(), "a.json: line one\\nline two");
}

TEST(Loader, NoFileIsUsageError) { EXPECT_THROW(perfgate::load_results({}), InputError); }

// ---- bad input ----------------------------------------------------------------------------------
namespace {

struct BadCase {
  const char* file;       // under data/bad/
  const char* benchmark;  // expected InputError::benchmark
  const char* field;      // expected InputError::field
  const char* detail;     // a substring of InputError::detail
};

const BadCase kBadCases[] = {
    {"truncated.json", "fixture/b", "", "truncated JSON"},
    {"malformed.json", "fixture/a", "iterations", "malformed JSON at line 29"},
    {"trailing_garbage.json", "", "", "after the end of the JSON document"},
    {"empty.json", "", "", "empty file"},
    {"not_json.json", "", "", "malformed JSON at line 1 column 1"},
    {"gbench_console.json", "", "", "not JSON: this is Google Benchmark's console output; perfgate reads its JSON"},
    {"gbench_csv.json", "", "", "not JSON: this is Google Benchmark's CSV output; perfgate reads its JSON"},
    {"gbench_after_banner.json", "", "",
     "not JSON from its first line: Google Benchmark's JSON starts at line 2, after other output ('my bench: 4 "
     "threads, seed 7')"},
    {"wrong_type_real_time.json", "fixture/a", "real_time", "wrong type: a string instead of a number"},
    {"wrong_type_name.json", "benchmarks[0]", "name", "wrong type: a number instead of a string"},
    {"wrong_type_iterations.json", "fixture/a", "iterations", "fractional number instead of an integer"},
    {"wrong_type_error_occurred.json", "fixture/a", "error_occurred", "instead of true/false"},
    {"wrong_type_counter.json", "fixture/a", "phase.a", "instead of a number (counter)"},
    {"nan_time.json", "fixture/a", "real_time", "NaN"},
    {"inf_time.json", "fixture/a", "real_time", "Infinity"},
    {"negative_time.json", "fixture/a", "real_time", "not a positive time"},
    {"zero_time.json", "fixture/a", "real_time", "0 is not a positive time"},
    {"negative_cpu_time.json", "fixture/a", "cpu_time", "negative time"},
    {"missing_real_time.json", "fixture/a", "real_time", "missing"},
    {"unit_mismatch.json", "fixture/a", "time_unit", "'us' here but 'ns'"},
    {"unknown_unit.json", "fixture/a", "time_unit", "unknown time unit 'fortnights'"},
    {"missing_repetition.json", "fixture/a", "repetition_index", "missing repetition: index 1 of 3"},
    {"duplicate_repetition.json", "fixture/a", "repetition_index", "repetition 1 appears twice"},
    {"duplicate_name.json", "fixture/a", "family_index", "duplicate benchmark name"},
    {"duplicate_normalised.json", "fixture/a/manual_time", "name", "both normalise to 'fixture/a'"},
    {"counter_missing.json", "fixture/a", "phase.a", "present in 2 of 3 repetitions"},
    {"unknown_run_type.json", "fixture/a", "run_type", "unknown run_type 'summary'"},
    {"no_benchmarks.json", "", "benchmarks", "unknown schema"},
    {"benchmarks_not_array.json", "", "benchmarks", "instead of an array"},
    {"top_level_array.json", "", "", "unknown schema"},
    {"perfgate_report.json", "", "schema",
     "a perfgate report (perfgate.report/1), not Google Benchmark results: give the run files it was made from"},
    {"entry_not_object.json", "benchmarks[1]", "", "instead of an object"},
    {"baseline_bad_process_run.json", "fixture/b", "perfgate_process_run", "holds 1 process run"},
    {"directory.json", "", "", "is a directory"},
    {"does_not_exist.json", "", "", "cannot open: no such file"},
};

class LoaderBadInput : public ::testing::TestWithParam<BadCase> {};

std::string case_name(const ::testing::TestParamInfo<BadCase>& info) {
  std::string n = info.param.file;
  n = n.substr(0, n.find('.'));
  for (char& c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

}  // namespace

TEST_P(LoaderBadInput, ThrowsOneLineNamingFileBenchmarkAndField) {
  const BadCase& c = GetParam();
  const std::string file = data(std::string("bad/") + c.file);
  try {
    (void)perfgate::load_result_file(file);
    FAIL() << c.file << " was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.file, file);
    EXPECT_EQ(e.benchmark, c.benchmark) << what;
    if (std::string(c.field).empty() && std::string(c.file) == "truncated.json") {
      // where the cut falls inside the entry decides the key; any is fine
    } else {
      EXPECT_EQ(e.field, c.field) << what;
    }
    EXPECT_NE(e.detail.find(c.detail), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_EQ(what.rfind(file, 0), 0u) << what;  // starts with the file name
    if (!e.benchmark.empty()) { EXPECT_NE(what.find("benchmark '" + e.benchmark + "'"), std::string::npos); }
    if (!e.field.empty()) { EXPECT_NE(what.find("field '" + e.field + "'"), std::string::npos); }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LoaderBadInput, ::testing::ValuesIn(kBadCases), case_name);

TEST(LoaderBadInputExtra, GoodFixtureIsAccepted) {
  // The bad fixtures are all derived from this one; it must load, or the cases above prove nothing.
  const perfgate::ResultSet rs = perfgate::load_result_file(data("bad/good.json"));
  EXPECT_EQ(rs.benchmarks.size(), 2u);
  EXPECT_EQ(rs.find("fixture/a")->time.samples.size(), 3u);
}

TEST(LoaderBadInputExtra, OneGigabyteFileIsRefusedBeforeReading) {
  TempDir dir;
  const fs::path big = dir.path / "huge.json";
  { std::ofstream(big.string()) << "{"; }
  fs::resize_file(big, std::uintmax_t{1} << 30);  // sparse: no disk space used
  const auto t0 = std::chrono::steady_clock::now();
  try {
    (void)perfgate::load_result_file(big.string());
    FAIL() << "1 GiB file accepted";
  } catch (const InputError& e) {
    EXPECT_NE(e.detail.find("1024.0 MiB, above the 512.0 MiB limit"), std::string::npos) << e.what();
    EXPECT_EQ(e.file, big.string());
  }
  // Refused from its size alone: far faster than reading 1 GiB.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.5);
}

TEST(LoaderBadInputExtra, SizeLimitIsConfigurable) {
  perfgate::LoadOptions small;
  small.max_file_bytes = 100;
  EXPECT_THROW((void)perfgate::load_result_file(data("bad/good.json"), small), InputError);
  EXPECT_EQ(perfgate::default_load_options().max_file_bytes, 512u << 20);
  // The process-wide default (what the CLI sets from PERFGATE_MAX_INPUT_BYTES) governs loads that pass none.
  perfgate::set_default_load_options(small);
  EXPECT_THROW((void)perfgate::load_result_file(data("bad/good.json")), InputError);
  perfgate::set_default_load_options({});
  EXPECT_NO_THROW((void)perfgate::load_result_file(data("bad/good.json")));
}

TEST(LoaderBadInputExtra, ByteCountsAreParsedStrictly) {
  EXPECT_EQ(perfgate::parse_byte_count("100", "PERFGATE_MAX_INPUT_BYTES"), 100u);
  for (const char* bad : {"lots", "0", "-5", "12k", ""}) {
    try {
      (void)perfgate::parse_byte_count(bad, "PERFGATE_MAX_INPUT_BYTES");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) { EXPECT_EQ(e.file, "PERFGATE_MAX_INPUT_BYTES"); }
  }
}

TEST(LoaderBadInputExtra, EveryTruncationIsRejected) {
  const std::string text = read_text(data("bad/good.json"));
  ASSERT_GT(text.size(), 1000u);
  for (std::size_t n = 0; n < text.size(); ++n) {
    EXPECT_THROW((void)perfgate::parse_results(std::string_view(text).substr(0, n), "cut.json"), InputError) << n;
  }
  EXPECT_NO_THROW((void)perfgate::parse_results(text, "whole.json"));
}

TEST(LoaderBadInputExtra, DeepNestingDoesNotCrash) {
  const std::string deep(1'000'000, '[');
  try {
    (void)perfgate::parse_results(deep, "deep.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(e.detail.find("nested deeper than 1024 levels"), std::string::npos) << e.what();
  }
  std::string closed = std::string(5000, '[') + std::string(5000, ']');
  EXPECT_THROW((void)perfgate::parse_results(closed, "deep2.json"), InputError);
}

TEST(LoaderBadInputExtra, ControlCharactersStayOnOneLine) {
  const std::string doc = R"({"context": {}, "benchmarks": [
    {"name": "s/evil\nname\r|`<b>", "repetitions": 1, "repetition_index": 0, "iterations": 5,
     "real_time": -1, "cpu_time": 9, "time_unit": "ns"}]})";
  try {
    (void)perfgate::parse_results(doc, "evil\nfile.json");
    FAIL();
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_EQ(what.find('\r'), std::string::npos) << what;
    EXPECT_EQ(e.benchmark, "s/evil\nname\r|`<b>");  // the member keeps the real name
    EXPECT_NE(what.find("s/evil\\nname\\r"), std::string::npos) << what;
  }
}

TEST(LoaderBadInputExtra, PerfgateProcessRunWithoutStoredRuns) {
  const std::string doc = R"({"context": {}, "benchmarks": [
    {"name": "s/x", "repetitions": 1, "repetition_index": 0, "iterations": 5, "real_time": 1, "cpu_time": 1,
     "time_unit": "ns", "perfgate_process_run": 0}]})";
  try {
    (void)perfgate::parse_results(doc, "x.json");
    FAIL();
  } catch (const InputError& e) { EXPECT_EQ(e.field, "perfgate_process_run"); }
}

TEST(LoaderBadInputExtra, FailedRepetitionsNeedNoFullCount) {
  // A benchmark that failed in its second repetition is a failure, not a missing-repetition error.
  const std::string doc = R"({"context": {}, "benchmarks": [
    {"name": "s/x", "repetitions": 3, "repetition_index": 0, "iterations": 5, "real_time": 1, "cpu_time": 1,
     "time_unit": "ns"},
    {"name": "s/x", "repetitions": 3, "repetition_index": 1, "error_occurred": true, "error_message": "CUDA error",
     "iterations": 0, "real_time": 0, "cpu_time": 0, "time_unit": "ns"}]})";
  const perfgate::ResultSet rs = perfgate::parse_results(doc, "x.json");
  ASSERT_TRUE(rs.find("s/x")->error);
  EXPECT_EQ(*rs.find("s/x")->error, "CUDA error");
  EXPECT_EQ(rs.find("s/x")->time.samples.size(), 1u);
}

// Through the real CLI: every bad-input fixture, as baseline and as current, exits 2 with one line
// on stderr that names the file.
TEST(LoaderBadInputCli, ExitTwoWithOneLine) {
  TempDir dir;
  const std::string good = data("bad/good.json");
  for (const BadCase& c : kBadCases) {
    const std::string bad = data(std::string("bad/") + c.file);
    for (int side = 0; side < 2; ++side) {
      const std::string err = (dir.path / "err.txt").string();
      const std::string cmd = std::string("'") + PERFGATE_CLI_PATH + "' compare '" + (side == 0 ? bad : good) + "' '" +
                              (side == 0 ? good : bad) + "' --no-config --quiet > /dev/null 2> '" + err + "'";
      const int status = std::system(cmd.c_str());
      ASSERT_TRUE(WIFEXITED(status)) << cmd;
      EXPECT_EQ(WEXITSTATUS(status), 2) << cmd;
      const std::string text = read_text(err);
      EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << c.file << ": " << text;
      EXPECT_NE(text.find(bad), std::string::npos) << text;
    }
  }
}

// A side whose files load but hold no benchmark (an empty list, entries without a measurement) is refused naming its
// files and what loading found, not as a machine-class mismatch of the two sides.
TEST(LoaderBadInputCli, ASideWithoutBenchmarksIsNamed) {
  TempDir dir;
  const std::string good = data("bad/good.json");
  const std::string empty = (dir.path / "empty-list.json").string();
  std::ofstream(empty) << R"({"context": {"num_cpus": 2}, "benchmarks": []})";
  const std::string timeless = (dir.path / "timeless.json").string();
  std::ofstream(timeless) << R"({"context": {}, "benchmarks": [{"name": "s/a", "verdict": "regression"}]})";
  const std::string err = (dir.path / "err.txt").string();
  const auto run = [&](const std::string& baseline, const std::string& current, int exit_code = 2) {
    const std::string cmd = std::string("'") + PERFGATE_CLI_PATH + "' compare '" + baseline + "' '" + current +
                            "' --no-config --quiet > /dev/null 2> '" + err + "'";
    const int status = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == exit_code) << cmd;
    return read_text(err);
  };
  const std::string first = run(empty, good);
  EXPECT_NE(first.find(empty + ": field 'benchmarks': no benchmark results on the baseline side"), std::string::npos)
      << first;
  EXPECT_EQ(first.find("machine class"), std::string::npos) << first;
  const std::string second = run(good, good + "," + timeless, 77);  // the good file carries the side: judged
  EXPECT_EQ(second.find("no benchmark results"), std::string::npos) << second;
  const std::string third = run(good, timeless);
  EXPECT_NE(third.find(timeless + ": field 'benchmarks': no benchmark results on the current side; 1 entry without "
                                  "real_time"),
            std::string::npos)
      << third;
}

TEST(LoaderBadInputExtra, PathologicalShapesStayBounded) {
  // A far repetition index: no dense table of a million flags, and a precise message.
  const std::string far = R"({"context": {}, "benchmarks": [
    {"name": "s/x", "repetitions": 1000000, "repetition_index": 999999, "iterations": 5, "real_time": 1,
     "cpu_time": 1, "time_unit": "ns"}]})";
  try {
    (void)perfgate::parse_results(far, "far.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field, "repetition_index");
    EXPECT_NE(e.detail.find("index 0 of 1000000 is absent"), std::string::npos) << e.what();
  }
  // Hundreds of counters in one entry.
  std::string many =
      R"({"context": {}, "benchmarks": [{"name": "s/x", "iterations": 5, "real_time": 1, "cpu_time": 1, "time_unit": "ns")";
  for (int i = 0; i < 300; ++i) many += ", \"c" + std::to_string(i) + "\": 1";
  many += "}]}";
  try {
    (void)perfgate::parse_results(many, "many.json");
    FAIL();
  } catch (const InputError& e) { EXPECT_NE(e.detail.find("more than 256 counters"), std::string::npos) << e.what(); }
}

// Google Benchmark writes the coefficient of variation of a constant counter as a bare NaN in the
// "_cv" aggregate (0/0). Aggregates are ignored, so such a file must load; the same token in a
// per-repetition entry's time stays bad input (nan_time.json above).
TEST(Loader, ToleratesBareNaNInAggregates) {
  const std::string json = R"({"context": {"date": "x", "num_cpus": 2, "perfgate.suite": "fixture"},
    "benchmarks": [
      {"name": "fixture/a", "run_name": "fixture/a", "run_type": "iteration", "repetitions": 2,
       "repetition_index": 0, "threads": 1, "iterations": 10, "real_time": 100.0, "cpu_time": 99.0,
       "time_unit": "ns", "throttled": 0},
      {"name": "fixture/a", "run_name": "fixture/a", "run_type": "iteration", "repetitions": 2,
       "repetition_index": 1, "threads": 1, "iterations": 10, "real_time": 102.0, "cpu_time": 99.0,
       "time_unit": "ns", "throttled": 0},
      {"name": "fixture/a_cv", "run_name": "fixture/a", "run_type": "aggregate", "repetitions": 2,
       "threads": 1, "aggregate_name": "cv", "aggregate_unit": "percentage", "iterations": 2,
       "real_time": 0.01, "cpu_time": 0.0, "time_unit": "ns", "throttled": NaN, "note": "NaN inside a string"},
      {"name": "fixture/a_max", "run_name": "fixture/a", "run_type": "aggregate", "repetitions": 2,
       "threads": 1, "aggregate_name": "max", "iterations": 2, "real_time": 102.0, "cpu_time": -inf,
       "time_unit": "ns"}
    ]})";
  const perfgate::ResultSet set = perfgate::parse_results(json, "cv_nan.json");
  ASSERT_EQ(set.benchmarks.size(), 1u);
  EXPECT_EQ(set.benchmarks[0].time.samples.size(), 2u);
}
