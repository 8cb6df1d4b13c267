// Produces the real Google Benchmark fixtures in this folder (gbench_1_7_1*.json) with the Google
// Benchmark installed here (Debian libbenchmark-dev 1.7.1):
//   g++ -std=c++17 -O2 make_gbench_fixture.cpp -o /tmp/fixture -lbenchmark -lpthread
//   /tmp/fixture --benchmark_repetitions=3 --benchmark_min_time=0.002 --benchmark_format=json > gbench_1_7_1.json
//   /tmp/fixture --benchmark_repetitions=3 --benchmark_min_time=0.002 --benchmark_format=json > gbench_1_7_1_run2.json
//   /tmp/fixture --benchmark_repetitions=2 --benchmark_min_time=0.002 --benchmark_enable_random_interleaving=true \
//     --benchmark_format=json > gbench_1_7_1_interleaved.json
#include <cstdint>

#include <benchmark/benchmark.h>

namespace {

void spin(benchmark::State& state) {
  std::uint64_t x = 1;
  for (auto _ : state) {
    for (int i = 0; i < 64; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
    benchmark::DoNotOptimize(x);
  }
  state.counters["phase.mix"] = 0.001;  // ms per iteration, lower is better
  state.counters["ops/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 64, benchmark::Counter::kIsRate);
  state.counters["pct.peak"] = 12.5;
  state.SetBytesProcessed(state.iterations() * 8);
}

void manual(benchmark::State& state) {
  for (auto _ : state) state.SetIterationTime(2e-6);
  state.counters["phase.copy"] = 0.002;
}

void fails(benchmark::State& state) {
  state.SkipWithError("wrong result: max relative error 0.5 > 1e-3");
  for (auto _ : state) {}
}

void skips(benchmark::State& state) {
  state.SkipWithError("skipped: needs 2 GPUs, found 0");
  for (auto _ : state) {}
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::RegisterBenchmark("fixture/spin/lcg/n:64", spin);
  benchmark::RegisterBenchmark("fixture/spin/lcg/n:64/unit:ms", spin)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("fixture/copy/manual", manual)->UseManualTime()->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("fixture/spin/threads", spin)->Threads(2);
  benchmark::RegisterBenchmark("fixture/check/fails", fails);
  benchmark::RegisterBenchmark("fixture/peer/skips", skips);
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("perfgate.suite", "fixture");
  benchmark::AddCustomContext("perfgate.cpu_model", "AMD EPYC");
  benchmark::AddCustomContext("perfgate.cpu_cores", "2");
  benchmark::AddCustomContext("perfgate.amx", "no");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
