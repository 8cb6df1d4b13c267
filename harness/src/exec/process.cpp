#include "perfgate/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

#include "exec/elapsed.hpp"

extern char** environ;

namespace perfgate {
namespace {

using Clock = std::chrono::steady_clock;

// The tails of a child's output that ProcessResult keeps (runner.hpp).
constexpr std::size_t kStdoutKeep = std::size_t{16} << 10;
constexpr std::size_t kStderrKeep = std::size_t{64} << 10;

void append_tail(std::string& buffer, const char* data, std::size_t n, std::size_t keep) {
  buffer.append(data, n);
  if (buffer.size() > 2 * keep) buffer.erase(0, buffer.size() - keep);
}

void trim_tail(std::string& buffer, std::size_t keep) {
  if (buffer.size() > keep) buffer.erase(0, buffer.size() - keep);
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGABRT: return "SIGABRT";
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: return "signal";
  }
}

}  // namespace

std::string ProcessResult::describe() const {
  if (!started) return "could not start: " + start_error;
  if (timed_out) return fmt::format("timed out after {:.0f} s, killed", wall_seconds);
  if (signal != 0) return fmt::format("killed by signal {} ({})", signal, signal_name(signal));
  return fmt::format("exit code {}", exit_code);
}

std::string find_executable(const std::string& name, const std::string& search_path,
                            const std::vector<std::string>& extra_dirs) {
  std::vector<std::string> dirs;
  std::stringstream folders(search_path);
  for (std::string dir; std::getline(folders, dir, ':');) dirs.push_back(dir.empty() ? "." : dir);
  dirs.insert(dirs.end(), extra_dirs.begin(), extra_dirs.end());
  for (const auto& dir : dirs) {
    const std::filesystem::path p = std::filesystem::path(dir) / name;
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

std::vector<int> parse_cpu_list(const std::string& text) {
  const auto bad = [&](const std::string& part, const std::string& why) {
    return std::invalid_argument(fmt::format("'{}' {} (expected a CPU list like 0, 0,2 or 1-3)", part, why));
  };
  const auto number = [&](const std::string& part, const std::string& digits) {
    if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos)
      throw bad(part, "is not a CPU number");
    const int cpu = std::stoi(digits);
    if (cpu >= CPU_SETSIZE) throw bad(part, "names a CPU beyond CPU_SETSIZE");
    return cpu;
  };
  if (text.empty()) throw bad(text, "is empty");
  std::set<int> cpus;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const auto dash = part.find('-');
    if (dash == std::string::npos) {
      cpus.insert(number(part, part));
    } else {
      const int lo = number(part, part.substr(0, dash)), hi = number(part, part.substr(dash + 1));
      if (lo > hi) throw bad(part, "is not a range of CPU numbers (low-high)");
      for (int c = lo; c <= hi; ++c) cpus.insert(c);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return {cpus.begin(), cpus.end()};
}

std::vector<std::vector<int>> parse_cpu_lanes(const std::string& text) {
  if (text.empty()) throw std::invalid_argument("'' is empty (expected lanes like 0;2 or 0-1;2-3)");
  std::vector<std::vector<int>> lanes;
  std::map<int, std::size_t> lane_of;  // CPU -> its lane (1-based)
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto semicolon = text.find(';', start);
    const std::string part = text.substr(start, semicolon == std::string::npos ? std::string::npos : semicolon - start);
    const std::size_t lane = lanes.size() + 1;
    try {
      lanes.push_back(parse_cpu_list(part));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("lane {} of '{}': {}", lane, text, e.what()));
    }
    for (int cpu : lanes.back()) {
      if (const auto [it, fresh] = lane_of.emplace(cpu, lane); !fresh)
        throw std::invalid_argument(fmt::format("lanes {} and {} of '{}' share CPU {}: each lane needs CPUs of its own",
                                                it->second, lane, text, cpu));
    }
    if (semicolon == std::string::npos) break;
    start = semicolon + 1;
  }
  return lanes;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0)
    throw std::system_error(errno, std::generic_category(), "sched_getaffinity");
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j > i ? fmt::format("{}-{}", cpus[i], cpus[j]) : std::to_string(cpus[i]);
    i = j + 1;
  }
  return out;
}

