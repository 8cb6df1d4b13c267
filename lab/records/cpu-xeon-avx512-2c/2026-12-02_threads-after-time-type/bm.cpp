#include <benchmark/benchmark.h>
#include <algorithm>
#include <numeric>
#include <vector>
static void BM_Sum(benchmark::State& s) {
  std::vector<int> v(s.range(0)); std::iota(v.begin(), v.end(), 0);
  for (auto _ : s) benchmark::DoNotOptimize(std::accumulate(v.begin(), v.end(), 0L));
  s.SetBytesProcessed(s.iterations() * s.range(0) * sizeof(int));
  s.counters["elems"] = benchmark::Counter(s.range(0), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Sum)->Arg(1 << 12)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Sum)->Arg(1 << 14)->MeasureProcessCPUTime()->Iterations(20000);
BENCHMARK(BM_Sum)->Name("sum with space/and:colon")->Arg(256)->ComputeStatistics("max", [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); });
BENCHMARK_MAIN();
