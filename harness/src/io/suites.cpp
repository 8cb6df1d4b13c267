#include "perfgate/suites.hpp"

#include <set>
#include <utility>

#include "perfgate/context_keys.hpp"

namespace perfgate {

std::string suite_of_benchmark(const std::string& normalised_name) {
  const auto slash = normalised_name.find('/');
  return slash == std::string::npos ? normalised_name : normalised_name.substr(0, slash);
}

std::map<std::string, std::vector<int>> process_runs_by_suite(const ResultSet& results) {
  std::map<std::string, std::set<int>> used;
  std::map<std::string, std::set<std::string>> files;
  for (const BenchmarkResult& b : results.benchmarks) {
    const std::string suite = suite_of_benchmark(b.name);
    auto& u = used[suite];
    u.insert(b.time.process_run.begin(), b.time.process_run.end());
    for (const Metric& c : b.counters) u.insert(c.process_run.begin(), c.process_run.end());
    files[suite].insert(b.source_file);
  }
  std::map<std::string, std::vector<int>> out;
  for (auto& [suite, u] : used) {
    // Contexts with no sample of this suite still belong to it when they name it, or, for a suite
    // without any sample (all failed or skipped), when they come from the file that reported it.
    const bool no_samples = u.empty();
    for (int k = 0; k < results.process_runs(); ++k) {
      const RunContext& c = results.contexts[static_cast<std::size_t>(k)];
      if (c.get(context_keys::kSuite) == suite || (no_samples && files[suite].count(c.source_file) != 0)) u.insert(k);
    }
    std::vector<int>& runs = out[suite];
    for (int k : u) {
      if (k >= 0 && k < results.process_runs()) runs.push_back(k);
    }
  }
  return out;
}

std::map<std::string, ResultSet> split_by_suite(const ResultSet& results) {
  const auto runs_by_suite = process_runs_by_suite(results);
  std::map<std::string, ResultSet> out;
  for (const auto& [suite, runs] : runs_by_suite) {
    std::map<int, int> remap;
    ResultSet rs;
    for (int k : runs) {
      remap[k] = static_cast<int>(rs.contexts.size());
      rs.contexts.push_back(results.contexts[static_cast<std::size_t>(k)]);
    }
    auto renumber = [&remap](Metric& m) {
      for (int& r : m.process_run) r = remap.count(r) != 0 ? remap[r] : 0;
    };
    for (const BenchmarkResult& b : results.benchmarks) {
      if (suite_of_benchmark(b.name) != suite) continue;
      BenchmarkResult copy = b;
      renumber(copy.time);
      renumber(copy.cpu_time);
      for (Metric& c : copy.counters) renumber(c);
      rs.index.emplace(copy.name, rs.benchmarks.size());
      rs.benchmarks.push_back(std::move(copy));
    }
    out.emplace(suite, std::move(rs));
  }
  return out;
}

}  // namespace perfgate
