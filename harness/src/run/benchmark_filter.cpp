#include "perfgate/benchmark_filter.hpp"

#include <fmt/format.h>

namespace perfgate {

BenchmarkFilter::BenchmarkFilter(const std::string& spec) {
  std::string pattern = spec;
  if (pattern.empty() || pattern == "all") {
    all_ = true;
    return;
  }
  if (pattern.front() == '-') {
    negative_ = true;
    pattern.erase(0, 1);
  }
  try {
    regex_ = std::regex(pattern, std::regex::extended);
  } catch (const std::regex_error&) { all_ = true; }
}

bool BenchmarkFilter::selects(const std::string& raw_name) const {
  if (all_) return true;
  return std::regex_search(raw_name, regex_) != negative_;
}

int drop_unselected(ResultSet& baseline, const BenchmarkFilter& filter) {
  if (filter.selects_everything()) return 0;
  std::vector<BenchmarkResult> kept;
  kept.reserve(baseline.benchmarks.size());
  int dropped = 0;
  for (auto& b : baseline.benchmarks) {
    if (filter.selects(b.raw_name.empty() ? b.name : b.raw_name)) {
      kept.push_back(std::move(b));
    } else {
      ++dropped;
    }
  }
  baseline.benchmarks = std::move(kept);
  baseline.index.clear();
  for (std::size_t i = 0; i < baseline.benchmarks.size(); ++i) baseline.index.emplace(baseline.benchmarks[i].name, i);
  return dropped;
}

std::string unselected_note(int count, const std::string& filter, std::size_t max_filter_chars) {
  const std::string shown = filter.size() > max_filter_chars ? filter.substr(0, max_filter_chars) + "..." : filter;
  return fmt::format("{} baseline benchmark{} not selected (filter '{}')", count, count == 1 ? "" : "s", shown);
}

}  // namespace perfgate
