// Lanes (MeasureOptions::lanes): rounds measured several at a time, each lane's processes pinned to its CPUs, each
// round's sides back to back on one lane, and the sides' process runs merged in round order whatever order the
// rounds end in. Fake benches (shell scripts) stand in for Google Benchmark binaries.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "perfgate/context_keys.hpp"
#include "perfgate/observer.hpp"
#include "perfgate/process.hpp"
#include "perfgate/runner.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

// A bench that lists fake/a and writes one repetition of it whose time encodes its round and side:
// round * 100 + FAKE_OFFSET ns (the round from its --benchmark_out name, <phase>.<side>.<suite>.r<round>.json). It
// appends "<side> <round> <its CPUs>" to FAKE_LOG when done. With FAKE_WAIT_FOR=N, the second side of round 1 waits
// (up to 10 s) until both sides of round N have written their output: round 1 then ends after every other round.
// FAKE_FAIL_ROUND=N: round N exits 1 at once, leaving failed.marker; with FAKE_WAIT_FAILURE set, the processes of
// rounds after the first wait for that marker (up to 10 s), then 0.3 s more.
fs::path lane_fake_bench(const fs::path& dir) {
  return perfgate::test_support::write_fake_bench(dir, {"fake/a"}, R"(dir=$(dirname "$out")
name=$(basename "$out" .json)
round=${name##*.r}
round=${round%-retry}
phase=${name%%.*}
if [ -n "${FAKE_WAIT_FOR:-}" ] && [ "$round" = 1 ] && [ -e "$dir/$phase.$FAKE_OTHER.fake.r1.json" ]; then
  i=0
  while [ ! -e "$dir/$phase.A.fake.r$FAKE_WAIT_FOR.json" ] || [ ! -e "$dir/$phase.B.fake.r$FAKE_WAIT_FOR.json" ]; do
    i=$((i + 1))
    [ "$i" -gt 200 ] && break
    sleep 0.05
  done
fi
if [ "$round" = "${FAKE_FAIL_ROUND:-}" ]; then
  : > "$dir/failed.marker"
  exit 1
fi
if [ -n "${FAKE_WAIT_FAILURE:-}" ] && [ "$round" != 1 ]; then
  i=0
  while [ ! -e "$dir/failed.marker" ] && [ "$i" -lt 200 ]; do i=$((i + 1)); sleep 0.05; done
  sleep 0.3
fi
cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
time=$((round * 100 + FAKE_OFFSET))
cat > "$out" <<J
{"context": {}, "benchmarks": [{"name": "fake/a", "run_name": "fake/a", "run_type": "iteration", "repetitions": 1,
 "repetition_index": 0, "iterations": 1, "real_time": $time, "cpu_time": $time, "time_unit": "ns"}]}
J
echo "$FAKE_SIDE $round $cpus" >> "$FAKE_LOG"
)");
}

// Two lanes of one CPU each: two CPUs this process may use, or the one it has twice.
std::vector<std::vector<int>> two_lanes() {
  const auto allowed = perfgate::allowed_cpus();
  if (allowed.size() < 2) return {{allowed.front()}, {allowed.front()}};
  return {{allowed.front()}, {allowed.back()}};
}

struct LaneRun {
  perfgate::MeasureResult result;
  std::vector<std::string> log;  // "<side> <round> <cpus>", in the order the processes ended
};

// Sides A (offset 0) and B (offset 1) of the fake bench, `rounds` rounds in two lanes.
LaneRun measure_in_lanes(const fs::path& dir, int rounds, const std::map<std::string, std::string>& extra_env,
                         std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt,
                         std::shared_ptr<perfgate::RunObserver> observer = nullptr,
                         const std::map<std::string, std::string>& extra_env_b = {}) {
  const fs::path bench = lane_fake_bench(dir);
  const fs::path log = dir / "log.txt";
  perfgate::MeasureOptions o = perfgate::test_support::fake_measure_options(dir, rounds, 11);
  o.lanes = two_lanes();
  o.deadline = deadline;
  o.observer = std::move(observer);
  std::vector<std::pair<std::string, std::string>> env_a{
      {"FAKE_SIDE", "A"}, {"FAKE_OTHER", "B"}, {"FAKE_OFFSET", "0"}, {"FAKE_LOG", log.string()}};
  std::vector<std::pair<std::string, std::string>> env_b{
      {"FAKE_SIDE", "B"}, {"FAKE_OTHER", "A"}, {"FAKE_OFFSET", "1"}, {"FAKE_LOG", log.string()}};
  for (const auto& kv : extra_env) {
    env_a.push_back(kv);
    env_b.push_back(kv);
  }
  for (const auto& kv : extra_env_b) env_b.push_back(kv);
  const auto benches = perfgate::resolve_benches(bench);
  LaneRun run;
  run.result = perfgate::measure({{"A", benches, env_a}, {"B", benches, env_b}}, o);
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) run.log.push_back(line);
  return run;
}

