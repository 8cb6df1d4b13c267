// A plain Google Benchmark program, as a user brings it: no perfgate conventions, ordinary names
// ("BM_Sort/1024"). BM_SORT_SLOWDOWN=0.10 makes every benchmark do 10% more work, which is how the docs
// show `perfgate ab` finding a planted regression (docs/running.md, "Gating your own Google Benchmark JSON").
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

namespace {

double slowdown() {
  const char* v = std::getenv("BM_SORT_SLOWDOWN");
  return v != nullptr ? std::max(0.0, std::atof(v)) : 0.0;
}

std::vector<std::uint32_t> shuffled(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint32_t> v(n);
  std::iota(v.begin(), v.end(), 0u);
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  return v;
}

void BM_Sort(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<std::uint32_t> input = shuffled(n, 42);
  const double extra = slowdown();
  std::vector<std::uint32_t> work;
  double owed = 0;
  for (auto _ : state) {
    work = input;
    std::sort(work.begin(), work.end());
    if (!std::is_sorted(work.begin(), work.end())) state.SkipWithError("not sorted");
    for (owed += extra; owed >= 1.0; owed -= 1.0) {  // the planted slowdown: whole extra sorts, spread evenly
      work = input;
      std::sort(work.begin(), work.end());
    }
    benchmark::DoNotOptimize(work.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}

void BM_Accumulate(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<std::uint32_t> input = shuffled(n, 7);
  const auto repeats = static_cast<int>(1 + 10 * slowdown());
  for (auto _ : state) {
    std::uint64_t sum = 0;
    for (int r = 0; r < repeats; ++r) sum += std::accumulate(input.begin(), input.end(), std::uint64_t{0});
    benchmark::DoNotOptimize(sum);
  }
}

}  // namespace

BENCHMARK(BM_Sort)->Arg(1024)->Arg(16384);
BENCHMARK(BM_Accumulate)->Arg(65536);
BENCHMARK_MAIN();
