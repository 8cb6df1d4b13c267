#include "perfgate/runner.hpp"

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
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perfgate/loader.hpp"
#include "perfgate/machine_class.hpp"
#include "perfgate/report.hpp"  // regex_escape

extern char** environ;

namespace perfgate {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

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

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string sanitise_for_file(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_') ? c : '_';
  return out.empty() ? "x" : out;
}

}  // namespace

// ---- child processes ---------------------------------------------------------------------------

std::string ProcessResult::describe() const {
  if (!started) return "could not start: " + start_error;
  if (timed_out) return fmt::format("timed out after {:.0f} s, killed", wall_seconds);
  if (signal != 0) return fmt::format("killed by signal {} ({})", signal, signal_name(signal));
  return fmt::format("exit code {}", exit_code);
}

std::string find_executable(const std::string& name, const std::vector<std::string>& extra_dirs) {
  std::vector<std::string> dirs;
  const char* path = std::getenv("PATH");
  std::stringstream folders(path != nullptr ? path : "");
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

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) throw std::system_error(errno, std::generic_category(), "sched_getaffinity");
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

ProcessResult run_process(const ProcessSpec& spec) {
  ProcessResult result;
  if (spec.argv.empty()) {
    result.start_error = "empty command";
    return result;
  }
  int out_pipe[2], err_pipe[2], exec_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");

  // Build argv/envp before fork (no allocation in the child).
  std::vector<std::string> env_strings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    const std::string key = entry.substr(0, eq);
    const bool overridden = std::any_of(spec.env.begin(), spec.env.end(), [&](const auto& kv) { return kv.first == key; });
    if (!overridden) env_strings.push_back(entry);
  }
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : spec.cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &cpus);
  // What the child reports through exec_pipe when it cannot start: the step and its errno.
  enum Step : int { kExec = 1, kAffinity = 2 };

  const auto t0 = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    if (spec.realtime_priority > 0) {
      sched_param param{};
      param.sched_priority = spec.realtime_priority;
      if (::sched_setscheduler(0, SCHED_FIFO, &param) != 0) {
        static const char kRefused[] = "perfgate: realtime scheduling refused\n";
        [[maybe_unused]] const auto w = ::write(STDERR_FILENO, kRefused, sizeof kRefused - 1);
      }
    }
    if (!spec.cpus.empty() && ::sched_setaffinity(0, sizeof cpus, &cpus) != 0) {
      const int failure[2] = {kAffinity, errno};
      [[maybe_unused]] const auto w = ::write(exec_pipe[1], failure, sizeof failure);
      ::_exit(127);
    }
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::execvpe(argv[0], argv.data(), envp.data());
    const int failure[2] = {kExec, errno};
    [[maybe_unused]] const auto w = ::write(exec_pipe[1], failure, sizeof failure);
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::close(exec_pipe[1]);

  int failure[2] = {0, 0};
  const auto got = ::read(exec_pipe[0], failure, sizeof failure);
  ::close(exec_pipe[0]);
  result.started = got != static_cast<ssize_t>(sizeof failure);
  if (!result.started)
    result.start_error = failure[0] == kAffinity
                             ? fmt::format("{}: could not pin to CPU(s) {}: {}", spec.argv[0], format_cpu_list(spec.cpus),
                                           std::strerror(failure[1]))
                             : fmt::format("{}: {}", spec.argv[0], std::strerror(failure[1]));

  std::string line_buffer;
  auto deliver = [&](const char* data, std::size_t n) {
    append_tail(result.stdout_tail, data, n, 16 * 1024);
    if (!spec.on_stdout_line) return;
    line_buffer.append(data, n);
    std::size_t pos;
    while ((pos = line_buffer.find('\n')) != std::string::npos) {
      spec.on_stdout_line(line_buffer.substr(0, pos));
      line_buffer.erase(0, pos + 1);
    }
  };

  bool out_open = true, err_open = true;
  bool term_sent = false, kill_sent = false;
  Clock::time_point term_time{};
  char buf[8192];
  while (out_open || err_open) {
    const double elapsed = seconds_since(t0);
    if (spec.timeout_seconds > 0 && !term_sent && elapsed > spec.timeout_seconds) {
      ::kill(-pid, SIGTERM);
      term_sent = true;
      result.timed_out = true;
      term_time = Clock::now();
    }
    if (term_sent && !kill_sent && seconds_since(term_time) > 2.0) {
      ::kill(-pid, SIGKILL);
      kill_sent = true;
    }
    if (kill_sent && seconds_since(term_time) > 5.0) break;  // a grandchild holds the pipes open
    pollfd fds[2];
    nfds_t n = 0;
    if (out_open) fds[n++] = {out_pipe[0], POLLIN, 0};
    if (err_open) fds[n++] = {err_pipe[0], POLLIN, 0};
    const int rc = ::poll(fds, n, 100);
    if (rc < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (nfds_t i = 0; i < n; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const auto r = ::read(fds[i].fd, buf, sizeof buf);
      const bool is_out = fds[i].fd == out_pipe[0];
      if (r <= 0) {
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        (is_out ? out_open : err_open) = false;
        continue;
      }
      if (is_out) {
        deliver(buf, static_cast<std::size_t>(r));
      } else {
        append_tail(result.stderr_tail, buf, static_cast<std::size_t>(r), 64 * 1024);
      }
    }
  }
  if (!line_buffer.empty() && spec.on_stdout_line) spec.on_stdout_line(line_buffer);
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);

  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, 0);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
  }
  result.wall_seconds = seconds_since(t0);
  trim_tail(result.stdout_tail, 16 * 1024);
  trim_tail(result.stderr_tail, 64 * 1024);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  if (!result.started) result.exit_code = 127;
  result.realtime_refused = spec.realtime_priority > 0 &&
                            result.stderr_tail.find("perfgate: realtime scheduling refused") != std::string::npos;
  return result;
}

