#include "perfgate/reference_build.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "perfgate/baseline_store.hpp"
#include "perfgate/bench_binary.hpp"
#include "perfgate/process.hpp"

namespace perfgate {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMarkerName = "perfgate-reference.json";

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

struct Captured {
  ProcessResult result;
  std::string out;
};

// Runs a tool, keeping its stdout; every line also goes to `log` when one is open.
Captured run_tool(const std::vector<std::string>& argv, std::ofstream* log = nullptr) {
  Captured c;
  ProcessSpec spec;
  spec.argv = argv;
  spec.on_stdout_line = [&](const std::string& line) {
    c.out += line + "\n";
    if (log != nullptr) *log << line << "\n";
  };
  c.result = run_process(spec);
  if (log != nullptr) {
    if (!c.result.stderr_tail.empty()) *log << c.result.stderr_tail;
    log->flush();
  }
  return c;
}

Captured git(const fs::path& dir, std::vector<std::string> args, std::ofstream* log = nullptr) {
  args.insert(args.begin(), {"git", "-C", dir.string()});
  Captured c = run_tool(args, log);
  if (!c.result.started)
    throw ReferenceError(ReferenceError::Kind::tool_failed, "could not run git: " + c.result.start_error);
  return c;
}

std::string one_line(const std::string& text) {
  std::string s = trim(text);
  const auto nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

bool git_ok(const fs::path& dir, const std::vector<std::string>& args) { return git(dir, args).result.ok(); }

std::string git_value(const fs::path& dir, const std::vector<std::string>& args) {
  const Captured c = git(dir, args);
  return c.result.ok() ? trim(c.out) : std::string();
}

void report_progress(const ReferenceBuildOptions& o, const std::string& line) {
  if (o.progress) o.progress(line);
}

nlohmann::json read_marker(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return nullptr;
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) { return nullptr; }
}

std::vector<std::string> targets_built_for(const fs::path& file, const std::string& commit) {
  const nlohmann::json m = read_marker(file);
  if (!m.is_object() || m.value("commit", "") != commit || !m.contains("targets")) return {};
  return m["targets"].get<std::vector<std::string>>();
}

bool marker_covers(const fs::path& file, const std::string& commit, const std::vector<std::string>& targets) {
  const nlohmann::json m = read_marker(file);
  if (!m.is_object() || m.value("commit", "") != commit || !m.contains("targets")) return false;
  const auto built = m["targets"].get<std::vector<std::string>>();
  const auto missing = m.value("missing_targets", std::vector<std::string>{});
  return std::all_of(targets.begin(), targets.end(), [&](const std::string& t) {
    return std::find(built.begin(), built.end(), t) != built.end() ||
           std::find(missing.begin(), missing.end(), t) != missing.end();
  });
}

// The worktree at `dir` holding `commit`, created or switched. Throws ReferenceError.
void checkout_worktree(const ReferenceBuildOptions& o, const fs::path& dir, std::ofstream& log) {
  std::error_code ec;
  const bool have = fs::exists(dir / ".git", ec) && git_ok(dir, {"rev-parse", "--git-dir"});
  Captured c;
  if (have) {
    c = git(dir, {"checkout", "--quiet", "--detach", "--force", o.commit}, &log);
  } else {
    fs::remove_all(dir, ec);
    git(o.source_dir, {"worktree", "prune"}, &log);
    fs::create_directories(dir.parent_path(), ec);
    c = git(o.source_dir, {"worktree", "add", "--quiet", "--detach", "--force", dir.string(), o.commit}, &log);
  }
  if (!c.result.ok())
    throw ReferenceError(
        ReferenceError::Kind::tool_failed,
        fmt::format("git could not check out {} into {}: {}", o.commit, dir.string(), one_line(c.result.stderr_tail)),
        "");
}

std::vector<std::string> configure_command(const ReferenceBuildOptions& o, const fs::path& src, const fs::path& build,
                                           const std::string& ccache) {
  std::vector<std::string> cmd{
      "cmake", "-S", src.string(), "-B", build.string(), "-DCMAKE_BUILD_TYPE=Release", "-DPERFGATE_BUILD_TESTS=OFF"};
  if (!ccache.empty()) {
    for (const char* lang : {"C", "CXX", "CUDA"})
      cmd.push_back(fmt::format("-DCMAKE_{}_COMPILER_LAUNCHER={}", lang, ccache));
  }
  cmd.insert(cmd.end(), o.cmake_args.begin(), o.cmake_args.end());
  return cmd;
}

// The requested targets the configured tree defines (`cmake --build --target help` lists them).
std::vector<std::string> defined_targets(const fs::path& build, const std::vector<std::string>& wanted) {
  const Captured c = run_tool({"cmake", "--build", build.string(), "--target", "help"});
  std::vector<std::string> out;
  for (const auto& t : wanted) {
    const std::regex word("(^|[ .])" + t + "(:|\\s|$)", std::regex::multiline);
    if (std::regex_search(c.out, word)) out.push_back(t);
  }
  return out;
}

[[noreturn]] void fail_build(const std::string& step, const ReferenceBuildOptions& o, const Captured& c,
                             const fs::path& log, const std::string& advice = "") {
  throw ReferenceError(ReferenceError::Kind::build_failed,
                       fmt::format("reference revision {} does not {} ({}); log: {}{}", o.commit.substr(0, 12), step,
                                   c.result.describe(), log.string(), advice),
                       log.string());
}

// A checkout CMake cannot configure because it is no CMake project: the build is the user's own command.
std::string configure_advice(const ReferenceBuildOptions& o, const fs::path& src) {
  std::error_code ec;
  if (fs::exists(src / "CMakeLists.txt", ec)) return {};
  return fmt::format(
      "; it has no CMakeLists.txt: give the command that builds it with {} (run in the checkout, with "
      "$PERFGATE_BUILD_DIR set to the folder where it should leave the binary)",
      o.build_command_flag);
}

// Where the build left the executable `name` (ReferenceBuild::binaries); nullopt when nowhere.
std::optional<fs::path> find_built_binary(const fs::path& build, const std::string& name) {
  for (const fs::path& p : {build / "bin" / name, build / name})
    if (is_executable_file(p)) return p;
  std::vector<fs::path> below;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(build, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && it->path().filename() == "CMakeFiles") it.disable_recursion_pending();
    else if (it->path().filename() == name && is_executable_file(it->path())) below.push_back(it->path());
  }
  if (below.empty()) return std::nullopt;
  return *std::min_element(below.begin(), below.end());
}

