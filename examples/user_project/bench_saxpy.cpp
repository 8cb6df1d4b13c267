// A user's kernel bench: y = a*x + y, written the perfgate way (names as paths, a correctness check
// against a reference before timing, a rate counter, the perfgate main for exit codes).
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "perfgate/bench/check.hpp"
#include "perfgate/bench/counters.hpp"
#include "perfgate/bench/main.hpp"
#include "perfgate/bench/skip.hpp"
#include "perfgate/context_keys.hpp"

namespace {

void saxpy(float a, std::span<const float> x, std::span<float> y) {
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = a * x[i] + y[i];
}

void bench_saxpy(benchmark::State& state, std::size_t n) {
  std::vector<float> x(n), y(n), ref(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 17) * 0.25f;
    y[i] = static_cast<float>(i % 5);
    ref[i] = 2.0f * x[i] + y[i];
  }
  saxpy(2.0f, x, y);
  if (auto err = perfgate::bench::check_relative_l2<float, float>("y", y, ref, 1e-6)) {
    perfgate::bench::fail(state, *err);
    return;
  }
  for (auto _ : state) {
    saxpy(2.0f, x, y);
    benchmark::ClobberMemory();
  }
  const double bytes = 3.0 * sizeof(float) * static_cast<double>(n);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
}

const bool registered = [] {
  for (std::size_t n : {4096U, 65536U}) {
    const std::string name = "user_saxpy/saxpy/f32/n:" + std::to_string(n);
    benchmark::RegisterBenchmark(name.c_str(), bench_saxpy, n);
  }
  benchmark::AddCustomContext(perfgate::context_keys::kSuite, "user_saxpy");
  return true;
}();

}  // namespace

PERFGATE_BENCH_MAIN()