// ---- bench binaries ----------------------------------------------------------------------------

std::string suite_from_binary(const std::filesystem::path& binary) {
  std::string name = binary.stem().string();
  if (binary.extension() != ".exe") name = binary.filename().string();
  if (name.rfind("bench_", 0) == 0) name = name.substr(6);
  return name;
}

namespace {

bool is_executable_file(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

std::vector<std::filesystem::path> bench_files_in(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const auto name = entry.path().filename().string();
    if (name.rfind("bench_", 0) == 0 && is_executable_file(entry.path())) out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<BenchBinary> resolve_benches(const std::filesystem::path& binary_or_dir,
                                         const std::vector<std::string>& suites) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(binary_or_dir, ec)) {
    files = bench_files_in(binary_or_dir / "bin");
    if (files.empty()) files = bench_files_in(binary_or_dir);
    if (files.empty())
      throw std::invalid_argument(fmt::format("{}: no bench_* executables in it or in its bin/", binary_or_dir.string()));
  } else if (std::filesystem::exists(binary_or_dir, ec)) {
    if (!is_executable_file(binary_or_dir))
      throw std::invalid_argument(fmt::format("{}: not an executable file", binary_or_dir.string()));
    files.push_back(binary_or_dir);
  } else {
    throw std::invalid_argument(fmt::format("{}: no such file or folder", binary_or_dir.string()));
  }
  std::vector<BenchBinary> out;
  for (const auto& f : files) {
    BenchBinary b{suite_from_binary(f), std::filesystem::absolute(f)};
    if (suites.empty() || std::find(suites.begin(), suites.end(), b.suite) != suites.end()) out.push_back(b);
  }
  if (!suites.empty()) {
    for (const auto& s : suites) {
      if (std::none_of(out.begin(), out.end(), [&](const BenchBinary& b) { return b.suite == s; }))
        throw std::invalid_argument(fmt::format("{}: no bench_{} here", binary_or_dir.string(), s));
    }
  }
  return out;
}

std::vector<std::string> list_benchmarks(const BenchBinary& bench, const std::string& filter,
                                         const std::vector<std::pair<std::string, std::string>>& env,
                                         double timeout_seconds) {
  ProcessSpec spec;
  spec.argv = {bench.path.string(), "--benchmark_list_tests=true"};
  if (!filter.empty()) spec.argv.push_back("--benchmark_filter=" + filter);
  spec.env = env;
  spec.timeout_seconds = timeout_seconds;
  const ProcessResult r = run_process(spec);
  if (r.started && !r.timed_out && r.signal == 0 && r.exit_code == 2 &&
      r.stderr_tail.find("no benchmark matched") != std::string::npos)
    return {};
  if (!r.ok()) {
    const auto lines = split_lines(r.stderr_tail);
    std::string last;
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
      if (!trim(*it).empty()) {
        last = trim(*it);
        break;
      }
    }
    throw std::runtime_error(fmt::format("{} --benchmark_list_tests: {}{}{}", bench.path.string(), r.describe(),
                                         last.empty() ? "" : ": ", last));
  }
  std::vector<std::string> names;
  for (const auto& line : split_lines(r.stdout_tail)) {
    const std::string t = trim(line);
    if (!t.empty()) names.push_back(t);
  }
  return names;
}

