#include <benchmark/benchmark.h>
#include <cstdlib>
#include <cstring>
static void BM_Work(benchmark::State& st) {
  const char* c = std::getenv("CRASH_AT");
  bool crash = c && std::atoi(c) == st.range(0);
  for (auto _ : st) { if (crash) std::abort(); benchmark::DoNotOptimize(st.range(0)); }
}
BENCHMARK(BM_Work)->DenseRange(0, 9);
BENCHMARK_MAIN();
