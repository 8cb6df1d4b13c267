#pragma once
// Counter naming convention, read by the harness to decide how each counter is gated:
//   "phase.<NAME>"        a phase time in milliseconds per iteration   -> lower is better, gated
//   "<unit>/s"            a throughput (TFLOP/s, GB/s, tokens/s)        -> higher is better, gated
//   "pct.<ceiling>"       percent of a measured or theoretical ceiling -> reported, not gated
//   anything else         informational (rows per expert, hit rate, ...) -> reported, not gated
#include <string>
#include <string_view>

#include <benchmark/benchmark.h>

namespace perfgate::bench {

// Phase time in ms per iteration; pass the total over all iterations of the timing loop.
void set_phase_ms(benchmark::State& state, std::string_view phase, double total_ms);

// A throughput: `amount_per_iteration` divided by the per-iteration time in seconds.
// `unit` is e.g. "TFLOP/s" (amount in TFLOP), "GB/s" (amount in GB), "tokens/s".
void set_rate(benchmark::State& state, std::string_view unit, double amount_per_iteration,
              double seconds_per_iteration);

// Percent of a ceiling: value / ceiling * 100, stored as "pct.<ceiling_name>".
void set_percent_of(benchmark::State& state, std::string_view ceiling_name, double value, double ceiling);

void set_info(benchmark::State& state, std::string_view name, double value);

// Roofline time: the larger of compute time and memory time.
inline double roofline_seconds(double flops, double flops_per_second, double bytes, double bytes_per_second) {
  const double compute = flops_per_second > 0 ? flops / flops_per_second : 0.0;
  const double memory = bytes_per_second > 0 ? bytes / bytes_per_second : 0.0;
  return compute > memory ? compute : memory;
}

}  // namespace perfgate::bench