std::optional<std::string> salvage_benchmark_json(const std::string& text) {
  const auto key = text.find("\"benchmarks\"");
  if (key == std::string::npos) return std::nullopt;
  const auto open = text.find('[', key);
  if (open == std::string::npos) return std::nullopt;
  // Scan complete {...} entries after '[', honouring strings and escapes.
  std::size_t pos = open + 1;
  std::size_t last_complete = open + 1;
  bool any = false;
  while (pos < text.size()) {
    while (pos < text.size() && (std::isspace(static_cast<unsigned char>(text[pos])) != 0 || text[pos] == ',')) ++pos;
    if (pos >= text.size() || text[pos] != '{') break;
    int depth = 0;
    bool in_string = false, escaped = false, complete = false;
    std::size_t i = pos;
    for (; i < text.size(); ++i) {
      const char c = text[i];
      if (in_string) {
        if (escaped) escaped = false;
        else if (c == '\\') escaped = true;
        else if (c == '"') in_string = false;
        continue;
      }
      if (c == '"') in_string = true;
      else if (c == '{') ++depth;
      else if (c == '}' && --depth == 0) {
        complete = true;
        break;
      }
    }
    if (!complete) break;
    pos = i + 1;
    last_complete = pos;
    any = true;
  }
  std::string doc = text.substr(0, any ? last_complete : open + 1) + "\n  ]\n}\n";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(doc);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  if (!j.is_object() || !j.contains("context") || !j["benchmarks"].is_array()) return std::nullopt;
  nlohmann::json kept = nlohmann::json::array();
  std::map<std::string, long> next_index;
  for (auto& b : j["benchmarks"]) {
    if (!b.is_object()) continue;
    if (b.value("run_type", std::string("iteration")) == "aggregate") continue;
    kept.push_back(b);
  }
  std::map<std::string, long> counts;
  for (auto& b : kept) {
    if (b.contains("repetition_index")) counts[b.value("name", std::string())]++;
  }
  for (auto& b : kept) {
    const std::string name = b.value("name", std::string());
    if (b.contains("repetition_index")) {
      b["repetition_index"] = next_index[name]++;
      b["repetitions"] = counts[name];
    }
  }
  j["benchmarks"] = kept;
  return j.dump(2);
}

std::string exact_filter(const std::vector<std::string>& names) {
  std::string out = "^(";
  bool first = true;
  for (const auto& n : names) {
    if (!first) out += '|';
    first = false;
    out += regex_escape(n);
  }
  out += ")(/(manual_time|real_time|process_time|repeats:[0-9]+|min_time:[^/]*|min_warmup_time:[^/]*|iterations:[0-9]+))*$";
  return out;
}

