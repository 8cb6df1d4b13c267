#include <benchmark/benchmark.h>
#include <algorithm>
#include <cstdlib>
#include <vector>
static double slow() { const char* s = std::getenv("SLOW"); return s ? std::atof(s) : 1.0; }
static void spin(int n) { volatile int x = 0; for (int i = 0; i < n * slow(); ++i) x += i; }
static void BM_OwnReps(benchmark::State& st) { for (auto _ : st) spin(2000); }
BENCHMARK(BM_OwnReps)->Repetitions(5);
static void BM_AggOnly(benchmark::State& st) { for (auto _ : st) spin(2000); }
BENCHMARK(BM_AggOnly)->Repetitions(4)->ReportAggregatesOnly(true);
static void BM_DispAgg(benchmark::State& st) { for (auto _ : st) spin(2000); }
BENCHMARK(BM_DispAgg)->Repetitions(4)->DisplayAggregatesOnly(true);
static void BM_Iters(benchmark::State& st) { for (auto _ : st) spin(2000); }
BENCHMARK(BM_Iters)->Iterations(5000);
static void BM_RealTime(benchmark::State& st) { for (auto _ : st) spin(2000); }
BENCHMARK(BM_RealTime)->UseRealTime()->MinTime(0.05);
static void BM_Process(benchmark::State& st) { for (auto _ : st) spin(2000); }
BENCHMARK(BM_Process)->MeasureProcessCPUTime()->UseRealTime();
static void BM_Named(benchmark::State& st) { for (auto _ : st) spin(st.range(0)); }
BENCHMARK(BM_Named)->ArgNames({"n"})->Arg(1000)->Arg(4000);
template <int N> static void BM_Tmpl(benchmark::State& st) { for (auto _ : st) spin(N); }
BENCHMARK_TEMPLATE(BM_Tmpl, 1000);
static double maxstat(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
static void BM_Stat(benchmark::State& st) { for (auto _ : st) spin(2000); }
BENCHMARK(BM_Stat)->Repetitions(3)->ComputeStatistics("max", maxstat);
static void BM_Sec(benchmark::State& st) { for (auto _ : st) spin(2000); }
BENCHMARK(BM_Sec)->Unit(benchmark::kSecond);
BENCHMARK_MAIN();