namespace {

// What the child needs, built before fork: no allocation happens between fork and exec.
struct ChildArgs {
  std::vector<std::string> env_strings, args;
  std::vector<char*> envp, argv;
  cpu_set_t cpus{};
};

// The parent's environment with spec.env added / overriding.
std::vector<std::string> child_environment(const ProcessSpec& spec) {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string key = entry.substr(0, entry.find('='));
    const bool overridden =
        std::any_of(spec.env.begin(), spec.env.end(), [&](const auto& kv) { return kv.first == key; });
    if (!overridden) out.push_back(entry);
  }
  for (const auto& [k, v] : spec.env) {
    std::string entry = k;
    entry += '=';
    entry += v;
    out.push_back(std::move(entry));
  }
  return out;
}

void build_child_args(const ProcessSpec& spec, ChildArgs& c) {
  c.env_strings = child_environment(spec);
  for (auto& s : c.env_strings) c.envp.push_back(s.data());
  c.envp.push_back(nullptr);
  c.args = spec.argv;
  for (auto& a : c.args) c.argv.push_back(a.data());
  c.argv.push_back(nullptr);
  CPU_ZERO(&c.cpus);
  for (int cpu : spec.cpus)
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &c.cpus);
}

struct Pipes {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int exec[2] = {-1, -1};  // the child writes {step, errno} here when it cannot start; closes on exec
};

Pipes open_pipes() {
  Pipes p;
  for (int* fds : {p.out, p.err, p.exec})
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  return p;
}

// What the child reports through the exec pipe when it cannot start: the step and its errno.
enum StartStep : int { kExec = 1, kAffinity = 2 };
constexpr char kRealtimeRefused[] = "perfgate: realtime scheduling refused\n";

[[noreturn]] void report_start_failure(const Pipes& p, int step) {
  const int failure[2] = {step, errno};
  [[maybe_unused]] const auto w = ::write(p.exec[1], failure, sizeof failure);
  ::_exit(127);
}

// In the child: its own process group, the pipes as stdout/stderr, scheduling and CPUs, then exec.
[[noreturn]] void exec_child(const ProcessSpec& spec, ChildArgs& c, const Pipes& p) {
  ::setpgid(0, 0);
  ::dup2(p.out[1], STDOUT_FILENO);
  ::dup2(p.err[1], STDERR_FILENO);
  if (spec.realtime_priority > 0) {
    sched_param param{};
    param.sched_priority = spec.realtime_priority;
    if (::sched_setscheduler(0, SCHED_FIFO, &param) != 0) {
      [[maybe_unused]] const auto w = ::write(STDERR_FILENO, kRealtimeRefused, sizeof kRealtimeRefused - 1);
    }
  }
  if (!spec.cpus.empty() && ::sched_setaffinity(0, sizeof c.cpus, &c.cpus) != 0) report_start_failure(p, kAffinity);
  const int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
  ::execvpe(c.argv[0], c.argv.data(), c.envp.data());
  report_start_failure(p, kExec);
}

// In the parent, after fork: did the child reach exec? Fills started / start_error.
void read_start(const ProcessSpec& spec, const Pipes& p, ProcessResult& result) {
  int failure[2] = {0, 0};
  const auto got = ::read(p.exec[0], failure, sizeof failure);
  ::close(p.exec[0]);
  result.started = got != static_cast<ssize_t>(sizeof failure);
  if (result.started) return;
  result.start_error = failure[0] == kAffinity ? fmt::format("{}: could not pin to CPU(s) {}: {}", spec.argv[0],
                                                             format_cpu_list(spec.cpus), std::strerror(failure[1]))
                                               : fmt::format("{}: {}", spec.argv[0], std::strerror(failure[1]));
}

// The child's output as it comes: stdout into its tail and, line by line, to spec.on_stdout_line.
class OutputSink {
 public:
  OutputSink(const ProcessSpec& spec, ProcessResult& result) : spec_(spec), result_(result) {}
  void stdout_bytes(const char* data, std::size_t n) {
    append_tail(result_.stdout_tail, data, n, kStdoutKeep);
    if (!spec_.on_stdout_line) return;
    line_buffer_.append(data, n);
    std::size_t pos;
    while ((pos = line_buffer_.find('\n')) != std::string::npos) {
      spec_.on_stdout_line(line_buffer_.substr(0, pos));
      line_buffer_.erase(0, pos + 1);
    }
  }
  void stderr_bytes(const char* data, std::size_t n) { append_tail(result_.stderr_tail, data, n, kStderrKeep); }
  void finish() {
    if (!line_buffer_.empty() && spec_.on_stdout_line) spec_.on_stdout_line(line_buffer_);
  }