BuildInfo build_info_for(const std::filesystem::path& binary) {
  BuildInfo info;
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::absolute(binary, ec).parent_path();
  for (int up = 0; up < 4 && !dir.empty(); ++up) {
    const auto cache = dir / "CMakeCache.txt";
    if (std::filesystem::exists(cache, ec)) {
      std::ifstream in(cache);
      std::string line;
      while (std::getline(in, line)) {
        if (line.rfind("CMAKE_HOME_DIRECTORY:INTERNAL=", 0) == 0) info.source_dir = line.substr(line.find('=') + 1);
        if (line.rfind("CMAKE_BUILD_TYPE:", 0) == 0) {
          const std::string v = line.substr(line.find('=') + 1);
          if (!v.empty()) info.build_type = v;
        }
      }
      break;
    }
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  // A copy of the tree without .git (the lent GPU machines get one) names its commit explicitly.
  if (const char* given = std::getenv("PERFGATE_GIT_COMMIT"); given != nullptr && *given != '\0') {
    info.commit = given;
    return info;
  }
  const std::string where = info.source_dir.empty() ? std::filesystem::current_path(ec).string() : info.source_dir;
  ProcessSpec spec;
  spec.argv = {"git", "-C", where, "rev-parse", "HEAD"};
  spec.timeout_seconds = 20;
  try {
    const ProcessResult r = run_process(spec);
    if (r.ok()) {
      info.commit = trim(r.stdout_tail);
      ProcessSpec dirty;
      dirty.argv = {"git", "-C", where, "status", "--porcelain", "--untracked-files=no"};
      dirty.timeout_seconds = 20;
      const ProcessResult d = run_process(dirty);
      if (d.ok() && !trim(d.stdout_tail).empty()) info.commit += "+dirty";
    }
  } catch (const std::exception&) {
    // no git: the commit stays "unknown"
  }
  return info;
}

std::optional<std::string> cuda_devices_from_ctest_env() {
  const char* count_s = std::getenv("CTEST_RESOURCE_GROUP_COUNT");
  if (count_s == nullptr) return std::nullopt;
  const int count = std::atoi(count_s);
  std::vector<std::string> outer;
  if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES"); cvd != nullptr && *cvd != '\0') {
    std::stringstream ss(cvd);
    std::string item;
    while (std::getline(ss, item, ',')) outer.push_back(trim(item));
  }
  std::vector<std::string> devices;
  for (int i = 0; i < count; ++i) {
    const char* gpus = std::getenv(fmt::format("CTEST_RESOURCE_GROUP_{}_GPUS", i).c_str());
    if (gpus == nullptr) continue;
    // "id:0,slots:1;id:1,slots:1"
    std::stringstream ss(gpus);
    std::string alloc;
    while (std::getline(ss, alloc, ';')) {
      const auto id_pos = alloc.find("id:");
      if (id_pos == std::string::npos) continue;
      std::string id = alloc.substr(id_pos + 3);
      id = id.substr(0, id.find(','));
      if (!outer.empty()) {
        char* end = nullptr;
        const long k = std::strtol(id.c_str(), &end, 10);
        if (end != nullptr && *end == '\0' && k >= 0 && static_cast<std::size_t>(k) < outer.size()) id = outer[static_cast<std::size_t>(k)];
      }
      if (std::find(devices.begin(), devices.end(), id) == devices.end()) devices.push_back(id);
    }
  }
  if (devices.empty()) return std::nullopt;
  std::string joined;
  for (const auto& d : devices) joined += (joined.empty() ? "" : ",") + d;
  return joined;
}

// ---- measuring ---------------------------------------------------------------------------------

namespace {

struct Job {
  std::size_t side = 0;
  std::size_t bench = 0;  // index into sides[side].benches
  int round = 0;
  std::vector<std::string> only;  // a retry after a crash: just these benchmarks
};

class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), tty_(::isatty(STDERR_FILENO) != 0) {}

  void line(const std::string& text) {
    if (!enabled_) return;
    clear();
    std::fprintf(stderr, "[perfgate] %s\n", text.c_str());
    std::fflush(stderr);
  }
  // Transient status: rewritten in place on a TTY, else printed at most every 10 s.
  void status(const std::string& text) {
    if (!enabled_) return;
    if (tty_) {
      std::fprintf(stderr, "\r\033[K[perfgate] %s", text.c_str());
      std::fflush(stderr);
      dirty_ = true;
      return;
    }
    if (seconds_since(last_) < 10.0) return;
    last_ = Clock::now();
    std::fprintf(stderr, "[perfgate] %s\n", text.c_str());
    std::fflush(stderr);
  }
  void clear() {
    if (tty_ && dirty_) {
      std::fprintf(stderr, "\r\033[K");
      dirty_ = false;
    }
  }

 private:
  bool enabled_;
  bool tty_;
  bool dirty_ = false;
  Clock::time_point last_ = Clock::now();
};

std::string failed_lines(const std::string& stderr_text) {
  std::string out;
  for (const auto& l : split_lines(stderr_text)) {
    if (l.rfind("perfgate: FAILED ", 0) == 0) out += (out.empty() ? "" : "; ") + l.substr(17);
  }
  return out;
}

