#pragma once
// Child processes of the runner (runner.hpp) and of the tools around it: spawning with a timeout, a
// realtime priority and CPU pinning, reading stdout/stderr as they come; CPU lists; executables on a
// search path. No knowledge of benchmarks here.
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace perfgate {

struct ProcessSpec {
  std::vector<std::string> argv;                                // argv[0] is the executable path
  std::vector<std::pair<std::string, std::string>> env;         // added to / overriding the environment
  double timeout_seconds = 0;                                   // 0: no limit
  std::function<void(const std::string& line)> on_stdout_line;  // called for every line of stdout
  // > 0: the child runs under SCHED_FIFO with this priority (its threads inherit it), shielded from
  // ordinary neighbours; the kernel's RT throttling still leaves them a share. Refusal (no
  // CAP_SYS_NICE) is not an error: the child runs normally and ProcessResult::realtime_refused says so.
  int realtime_priority = 0;
  // Non-empty: the child runs only on these CPUs (sched_setaffinity before exec; its threads inherit
  // it). A refusal is a start failure: a measurement that claims a CPU it did not get is worse than none.
  std::vector<int> cpus;
};

struct ProcessResult {
  bool started = false;
  std::string start_error;  // why it did not start (exec failure)
  int exit_code = -1;       // when it exited
  int signal = 0;           // when a signal ended it
  bool timed_out = false;   // killed by us after timeout_seconds
  double wall_seconds = 0;
  std::string stderr_tail;        // the last 64 KiB of stderr
  std::string stdout_tail;        // the last 16 KiB of stdout
  bool realtime_refused = false;  // realtime_priority was asked for and the kernel said no

  bool ok() const { return started && !timed_out && signal == 0 && exit_code == 0; }
  // "exit code 3", "killed by signal 6 (SIGABRT)", "timed out after 30 s", "could not start: ..."
  std::string describe() const;
};

// "0", "0,2", "1-3", "0-1,4" -> sorted, distinct CPU numbers. Throws std::invalid_argument naming the
// offending part ("'3-1' is not a range of CPU numbers (low-high) ...").
std::vector<int> parse_cpu_list(const std::string& text);
// "0;2", "0-1;2-3": the CPU sets of lanes (MeasureOptions::lanes), separated by ';', each a parse_cpu_list.
// Throws std::invalid_argument naming the lane and its bad part, or two lanes that share a CPU.
std::vector<std::vector<int>> parse_cpu_lanes(const std::string& text);
// The CPUs this process may run on (sched_getaffinity), ascending.
std::vector<int> allowed_cpus();
// "0", "0,2", "1-3": the inverse of parse_cpu_list.
std::string format_cpu_list(const std::vector<int>& cpus);

// The executable `name` in a folder of `search_path` (PATH's form: folders separated by ':', an empty one
// meaning "."), else in one of `extra_dirs`; empty when absent.
std::string find_executable(const std::string& name, const std::string& search_path,
                            const std::vector<std::string>& extra_dirs = {});

// Runs a child in its own process group, reading its stdout/stderr; on timeout the group gets SIGTERM,
// then SIGKILL after 2 s. Never throws for a failing child; throws std::system_error when pipes or
// fork fail.
ProcessResult run_process(const ProcessSpec& spec);

}  // namespace perfgate
