#include "perfgate/bench/process_usage.hpp"

#include <linux/perf_event.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

namespace perfgate::bench {
namespace {

struct Start {
  std::chrono::steady_clock::time_point wall;
  int migrations_fd = -1;
};

Start& start_state() {
  static Start s;
  return s;
}

// CPU migrations of this process and the threads it starts later; -1 where perf events are refused.
int open_migration_counter() {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_MIGRATIONS;
  attr.inherit = 1;
  attr.exclude_kernel = 1;
  return static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
}

double read_counter(int fd) {
  std::uint64_t value = 0;
  if (fd < 0 || read(fd, &value, sizeof(value)) != static_cast<ssize_t>(sizeof(value))) return -1;
  return static_cast<double>(value);
}

double seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; }

}  // namespace

void start_process_usage() {
  if (std::getenv(kProcessUsageVar) == nullptr) return;
  start_state().wall = std::chrono::steady_clock::now();
  start_state().migrations_fd = open_migration_counter();
}

void finish_process_usage() {
  const char* path = std::getenv(kProcessUsageVar);
  if (path == nullptr || *path == '\0') return;
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_state().wall).count();
  std::ofstream out(path);
  out << fmt::format(
      "{{\"wall_s\": {:.6f}, \"user_s\": {:.6f}, \"system_s\": {:.6f}, \"voluntary_switches\": {}, "
      "\"involuntary_switches\": {}, \"minor_faults\": {}, \"major_faults\": {}, \"migrations\": {}}}\n",
      wall, seconds(u.ru_utime), seconds(u.ru_stime), u.ru_nvcsw, u.ru_nivcsw, u.ru_minflt, u.ru_majflt,
      read_counter(start_state().migrations_fd));
  if (!out) std::fprintf(stderr, "perfgate: cannot write %s=%s: %s\n", kProcessUsageVar, path, std::strerror(errno));
}

}  // namespace perfgate::bench