// Lines Google Benchmark prints on stderr before the run (context): not the bench's message.
bool is_context_line(const std::string& line) {
  static const char* const kPrefixes[] = {"Run on (", "CPU Caches:", "  L1 ", "  L2 ", "  L3 ", "  L4 ", "Load Average:",
                                          "***WARNING***", "Running ", "perfgate.", "benchmark:"};
  for (const char* p : kPrefixes)
    if (line.rfind(p, 0) == 0) return true;
  // "2026-11-22T02:20:35+00:00" (the date line)
  return line.size() >= 19 && std::isdigit(static_cast<unsigned char>(line[0])) != 0 && line[4] == '-' && line[10] == 'T';
}

// Does `text` name benchmark `name` (not merely a longer name it is a prefix of)?
bool mentions(const std::string& text, const std::string& name) {
  for (auto pos = text.find(name); pos != std::string::npos; pos = text.find(name, pos + 1)) {
    const std::size_t end = pos + name.size();
    if (end >= text.size()) return true;
    const char c = text[end];
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_' && c != ':' && c != '.') return true;
  }
  return false;
}

std::string last_lines(const std::string& text, int n) {
  std::vector<std::string> keep;
  const auto lines = split_lines(text);
  for (auto it = lines.rbegin(); it != lines.rend() && static_cast<int>(keep.size()) < n; ++it) {
    const std::string t = trim(*it);
    if (!t.empty() && !is_context_line(*it)) keep.push_back(t);
  }
  std::string out;
  for (auto it = keep.rbegin(); it != keep.rend(); ++it) out += (out.empty() ? "" : " | ") + *it;
  return out;
}

long count_latency_samples(const ResultSet& rs) {
  long n = 0;
  for (const auto& b : rs.benchmarks) n += static_cast<long>(b.time.samples.size());
  return n;
}

}  // namespace

void apply_failures(SideResult& side) {
  for (const auto& f : side.failures) {
    ResultSet& rs = side.suites[f.suite];
    const std::string message = f.message.empty() ? f.what : f.what + ": " + f.message;
    for (const auto& name : f.benchmarks) {
      const std::string norm = normalise_benchmark_name(name);
      auto it = rs.index.find(norm);
      if (it != rs.index.end()) {
        BenchmarkResult& b = rs.benchmarks[it->second];
        if (!b.error) b.error = message;
      } else {
        BenchmarkResult b;
        b.name = norm;
        b.raw_name = name;
        b.time_kind = "real_time";
        b.time.name = "time";
        b.time.kind = MetricKind::latency;
        b.error = message;
        b.source_file = f.binary;
        rs.index[norm] = rs.benchmarks.size();
        rs.benchmarks.push_back(std::move(b));
      }
    }
  }
}

