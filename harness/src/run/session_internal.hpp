#pragma once
// Shared by the session sources (session.cpp, session_adaptive.cpp, session_record.cpp); not part of the public API.
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "exec/elapsed.hpp"
#include "perfgate/session.hpp"

namespace perfgate::session_detail {

// The entry of `name` in a report replaced by `entry` (added when absent).
void replace_entry(ComparisonReport& report, const BenchmarkComparison& entry);
const BenchmarkComparison* find_entry(const ComparisonReport& report, const std::string& name);
// The binaries of these suites.
std::vector<BenchBinary> binaries_for(const std::vector<BenchBinary>& all, const std::set<std::string>& suites);

// Adaptive extra rounds for the undecided benchmarks of `reports` (only those named in `eligible`, when
// given). data0 / data1 hold each suite's runs of the two sides measured so far (merged in place); `sides`
// are the binaries to re-run; each look re-judges whole suites (the family of the BH correction stays the
// suite) with suite_options (whose alpha is already alpha per look) and replaces the entries of the
// benchmarks that were re-measured.
struct AdaptiveRun {
  std::vector<SuiteReport*> reports;
  SideResult& data0;
  SideResult& data1;
  const std::vector<Side>& sides;
  const std::map<std::string, CompareOptions>& suite_options;
  const MeasureOptions& base;
  const GateOptions& gate;
  const std::set<std::string>* eligible;
  std::string label;
};

void extend_undecided(AdaptiveRun& run, double initial_seconds, AdaptiveSummary& summary,
                      std::vector<std::string>& notes);

// The plan of an adaptive session that starts with `initial_rounds` (the extra rounds of each later look);
// returns the planned looks, which every look's alpha is divided by (the first included).
int plan_adaptive(AdaptiveSummary& summary, int initial_rounds, const GateOptions& gate);

}  // namespace perfgate::session_detail
