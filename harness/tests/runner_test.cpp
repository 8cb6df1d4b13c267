// Unit tests of the runner's building blocks: child processes (exit codes, signals, timeouts, output),
// salvage of a Google Benchmark JSON cut short by a crash, exact filters, binary resolution, ctest GPUs, and the
// stored gate's note on a suite that only skips.
#include "perfgate/runner.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "perfgate/baseline_store.hpp"
#include "perfgate/compare.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/machine_class.hpp"
#include "perfgate/profile_run.hpp"
#include "perfgate/report.hpp"
#include "perfgate/session.hpp"
#include "perfgate/suites.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using perfgate::ProcessSpec;
using perfgate::run_process;

namespace {

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("perfgate_runner_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

ProcessSpec sh(const std::string& script, double timeout = 0) {
  ProcessSpec s;
  s.argv = {"/bin/sh", "-c", script};
  s.timeout_seconds = timeout;
  return s;
}

}  // namespace

TEST(RunProcess, ExitCodeOutputAndEnvironment) {
  auto spec = sh("echo out1; echo \"v=$PERFGATE_T\"; echo err >&2; exit 3");
  spec.env = {{"PERFGATE_T", "42"}};
  std::vector<std::string> lines;
  spec.on_stdout_line = [&](const std::string& l) { lines.push_back(l); };
  const auto r = run_process(spec);
  EXPECT_TRUE(r.started);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.describe(), "exit code 3");
  EXPECT_EQ(lines, (std::vector<std::string>{"out1", "v=42"}));
  EXPECT_EQ(r.stderr_tail, "err\n");
}

TEST(RunProcess, SignalIsReported) {
  const auto r = run_process(sh("kill -ABRT $$"));
  EXPECT_EQ(r.signal, 6);
  EXPECT_NE(r.describe().find("SIGABRT"), std::string::npos);
}

TEST(RunProcess, TimeoutKillsTheProcessGroup) {
  const auto r = run_process(sh("sleep 30 & sleep 30; echo never", 0.5));
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(r.wall_seconds, 10.0);
  EXPECT_NE(r.describe().find("timed out"), std::string::npos);
  EXPECT_EQ(r.stdout_tail.find("never"), std::string::npos);
}

TEST(RunProcess, MissingExecutableDoesNotStart) {
  ProcessSpec s;
  s.argv = {"/nonexistent/perfgate_no_such_binary"};
  const auto r = run_process(s);
  EXPECT_FALSE(r.started);
  EXPECT_NE(r.describe().find("could not start"), std::string::npos);
}

TEST(RunProcess, PinnedChildRunsOnlyOnItsCpu) {
  const auto allowed = perfgate::allowed_cpus();
  ASSERT_FALSE(allowed.empty());
  const int cpu = allowed.back();
  auto spec = sh("grep Cpus_allowed_list /proc/self/status");
  spec.cpus = {cpu};
  const auto r = run_process(spec);
  ASSERT_TRUE(r.ok()) << r.describe() << r.stderr_tail;
  EXPECT_EQ(r.stdout_tail, "Cpus_allowed_list:\t" + std::to_string(cpu) + "\n");
}

TEST(RunProcess, UnavailableCpuIsAStartFailureThatNamesIt) {
  ProcessSpec s = sh("echo never");
  s.cpus = {CPU_SETSIZE - 1};  // no machine here has it: the kernel refuses an empty effective set
  const auto r = run_process(s);
  EXPECT_FALSE(r.started);
  EXPECT_NE(r.describe().find("could not pin to CPU(s) " + std::to_string(CPU_SETSIZE - 1)), std::string::npos)
      << r.describe();
  EXPECT_EQ(r.stdout_tail.find("never"), std::string::npos);
}

