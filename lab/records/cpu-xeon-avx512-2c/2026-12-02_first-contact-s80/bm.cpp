#include <benchmark/benchmark.h>
#include <vector>
#include <numeric>
#include <algorithm>
#include <chrono>
#include <thread>
#ifndef SCALE
#define SCALE 1
#endif
static void BM_Sum(benchmark::State& s) {
  std::vector<float> v(s.range(0), 1.f);
  if (CRASH && s.range(0) > 5000) __builtin_trap(); for (auto _ : s) { for (int r = 0; r < SCALE; ++r) { float x = std::accumulate(v.begin(), v.end(), 0.f); benchmark::DoNotOptimize(x);} }
  s.SetBytesProcessed(s.iterations() * v.size() * 4);
  s.counters["elems"] = benchmark::Counter(v.size(), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Sum)->Arg(1<<12)->Arg(1<<16)->Unit(UNIT);
template <class T> static void BM_Fill(benchmark::State& s) {
  std::vector<T> v(s.range(0));
  for (auto _ : s) { std::fill(v.begin(), v.end(), T(1)); benchmark::ClobberMemory(); }
  s.SetComplexityN(s.range(0));
}
BENCHMARK_TEMPLATE(BM_Fill, int)->RangeMultiplier(4)->Range(1<<10, 1<<14)->Complexity();
static void BM_Threads(benchmark::State& s) {
  for (auto _ : s) { int x = 0; for (int i = 0; i < 10000 * SCALE; ++i) benchmark::DoNotOptimize(x += i); }
}
BENCHMARK(BM_Threads)->Threads(1)->Threads(2)->UseRealTime();
static void BM_Manual(benchmark::State& s) {
  for (auto _ : s) { auto t0 = std::chrono::steady_clock::now(); int x=0; for (int i = 0; i < 20000; ++i) benchmark::DoNotOptimize(x += i);
    s.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()); }
}
BENCHMARK(BM_Manual)->UseManualTime();
static void BM_Skip(benchmark::State& s) {
  if (SKIPERR) { s.SkipWithError("no device"); return; }
  for (auto _ : s) benchmark::DoNotOptimize(s.iterations());
}
BENCHMARK(BM_Skip);
BENCHMARK_MAIN();
