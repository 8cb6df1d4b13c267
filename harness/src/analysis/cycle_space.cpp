#include "perfgate/cycle_space.hpp"

#include <cmath>
#include <vector>

#include "perfgate/stats.hpp"

namespace perfgate {

std::optional<ComputeBoundPattern> compute_bound_pattern(const ResultSet& baseline, const ResultSet& current) {
  return context_pattern(baseline, current, kComputeBoundKey);
}

std::optional<double> median_clock_mhz(const BenchmarkResult& b) {
  const Metric* clock = b.counter(kClockCounter);
  if (clock == nullptr) return std::nullopt;
  std::vector<double> usable;
  for (double v : clock->samples)
    if (std::isfinite(v) && v > 0) usable.push_back(v);
  if (usable.empty()) return std::nullopt;
  return stats::median(usable);
}

BenchmarkResult timed_in_cycles(const BenchmarkResult& b, double median_clock) {
  BenchmarkResult out = b;
  out.counters.clear();
  const Metric* clock = b.counter(kClockCounter);
  const bool paired = clock != nullptr && clock->samples.size() == b.time.samples.size();
  for (std::size_t i = 0; i < out.time.samples.size(); ++i) {
    double mhz = paired ? clock->samples[i] : median_clock;
    if (!(std::isfinite(mhz) && mhz > 0)) mhz = median_clock;
    out.time.samples[i] *= mhz / 1000.0;  // ns x MHz = 1e-3 cycles
  }
  return out;
}

}  // namespace perfgate