TEST(CpuList, ParsesListsAndRanges) {
  using perfgate::parse_cpu_list;
  EXPECT_EQ(parse_cpu_list("0"), (std::vector<int>{0}));
  EXPECT_EQ(parse_cpu_list("3,1,1"), (std::vector<int>{1, 3}));
  EXPECT_EQ(parse_cpu_list("0-2,5"), (std::vector<int>{0, 1, 2, 5}));
  EXPECT_EQ(perfgate::format_cpu_list({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(perfgate::format_cpu_list(parse_cpu_list("4-6,9")), "4-6,9");
}

TEST(CpuList, MalformedListsNameTheBadPart) {
  using perfgate::parse_cpu_list;
  const auto message = [](const std::string& text) {
    try {
      parse_cpu_list(text);
    } catch (const std::invalid_argument& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  EXPECT_NE(message("").find("is empty"), std::string::npos);
  EXPECT_NE(message("a").find("'a' is not a CPU number"), std::string::npos);
  EXPECT_NE(message("0,,1").find("'' is not a CPU number"), std::string::npos);
  EXPECT_NE(message("-1").find("'-1' is not a CPU number"), std::string::npos);
  EXPECT_NE(message("3-1").find("'3-1' is not a range"), std::string::npos);
  EXPECT_NE(message("1-").find("'1-' is not a CPU number"), std::string::npos);
  EXPECT_NE(message("99999").find("beyond CPU_SETSIZE"), std::string::npos);
  EXPECT_NE(message("0,").find("'' is not a CPU number"), std::string::npos);
}

TEST(Salvage, TruncatedOutputKeepsCompleteEntriesAndRenumbers) {
  // What random interleaving leaves when the process dies: repetitions 2 and 0 of "a", half of "b".
  const std::string text = R"({
  "context": {"date": "x", "num_cpus": 2, "library_build_type": "release"},
  "benchmarks": [
    {"name": "s/a", "run_name": "s/a", "run_type": "iteration", "repetitions": 5, "repetition_index": 2,
     "threads": 1, "iterations": 10, "real_time": 1.0e+02, "cpu_time": 1.0e+02, "time_unit": "ns"},
    {"name": "s/a", "run_name": "s/a", "run_type": "iteration", "repetitions": 5, "repetition_index": 0,
     "threads": 1, "iterations": 10, "real_time": 1.1e+02, "cpu_time": 1.1e+02, "time_unit": "ns", "note": "}{\""},
    {"name": "s/a_mean", "run_name": "s/a", "run_type": "aggregate", "repetitions": 5,
     "threads": 1, "iterations": 2, "real_time": 1.0e+02, "cpu_time": 1.0e+02, "time_unit": "ns"},
    {"name": "s/b", "run_name": "s/b", "run_type": "iteration", "repetitions": 5, "repetition_index": 1,
     "threads": 1, "iterations": 10, "real_ti)";
  const auto fixed = perfgate::salvage_benchmark_json(text);
  ASSERT_TRUE(fixed.has_value());
  const auto j = nlohmann::json::parse(*fixed);
  ASSERT_EQ(j["benchmarks"].size(), 2U);
  EXPECT_EQ(j["benchmarks"][0]["repetition_index"], 0);
  EXPECT_EQ(j["benchmarks"][1]["repetition_index"], 1);
  EXPECT_EQ(j["benchmarks"][0]["repetitions"], 2);
  EXPECT_EQ(j["context"]["num_cpus"], 2);
}

TEST(Salvage, NothingUsable) {
  EXPECT_FALSE(perfgate::salvage_benchmark_json("").has_value());
  EXPECT_FALSE(perfgate::salvage_benchmark_json("{\n  \"context\": {\"da").has_value());
  const auto empty = perfgate::salvage_benchmark_json("{\"context\": {}, \"benchmarks\": [\n {\"name\": \"x");
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(nlohmann::json::parse(*empty)["benchmarks"].empty());
}

TEST(ExactFilter, MatchesOnlyTheNamedBenchmarks) {
  const std::string f = perfgate::exact_filter({"s/chain/units:1000", "s/x.y(z)"});
  const std::regex re(f, std::regex::extended);
  EXPECT_TRUE(std::regex_search("s/chain/units:1000", re));
  EXPECT_TRUE(std::regex_search("s/chain/units:1000/manual_time", re));
  EXPECT_TRUE(std::regex_search("s/x.y(z)", re));
  EXPECT_FALSE(std::regex_search("s/chain/units:10000", re));
  EXPECT_FALSE(std::regex_search("s/xay(z)", re));
  EXPECT_FALSE(std::regex_search("t/s/chain/units:1000", re));
}

TEST(ResolveBenches, BuildFolderBinaryAndErrors) {
  const fs::path dir = scratch("resolve");
  fs::create_directories(dir / "bin");
  for (const char* n : {"bench_alpha", "bench_beta", "not_a_bench"}) {
    std::ofstream(dir / "bin" / n) << "#!/bin/sh\n";
    fs::permissions(dir / "bin" / n, fs::perms::owner_all);
  }
  const auto all = perfgate::resolve_benches(dir);
  ASSERT_EQ(all.size(), 2U);
  EXPECT_EQ(all[0].suite, "alpha");
  EXPECT_EQ(all[1].suite, "beta");
  const auto one = perfgate::resolve_benches(dir, {"beta"});
  ASSERT_EQ(one.size(), 1U);
  EXPECT_EQ(one[0].path.filename(), "bench_beta");
  EXPECT_EQ(perfgate::resolve_benches(dir / "bin" / "bench_alpha").at(0).suite, "alpha");
  EXPECT_THROW(perfgate::resolve_benches(dir, {"gamma"}), std::invalid_argument);
  EXPECT_THROW(perfgate::resolve_benches(dir / "missing"), std::invalid_argument);
  fs::remove_all(dir.parent_path());
}

TEST(CtestResources, GpusMapToCudaVisibleDevices) {
  std::map<std::string, std::string> env;
  const perfgate::EnvLookup lookup = [&env](const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  EXPECT_FALSE(perfgate::cuda_devices_for_ctest(lookup).has_value());
  env["CTEST_RESOURCE_GROUP_COUNT"] = "2";
  env["CTEST_RESOURCE_GROUP_0"] = "gpus";
  env["CTEST_RESOURCE_GROUP_0_GPUS"] = "id:1,slots:1";
  env["CTEST_RESOURCE_GROUP_1"] = "gpus";
  env["CTEST_RESOURCE_GROUP_1_GPUS"] = "id:0,slots:1";
  EXPECT_EQ(perfgate::cuda_devices_for_ctest(lookup).value_or(""), "1,0");
  env["CUDA_VISIBLE_DEVICES"] = "4,6";  // ctest ids are ordinals of the visible devices
  EXPECT_EQ(perfgate::cuda_devices_for_ctest(lookup).value_or(""), "6,4");
}

TEST(SuiteFromBinary, StripsPrefix) {
  EXPECT_EQ(perfgate::suite_from_binary("/x/bin/bench_lora_backward"), "lora_backward");
  EXPECT_EQ(perfgate::suite_from_binary("mybench"), "mybench");
}

// A plain binary runs as suite "b", the suite its benchmarks (BM_Sort/1024, BM_Sum, a crashed one too) are reported
// under, so that the report's reproduce lines and --explain find the binary by a benchmark's suite.
TEST(BinariesBySuite, EachSuiteMapsToTheBinaryThatRanIt) {
  perfgate::SideResult side;
  perfgate::ResultSet rs = perfgate::test_support::set_of(
      {perfgate::test_support::bench("BM_Sort/1024", {1}), perfgate::test_support::bench("BM_Sum", {1})});
  rs.contexts.front().fields["perfgate.run.binary"] = "/src/b";
  rs.contexts.front().fields["perfgate.suite"] = "b";
  for (auto& b : rs.benchmarks) b.source_file = rs.contexts.front().source_file;
  side.suites.emplace("b", rs);
  perfgate::ResultSet own = perfgate::test_support::set_of({perfgate::test_support::bench("expert_gemm/x", {1})});
  own.contexts.front().fields["perfgate.run.binary"] = "build/bin/bench_expert_gemm";
  side.suites.emplace("expert_gemm", own);
  const auto binaries = perfgate::binaries_by_suite(side);
  EXPECT_EQ(binaries.at("b"), "/src/b");
  EXPECT_EQ(binaries.at("expert_gemm"), "build/bin/bench_expert_gemm");
  EXPECT_EQ(binaries.size(), 2U);
  const auto by_file = perfgate::suites_by_file(rs);
  for (const auto& b : rs.benchmarks) EXPECT_EQ(binaries.at(perfgate::reported_suite(by_file, b)), "/src/b") << b.name;
  // A benchmark the runner marked failed (apply_failures: a crash, no JSON of its own) names the binary it ran in,
  // and is reported under that binary's suite, not under its name's first part.
  perfgate::BenchmarkResult crashed = perfgate::test_support::bench("BM_Crash/65536", {});
  crashed.source_file = "/src/b";
  EXPECT_EQ(perfgate::reported_suite(by_file, crashed), "b");
}

// The runner prints nothing itself: a failing bench process reaches the observer as a warning, and the
// phase's plan and end as phase events (observer.hpp).
TEST(Measure, FailedProcessIsAWarningToTheObserver) {
  const fs::path dir = scratch("observer");
  const fs::path bench = dir / "bench_fake";
  std::ofstream(bench)
      << "#!/bin/sh\n"
         "for a in \"$@\"; do [ \"$a\" = --benchmark_list_tests=true ] && { echo fake/a; exit 0; }; done\n"
         "echo 'perfgate: FAILED fake/a: wrong result' >&2\n"
         "exit 3\n";
  fs::permissions(bench, fs::perms::owner_all);
  perfgate::MeasureOptions o;
  o.rounds = 1;
  o.repetitions = 1;
  o.seed = 7;
  o.work_dir = dir / "raw";
  o.environment.git_commit = "0123abc";  // no git asked
  auto observer = std::make_shared<perfgate::RecordingObserver>();
  o.observer = observer;
  const perfgate::MeasureResult m = perfgate::measure({{"current", perfgate::resolve_benches(bench), {}}}, o);
  ASSERT_EQ(m.sides.at(0).failures.size(), 1u);
  const auto& events = observer->events;
  const auto warning = std::find_if(events.begin(), events.end(), [](const std::string& e) {
    return e.rfind("warning: ", 0) == 0 && e.find("FAILED") != std::string::npos &&
           e.find("fake/a: wrong result") != std::string::npos;
  });
  EXPECT_NE(warning, events.end()) << ::testing::PrintToString(events);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().rfind("phase: measure: 1 process run(s)", 0), 0u) << events.front();
  EXPECT_EQ(events.back().rfind("phase: measure: done in", 0), 0u) << events.back();
  fs::remove_all(dir.parent_path());
}

// A binary that exits 0 without writing --benchmark_out (a script, a wrapper that drops its arguments) is named as
// one that may not be a Google Benchmark binary, with what it printed, not as a file that cannot be opened; the
// failure is the binary's, not that of the names its listing printed.
TEST(Measure, ACleanExitWithoutJsonSaysWhatTheBinaryMayBe) {
  const fs::path dir = scratch("no-json");
  const fs::path bench = perfgate::test_support::write_fake_bench(dir, {"fake/a"}, "echo 'usage: wrapper ARGS'\n");
  const perfgate::MeasureResult m = perfgate::measure({{"current", perfgate::resolve_benches(bench), {}}},
                                                      perfgate::test_support::fake_measure_options(dir, 1, 7));
  ASSERT_EQ(m.sides.at(0).failures.size(), 1u);
  const std::string& message = m.sides.at(0).failures.front().message;
  EXPECT_NE(message.find("exited 0 without writing its JSON to --benchmark_out="), std::string::npos) << message;
  EXPECT_NE(message.find("is it a Google Benchmark binary"), std::string::npos) << message;
  EXPECT_NE(message.find("It printed: usage: wrapper ARGS"), std::string::npos) << message;
  // Its listing named no benchmark it ran: the binary is blamed, under its own name.
  EXPECT_EQ(m.sides.at(0).failures.front().benchmarks, std::vector<std::string>{"fake/bench_fake"});
  fs::remove_all(dir.parent_path());
}

// A program that lists nothing and says nothing for --benchmark_list_tests (/bin/true, a wrapper that drops its
// arguments) is a failure that asks whether it is a Google Benchmark binary, not a quiet "nothing ran"; a Google
// Benchmark binary that registers nothing says so on stderr, and is a note naming no filter.
TEST(Measure, AProgramThatListsNothingSilentlyIsNotTakenForAnEmptyBinary) {
  const fs::path dir = scratch("lists-nothing");
  const fs::path silent = dir / "bench_silent";
  std::ofstream(silent) << "#!/bin/sh\nexit 0\n";
  fs::permissions(silent, fs::perms::owner_all);
  const perfgate::MeasureResult m = perfgate::measure({{"current", perfgate::resolve_benches(silent), {}}},
                                                      perfgate::test_support::fake_measure_options(dir, 1, 7));
  ASSERT_EQ(m.sides.at(0).failures.size(), 1u);
  const std::string message = m.sides.at(0).failures.front().message;
  EXPECT_NE(message.find("listed no benchmark"), std::string::npos) << message;
  EXPECT_NE(message.find("is it a Google Benchmark binary"), std::string::npos) << message;
  EXPECT_NE(message.find("It printed nothing"), std::string::npos) << message;

  const fs::path empty = dir / "bench_empty";
  std::ofstream(empty) << "#!/bin/sh\necho 'Failed to match any benchmarks against regex: .' >&2\nexit 0\n";
  fs::permissions(empty, fs::perms::owner_all);
  const perfgate::MeasureResult e = perfgate::measure({{"current", perfgate::resolve_benches(empty), {}}},
                                                      perfgate::test_support::fake_measure_options(dir, 1, 7));
  EXPECT_TRUE(e.sides.at(0).failures.empty());
  EXPECT_NE(std::find(e.notes.begin(), e.notes.end(), "bench_empty (current): registers no benchmark"), e.notes.end())
      << ::testing::PrintToString(e.notes);
  fs::remove_all(dir.parent_path());
}

namespace {

// A bench of fake/a..fake/d that dies of SIGSEGV, naming nothing, whenever fake/c is among the benchmarks it runs.
fs::path crashing_fake_bench(const fs::path& dir) {
  return perfgate::test_support::write_fake_bench(
      dir, {"fake/a", "fake/b", "fake/c", "fake/d"},
      "filter=\n"
      "for a in \"$@\"; do case \"$a\" in --benchmark_filter=*) filter=\"${a#--benchmark_filter=}\";; esac; done\n"
      "sel=\n"
      "for n in a b c d; do case \"$filter\" in ''|*\"fake/$n\"*) sel=\"$sel $n\";; esac; done\n"
      "case \"$sel\" in *c*) kill -SEGV $$;; esac\n"
      "{ printf '{\"context\": {}, \"benchmarks\": ['; sep=\n"
      "  for n in $sel; do printf '%s{\"name\": \"fake/%s\", \"run_name\": \"fake/%s\", \"run_type\": \"iteration\", "
      "\"repetitions\": 1, \"repetition_index\": 0, \"iterations\": 1, \"real_time\": 1.0, \"cpu_time\": 1.0, "
      "\"time_unit\": \"ns\"}' \"$sep\" $n $n; sep=,; done\n"
      "  printf ']}\\n'; } > \"$out\"\n");
}

}  // namespace

// A crash that names no benchmark blames none of the several it cut short: they run again in halves until the one
// that crashes alone is found, and the others keep their samples (before: all four failed).
TEST(Measure, ACrashNamingNoBenchmarkIsNarrowedToTheOneThatCrashesAlone) {
  const fs::path dir = scratch("crash-halves");
  const fs::path bench = crashing_fake_bench(dir);
  const perfgate::MeasureResult m = perfgate::measure({{"current", perfgate::resolve_benches(bench), {}}},
                                                      perfgate::test_support::fake_measure_options(dir, 2, 7));
  const perfgate::SideResult& side = m.sides.at(0);
  std::vector<std::string> blamed;
  for (const auto& f : side.failures) blamed.insert(blamed.end(), f.benchmarks.begin(), f.benchmarks.end());
  EXPECT_EQ(blamed, std::vector<std::string>{"fake/c"});
  ASSERT_EQ(side.failures.size(), 3u);  // all four, then c and d, then c alone
  EXPECT_NE(side.failures.front().message.find("run again in halves"), std::string::npos)
      << side.failures.front().message;
  const perfgate::ResultSet& rs = side.suites.at("fake");
  for (const char* healthy : {"fake/a", "fake/b", "fake/d"}) {
    ASSERT_NE(rs.find(healthy), nullptr) << healthy;
    EXPECT_EQ(rs.find(healthy)->time.samples.size(), 2u) << healthy;  // both rounds
    EXPECT_FALSE(rs.find(healthy)->error.has_value()) << healthy;
  }
  ASSERT_NE(rs.find("fake/c"), nullptr);
  EXPECT_TRUE(rs.find("fake/c")->error.has_value());
  fs::remove_all(dir.parent_path());
}

namespace {

// A bench that lists fake/a and writes one valid repetition of it to --benchmark_out.
fs::path passing_fake_bench(const fs::path& dir) {
  return perfgate::test_support::write_fake_bench(
      dir, {"fake/a"},
      "cat > \"$out\" <<'J'\n"
      "{\"context\": {}, \"benchmarks\": [{\"name\": \"fake/a\", \"run_name\": \"fake/a\", "
      "\"run_type\": \"iteration\", \"repetitions\": 1, \"repetition_index\": 0, "
      "\"iterations\": 1, \"real_time\": 1.0, \"cpu_time\": 1.0, \"time_unit\": \"ns\"}]}\n"
      "J\n");
}

perfgate::MeasureResult measure_fake(const fs::path& dir, int rounds,
                                     std::optional<std::chrono::steady_clock::time_point> deadline) {
  perfgate::MeasureOptions o = perfgate::test_support::fake_measure_options(dir, rounds, 7);
  o.deadline = deadline;
  return perfgate::measure({{"current", perfgate::resolve_benches(passing_fake_bench(dir)), {}}}, o);
}

}  // namespace

// A deadline already passed lets the first rounds_before_deadline (3) rounds run and no more, and says so; without
// one every round runs.
TEST(Measure, DeadlineStopsTheRoundsAfterTheFirstThree) {
  const fs::path dir = scratch("deadline");
  const perfgate::MeasureResult cut = measure_fake(dir, 6, std::chrono::steady_clock::now());
  EXPECT_EQ(cut.rounds_run, 3);
  EXPECT_EQ(cut.sides.at(0).processes, 3);
  EXPECT_EQ(cut.sides.at(0).failures.size(), 0u);
  ASSERT_EQ(cut.notes.size(), 1u);
  EXPECT_EQ(cut.notes[0].rfind("time budget: 3 of 6 rounds measured; round 4", 0), 0u) << cut.notes[0];

  const perfgate::MeasureResult all = measure_fake(dir, 6, std::nullopt);
  EXPECT_EQ(all.rounds_run, 6);
  EXPECT_EQ(all.sides.at(0).processes, 6);
  EXPECT_TRUE(all.notes.empty()) << ::testing::PrintToString(all.notes);
  fs::remove_all(dir.parent_path());
}

namespace {
// A fake bench binary of one benchmark, fake/a, one repetition, whose entry holds `fields` besides its name, type,
// repetition and time unit; `script` runs first, and its shell variables expand in `fields`.
fs::path bench_of_fake_a(const fs::path& dir, const std::string& fields, const std::string& script = "") {
  return perfgate::test_support::write_fake_bench(
      dir, {"fake/a"},
      script +
          "cat > \"$out\" <<J\n"
          "{\"context\": {}, \"benchmarks\": [{\"name\": \"fake/a\", \"run_name\": \"fake/a\", "
          "\"run_type\": \"iteration\", \"repetitions\": 1, \"repetition_index\": 0, \"time_unit\": \"ns\", " +
          fields + "}]}\nJ\n");
}
}  // namespace

// A suite whose every benchmark skips, with no baseline, is noted once: by the stored gate, or, where the caller's
// notes already say why it skips (perfgate run's plan found its hardware missing), by the caller alone.
TEST(GateRun, ASuiteThatOnlySkipsIsNotedOnce) {
  const fs::path dir = scratch("only_skips");
  const fs::path bench = bench_of_fake_a(dir, R"("error_occurred": true, "error_message": "skipped: needs 1 GPU",
      "iterations": 1, "real_time": 0, "cpu_time": 0)");
  const perfgate::Side side{"current", perfgate::resolve_benches(bench), {}};
  ASSERT_EQ(side.benches.size(), 1u);
  perfgate::GateOptions gate;
  gate.baseline_dir = dir / "baselines";
  gate.confirm_rounds = 0;
  const auto notes_of = [&](const std::string& run) {
    const perfgate::SessionResult s =
        perfgate::gate_run(side, perfgate::test_support::fake_measure_options(dir / run, 1, 7), gate);
    EXPECT_EQ(s.suites.size(), 1u);
    return s.suites.empty() ? std::vector<std::string>{} : s.suites.front().report.notes;
  };
  const std::vector<std::string> own = notes_of("own");
  ASSERT_EQ(own.size(), 1u) << ::testing::PrintToString(own);
  EXPECT_EQ(own[0].rfind("every benchmark of suite " + side.benches.front().suite + " skipped", 0), 0u) << own[0];
  gate.skips_explained = {side.benches.front().suite};
  EXPECT_EQ(notes_of("explained"), std::vector<std::string>{});
  fs::remove_all(dir.parent_path());
}

// A thresholds entry that applies to no compared benchmark is named in the run's report, unless a --filter left its
// benchmarks out, as the filter meant.
TEST(GateRun, AThresholdsEntryForNothingIsNamedUnlessAFilterLeftItOut) {
  const fs::path dir = scratch("unmatched_thresholds");
  const fs::path bench = bench_of_fake_a(dir, R"("iterations": 1, "real_time": 1.0, "cpu_time": 1.0)");
  const perfgate::Side side{"current", perfgate::resolve_benches(bench), {}};
  const std::string suite = side.benches.at(0).suite;
  const perfgate::MeasureResult recorded =
      perfgate::measure({side}, perfgate::test_support::fake_measure_options(dir / "recorded", 3, 7));
  const perfgate::ResultSet& runs = recorded.sides.at(0).suites.at(suite);
  perfgate::BaselineInfo info;
  info.machine_class = perfgate::machine_class(runs);
  perfgate::write_baseline(dir / "baselines", suite, runs, info);
  perfgate::GateOptions gate;
  gate.baseline_dir = dir / "baselines";
  gate.confirm_rounds = 0;
  gate.rule.config = perfgate::parse_threshold_config(R"({"benchmarks": {"fake/aa": 0.1, "fake/a": 0.2}})", "t.json");
  perfgate::MeasureOptions options = perfgate::test_support::fake_measure_options(dir / "all", 3, 7);
  const perfgate::SessionResult all = perfgate::gate_run(side, options, gate);
  EXPECT_EQ(all.combined.unmatched_thresholds, std::vector<std::string>{"benchmarks 'fake/aa'"});
  EXPECT_TRUE(all.combined.current_runs.empty());  // no run file asked for (GateOptions::runs_dir)
  ASSERT_EQ(all.combined.benchmarks.size(), 1u);
  EXPECT_DOUBLE_EQ(all.combined.benchmarks[0].threshold, 0.2);
  options = perfgate::test_support::fake_measure_options(dir / "filtered", 3, 7);
  options.filter = "fake/a$";
  const perfgate::SessionResult filtered = perfgate::gate_run(side, options, gate);
  EXPECT_TRUE(filtered.combined.unmatched_thresholds.empty())
      << ::testing::PrintToString(filtered.combined.unmatched_thresholds);
  fs::remove_all(dir.parent_path());
}

namespace {
// A bench of fake/a whose level moves by up to 13% from one process run to the next (each run takes the next of four
// levels, counted in a file beside it): the per-round differences of two such builds never settle at 2 or 3 rounds.
fs::path drifting_fake_bench(const fs::path& dir) {
  return bench_of_fake_a(dir, R"("iterations": 1, "real_time": $t, "cpu_time": $t)",
                         "n=$(cat \"$0.count\" 2>/dev/null || echo 0); echo $((n + 1)) > \"$0.count\"\n"
                         "t=$(echo 1.00 1.08 0.95 1.04 | cut -d' ' -f$((n % 4 + 1)))\n");
}
}  // namespace

// The adaptive extra rounds' process runs are counted apart in the report's side table, and their files are listed
// with the first rounds': the verdicts rest on all of them, and so does the next step's advice.
TEST(GateAb, ExtraRoundsCountInTheSidesFilesAndNextStep) {
  const fs::path dir = scratch("extra_rounds_sides");
  for (const char* sub : {"before", "after"}) fs::create_directories(dir / sub);
  const fs::path before = drifting_fake_bench(dir / "before");
  const fs::path after = drifting_fake_bench(dir / "after");
  std::ofstream(after, std::ios::app) << "# another build\n";
  std::ofstream(after.string() + ".count") << "1\n";  // a level ahead of before's in every round
  perfgate::GateOptions gate;
  gate.baseline_dir = dir / "baselines";
  gate.max_extra_rounds = 2;
  gate.extra_rounds_step = 2;
  gate.max_extra_time_factor = 0;
  const perfgate::MeasureOptions options = perfgate::test_support::fake_measure_options(dir / "ab", 3, 7);
  const perfgate::SessionResult s = perfgate::gate_ab({"before", perfgate::resolve_benches(before), {}},
                                                      {"after", perfgate::resolve_benches(after), {}}, options, gate);
  ASSERT_EQ(s.suites.size(), 1u);
  const perfgate::ComparisonReport& r = s.suites.front().report;
  ASSERT_EQ(r.benchmarks.size(), 1u);
  EXPECT_EQ(r.benchmarks[0].reason.rfind("look 2/2 (2 extra round(s)): ", 0), 0u) << r.benchmarks[0].reason;
  EXPECT_EQ(r.benchmarks[0].verdict, perfgate::Verdict::noisy);
  EXPECT_NE(r.next_step.find("with 5 process runs a side"), std::string::npos) << r.next_step;  // not the first 3
  for (const perfgate::SideInfo* side : {&r.baseline, &r.current}) {
    EXPECT_EQ(side->process_runs, 5);
    EXPECT_EQ(side->extra_process_runs, 2);
    ASSERT_EQ(side->files.size(), 5u);
    EXPECT_EQ(std::count_if(side->files.begin(), side->files.end(),
                            [](const std::string& f) { return f.find("extra-2") != std::string::npos; }),
              2);
  }
  const perfgate::ComparisonReport combined = perfgate::combine_reports(s.suites);
  EXPECT_EQ(combined.current.extra_process_runs, 2);
  const std::string md = perfgate::render_markdown(combined, {});
  EXPECT_NE(md.find("| process runs | 3 + 2 in extra rounds (of the benchmarks re-measured) | 3 + 2 in extra"),
            std::string::npos)
      << md;
  fs::remove_all(dir.parent_path());
}

// `perfgate ab` of one build against itself (the same path, or a copy: a slip when --after was not rebuilt) is an A/A
// comparison: the suite's report says so, and the terminal's notes; a build of other bytes gets no such note. The
// relative gate's reference build of the same bytes is noted as such, without ab's advice.
TEST(GateAb, IdenticalBuildsAreNotedAsAnAaComparison) {
  const fs::path dir = scratch("identical_builds");
  for (const char* sub : {"before", "copy", "changed"}) fs::create_directories(dir / sub);
  const fs::path before = passing_fake_bench(dir / "before");
  fs::copy_file(before, dir / "copy" / "bench_fake");
  const fs::path changed = passing_fake_bench(dir / "changed");
  std::ofstream(changed, std::ios::app) << "# another build\n";
  perfgate::GateOptions gate;
  gate.baseline_dir = dir / "baselines";
  const auto ab = [&](const fs::path& after, const std::string& run) {
    return perfgate::gate_ab({"before", perfgate::resolve_benches(before), {}},
                             {"after", perfgate::resolve_benches(after), {}},
                             perfgate::test_support::fake_measure_options(dir / run, 2, 7), gate);
  };
  for (const fs::path& same : {before, dir / "copy" / "bench_fake"}) {
    const perfgate::SessionResult s = ab(same, "same");
    ASSERT_EQ(s.suites.size(), 1u);
    EXPECT_EQ(s.suites.front().report.identical_builds, std::vector<std::string>{"fake"}) << same;
    const std::string terminal = perfgate::render_terminal(perfgate::combine_reports(s.suites), false);
    EXPECT_NE(terminal.find("note: fake: --before and --after are the same bytes: an A/A comparison"),
              std::string::npos)
        << terminal;
  }
  // The main job's reference gate (perfgate run --against) on a commit that changed no code of the suite: the
  // same bytes again, noted as the reference build's, with no advice about ab's flags.
  perfgate::SessionResult relative = ab(before, "relative");
  perfgate::mark_reference_gate(relative, "reference 0aaa6ee");
  ASSERT_EQ(relative.suites.size(), 1u);
  EXPECT_TRUE(relative.suites.front().reference_gate);
  EXPECT_TRUE(relative.suites.front().report.identical_builds.empty());
  const std::string relative_terminal = perfgate::render_terminal(perfgate::combine_reports(relative.suites), false);
  EXPECT_NE(relative_terminal.find("note: fake: the bench binaries are the same bytes as the reference build's: the "
                                   "commits since the reference changed none of their code, so this is an A/A "
                                   "comparison and any change found is the machine's\n"),
            std::string::npos)
      << relative_terminal;
  EXPECT_EQ(relative_terminal.find("--after"), std::string::npos) << relative_terminal;
  const perfgate::SessionResult other = ab(changed, "other");
  ASSERT_EQ(other.suites.size(), 1u);
  EXPECT_TRUE(other.suites.front().report.identical_builds.empty());
  // One binary, two environments (--after-env PERFGATE_SYNTHETIC_SLOWDOWN=0.10, say): two variants, not an A/A.
  const perfgate::SessionResult env =
      perfgate::gate_ab({"before", perfgate::resolve_benches(before), {}},
                        {"after", perfgate::resolve_benches(before), {{"PERFGATE_SYNTHETIC_SLOWDOWN", "0.10"}}},
                        perfgate::test_support::fake_measure_options(dir / "env", 2, 7), gate);
  ASSERT_EQ(env.suites.size(), 1u);
  EXPECT_TRUE(env.suites.front().report.identical_builds.empty());
  fs::remove_all(dir.parent_path());
}

// A crash in the after build, narrowed down in halves: the run notes say each step, and the last one which benchmark
// it marked failed, with no empty message after it.
TEST(GateAb, ACrashsRunNotesEndWithTheBenchmarkItMarkedFailed) {
  const fs::path dir = scratch("ab_crash_notes");
  for (const char* sub : {"before", "after"}) fs::create_directories(dir / sub);
  const fs::path before = passing_fake_bench(dir / "before");
  const fs::path after = crashing_fake_bench(dir / "after");
  perfgate::GateOptions gate;
  gate.baseline_dir = dir / "baselines";
  const perfgate::SessionResult s = perfgate::gate_ab(
      {"before", perfgate::resolve_benches(before), {}}, {"after", perfgate::resolve_benches(after), {}},
      perfgate::test_support::fake_measure_options(dir / "ab", 1, 7), gate);
  std::vector<std::string> failed;
  for (const auto& n : s.notes)
    if (n.rfind("FAILED ", 0) == 0) failed.push_back(n);
  ASSERT_EQ(failed.size(), 3u) << ::testing::PrintToString(s.notes);  // all four, then c and d, then c alone
  EXPECT_NE(failed.front().find("[after] round 1: killed by signal 11 (SIGSEGV): no benchmark named"),
            std::string::npos)
      << failed.front();
  EXPECT_EQ(failed.back().substr(failed.back().find("round 1: ")),
            "round 1: killed by signal 11 (SIGSEGV); marked failed: fake/c");
  fs::remove_all(dir.parent_path());
}

// --explain of a plain binary on a machine whose perf counts nothing (a VM) and without oneDNN: no tool could look
// inside, and the explanation says why instead of leaving "no profile difference" to stand for a profile taken.
TEST(Explain, APlainBinaryThatNothingCouldProfileSaysWhy) {
  const fs::path dir = scratch("explain_nothing");
  const fs::path bench = passing_fake_bench(dir);
  const fs::path perf = dir / "perf";  // perf stat as a VM answers it: every hardware counter <not supported>
  std::ofstream(perf) << "#!/bin/sh\n"
                         "o=; while [ \"$1\" != -- ]; do [ \"$1\" = -o ] && { shift; o=\"$1\"; }; shift; done; shift\n"
                         "printf '<not supported>,,cycles,0,100.00,,\\n1.0,msec,task-clock,1000000,100.00,0.9,CPUs "
                         "utilized\\n' > \"$o\"\n"
                         "exec \"$@\"\n";
  fs::permissions(perf, fs::perms::owner_all);
  perfgate::ExplainOptions o;
  o.out_dir = dir / "explain";
  o.perf = perf.string();
  const perfgate::ExplainSide before{"before", perfgate::resolve_benches(bench).front(), {}};
  const perfgate::ExplainSide after{"after", perfgate::resolve_benches(bench).front(), {}};
  const perfgate::Explanation e = perfgate::explain_benchmark("fake/a", "fake/a", before, after, o);
  EXPECT_EQ(e.nothing_profiled,
            "hardware counters not permitted here, no oneDNN primitive ran, and the bench wrote no process account");
  o.perf.clear();
  EXPECT_EQ(
      perfgate::explain_benchmark("fake/a", "fake/a", before, after, o).nothing_profiled.rfind("perf not found", 0),
      0u);
  fs::remove_all(dir.parent_path());
}

// A plain binary of two benchmarks, fake/a and fake/b, that honours --benchmark_filter; every time 1 ns.
fs::path two_benchmark_fake_bench(const fs::path& dir) {
  return perfgate::test_support::write_fake_bench(
      dir, {"fake/a", "fake/b"},
      "filter=\n"
      "for a in \"$@\"; do case \"$a\" in --benchmark_filter=*) filter=\"${a#--benchmark_filter=}\";; esac; done\n"
      "{ printf '{\"context\": {}, \"benchmarks\": ['; sep=\n"
      "  for n in a b; do case \"$filter\" in ''|*\"fake/$n\"*) ;; *) continue;; esac\n"
      "    printf '%s{\"name\": \"fake/%s\", \"run_name\": \"fake/%s\", \"run_type\": \"iteration\", \"repetitions\": "
      "1, "
      "\"repetition_index\": 0, \"iterations\": 1, \"real_time\": 1.0, \"cpu_time\": 1.0, \"time_unit\": \"ns\"}' "
      "\"$sep\" $n $n; sep=,; done\n"
      "  printf ']}\\n'; } > \"$out\"\n");
}

// `perfgate run` of `bench` with the baselines and reports in `dir`, and `extra` flags; its exit code and output.
perfgate::test_support::ShellResult run_with_baselines(const fs::path& dir, const fs::path& bench,
                                                       const std::string& extra) {
  return perfgate::test_support::shell_output(
      fmt::format("{} run --bench {} --rounds 1 --repetitions 1 --baseline-dir {} --report-dir {} -q {} 2>&1",
                  perfgate::test_support::quote(PERFGATE_CLI_PATH), perfgate::test_support::quote(bench.string()),
                  perfgate::test_support::quote((dir / "baselines").string()),
                  perfgate::test_support::quote((dir / "reports").string()), extra));
}

// `perfgate run --filter X --update-baseline` over a stored baseline that holds more than X: the rest would be dropped,
// so the baseline is left as it was and the message names what it holds and the command that writes the run anyway.
TEST(RunCli, AFilteredUpdateDoesNotDropTheBaselinesOtherBenchmarks) {
  const fs::path dir = scratch("filtered_update");
  const fs::path bench = two_benchmark_fake_bench(dir);
  const auto run = [&](const std::string& extra) {
    return run_with_baselines(dir, bench, "--update-baseline " + extra);
  };
  const auto whole = run("");
  ASSERT_EQ(whole.code, 0) << whole.output;
  std::vector<fs::path> stored;
  for (const auto& e : fs::recursive_directory_iterator(dir / "baselines"))
    if (e.path().extension() == ".json") stored.push_back(e.path());
  ASSERT_EQ(stored.size(), 1u);
  const auto names = [&] {
    std::vector<std::string> out;
    for (const auto& b : perfgate::load_result_file(stored.front().string()).benchmarks) out.push_back(b.name);
    return out;
  };
  ASSERT_EQ(names(), (std::vector<std::string>{"fake/a", "fake/b"}));
  const auto part = run("--filter fake/a");
  EXPECT_EQ(part.code, 2) << part.output;
  EXPECT_NE(part.output.find("holds 1 benchmark(s) this run did not measure (--filter 'fake/a': fake/b); writing the "
                             "run would drop them, so the baseline is left unchanged"),
            std::string::npos)
      << part.output;
  EXPECT_NE(part.output.find("perfgate baseline update --suite 'fake' --from "), std::string::npos) << part.output;
  EXPECT_EQ(names(), (std::vector<std::string>{"fake/a", "fake/b"}));
  // Asked for (ci/perf.sh, whose case lists are the suites' gated sets): the filtered run is the whole baseline.
  const auto replaced = run("--filter fake/a --replace-baseline");
  EXPECT_EQ(replaced.code, 0) << replaced.output;
  EXPECT_EQ(names(), (std::vector<std::string>{"fake/a"}));
  fs::remove_all(dir.parent_path());
}

// An update over a stored baseline says what it replaced; a gate against a stored baseline that judged nothing names
// this command's flags in its next step (both sides need the runs), not compare's files or ab's two builds.
TEST(RunCli, AStoredBaselinesUpdateAndNextStepSpeakOfThisCommand) {
  const fs::path dir = scratch("stored_next_step");
  const fs::path bench = two_benchmark_fake_bench(dir);
  ASSERT_EQ(run_with_baselines(dir, bench, "--update-baseline").code, 0);
  const auto again = run_with_baselines(dir, bench, "--update-baseline");
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("(1 process runs), replacing the one recorded 20"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("at commit "), std::string::npos) << again.output;
  const auto gate = run_with_baselines(dir, bench, "--against none --confirm-rounds 0");
  EXPECT_EQ(gate.code, 77) << gate.output;
  EXPECT_NE(gate.output.find("--update-baseline records the stored baseline with that many, then perfgate run "
                             "--rounds "),
            std::string::npos)
      << gate.output;
  EXPECT_EQ(gate.output.find("perfgate compare takes a comma list"), std::string::npos) << gate.output;
  fs::remove_all(dir.parent_path());
}