MeasureResult measure(const std::vector<Side>& sides, const MeasureOptions& options) {
  MeasureResult out;
  const auto t0 = Clock::now();
  out.seed = options.seed != 0 ? options.seed
                               : static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  std::mt19937_64 rng(out.seed);
  Progress progress(options.progress);
  std::filesystem::create_directories(options.work_dir);

  std::vector<std::pair<std::string, std::string>> device_env;
  if (auto devices = cuda_devices_from_ctest_env()) device_env.emplace_back("CUDA_VISIBLE_DEVICES", *devices);

  // Expected benchmarks per (side, bench); binaries with none are left out.
  std::vector<std::vector<std::vector<std::string>>> expected(sides.size());
  std::vector<std::vector<bool>> dead(sides.size());
  std::vector<std::vector<std::set<std::string>>> excluded(sides.size());  // failed: not run again
  std::vector<std::vector<BuildInfo>> build(sides.size());
  for (std::size_t s = 0; s < sides.size(); ++s) {
    out.sides.push_back(SideResult{sides[s].label, {}, {}, {}, 0, 0, 0});
    expected[s].resize(sides[s].benches.size());
    dead[s].assign(sides[s].benches.size(), false);
    excluded[s].resize(sides[s].benches.size());
    for (std::size_t b = 0; b < sides[s].benches.size(); ++b) {
      const BenchBinary& bench = sides[s].benches[b];
      build[s].push_back(build_info_for(bench.path));
      auto env = sides[s].env;
      env.insert(env.end(), device_env.begin(), device_env.end());
      try {
        expected[s][b] = list_benchmarks(bench, options.filter, env, std::min(options.timeout_seconds, 120.0));
      } catch (const std::exception& e) {
        ProcessFailure f{sides[s].label, bench.suite, bench.path.string(), 0, "listing benchmarks failed", e.what(),
                         {bench.suite + "/" + bench.path.filename().string()}};
        out.sides[s].failures.push_back(f);
        dead[s][b] = true;
        continue;
      }
      if (expected[s][b].empty()) {
        out.notes.push_back(fmt::format("{} ({}): no benchmark matches the filter '{}'", bench.path.filename().string(),
                                        sides[s].label, options.filter));
        dead[s][b] = true;
      }
    }
  }

  // The schedule: per round, suites in random order; per suite, the sides back to back, random order.
  std::vector<std::string> suites;
  for (const auto& side : sides)
    for (const auto& b : side.benches)
      if (std::find(suites.begin(), suites.end(), b.suite) == suites.end()) suites.push_back(b.suite);
  std::vector<Job> jobs;
  for (int round = 1; round <= options.rounds; ++round) {
    std::vector<std::string> order = suites;
    if (options.interleave) std::shuffle(order.begin(), order.end(), rng);
    for (const auto& suite : order) {
      std::vector<Job> group;
      for (std::size_t s = 0; s < sides.size(); ++s)
        for (std::size_t b = 0; b < sides[s].benches.size(); ++b)
          if (sides[s].benches[b].suite == suite && !dead[s][b]) group.push_back({s, b, round, {}});
      if (options.interleave) std::shuffle(group.begin(), group.end(), rng);
      jobs.insert(jobs.end(), group.begin(), group.end());
    }
  }

  std::map<std::pair<std::size_t, std::size_t>, double> last_duration;
  bool realtime_refused_noted = false;
  progress.line(fmt::format("{}: {} process run(s): {} round(s) x {} suite(s) x {} side(s), {} repetition(s) each, seed {}{}",
                            options.phase_label, jobs.size(), options.rounds, suites.size(), sides.size(),
                            options.repetitions, out.seed,
                            options.pin_cpus.empty() ? "" : ", pinned to CPU(s) " + format_cpu_list(options.pin_cpus)));

  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const Job job = jobs[j];
    if (dead[job.side][job.bench]) continue;
    const Side& side = sides[job.side];
    const BenchBinary& bench = side.benches[job.bench];
    SideResult& sr = out.sides[job.side];
    // What this process runs: everything expected minus what already failed (or a retry's list).
    std::vector<std::string> names;
    for (const auto& n : job.only.empty() ? expected[job.side][job.bench] : job.only)
      if (excluded[job.side][job.bench].count(n) == 0) names.push_back(n);
    if (names.empty()) continue;
    const bool narrowed = !job.only.empty() || !excluded[job.side][job.bench].empty();
    const std::string job_filter = narrowed ? exact_filter(names) : options.filter;

    // ETA: the last duration of each remaining (side, bench); unknown ones count as the mean known.
    double known_sum = 0;
    for (const auto& kv : last_duration) known_sum += kv.second;
    const double mean_known = last_duration.empty() ? NAN : known_sum / static_cast<double>(last_duration.size());
    double eta = 0;       // this process and every later one
    double eta_after = 0; // the later ones only
    for (std::size_t k = j; k < jobs.size(); ++k) {
      if (dead[jobs[k].side][jobs[k].bench]) continue;
      auto it = last_duration.find({jobs[k].side, jobs[k].bench});
      const double d = it != last_duration.end() ? it->second : mean_known;
      eta += d;
      if (k > j) eta_after += d;
    }
    const auto known_it = last_duration.find({job.side, job.bench});
    const double this_known = known_it != last_duration.end() ? known_it->second : NAN;
    const std::string where = fmt::format("{} {} [{}] round {}/{}{}", options.phase_label, bench.suite, side.label,
                                          job.round, options.rounds, job.only.empty() ? "" : " (retry after a failure)");
    progress.line(fmt::format("{}: {} benchmark(s) x {} rep(s); process {}/{}, ETA {}", where, names.size(),
                              options.repetitions, j + 1, jobs.size(), format_duration(eta)));

    const std::filesystem::path out_file =
        options.work_dir / fmt::format("{}.{}.{}.r{}{}.json", sanitise_for_file(options.phase_label),
                                       sanitise_for_file(side.label), sanitise_for_file(bench.suite), job.round,
                                       job.only.empty() ? "" : "-retry");
    std::error_code ec;
    std::filesystem::remove(out_file, ec);
    ProcessSpec spec;
    spec.argv = {bench.path.string(), "--benchmark_out=" + out_file.string(), "--benchmark_out_format=json",
                 fmt::format("--benchmark_repetitions={}", options.repetitions)};
    if (options.interleave) spec.argv.push_back("--benchmark_enable_random_interleaving=true");
    if (!job_filter.empty()) spec.argv.push_back("--benchmark_filter=" + job_filter);
    if (options.min_time) spec.argv.push_back(fmt::format("--benchmark_min_time={}", *options.min_time));
    if (options.warmup) spec.argv.push_back(fmt::format("--benchmark_min_warmup_time={}", *options.warmup));
    spec.argv.insert(spec.argv.end(), options.extra_args.begin(), options.extra_args.end());
    spec.env = side.env;
    spec.env.insert(spec.env.end(), device_env.begin(), device_env.end());
    spec.timeout_seconds = options.timeout_seconds;
    spec.realtime_priority = options.realtime_priority;
    spec.cpus = options.pin_cpus;
    const std::set<std::string> expected_set(names.begin(), names.end());
    long done_lines = 0;
    const long total_lines = static_cast<long>(names.size()) * options.repetitions;
    const auto p0 = Clock::now();
    spec.on_stdout_line = [&](const std::string& line) {
      const std::string first = line.substr(0, line.find(' '));
      const std::string norm = normalise_benchmark_name(first);
      if (expected_set.count(norm) == 0 && expected_set.count(first) == 0) return;
      ++done_lines;
      const double el = seconds_since(p0);
      // This process: from its last duration when known, else from its pace so far.
      const double pace = el / static_cast<double>(done_lines);
      const double cur_left = std::isfinite(this_known)
                                  ? std::max(0.0, this_known - el)
                                  : pace * static_cast<double>(std::max(0L, total_lines - done_lines));
      progress.status(fmt::format("{}: {} ({}/{}), ETA {}", where, norm, done_lines, total_lines,
                                  format_duration(cur_left + eta_after)));
    };
    const ProcessResult pr = run_process(spec);
    progress.clear();
    if (pr.realtime_refused && !realtime_refused_noted) {
      realtime_refused_noted = true;
      out.notes.push_back("realtime scheduling (SCHED_FIFO) was refused (needs CAP_SYS_NICE): measured at normal priority");
      progress.line(out.notes.back());
    }
    last_duration[{job.side, job.bench}] = pr.wall_seconds;
    sr.processes += 1;
    sr.process_seconds += pr.wall_seconds;
    sr.raw_files.push_back(out_file.string());

    const bool skipped_all = pr.started && !pr.timed_out && pr.signal == 0 && pr.exit_code == 77;
    std::optional<ResultSet> loaded;
    std::string load_error;
    if (pr.ok() || skipped_all) {
      try {
        loaded = load_result_file(out_file.string());
      } catch (const std::exception& e) {
        load_error = e.what();
      }
    } else if (std::filesystem::exists(out_file, ec)) {
      std::ifstream in(out_file, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      if (auto salvaged = salvage_benchmark_json(ss.str())) {
        try {
          loaded = parse_results(*salvaged, out_file.string());
        } catch (const std::exception& e) {
          load_error = e.what();
        }
      }
    }

    if (loaded) {
      for (auto& ctx : loaded->contexts) {
        ctx.fields["perfgate.git_commit"] = build[job.side][job.bench].commit;
        if (ctx.fields.count("perfgate.build_type") == 0 || ctx.fields["perfgate.build_type"] == "none")
          ctx.fields["perfgate.build_type"] = build[job.side][job.bench].build_type;
        ctx.fields["perfgate.run.side"] = side.label;
        ctx.fields["perfgate.run.round"] = std::to_string(job.round);
        ctx.fields["perfgate.run.binary"] = bench.path.string();
        ctx.fields["perfgate.run.seed"] = std::to_string(out.seed);
        ctx.fields["perfgate.run.phase"] = options.phase_label;
        ctx.fields["perfgate.run.sched"] =
            options.realtime_priority > 0 && !pr.realtime_refused ? fmt::format("fifo:{}", options.realtime_priority) : "normal";
        ctx.fields["perfgate.run.cpus"] = options.pin_cpus.empty() ? "any" : format_cpu_list(options.pin_cpus);
        if (const char* mc = std::getenv("PERFGATE_MACHINE_CLASS"); mc != nullptr && *mc != '\0') {
          ctx.fields["perfgate.machine_class"] = mc;
        } else {
          try {
            ctx.fields["perfgate.machine_class"] = derive_machine_class(ctx);
          } catch (const std::exception&) {
            // not derivable from this context: the loader's precedence decides later
          }
        }
        if (ctx.fields.count("perfgate.suite") == 0) ctx.fields["perfgate.suite"] = bench.suite;
      }
      sr.repetitions += count_latency_samples(*loaded);
      auto it = sr.suites.find(bench.suite);
      try {
        if (it == sr.suites.end()) {
          sr.suites.emplace(bench.suite, std::move(*loaded));
        } else {
          merge_results(it->second, std::move(*loaded));
        }
      } catch (const std::exception& e) {
        load_error = std::string("merging process runs: ") + e.what();
      }
    }

    const bool failed = !(pr.ok() || skipped_all) || !load_error.empty();
    if (!failed) continue;

    std::vector<std::string> unfinished_retry;
    ProcessFailure f;
    f.side = side.label;
    f.suite = bench.suite;
    f.binary = bench.path.string();
    f.round = job.round;
    f.what = !load_error.empty() && (pr.ok() || skipped_all) ? "unreadable output" : pr.describe();
    const std::string failed_msg = failed_lines(pr.stderr_tail);
    f.message = !load_error.empty() ? load_error : (failed_msg.empty() ? last_lines(pr.stderr_tail, 4) : failed_msg);
    if (!failed_msg.empty() && load_error.empty() && pr.exit_code == 3 && pr.signal == 0 && !pr.timed_out) {
      // Failed checks: the JSON carries the errors; mark names only the stderr knows.
      for (const auto& n : names) {
        if (failed_msg.find(n + ":") != std::string::npos) f.benchmarks.push_back(n);
      }
    } else {
      // Crash, timeout, other exit: the benchmarks it did not finish. Those the stderr names, when it
      // names some; else every unfinished one.
      std::vector<std::string> unfinished;
      const ResultSet* rs = sr.suites.count(bench.suite) != 0 ? &sr.suites[bench.suite] : nullptr;
      for (const auto& n : names) {
        const BenchmarkResult* b = rs != nullptr ? rs->find(normalise_benchmark_name(n)) : nullptr;
        long in_this_process = 0;
        if (b != nullptr && loaded) {
          const int last_run = rs->process_runs() - 1;
          for (int pr_idx : b->time.process_run) in_this_process += pr_idx == last_run ? 1 : 0;
        }
        if (in_this_process < options.repetitions) unfinished.push_back(n);
      }
      for (const auto& n : unfinished)
        if (mentions(pr.stderr_tail, n)) f.benchmarks.push_back(n);
      if (f.benchmarks.empty()) f.benchmarks = unfinished;
      for (const auto& n : unfinished)
        if (std::find(f.benchmarks.begin(), f.benchmarks.end(), n) == f.benchmarks.end()) unfinished_retry.push_back(n);
      if (f.benchmarks.empty()) f.benchmarks.push_back(bench.suite + "/" + bench.path.filename().string());
    }
    progress.line(fmt::format("{}: FAILED ({}){}{}", where, f.what, f.message.empty() ? "" : ": ", f.message));
    // The failed benchmarks are not run again; the others go on. A crash or timeout also cut short the
    // benchmarks that were still running in this process: re-run those once, at once, without the
    // failed ones, so this round keeps a sample of every healthy benchmark.
    bool attributed = false;
    for (const auto& n : f.benchmarks) {
      if (std::find(names.begin(), names.end(), n) != names.end()) {
        excluded[job.side][job.bench].insert(n);
        attributed = true;
      }
    }
    if (!attributed) {
      dead[job.side][job.bench] = true;  // cannot tell which benchmark broke it: stop running this binary
    } else if (job.only.empty() && (pr.signal != 0 || pr.timed_out) && !unfinished_retry.empty()) {
      Job retry = job;
      retry.only = unfinished_retry;
      jobs.insert(jobs.begin() + static_cast<std::ptrdiff_t>(j) + 1, retry);
    }
    sr.failures.push_back(f);
  }
  for (auto& sr : out.sides) apply_failures(sr);
  out.wall_seconds = seconds_since(t0);
  progress.line(fmt::format("{}: done in {} ({} process run(s))", options.phase_label, format_duration(out.wall_seconds),
                            jobs.size()));
  return out;
}

}  // namespace perfgate