// Fills `b.binaries` for the targets the build made.
void locate_binaries(const fs::path& build, ReferenceBuild& b) {
  for (const auto& t : b.built_targets)
    if (const auto path = find_built_binary(build, t)) b.binaries[t] = *path;
}

void write_marker(const fs::path& file, const ReferenceBuild& b) {
  nlohmann::json m{{"commit", b.commit}, {"targets", b.built_targets}, {"missing_targets", b.missing_targets}};
  write_file_atomically(file, m.dump(2) + "\n");
}

// --build-command: the user's own build, run in the worktree with PERFGATE_BUILD_DIR set.
void run_build_command(const ReferenceBuildOptions& o, const fs::path& src, const fs::path& build, ReferenceBuild& b,
                       std::ofstream& log) {
  report_progress(o, fmt::format("reference {}: {}", o.commit.substr(0, 12), o.build_command));
  std::error_code ec;
  fs::create_directories(build, ec);
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "cd \"$1\" && eval \"$2\"", "sh", src.string(), o.build_command};
  spec.env = {{"PERFGATE_BUILD_DIR", build.string()}};
  Captured c;
  spec.on_stdout_line = [&](const std::string& line) { log << line << "\n"; };
  c.result = run_process(spec);
  log << c.result.stderr_tail;
  log.flush();
  b.build_seconds = c.result.wall_seconds;
  if (!c.result.ok()) fail_build("build with the build command", o, c, b.log_file);
  for (const auto& t : o.targets) {
    const auto path = find_built_binary(build, t);
    (path ? b.built_targets : b.missing_targets).push_back(t);
    if (path) b.binaries[t] = *path;
  }
}

}  // namespace

