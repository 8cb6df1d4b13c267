#include <benchmark/benchmark.h>
#include <cstdlib>
#include <vector>
#include <numeric>
#include <chrono>
#include <thread>
static double slow() { const char* s = std::getenv("SLOW"); return s ? std::atof(s) : 1.0; }
static void BM_Sum(benchmark::State& st) {
  std::vector<float> v(st.range(0), 1.0f);
  int reps = static_cast<int>(slow());
  for (auto _ : st) { float s = 0; for (int r = 0; r < reps; ++r) s += std::accumulate(v.begin(), v.end(), 0.0f); benchmark::DoNotOptimize(s); }
  st.SetBytesProcessed(st.iterations() * st.range(0) * 4);
  st.counters["elems"] = benchmark::Counter(st.range(0), benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel("float");
}
BENCHMARK(BM_Sum)->RangeMultiplier(4)->Range(1<<10, 1<<16);
static void BM_Manual(benchmark::State& st) {
  for (auto _ : st) { auto t0 = std::chrono::high_resolution_clock::now(); volatile int x=0; for (int i=0;i<1000*slow();++i) x+=i; auto t1 = std::chrono::high_resolution_clock::now(); st.SetIterationTime(std::chrono::duration<double>(t1-t0).count()); }
}
BENCHMARK(BM_Manual)->UseManualTime()->Unit(benchmark::kMicrosecond);
static void BM_Threads(benchmark::State& st) { for (auto _ : st) { volatile int x=0; for (int i=0;i<500;++i) x+=i; } }
BENCHMARK(BM_Threads)->Threads(1)->Threads(2);
static void BM_Err(benchmark::State& st) { for (auto _ : st) { st.SkipWithError("no device"); break; } }
BENCHMARK(BM_Err);
static void BM_Cx(benchmark::State& st) { std::vector<int> v(st.range(0)); for (auto _ : st) { std::iota(v.begin(), v.end(), 0); benchmark::DoNotOptimize(v.data()); } st.SetComplexityN(st.range(0)); }
BENCHMARK(BM_Cx)->Range(1<<8, 1<<12)->Complexity();
BENCHMARK_MAIN();
