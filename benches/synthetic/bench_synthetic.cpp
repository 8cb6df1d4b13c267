// The synthetic suite: CPU benchmarks of a known, countable cost with an injectable slowdown.
// It exists to test the gate itself (see synthetic.hpp for the knobs, docs/running.md for use).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "perfgate/bench/counters.hpp"
#include "perfgate/bench/main.hpp"
#include "perfgate/bench/skip.hpp"
#include "perfgate/bench/timer.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/synthetic/synthetic.hpp"

namespace {

using perfgate::synthetic::Config;
using perfgate::synthetic::name_matches;
using perfgate::synthetic::planned_units;

Config& config() {
  static Config c;
  return c;
}

// Failure injection, applied at the start of every benchmark. Returns the value the correctness
// check must add to the computed result (non-zero: the check sees a wrong value).
std::uint64_t inject_failures(const std::string& name) {
  const Config& c = config();
  if (name_matches(c.crash_filter, name)) {
    std::fprintf(stderr, "synthetic: injected crash in %s\n", name.c_str());
    std::fflush(stderr);
    std::abort();
  }
  if (name_matches(c.hang_filter, name)) {
    std::fprintf(stderr, "synthetic: injected hang in %s\n", name.c_str());
    std::fflush(stderr);
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return name_matches(c.fail_filter, name) ? 1U : 0U;
}

void report_units(benchmark::State& state, std::uint64_t units, std::uint64_t base_units) {
  perfgate::bench::set_info(state, "units", static_cast<double>(units));
  perfgate::bench::set_info(state, "base_units", static_cast<double>(base_units));
}

// A dependent LCG chain of base_units steps under `name`, checked against the jump-ahead reference before timing.
void register_chain_named(const std::string& name, std::uint64_t base_units) {
  benchmark::RegisterBenchmark(name.c_str(), [name, base_units](benchmark::State& state) {
    const std::uint64_t corrupt = inject_failures(name);
    const std::uint64_t units = planned_units(config(), name, base_units);
    const std::uint64_t got = perfgate::synthetic::run_chain(units) + corrupt;
    const std::uint64_t want = perfgate::synthetic::chain_reference(units);
    if (got != want) {
      perfgate::bench::fail(
          state, fmt::format("wrong result: chain of {} units gave {:#x}, reference {:#x}", units, got, want));
      return;
    }
    for (auto _ : state) { benchmark::DoNotOptimize(perfgate::synthetic::run_chain(units)); }
    report_units(state, units, base_units);
  });
}

void register_chain(std::uint64_t base_units) {
  register_chain_named(fmt::format("synthetic/chain/lcg/units:{}", base_units), base_units);
}

void register_walk(const char* level, std::uint32_t kib, std::uint64_t base_units) {
  const std::string name = fmt::format("synthetic/walk/{}/units:{}", level, base_units);
  benchmark::RegisterBenchmark(name.c_str(), [name, kib, base_units](benchmark::State& state) {
    const std::uint64_t corrupt = inject_failures(name);
    const std::uint64_t units = planned_units(config(), name, base_units);
    const perfgate::synthetic::Walk walk(kib * 1024U / 4U);
    const std::uint64_t got = walk.run(units) + corrupt;
    const std::uint64_t want = walk.reference(units);
    if (got != want) {
      perfgate::bench::fail(
          state, fmt::format("wrong result: walk of {} units reached slot {}, reference {}", units, got, want));
      return;
    }
    for (auto _ : state) { benchmark::DoNotOptimize(walk.run(units)); }
    report_units(state, units, base_units);
    perfgate::bench::set_info(state, "working_set_kib", kib);
  });
}

// A calibration benchmark, as real suites have (perfgate/host_fit.hpp): the chain again, under a name that the host
// check reads as work no change of the suite touches. Not in the suite's gate (cases/gate.txt); the tests of the
// host check select it, and slow it with PERFGATE_SYNTHETIC_SLOWDOWN_FILTER to stand for a slower host. The failure
// knobs apply to it as to every benchmark of the suite (the fleet test crashes whichever its shard lists first).
void register_calibration(std::uint64_t base_units) {
  register_chain_named(fmt::format("synthetic/calibration/chain/units:{}", base_units), base_units);
}

// Two phases, A (chain, 60% of the units) and B (walk in L1, 40%), timed separately as phase
// counters, plus a rate: exercises the per-phase and higher-is-better paths of the gate.
void register_phased(std::uint64_t base_units) {
  const std::string name = fmt::format("synthetic/phased/chain_walk/units:{}", base_units);
  benchmark::RegisterBenchmark(name.c_str(), [name, base_units](benchmark::State& state) {
    const std::uint64_t corrupt = inject_failures(name);
    const std::uint64_t base_a = base_units * 6 / 10;
    const std::uint64_t base_b = base_units - base_a;
    const std::uint64_t units_a = planned_units(config(), name, base_a, "A");
    const std::uint64_t units_b = planned_units(config(), name, base_b, "B");
    const perfgate::synthetic::Walk walk(16U * 1024U / 4U);
    const std::uint64_t got_a = perfgate::synthetic::run_chain(units_a) + corrupt;
    const std::uint64_t got_b = walk.run(units_b);
    if (got_a != perfgate::synthetic::chain_reference(units_a) || got_b != walk.reference(units_b)) {
      perfgate::bench::fail(state, fmt::format("wrong result: phased bench of {}+{} units", units_a, units_b));
      return;
    }
    double ms_a = 0.0;
    double ms_b = 0.0;
    perfgate::bench::Stopwatch total;
    for (auto _ : state) {
      perfgate::bench::Stopwatch sw;
      benchmark::DoNotOptimize(perfgate::synthetic::run_chain(units_a));
      ms_a += sw.elapsed_ms();
      sw.restart();
      benchmark::DoNotOptimize(walk.run(units_b));
      ms_b += sw.elapsed_ms();
    }
    const double iters = static_cast<double>(state.iterations());
    perfgate::bench::set_phase_ms(state, "A", ms_a);
    perfgate::bench::set_phase_ms(state, "B", ms_b);
    if (iters > 0) {
      perfgate::bench::set_rate(state, "Munits/s", static_cast<double>(base_units) / 1e6, (ms_a + ms_b) / 1e3 / iters);
    }
    report_units(state, units_a + units_b, base_units);
  });
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  try {
    config() = Config::from_env();
    config().apply_flags(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_synthetic: %s\n", e.what());
    return 2;
  }
  benchmark::AddCustomContext(perfgate::context_keys::kSuite, "synthetic");
  benchmark::AddCustomContext(perfgate::context_keys::kSyntheticSlowdown, fmt::format("{}", config().slowdown));
  benchmark::AddCustomContext(perfgate::context_keys::kSyntheticSlowdownFilter, config().slowdown_filter);
  benchmark::AddCustomContext(perfgate::context_keys::kSyntheticSlowdownPhase, config().slowdown_phase);

  for (std::uint64_t units : {1000U, 10000U, 100000U}) register_chain(units);
  register_walk("l1", 16, 20000);
  register_walk("l2", 1024, 20000);
  register_phased(100000);
  register_calibration(10000);

  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  return perfgate::bench::run_main(static_cast<int>(args.size()), cargs.data());
}
