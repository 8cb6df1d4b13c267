#pragma once
// The process's own account of a run, for perfgate's --explain on CPU suites where perf's hardware counters
// are not permitted (VMs, containers): with PERFGATE_RUSAGE=<file> a bench process writes, when it ends, its
// wall and CPU time, context switches and page faults (getrusage) and its CPU migrations (a software
// perf event on itself, -1 where even that is refused) as JSON.
namespace perfgate::bench {

inline constexpr const char* kProcessUsageVar = "PERFGATE_RUSAGE";

// Called by run_main(): start() before the benchmarks, finish() after them; both do nothing unless
// PERFGATE_RUSAGE is set.
void start_process_usage();
void finish_process_usage();

}  // namespace perfgate::bench