// Side s's process run i is round i + 1: its context says so, and its sample is the time that round wrote.
void expect_rounds_in_order(const perfgate::MeasureResult& m, int rounds) {
  for (std::size_t s = 0; s < 2; ++s) {
    const perfgate::SideResult& side = m.sides.at(s);
    ASSERT_EQ(side.suites.count("fake"), 1u) << side.label;
    const perfgate::ResultSet& rs = side.suites.at("fake");
    ASSERT_EQ(rs.process_runs(), rounds) << side.label;
    for (int i = 0; i < rounds; ++i)
      EXPECT_EQ(rs.contexts.at(static_cast<std::size_t>(i)).get(perfgate::context_keys::kRunRound),
                std::to_string(i + 1))
          << side.label << " process run " << i;
    const perfgate::BenchmarkResult* b = rs.find("fake/a");
    ASSERT_NE(b, nullptr);
    ASSERT_EQ(b->time.samples.size(), static_cast<std::size_t>(rounds));
    for (std::size_t k = 0; k < b->time.samples.size(); ++k) {
      const int run = b->time.process_run.at(k);
      EXPECT_DOUBLE_EQ(b->time.samples[k], (run + 1) * 100.0 + static_cast<double>(s))
          << side.label << " sample " << k << " of process run " << run;
    }
    // The raw files too, in round order.
    ASSERT_EQ(side.raw_files.size(), static_cast<std::size_t>(rounds));
    for (int i = 0; i < rounds; ++i)
      EXPECT_NE(side.raw_files[static_cast<std::size_t>(i)].find(".r" + std::to_string(i + 1) + ".json"),
                std::string::npos)
          << side.raw_files[static_cast<std::size_t>(i)];
  }
}

std::string lane_cpus(const std::vector<int>& cpus) { return perfgate::format_cpu_list(cpus); }

}  // namespace

// 2 lanes, 6 rounds, 2 sides: 12 processes, every round once per side, both sides of a round on the same lane, each
// process on its lane's CPU (what /proc/self/status says, and perfgate.run.cpus), the progress naming the lane.
TEST(Lanes, EveryRoundOnceEachProcessPinnedToItsLane) {
  const perfgate::test_support::TempDir tmp;
  const fs::path& dir = tmp.path;
  auto observer = std::make_shared<perfgate::RecordingObserver>();
  const LaneRun run = measure_in_lanes(dir, 6, {}, std::nullopt, observer);
  const perfgate::MeasureResult& m = run.result;
  EXPECT_EQ(m.rounds_run, 6);
  EXPECT_EQ(m.sides.at(0).processes, 6);
  EXPECT_EQ(m.sides.at(1).processes, 6);
  EXPECT_TRUE(m.sides.at(0).failures.empty());
  EXPECT_TRUE(m.sides.at(1).failures.empty());
  ASSERT_EQ(run.log.size(), 12u) << ::testing::PrintToString(run.log);

  std::set<std::string> lanes;
  for (const auto& l : two_lanes()) lanes.insert(lane_cpus(l));
  std::map<std::pair<std::string, int>, std::string> cpus_of;  // (side, round) -> CPUs
  for (const auto& line : run.log) {
    std::istringstream in(line);
    std::string side, cpus;
    int round = 0;
    in >> side >> round >> cpus;
    EXPECT_TRUE(cpus_of.emplace(std::make_pair(side, round), cpus).second) << "twice: " << line;
    EXPECT_EQ(lanes.count(cpus), 1u) << "not a lane's CPUs: " << line;
  }
  for (int round = 1; round <= 6; ++round) {
    ASSERT_EQ(cpus_of.count({"A", round}), 1u) << round;
    ASSERT_EQ(cpus_of.count({"B", round}), 1u) << round;
    const std::string cpus_a = cpus_of[{"A", round}], cpus_b = cpus_of[{"B", round}];
    EXPECT_EQ(cpus_a, cpus_b) << "round " << round << " spans two lanes";
    for (std::size_t s = 0; s < 2; ++s) {
      const auto& rs = m.sides.at(s).suites.at("fake");
      const std::string side = s == 0 ? "A" : "B";
      const std::string logged = cpus_of[{side, round}];
      EXPECT_EQ(rs.contexts.at(static_cast<std::size_t>(round - 1)).get(perfgate::context_keys::kRunCpus), logged);
    }
  }
  expect_rounds_in_order(m, 6);

  int process_lines = 0;
  for (const auto& e : observer->events) {
    if (e.rfind("process: ", 0) != 0) continue;
    ++process_lines;
    EXPECT_TRUE(e.find(" lane 1/2:") != std::string::npos || e.find(" lane 2/2:") != std::string::npos) << e;
  }
  EXPECT_EQ(process_lines, 12);
  ASSERT_FALSE(observer->events.empty());
  EXPECT_NE(observer->events.front().find("2 lane(s) at once"), std::string::npos) << observer->events.front();
  EXPECT_TRUE(std::any_of(m.notes.begin(), m.notes.end(), [](const std::string& n) {
    return n.find("2 at a time in lanes") != std::string::npos;
  })) << ::testing::PrintToString(m.notes);
}

