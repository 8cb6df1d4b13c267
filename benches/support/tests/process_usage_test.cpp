// PERFGATE_RUSAGE: the bench process's own account, written when it ends (process_usage.hpp).
#include "perfgate/bench/process_usage.hpp"

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace {

double field(const std::string& json, const std::string& name) {
  std::smatch m;
  const std::regex re("\"" + name + "\": (-?[0-9.]+)");
  if (!std::regex_search(json, m, re)) ADD_FAILURE() << name << " missing in " << json;
  return m.empty() ? -2 : std::stod(m[1]);
}

}  // namespace

TEST(ProcessUsage, WritesWallCpuSwitchesAndFaultsOfTheRun) {
  const auto file = std::filesystem::temp_directory_path() / "perfgate_process_usage_test.json";
  std::filesystem::remove(file);
  setenv(perfgate::bench::kProcessUsageVar, file.c_str(), 1);
  perfgate::bench::start_process_usage();
  // 60 ms of this process's CPU time, however long a loaded machine takes to give it.
  const std::clock_t until = std::clock() + CLOCKS_PER_SEC * 6 / 100;
  volatile double sink = 0;
  while (std::clock() < until) sink = sink + 1.0;
  perfgate::bench::finish_process_usage();
  unsetenv(perfgate::bench::kProcessUsageVar);
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string json = ss.str();
  EXPECT_GE(field(json, "user_s") + field(json, "system_s"), 0.055);
  EXPECT_GE(field(json, "wall_s"), 0.055);  // one thread's CPU time cannot exceed the wall time
  EXPECT_GE(field(json, "voluntary_switches"), 0);
  EXPECT_GE(field(json, "involuntary_switches"), 0);
  EXPECT_GT(field(json, "minor_faults"), 0);  // a process that ran faulted its pages in
  EXPECT_GE(field(json, "migrations"), -1);   // -1 where perf events are refused
  std::filesystem::remove(file);
}
