#include <benchmark/benchmark.h>
#include <cstdlib>
static double slow() { const char* s = std::getenv("SLOW"); return s ? std::atof(s) : 1.0; }
static void BM_Copy(benchmark::State& st) {
  const int n = static_cast<int>(4000 * slow());
  for (auto _ : st) { volatile int x = 0; for (int i = 0; i < n; ++i) x += i; }
  st.counters["bytes"] = benchmark::Counter(4096.0, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["misses"] = 12.0 * slow();
  st.counters["ns_per_item"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  st.SetItemsProcessed(st.iterations());
}
BENCHMARK(BM_Copy)->Arg(1)->Arg(2);
BENCHMARK_MAIN();