// Round 1 ends last: its second side waits until both sides of round 6 (on the other lane) are done. Merged in the
// order the processes ended, side A's and side B's process runs would pair round 1 of one side with another round
// of the other; merged in round order, process run i of both sides is round i + 1.
TEST(Lanes, PairingFollowsTheRoundsWhenTheyEndOutOfOrder) {
  if (perfgate::allowed_cpus().empty()) GTEST_SKIP() << "no CPU";
  const perfgate::test_support::TempDir tmp;
  const fs::path& dir = tmp.path;
  const LaneRun run = measure_in_lanes(dir, 6, {{"FAKE_WAIT_FOR", "6"}});
  ASSERT_EQ(run.log.size(), 12u) << ::testing::PrintToString(run.log);
  // The premise: round 1's second side ended after round 6 (both sides) had ended.
  EXPECT_EQ(run.log.back().substr(2, 2), "1 ") << ::testing::PrintToString(run.log);
  const auto round6 =
      std::find_if(run.log.begin(), run.log.end(), [](const std::string& l) { return l.substr(2, 2) == "6 "; });
  ASSERT_NE(round6, run.log.end());
  const auto first_round1 =
      std::find_if(run.log.begin(), run.log.end(), [](const std::string& l) { return l.substr(2, 2) == "1 "; });
  EXPECT_LT(first_round1, round6) << "round 1's first side ended before round 6";
  expect_rounds_in_order(run.result, 6);
  // The paired differences: B - A is 1 ns in every round.
  const auto* a = run.result.sides.at(0).suites.at("fake").find("fake/a");
  const auto* b = run.result.sides.at(1).suites.at("fake").find("fake/a");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(b->time.samples.at(i) - a->time.samples.at(i), 1.0) << i;
}

// A deadline already passed: with lanes too the first rounds_before_deadline (3) rounds run, both sides, and no
// more, and the note says so.
TEST(Lanes, DeadlineStopsTheRoundsAfterTheFirstThree) {
  const perfgate::test_support::TempDir tmp;
  const fs::path& dir = tmp.path;
  const LaneRun run = measure_in_lanes(dir, 6, {}, std::chrono::steady_clock::now());
  const perfgate::MeasureResult& m = run.result;
  EXPECT_EQ(m.rounds_run, 3);
  EXPECT_EQ(m.sides.at(0).processes, 3);
  EXPECT_EQ(m.sides.at(1).processes, 3);
  EXPECT_EQ(run.log.size(), 6u);
  const auto note = std::find_if(m.notes.begin(), m.notes.end(),
                                 [](const std::string& n) { return n.rfind("time budget: ", 0) == 0; });
  ASSERT_NE(note, m.notes.end()) << ::testing::PrintToString(m.notes);
  EXPECT_EQ(note->rfind("time budget: 3 of 6 rounds measured; round 4", 0), 0u) << *note;
  expect_rounds_in_order(m, 3);
}