CheckoutState checkout_state(const fs::path& source_dir) {
  CheckoutState s;
  s.head = git_value(source_dir, {"rev-parse", "--verify", "HEAD^{commit}"});
  if (s.head.empty())
    throw ReferenceError(
        ReferenceError::Kind::not_a_checkout,
        fmt::format("{} is not a git checkout with a commit: a reference revision needs one", source_dir.string()));
  s.dirty = !git_ok(source_dir, {"diff-index", "--quiet", "HEAD", "--"});
  s.shallow = git_value(source_dir, {"rev-parse", "--is-shallow-repository"}) == "true";
  return s;
}

std::string resolve_revision(const fs::path& source_dir, const std::string& rev) {
  const CheckoutState state = checkout_state(source_dir);
  std::string sha = git_value(source_dir, {"rev-parse", "--verify", "--quiet", rev + "^{commit}"});
  if (!sha.empty()) return sha;
  throw ReferenceError(ReferenceError::Kind::unknown_revision,
                       state.shallow ? fmt::format("revision '{}' is not in this shallow clone of {}: fetch it "
                                                   "(git fetch --unshallow, or a deeper --depth) or pass a revision "
                                                   "that is here",
                                                   rev, source_dir.string())
                                     : fmt::format("revision '{}' names no commit in {}", rev, source_dir.string()));
}

AutoReference automatic_reference(const fs::path& source_dir) {
  AutoReference a;
  CheckoutState state;
  try {
    state = checkout_state(source_dir);
  } catch (const ReferenceError& e) {
    a.why_none = e.what();
    return a;
  }
  for (const char* branch : {"origin/HEAD", "origin/main", "origin/master", "main", "master"}) {
    if (git_value(source_dir, {"rev-parse", "--verify", "--quiet", std::string(branch) + "^{commit}"}).empty())
      continue;
    const std::string base = git_value(source_dir, {"merge-base", "HEAD", branch});
    if (base.empty()) continue;
    if (base != state.head) {
      a.commit = base;
      a.description = fmt::format("merge base of HEAD with {}", branch);
    } else if (state.dirty) {
      a.commit = base;
      a.description = fmt::format("HEAD (on {}), against the uncommitted changes", branch);
    } else {
      a.commit = git_value(source_dir, {"rev-parse", "--verify", "--quiet", "HEAD~1^{commit}"});
      a.description = fmt::format("HEAD~1 (HEAD is on {})", branch);
      if (a.commit.empty())
        a.why_none = "HEAD is on the default branch and has no parent here" +
                     std::string(state.shallow ? " (shallow clone)" : "");
    }
    return a;
  }
  a.why_none = state.shallow
                   ? "no default branch (origin/main, main, ...) in this shallow clone to take a merge base with"
                   : "no default branch (origin/HEAD, origin/main, origin/master, main, master) to take a "
                     "merge base with";
  return a;
}

