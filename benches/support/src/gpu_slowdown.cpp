#include "perfgate/bench/gpu_slowdown.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "perfgate/context_keys.hpp"

namespace perfgate::bench {

GpuSlowdown GpuSlowdown::parse(const char* fraction_text, const char* filter_text) {
  GpuSlowdown s;
  const std::string text = fraction_text != nullptr ? fraction_text : "";
  if (!text.empty()) {
    std::size_t used = 0;
    double value = 0.0;
    try {
      value = std::stod(text, &used);
    } catch (const std::exception&) { used = 0; }
    if (used == 0 || used != text.size() || !std::isfinite(value) || value < 0.0 || value > kGpuSlowdownMax)
      throw std::invalid_argument(fmt::format("{}='{}' is not a fraction in [0, {}] (e.g. 0.03 for 3% more work)",
                                              kGpuSlowdownVar, text, kGpuSlowdownMax));
    s.fraction_ = value;
  }
  s.filter_text_ = filter_text != nullptr ? filter_text : "";
  if (!s.filter_text_.empty()) {
    try {
      s.filter_.emplace(s.filter_text_);
    } catch (const std::regex_error& e) {
      throw std::invalid_argument(
          fmt::format("{}='{}' is not a valid regex: {}", kGpuSlowdownFilterVar, s.filter_text_, e.what()));
    }
  }
  return s;
}

double GpuSlowdown::fraction_for(const std::string& benchmark_name) const {
  if (!active()) return 0.0;
  if (filter_ && !std::regex_search(benchmark_name, *filter_)) return 0.0;
  return fraction_;
}

const GpuSlowdown& gpu_slowdown() {
  static const GpuSlowdown knob = [] {
    try {
      return GpuSlowdown::parse(std::getenv(kGpuSlowdownVar), std::getenv(kGpuSlowdownFilterVar));
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      std::exit(2);
    }
  }();
  return knob;
}

void add_gpu_slowdown_context() {
  const GpuSlowdown& knob = gpu_slowdown();
  if (!knob.active()) return;
  benchmark::AddCustomContext(perfgate::context_keys::kGpuSlowdown, fmt::format("{}", knob.fraction()));
  benchmark::AddCustomContext(perfgate::context_keys::kGpuSlowdownFilter,
                              knob.filter().empty() ? "all" : knob.filter());
}

}  // namespace perfgate::bench