// Side B's process of round 1 fails (exit 1): its benchmark is not run again, in either lane. Every process of a
// later round waits until that failure has happened, and 0.3 s more, so a B process of round 3 or later starts after
// the runner knew of it; round 2's may have started before. The rounds that ran still pair.
TEST(Lanes, FailedBenchmarkStopsInEveryLane) {
  const perfgate::test_support::TempDir tmp;
  const fs::path& dir = tmp.path;
  const LaneRun run =
      measure_in_lanes(dir, 6, {{"FAKE_WAIT_FAILURE", "1"}}, std::nullopt, nullptr, {{"FAKE_FAIL_ROUND", "1"}});
  const perfgate::MeasureResult& m = run.result;
  EXPECT_EQ(m.sides.at(0).processes, 6);
  EXPECT_TRUE(m.sides.at(0).failures.empty());
  ASSERT_EQ(m.sides.at(1).failures.size(), 1u);
  EXPECT_EQ(m.sides.at(1).failures[0].round, 1);
  EXPECT_GE(m.sides.at(1).processes, 1);
  EXPECT_LE(m.sides.at(1).processes, 2);
  for (const auto& line : run.log) {
    if (line.rfind("B ", 0) == 0) { EXPECT_EQ(line.substr(0, 4), "B 2 ") << line; }
  }
  const auto& a = m.sides.at(0).suites.at("fake");
  ASSERT_EQ(a.process_runs(), 6);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(a.contexts.at(static_cast<std::size_t>(i)).get(perfgate::context_keys::kRunRound), std::to_string(i + 1));
  const auto* b = m.sides.at(1).suites.at("fake").find("fake/a");
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->error.has_value());
}

namespace {

// A bench of three benchmarks, fake/a, fake/b and fake/c, each one repetition of round * 100 + FAKE_OFFSET ns. With
// FAKE_CRASH_ROUND=N, round N writes fake/a, starts fake/b, says fake/b crashed and dies of SIGSEGV; its retry
// (-retry in the output's name) writes fake/c alone.
fs::path crashing_fake_bench(const fs::path& dir) {
  return perfgate::test_support::write_fake_bench(dir, {"fake/a", "fake/b", "fake/c"}, R"(name=$(basename "$out" .json)
round=${name##*.r}
retry=no
case "$round" in *-retry) retry=yes; round=${round%-retry};; esac
t=$((round * 100 + FAKE_OFFSET))
entry() {
  printf '{"name": "%s", "run_name": "%s", "run_type": "iteration", "repetitions": 1, "repetition_index": 0, ' "$1" "$1"
  printf '"iterations": 1, "real_time": %s, "cpu_time": %s, "time_unit": "ns"}' "$t" "$t"
}
if [ "$retry" = yes ]; then
  { printf '{"context": {}, "benchmarks": ['; entry fake/c; printf ']}\n'; } > "$out"
  exit 0
fi
if [ "$round" = "${FAKE_CRASH_ROUND:-}" ]; then
  { printf '{"context": {}, "benchmarks": ['; entry fake/a; printf ', {"name": "fake/b", "run_na'; } > "$out"
  echo "fake/b crashed" >&2
  kill -SEGV $$
fi
{ printf '{"context": {}, "benchmarks": ['; entry fake/a; printf ', '; entry fake/b; printf ', '; entry fake/c
  printf ']}\n'; } > "$out"
)");
}

}  // namespace

// A crash in a lane: the benchmark it names is not run again, the one it cut short is retried at once on the same
// lane, and the retry's process run sits right after its round's: every benchmark's runs stay in round order.
TEST(Lanes, CrashRetryRunsInItsLaneAndKeepsTheRoundOrder) {
  const perfgate::test_support::TempDir tmp;
  const fs::path& dir = tmp.path;
  const fs::path bench = crashing_fake_bench(dir);
  perfgate::MeasureOptions o = perfgate::test_support::fake_measure_options(dir, 6, 11);
  o.lanes = two_lanes();
  const auto benches = perfgate::resolve_benches(bench);
  const perfgate::MeasureResult m = perfgate::measure(
      {{"A", benches, {{"FAKE_OFFSET", "0"}}}, {"B", benches, {{"FAKE_OFFSET", "1"}, {"FAKE_CRASH_ROUND", "2"}}}}, o);
  ASSERT_EQ(m.sides.at(1).failures.size(), 1u);
  EXPECT_EQ(m.sides.at(1).failures[0].round, 2);
  EXPECT_EQ(m.sides.at(1).failures[0].benchmarks, (std::vector<std::string>{"fake/b"}));
  EXPECT_EQ(m.sides.at(1).processes, 7);  // six rounds and the retry
  const perfgate::ResultSet& b = m.sides.at(1).suites.at("fake");
  ASSERT_EQ(b.process_runs(), 7);
  const std::vector<std::string> rounds{"1", "2", "2", "3", "4", "5", "6"};
  for (std::size_t i = 0; i < rounds.size(); ++i)
    EXPECT_EQ(b.contexts[i].get(perfgate::context_keys::kRunRound), rounds[i]) << i;
  EXPECT_EQ(b.contexts[2].get(perfgate::context_keys::kRunCpus), b.contexts[1].get(perfgate::context_keys::kRunCpus))
      << "the retry ran on another lane than its round";
  // Each benchmark's samples, in process-run order, are the rounds in order.
  for (const char* name : {"fake/a", "fake/c"}) {
    const perfgate::BenchmarkResult* r = b.find(name);
    ASSERT_NE(r, nullptr) << name;
    std::vector<std::pair<int, double>> runs;
    for (std::size_t k = 0; k < r->time.samples.size(); ++k)
      runs.emplace_back(r->time.process_run[k], r->time.samples[k]);
    std::sort(runs.begin(), runs.end());
    ASSERT_EQ(runs.size(), 6u) << name;
    for (std::size_t k = 0; k < runs.size(); ++k)
      EXPECT_DOUBLE_EQ(runs[k].second, static_cast<double>(k + 1) * 100.0 + 1) << name << k;
  }
  EXPECT_TRUE(b.find("fake/b")->error.has_value());
  EXPECT_EQ(m.sides.at(0).processes, 6);
  EXPECT_TRUE(m.sides.at(0).failures.empty());
}

