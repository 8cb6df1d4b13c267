// Synthetic series of the results history, shared by the history tests (history_support.hpp) and the scale
// tool (harness/bench/history_scale.cpp): header-only, without the test framework.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "perfgate/history.hpp"
#include "perfgate/stats.hpp"

namespace perfgate::test_support {

// Adds the three series of `benchmark` to `session`: a rate, a phase and a time, each of `runs` process runs
// of `reps` repetitions. `draw_time()` gives each repetition's time in ns; the rate is 1e12 / time.
template <class DrawTime>
void add_synthetic_series(history::SessionRecord& session, const std::string& benchmark, int runs, int reps,
                          DrawTime draw_time) {
  const std::pair<const char*, MetricKind> metrics[] = {
      {"bytes_per_second", MetricKind::rate}, {"phase.main", MetricKind::phase}, {"time", MetricKind::latency}};
  for (const auto& [metric, kind] : metrics) {
    history::SeriesSamples s;
    s.benchmark = benchmark;
    s.metric = metric;
    s.kind = kind;
    for (int p = 0; p < runs; ++p)
      for (int k = 0; k < reps; ++k) {
        const double time = draw_time();
        s.process_run.push_back(p);
        s.values.push_back(kind == MetricKind::rate ? 1e12 / time : time);
      }
    std::vector<double> copy = s.values;
    s.median = stats::median_inplace(copy);
    session.series.push_back(std::move(s));
  }
}

}  // namespace perfgate::test_support
