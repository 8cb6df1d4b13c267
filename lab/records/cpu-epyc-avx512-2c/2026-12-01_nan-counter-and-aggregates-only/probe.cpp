// A plain Google Benchmark binary for two first-contact probes: a user counter that is NaN when NANC is set (a rate
// over a zero count), and a loop that calls getenv every time, which finds SLOW early when it is set (a planted change of BM_Env).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <vector>

static void BM_Sum(benchmark::State& st) {
  std::vector<float> v(static_cast<std::size_t>(st.range(0)), 1.f);
  for (auto _ : st) {
    float s = 0;
    for (float x : v) s += x;
    benchmark::DoNotOptimize(s);
  }
  st.counters["hit_rate"] = std::getenv("NANC") ? NAN : 0.5;
  st.counters["bytes"] = static_cast<double>(v.size() * sizeof(float));
}
BENCHMARK(BM_Sum)->RangeMultiplier(4)->Range(1 << 10, 1 << 14)->Unit(benchmark::kMicrosecond);

static void BM_Env(benchmark::State& st) {
  for (auto _ : st) {
    double d = 0;
    for (int i = 0; i < 20000; ++i) d += std::getenv("SLOW") ? 1.0 : 0.5;
    benchmark::DoNotOptimize(d);
  }
}
BENCHMARK(BM_Env)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