TEST(Lanes, ParseErrorsNameTheBadLane) {
  using perfgate::parse_cpu_lanes;
  EXPECT_EQ(parse_cpu_lanes("56;58;60;62"), (std::vector<std::vector<int>>{{56}, {58}, {60}, {62}}));
  EXPECT_EQ(parse_cpu_lanes("0-1;2-3"), (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(parse_cpu_lanes("4"), (std::vector<std::vector<int>>{{4}}));
  const auto message = [](const std::string& text) {
    try {
      parse_cpu_lanes(text);
    } catch (const std::invalid_argument& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  EXPECT_NE(message("").find("is empty"), std::string::npos) << message("");
  EXPECT_NE(message("0;a").find("lane 2 of '0;a': 'a' is not a CPU number"), std::string::npos) << message("0;a");
  EXPECT_NE(message("0;;2").find("lane 2 of '0;;2': '' is"), std::string::npos) << message("0;;2");
  EXPECT_NE(message("0;").find("lane 2"), std::string::npos) << message("0;");
  EXPECT_NE(message("3-1;4").find("lane 1 of '3-1;4': '3-1' is not a range"), std::string::npos) << message("3-1;4");
  EXPECT_NE(message("0-2;2-3").find("lanes 1 and 2 of '0-2;2-3' share CPU 2"), std::string::npos) << message("0-2;2-3");
  EXPECT_THROW(perfgate::measure({},
                                 [] {
                                   perfgate::MeasureOptions o;
                                   o.lanes = {{0}, {}};
                                   return o;
                                 }()),
               std::invalid_argument);
}

// The CLI refuses malformed lanes before measuring anything, exit 2, naming the flag and the lane.
TEST(Lanes, CliRefusesMalformedLanes) {
  if (!fs::exists(PERFGATE_CLI_PATH)) GTEST_SKIP() << "perfgate CLI not built: " << PERFGATE_CLI_PATH;
  const perfgate::test_support::TempDir tmp;
  const fs::path& dir = tmp.path;
  const fs::path bench = lane_fake_bench(dir);
  const auto run_cli = [&](std::vector<std::string> args) {
    perfgate::ProcessSpec spec;
    spec.argv = {PERFGATE_CLI_PATH};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.timeout_seconds = 60;
    return perfgate::run_process(spec);
  };
  const std::string b = bench.string();
  const auto bad = run_cli({"ab", "--before", b, "--after", b, "--lanes", "0;x", "--report-dir", (dir / "r").string()});
  EXPECT_EQ(bad.exit_code, 2) << bad.describe() << bad.stderr_tail;
  EXPECT_NE(bad.stderr_tail.find("--lanes"), std::string::npos) << bad.stderr_tail;
  EXPECT_NE(bad.stderr_tail.find("lane 2 of '0;x': 'x' is not a CPU number"), std::string::npos) << bad.stderr_tail;

  const auto shared =
      run_cli({"ab", "--before", b, "--after", b, "--lanes", "0;0", "--report-dir", (dir / "r").string()});
  EXPECT_EQ(shared.exit_code, 2) << shared.describe() << shared.stderr_tail;
  EXPECT_NE(shared.stderr_tail.find("share CPU 0"), std::string::npos) << shared.stderr_tail;

  const auto against = run_cli({"run", "--bench", b, "--against-lanes", "1-0", "--report-dir", (dir / "r").string()});
  EXPECT_EQ(against.exit_code, 2) << against.describe() << against.stderr_tail;
  EXPECT_NE(against.stderr_tail.find("--against-lanes"), std::string::npos) << against.stderr_tail;
  EXPECT_NE(against.stderr_tail.find("lane 1 of '1-0'"), std::string::npos) << against.stderr_tail;
}
