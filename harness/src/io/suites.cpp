#include "perfgate/suites.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include "perfgate/context_keys.hpp"

namespace perfgate {
namespace {
// The file name of the binary a run context says wrote it ("executable"), empty when it names none.
std::string executable_name(const RunContext& c) {
  const std::string path = c.get("executable");
  return path.substr(path.find_last_of('/') + 1);
}
}  // namespace

std::string suite_of_benchmark(const std::string& normalised_name) {
  const auto slash = normalised_name.find('/');
  return slash == std::string::npos ? normalised_name : normalised_name.substr(0, slash);
}

std::string suite_of_context(const RunContext& c) {
  std::string suite = c.get(context_keys::kSuite);
  if (!suite.empty()) return suite;
  const std::string exe = executable_name(c);
  return exe.rfind("bench_", 0) == 0 ? exe.substr(6) : std::string();
}

std::map<std::string, std::string> suites_by_file(const ResultSet& results) {
  std::map<std::string, std::string> by_file;
  for (const RunContext& c : results.contexts) {
    std::string suite = suite_of_context(c);
    if (suite.empty()) suite = executable_name(c);
    if (suite.empty()) continue;
    // A benchmark the runner marked failed (a crash) has no JSON of its own: it names the binary it ran in.
    if (const std::string binary = c.get(context_keys::kRunBinary); !binary.empty()) by_file.emplace(binary, suite);
    by_file.emplace(c.source_file, std::move(suite));
  }
  return by_file;
}

std::string reported_suite(const std::map<std::string, std::string>& by_file, const BenchmarkResult& b) {
  const auto it = by_file.find(b.source_file);
  return it != by_file.end() ? it->second : suite_of_benchmark(b.name);
}

namespace {

// process_runs_by_suite with the files' suites (suites_by_file) given.
std::map<std::string, std::vector<int>> runs_by_suite(const ResultSet& results,
                                                      const std::map<std::string, std::string>& by_file) {
  std::map<std::string, std::set<int>> used;
  std::map<std::string, std::set<std::string>> files;
  for (const BenchmarkResult& b : results.benchmarks) {
    const std::string suite = reported_suite(by_file, b);
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

}  // namespace

std::map<std::string, std::vector<int>> process_runs_by_suite(const ResultSet& results) {
  return runs_by_suite(results, suites_by_file(results));
}

namespace {

// The process runs `runs` of `results` with the benchmarks `keep` picks, process_run indices renumbered densely.
template <typename Keep>
ResultSet subset(const ResultSet& results, const std::vector<int>& runs, Keep keep) {
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
    if (!keep(b)) continue;
    BenchmarkResult copy = b;
    renumber(copy.time);
    renumber(copy.cpu_time);
    for (Metric& c : copy.counters) renumber(c);
    rs.index.emplace(copy.name, rs.benchmarks.size());
    rs.benchmarks.push_back(std::move(copy));
  }
  return rs;
}

}  // namespace

std::map<std::string, ResultSet> split_by_suite(const ResultSet& results) {
  std::map<std::string, ResultSet> out;
  const auto by_file = suites_by_file(results);
  for (const auto& [name, runs] : runs_by_suite(results, by_file)) {
    const std::string& suite = name;  // clang before 16 cannot capture a structured binding in a lambda
    out.emplace(suite, subset(results, runs, [&suite, &by_file](const BenchmarkResult& b) {
                  return reported_suite(by_file, b) == suite;
                }));
  }
  return out;
}

}  // namespace perfgate