 private:
  const ProcessSpec& spec_;
  ProcessResult& result_;
  std::string line_buffer_;
};

// The timeout: SIGTERM to the group, SIGKILL 2 s later. give_up() once 5 s after SIGTERM a grandchild still
// holds the pipes open.
class Deadline {
 public:
  Deadline(pid_t pid, double timeout_seconds, Clock::time_point start)
      : pid_(pid), timeout_(timeout_seconds), start_(start) {}
  void enforce(ProcessResult& result) {
    if (timeout_ > 0 && !term_sent_ && seconds_since(start_) > timeout_) {
      ::kill(-pid_, SIGTERM);
      term_sent_ = true;
      result.timed_out = true;
      term_time_ = Clock::now();
    }
    if (term_sent_ && !kill_sent_ && seconds_since(term_time_) > 2.0) {
      ::kill(-pid_, SIGKILL);
      kill_sent_ = true;
    }
  }
  bool give_up() const { return kill_sent_ && seconds_since(term_time_) > 5.0; }

 private:
  pid_t pid_;
  double timeout_;
  Clock::time_point start_;
  bool term_sent_ = false, kill_sent_ = false;
  Clock::time_point term_time_{};
};

// Reads one ready pipe; false when it is closed.
bool drain(int fd, bool is_out, OutputSink& sink) {
  char buf[8192];
  const auto r = ::read(fd, buf, sizeof buf);
  if (r < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (r <= 0) return false;
  if (is_out) {
    sink.stdout_bytes(buf, static_cast<std::size_t>(r));
  } else {
    sink.stderr_bytes(buf, static_cast<std::size_t>(r));
  }
  return true;
}

// Reads stdout and stderr until both close (or the deadline gives up), enforcing the timeout.
void pump_output(const Pipes& p, Deadline& deadline, OutputSink& sink, ProcessResult& result) {
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    deadline.enforce(result);
    if (deadline.give_up()) break;
    pollfd fds[2];
    nfds_t n = 0;
    if (out_open) fds[n++] = {p.out[0], POLLIN, 0};
    if (err_open) fds[n++] = {p.err[0], POLLIN, 0};
    if (::poll(fds, n, 100) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (nfds_t i = 0; i < n; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const bool is_out = fds[i].fd == p.out[0];
      if (!drain(fds[i].fd, is_out, sink)) (is_out ? out_open : err_open) = false;
    }
  }
  sink.finish();
}

int wait_for(pid_t pid) {
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, 0);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
  }
  return status;
}

void finish_result(const ProcessSpec& spec, int status, ProcessResult& result) {
  trim_tail(result.stdout_tail, kStdoutKeep);
  trim_tail(result.stderr_tail, kStderrKeep);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  if (!result.started) result.exit_code = 127;
  result.realtime_refused =
      spec.realtime_priority > 0 &&
      result.stderr_tail.find(std::string_view(kRealtimeRefused, sizeof kRealtimeRefused - 2)) != std::string::npos;
}

}  // namespace

ProcessResult run_process(const ProcessSpec& spec) {
  ProcessResult result;
  if (spec.argv.empty()) {
    result.start_error = "empty command";
    return result;
  }
  const Pipes pipes = open_pipes();
  ChildArgs child;
  build_child_args(spec, child);
  const auto t0 = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid == 0) exec_child(spec, child, pipes);
  ::setpgid(pid, pid);
  for (int fd : {pipes.out[1], pipes.err[1], pipes.exec[1]}) ::close(fd);
  read_start(spec, pipes, result);
  OutputSink sink(spec, result);
  Deadline deadline(pid, spec.timeout_seconds, t0);
  pump_output(pipes, deadline, sink, result);
  ::close(pipes.out[0]);
  ::close(pipes.err[0]);
  const int status = wait_for(pid);
  result.wall_seconds = seconds_since(t0);
  finish_result(spec, status, result);
  return result;
}

}  // namespace perfgate