std::vector<std::string> commits_between(const fs::path& source_dir, const std::string& good, const std::string& bad) {
  const Captured c = git(source_dir, {"rev-list", "--reverse", "--ancestry-path", good + ".." + bad});
  if (!c.result.ok())
    throw ReferenceError(ReferenceError::Kind::tool_failed,
                         fmt::format("git rev-list {}..{}: {}", good, bad, one_line(c.result.stderr_tail)));
  std::vector<std::string> out;
  std::istringstream lines(c.out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

std::string commit_subject(const fs::path& source_dir, const std::string& commit) {
  return git_value(source_dir, {"log", "-1", "--format=%s", commit});
}

namespace {

// A build the marker says is complete for these targets: reused as it is.
ReferenceBuild reused_build(const ReferenceBuildOptions& o, ReferenceBuild b, const fs::path& marker) {
  const nlohmann::json m = read_marker(marker);
  b.built_targets = m["targets"].get<std::vector<std::string>>();
  b.missing_targets = m.value("missing_targets", std::vector<std::string>{});
  b.reused = true;
  locate_binaries(b.build_dir, b);
  report_progress(o, fmt::format("reference {}: already built in {}", o.commit.substr(0, 12), b.build_dir.string()));
  return b;
}

// Configures the checkout with CMake and builds the targets that this revision defines.
void cmake_build(const ReferenceBuildOptions& o, const fs::path& src, const std::string& ccache, ReferenceBuild& b,
                 std::ofstream& log) {
  report_progress(o, fmt::format("reference {}: configuring{}", o.commit.substr(0, 12), b.ccache ? " (ccache)" : ""));
  const Captured conf = run_tool(configure_command(o, src, b.build_dir, ccache), &log);
  b.configure_seconds = conf.result.wall_seconds;
  if (!conf.result.ok()) fail_build("configure", o, conf, b.log_file, configure_advice(o, src));

  b.built_targets = defined_targets(b.build_dir, o.targets);
  for (const auto& t : o.targets)
    if (std::find(b.built_targets.begin(), b.built_targets.end(), t) == b.built_targets.end())
      b.missing_targets.push_back(t);
  if (b.built_targets.empty()) return;
  report_progress(o, fmt::format("reference {}: building {}", o.commit.substr(0, 12), fmt::join(b.built_targets, " ")));
  std::vector<std::string> cmd{
      "cmake", "--build", b.build_dir.string(), "--parallel", std::to_string(std::max(1, o.jobs)), "--target"};
  cmd.insert(cmd.end(), b.built_targets.begin(), b.built_targets.end());
  const Captured made = run_tool(cmd, &log);
  b.build_seconds = made.result.wall_seconds;
  if (!made.result.ok()) fail_build("build", o, made, b.log_file);
}

}  // namespace

ReferenceBuild build_reference(const ReferenceBuildOptions& given) {
  // Absolute, since git worktree and the build command run in other folders than this process.
  ReferenceBuildOptions o = given;
  o.source_dir = fs::absolute(o.source_dir);
  o.root = fs::absolute(o.root);
  ReferenceBuild b;
  b.commit = o.commit;
  const fs::path src = o.root / "src", build = o.root / "build", marker = build / kMarkerName;
  b.build_dir = build;
  b.bin_dir = build / "bin";
  b.log_file = o.root / "reference-build.log";
  const std::string ccache = o.use_ccache ? find_executable("ccache", o.search_path) : "";
  b.ccache = !ccache.empty();
  if (marker_covers(marker, o.commit, o.targets)) return reused_build(o, b, marker);
  fs::create_directories(o.root);
  // Targets of this commit built before (another suite's ctest perf test) stay listed: the build keeps them.
  const std::vector<std::string> earlier = targets_built_for(marker, o.commit);
  std::error_code ec;
  fs::remove(marker, ec);  // from here on, the folder holds no usable build until the new marker is written
  std::ofstream log(b.log_file, std::ios::trunc);

  report_progress(o, fmt::format("reference {}: checking out into {}", o.commit.substr(0, 12), src.string()));
  const auto t0 = std::chrono::steady_clock::now();
  checkout_worktree(o, src, log);
  b.checkout_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (!o.build_command.empty()) {
    run_build_command(o, src, build, b, log);
    write_marker(marker, b);
    return b;
  }
  cmake_build(o, src, ccache, b, log);
  for (const auto& t : earlier)
    if (std::find(b.built_targets.begin(), b.built_targets.end(), t) == b.built_targets.end())
      b.built_targets.push_back(t);
  write_marker(marker, b);
  locate_binaries(build, b);
  report_progress(o,
                  fmt::format("reference {}: built in {:.0f} s (checkout {:.0f} s, configure {:.0f} s, build {:.0f} s)",
                              o.commit.substr(0, 12), b.checkout_seconds + b.configure_seconds + b.build_seconds,
                              b.checkout_seconds, b.configure_seconds, b.build_seconds));
  return b;
}

}  // namespace perfgate
