#include <benchmark/benchmark.h>
#include <vector>
#include <numeric>
#include <algorithm>
#include <cstdlib>
static void BM_Sort(benchmark::State& s) {
  std::vector<int> v(s.range(0));
  for (auto _ : s) {
    s.PauseTiming(); std::iota(v.rbegin(), v.rend(), 0); s.ResumeTiming();
    std::sort(v.begin(), v.end());
    benchmark::DoNotOptimize(v.data());
  }
  s.SetItemsProcessed(s.iterations() * s.range(0));
}
BENCHMARK(BM_Sort)->Arg(1<<12)->Arg(1<<16);
static void BM_Accumulate(benchmark::State& s) {
  std::vector<double> v(s.range(0), 1.0);
  double scale = SCALE;
  for (auto _ : s) {
    double acc = 0;
    for (int r = 0; r < scale; ++r) acc += std::accumulate(v.begin(), v.end(), 0.0);
    benchmark::DoNotOptimize(acc);
  }
  s.SetBytesProcessed(s.iterations() * s.range(0) * 8);
}
BENCHMARK(BM_Accumulate)->Arg(1<<14);
BENCHMARK_MAIN();
