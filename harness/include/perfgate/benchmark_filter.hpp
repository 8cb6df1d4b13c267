#pragma once
// Which benchmarks a --benchmark_filter selects, decided as Google Benchmark decides it, so that the harness
// can tell a baseline benchmark that a filtered run did not select from one that went missing.
#include <regex>
#include <string>

#include "perfgate/model.hpp"

namespace perfgate {

// Google Benchmark's rule: "" and "all" select everything; a leading '-' selects what the rest does not
// match; otherwise a POSIX extended regex searched anywhere in the benchmark's full (raw) name.
class BenchmarkFilter {
 public:
  // A filter that is no valid regex selects everything here (Google Benchmark refuses it, so the run
  // itself failed and says why).
  explicit BenchmarkFilter(const std::string& spec);
  bool selects(const std::string& raw_name) const;
  bool selects_everything() const { return all_; }

 private:
  bool all_ = false;
  bool negative_ = false;
  std::regex regex_;
};

// Removes from `baseline` the benchmarks that `filter` does not select (by raw name, else the normalised
// one); returns how many. A filter that selects everything removes nothing.
int drop_unselected(ResultSet& baseline, const BenchmarkFilter& filter);

// "12 baseline benchmarks not selected (filter '^expert_gemm/...')": the report line for them, the
// filter shortened to `max_filter_chars`.
std::string unselected_note(int count, const std::string& filter, std::size_t max_filter_chars = 100);

}  // namespace perfgate
