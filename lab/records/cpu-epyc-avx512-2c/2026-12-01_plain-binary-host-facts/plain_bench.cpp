#include <cstdlib>
#include <numeric>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
static int slow() {
  const char* s = std::getenv("SLOW");
  return s ? std::atoi(s) : 0;
}
static void BM_Sum(benchmark::State& st) {
  std::vector<float> v(st.range(0), 1.0f);
  for (auto _ : st) {
    float s = std::accumulate(v.begin(), v.end(), 0.0f);
    benchmark::DoNotOptimize(s);
    if (slow()) {
      for (int i = 0; i < slow(); ++i) {
        float t = std::accumulate(v.begin(), v.end(), 0.0f);
        benchmark::DoNotOptimize(t);
      }
    }
  }
  st.SetComplexityN(st.range(0));
  st.SetBytesProcessed(st.iterations() * st.range(0) * 4);
  st.counters["elems"] = benchmark::Counter(st.range(0));
}
BENCHMARK(BM_Sum)->RangeMultiplier(4)->Range(1 << 10, 1 << 16)->Complexity();
static void BM_Manual(benchmark::State& st) {
  for (auto _ : st) { st.SetIterationTime(1e-4 * (1 + slow())); }
}
BENCHMARK(BM_Manual)->UseManualTime()->Unit(benchmark::kMicrosecond);
static void BM_Skip(benchmark::State& st) {
  st.SkipWithError("no GPU here");
  for (auto _ : st) {}
}
BENCHMARK(BM_Skip);
static void BM_Threads(benchmark::State& st) {
  for (auto _ : st) { benchmark::DoNotOptimize(st.thread_index()); }
}
BENCHMARK(BM_Threads)->Threads(2);
BENCHMARK_MAIN();
