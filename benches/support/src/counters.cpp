#include "perfgate/bench/counters.hpp"

namespace perfgate::bench {

void set_phase_ms(benchmark::State& state, std::string_view phase, double total_ms) {
  const auto iterations = static_cast<double>(state.iterations());
  state.counters["phase." + std::string(phase)] = iterations > 0 ? total_ms / iterations : 0.0;
}

void set_rate(benchmark::State& state, std::string_view unit, double amount_per_iteration,
              double seconds_per_iteration) {
  state.counters[std::string(unit)] = seconds_per_iteration > 0 ? amount_per_iteration / seconds_per_iteration : 0.0;
}

void set_percent_of(benchmark::State& state, std::string_view ceiling_name, double value, double ceiling) {
  state.counters["pct." + std::string(ceiling_name)] = ceiling > 0 ? 100.0 * value / ceiling : 0.0;
}

void set_info(benchmark::State& state, std::string_view name, double value) {
  state.counters[std::string(name)] = value;
}

}  // namespace perfgate::bench
