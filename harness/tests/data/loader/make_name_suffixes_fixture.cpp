// Generates gbench_1_7_1_name_suffixes.json: the names Google Benchmark builds from its registration knobs.
//   g++ -O2 -std=c++17 make_name_suffixes_fixture.cpp -lbenchmark -lpthread -o make_name_suffixes_fixture
//   ./make_name_suffixes_fixture --benchmark_repetitions=2 --benchmark_min_time=0.01 \
//     --benchmark_out=gbench_1_7_1_name_suffixes.json --benchmark_out_format=json
#include <algorithm>
#include <numeric>
#include <vector>

#include <benchmark/benchmark.h>

static void BM_Sum(benchmark::State& s) {
  std::vector<int> v(static_cast<std::size_t>(s.range(0)));
  std::iota(v.begin(), v.end(), 0);
  for (auto _ : s) benchmark::DoNotOptimize(std::accumulate(v.begin(), v.end(), 0L));
}
// "BM_Sum/4096/real_time/threads:1" and ".../threads:2": the time type comes before the thread count.
BENCHMARK(BM_Sum)->Arg(1 << 12)->Threads(1)->Threads(2)->UseRealTime();
// "BM_Sum/16384/iterations:20000/process_time".
BENCHMARK(BM_Sum)->Arg(1 << 14)->MeasureProcessCPUTime()->Iterations(20000);
// A name of the user's own, with a space and a colon, and a statistic of its own ("_max").
BENCHMARK(BM_Sum)
    ->Name("sum with space/and:colon")
    ->Arg(256)
    ->ComputeStatistics("max", [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); });

BENCHMARK_MAIN();
