// Record-only runs (session.hpp, record_run): measure, then summarise for the record-only reporters.
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "perfgate/context_keys.hpp"
#include "perfgate/session.hpp"
#include "perfgate/stats.hpp"

namespace perfgate {

RecordResult record_run(const Side& current, const MeasureOptions& options) {
  RecordResult r;
  r.measurement = measure({current}, options);
  const SideResult& side = r.measurement.sides.at(0);
  bool any_ran = false;
  bool any_failed = !side.failures.empty();
  for (const auto& [suite, rs] : side.suites) {
    for (const auto& b : rs.benchmarks) {
      if (b.error) any_failed = true;
      if (!b.error && !b.skip_reason && !b.time.samples.empty()) any_ran = true;
    }
  }
  r.exit_code = any_failed ? 3 : (any_ran ? 0 : 77);
  r.report = summarise_record(r.measurement);
  return r;
}

// ---- record-only summaries ------------------------------------------------------------------------

namespace {

RecordedBenchmark summarise_benchmark(const BenchmarkResult& b) {
  RecordedBenchmark s;
  s.name = b.name;
  s.median = NAN;
  s.samples = b.time.samples.size();
  s.status = b.error ? "failed: " + *b.error : (b.skip_reason ? "skipped: " + *b.skip_reason : "ok");
  if (b.time.samples.empty()) return s;
  s.median = stats::median(b.time.samples);
  std::map<int, std::vector<double>> runs;
  for (std::size_t i = 0; i < b.time.samples.size(); ++i)
    runs[i < b.time.process_run.size() ? b.time.process_run[i] : 0].push_back(b.time.samples[i]);
  s.runs = static_cast<int>(runs.size());
  std::vector<double> medians;
  for (auto& [r, v] : runs) {
    s.within_cv = std::max(s.within_cv, stats::robust_cv(v));
    medians.push_back(stats::median_inplace(v));
  }
  const auto [lo, hi] = std::minmax_element(medians.begin(), medians.end());
  s.between_spread = s.median > 0 ? (*hi - *lo) / s.median : 0;
  return s;
}

RecordedSuite summarise_suite(const std::string& name, const ResultSet& rs) {
  RecordedSuite s;
  s.name = name;
  s.has_context = !rs.contexts.empty();
  if (s.has_context) {
    s.commit = rs.contexts.front().get(context_keys::kGitCommit, "unknown");
    s.build_type = rs.contexts.front().get(context_keys::kBuildType, "unknown");
    s.process_runs = rs.process_runs();
  }
  for (const auto& b : rs.benchmarks) s.benchmarks.push_back(summarise_benchmark(b));
  return s;
}

RecordedSide summarise_side(const SideResult& side) {
  RecordedSide s{side.label, side.processes, side.repetitions, side.process_seconds, side.raw_files, {}, {}};
  for (const auto& f : side.failures)
    s.failures.push_back(RecordedFailure{f.suite, f.side, f.binary, f.round, f.what, f.message, f.benchmarks});
  for (const auto& [suite, rs] : side.suites) s.suites.push_back(summarise_suite(suite, rs));
  return s;
}

}  // namespace

RecordReport summarise_record(const MeasureResult& m) {
  RecordReport r;
  r.wall_seconds = m.wall_seconds;
  r.seed = m.seed;
  r.notes = m.notes;
  for (const auto& side : m.sides) r.sides.push_back(summarise_side(side));
  return r;
}

}  // namespace perfgate
