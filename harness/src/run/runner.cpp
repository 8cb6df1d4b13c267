#include "perfgate/runner.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "exec/elapsed.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/machine_class.hpp"
#include "perfgate/report.hpp"  // format_duration
#include "perfgate/text.hpp"    // regex_escape

namespace perfgate {
namespace {

using Clock = std::chrono::steady_clock;

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

std::string sanitise_for_file(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_') ? c : '_';
  return out.empty() ? "x" : out;
}

}  // namespace
// ---- bench binaries ----------------------------------------------------------------------------

namespace {

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

// The suites of bench binaries, in their order.
std::vector<std::string> suites_of(const std::vector<std::filesystem::path>& files) {
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back(suite_from_binary(f));
  return out;
}

// Why a folder gave no bench: perfgate looks for its own bench_<suite> binaries only, so a plain binary in it is named
// itself; the executables it does hold are listed (the first of them as the example).
std::string no_bench_in(const std::filesystem::path& dir) {
  std::vector<std::string> held;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (is_executable_file(entry.path())) held.push_back(entry.path().filename().string());
  std::sort(held.begin(), held.end());
  const std::string why = fmt::format(
      "{}: no bench_* executables in it or in its bin/ (a folder is searched for perfgate's bench_<suite> binaries)",
      dir.string());
  if (held.empty()) return why + "; it holds no executable at all";
  constexpr std::size_t kShown = 5;
  // The example: the first whose name says bench, else the first.
  const auto bench = std::find_if(held.begin(), held.end(), [](const std::string& name) {
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    return lower.find("bench") != std::string::npos;
  });
  return fmt::format("{}; it holds {}: name the bench binary itself, e.g. {}", why, first_and_more(held, kShown),
                     (dir / (bench != held.end() ? *bench : held.front())).string());
}

}  // namespace

std::vector<BenchBinary> resolve_benches(const std::filesystem::path& binary_or_dir,
                                         const std::vector<std::string>& suites) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(binary_or_dir, ec)) {
    files = bench_files_in(binary_or_dir / "bin");
    if (files.empty()) files = bench_files_in(binary_or_dir);
    if (files.empty()) throw std::invalid_argument(no_bench_in(binary_or_dir));
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
        throw std::invalid_argument(fmt::format("{}: no bench_{} here (the suites it has: {})", binary_or_dir.string(),
                                                s, fmt::join(suites_of(files), ", ")));
    }
  }
  return out;
}

namespace {

// What a Google Benchmark binary (or one with perfgate's main) writes to stderr when nothing matches its filter, or
// it registers nothing; a program that is no such binary lists nothing without it.
bool says_no_benchmark_matched(const std::string& stderr_text) {
  return stderr_text.find("Failed to match any benchmarks") != std::string::npos ||
         stderr_text.find("no benchmark matched") != std::string::npos;
}

}  // namespace

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
  if (names.empty() && !says_no_benchmark_matched(r.stderr_tail)) {
    const std::string printed = trim(r.stderr_tail);
    throw std::runtime_error(fmt::format(
        "{} --benchmark_list_tests=true exited 0 and listed no benchmark, without Google Benchmark's \"Failed to "
        "match any benchmarks\": is it a Google Benchmark binary that passes its arguments to "
        "benchmark::Initialize?{}{}",
        bench.path.string(), printed.empty() ? " It printed nothing" : " It printed: ", printed));
  }
  return names;
}

namespace {

// The position just past the JSON object that opens at text[pos] ('{'), honouring strings and escapes;
// nullopt when the text ends inside it.
std::optional<std::size_t> end_of_object(const std::string& text, std::size_t pos) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{') ++depth;
    else if (c == '}' && --depth == 0) return i + 1;
  }
  return std::nullopt;
}

// The text up to the last complete entry of the array that opens at text[open], closed as a document.
std::string close_after_complete_entries(const std::string& text, std::size_t open) {
  std::size_t pos = open + 1;
  std::size_t last_complete = open + 1;
  while (pos < text.size()) {
    while (pos < text.size() && (std::isspace(static_cast<unsigned char>(text[pos])) != 0 || text[pos] == ',')) ++pos;
    if (pos >= text.size() || text[pos] != '{') break;
    const auto end = end_of_object(text, pos);
    if (!end) break;
    pos = last_complete = *end;
  }
  return text.substr(0, last_complete) + "\n  ]\n}\n";
}

// Drops aggregates and renumbers each benchmark's repetitions 0..n-1.
nlohmann::json iterations_renumbered(const nlohmann::json& benchmarks) {
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& b : benchmarks) {
    if (!b.is_object()) continue;
    if (b.value("run_type", std::string("iteration")) == "aggregate") continue;
    kept.push_back(b);
  }
  std::map<std::string, long> counts, next_index;
  for (auto& b : kept)
    if (b.contains("repetition_index")) counts[b.value("name", std::string())]++;
  for (auto& b : kept) {
    const std::string name = b.value("name", std::string());
    if (b.contains("repetition_index")) {
      b["repetition_index"] = next_index[name]++;
      b["repetitions"] = counts[name];
    }
  }
  return kept;
}

}  // namespace

std::optional<std::string> salvage_benchmark_json(const std::string& text) {
  const auto key = text.find("\"benchmarks\"");
  if (key == std::string::npos) return std::nullopt;
  const auto open = text.find('[', key);
  if (open == std::string::npos) return std::nullopt;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(close_after_complete_entries(text, open));
  } catch (const nlohmann::json::exception&) { return std::nullopt; }
  if (!j.is_object() || !j.contains("context") || !j["benchmarks"].is_array()) return std::nullopt;
  j["benchmarks"] = iterations_renumbered(j["benchmarks"]);
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
  out +=
      ")(/(manual_time|real_time|process_time|repeats:[0-9]+|min_time:[^/]*|min_warmup_time:[^/"
      "]*|iterations:[0-9]+))*$";
  return out;
}

BuildInfo build_info_for(const std::filesystem::path& binary, const std::string& given_commit) {
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
  if (!given_commit.empty()) {
    info.commit = given_commit;
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

std::optional<std::string> cuda_devices_for_ctest(const EnvLookup& lookup) {
  const auto count_s = lookup("CTEST_RESOURCE_GROUP_COUNT");
  if (!count_s) return std::nullopt;
  const int count = std::atoi(count_s->c_str());
  std::vector<std::string> outer;
  if (const auto cvd = lookup("CUDA_VISIBLE_DEVICES"); cvd && !cvd->empty()) {
    std::stringstream ss(*cvd);
    std::string item;
    while (std::getline(ss, item, ',')) outer.push_back(trim(item));
  }
  std::vector<std::string> devices;
  for (int i = 0; i < count; ++i) {
    const auto gpus = lookup(fmt::format("CTEST_RESOURCE_GROUP_{}_GPUS", i));
    if (!gpus) continue;
    // "id:0,slots:1;id:1,slots:1"
    std::stringstream ss(*gpus);
    std::string alloc;
    while (std::getline(ss, alloc, ';')) {
      const auto id_pos = alloc.find("id:");
      if (id_pos == std::string::npos) continue;
      std::string id = alloc.substr(id_pos + 3);
      id = id.substr(0, id.find(','));
      if (!outer.empty()) {
        char* end = nullptr;
        const long k = std::strtol(id.c_str(), &end, 10);
        if (end != nullptr && *end == '\0' && k >= 0 && static_cast<std::size_t>(k) < outer.size())
          id = outer[static_cast<std::size_t>(k)];
      }
      if (std::find(devices.begin(), devices.end(), id) == devices.end()) devices.push_back(id);
    }
  }
  if (devices.empty()) return std::nullopt;
  std::string joined;
  for (const auto& d : devices) joined += (joined.empty() ? "" : ",") + d;
  return joined;
}

std::optional<RunContext> host_context(const RunEnvironment& env, const std::vector<int>& cpus) {
  if (!env.host_cpu) return std::nullopt;
  RunContext c;
  const int cores = cpus.empty() ? env.host_cores : static_cast<int>(cpus.size());
  for (auto& [key, value] : cpu_context(*env.host_cpu, cores)) c.fields.emplace(std::move(key), std::move(value));
  if (env.host_gpus > 0) c.fields[context_keys::kHostGpuCount] = std::to_string(env.host_gpus);
  c.fields[context_keys::kRunHostFacts] = "this host's /proc/cpuinfo, read by the runner: the binary records none";
  return c;
}

bool add_host_facts(RunContext& ctx, const RunEnvironment& env, const std::vector<int>& cpus) {
  if (ctx.fields.count(context_keys::kCpuModel) != 0) return false;
  auto host = host_context(env, cpus);
  if (!host) return false;
  for (auto& [key, value] : host->fields) ctx.fields.emplace(key, std::move(value));
  return true;
}

// ---- measuring ---------------------------------------------------------------------------------

namespace {

struct Job {
  std::size_t side = 0;
  std::size_t bench = 0;  // index into sides[side].benches
  int round = 0;
  std::vector<std::string> only;  // a retry after a crash: just these benchmarks
  int lane = 0;                   // 1..lanes: the lane that runs it (MeasureOptions::lanes); 0: no lanes
  std::string retry_tag;          // a retry's output file: "" for the first try, then "-retry", "-retry-a", ...
};

// The observer's calls, each a no-op without one. Lanes call it from several threads: one call at a time (its own
// mutex, taken after Measurement::mutex when both are held, never before it).
class Tell {
 public:
  explicit Tell(RunObserver* observer) : observer_(observer) {}
  void phase(const std::string& line) const {
    if (observer_ == nullptr) return;
    const std::lock_guard<std::mutex> hold(*mutex_);
    observer_->on_phase(line);
  }
  void process_start(const std::string& line) const {
    if (observer_ == nullptr) return;
    const std::lock_guard<std::mutex> hold(*mutex_);
    observer_->on_process_start(line);
  }
  void progress(const std::string& line) const {
    if (observer_ == nullptr) return;
    const std::lock_guard<std::mutex> hold(*mutex_);
    observer_->on_progress(line);
  }
  void process_done() const {
    if (observer_ == nullptr) return;
    const std::lock_guard<std::mutex> hold(*mutex_);
    observer_->on_process_done();
  }
  void warning(const std::string& line) const {
    if (observer_ == nullptr) return;
    const std::lock_guard<std::mutex> hold(*mutex_);
    observer_->on_warning(line);
  }

 private:
  RunObserver* observer_;
  std::shared_ptr<std::mutex> mutex_ = std::make_shared<std::mutex>();  // shared by the copies (progress_reporter)
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
  static const char* const kPrefixes[] = {
      "Run on (", "CPU Caches:",         "  L1 ",     "  L2 ", "  L3 ", "  L4 ", "Load Average:", "***WARNING***",
      "Running ", context_keys::kPrefix, "benchmark:"};
  for (const char* p : kPrefixes)
    if (line.rfind(p, 0) == 0) return true;
  // "2026-11-22T02:20:35+00:00" (the date line)
  return line.size() >= 19 && std::isdigit(static_cast<unsigned char>(line[0])) != 0 && line[4] == '-' &&
         line[10] == 'T';
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

std::filesystem::path run_file(const std::filesystem::path& runs_dir, const std::string& suite,
                               const std::string& label) {
  return runs_dir / fmt::format("{}.{}.json", suite, label);
}

std::map<std::string, std::string> binaries_by_suite(const SideResult& side) {
  std::map<std::string, std::string> out;
  for (const auto& [suite, rs] : side.suites) {
    if (rs.contexts.empty()) continue;
    out[suite] = rs.contexts.front().get(context_keys::kRunBinary);
  }
  return out;
}

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

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// What the runner knows about one binary of one side while it measures.
struct BinaryState {
  BuildInfo build;
  std::vector<std::string> expected;    // benchmarks it runs with the filter
  std::set<std::string> excluded;       // failed once: not run again
  bool dead = false;                    // not run again at all
  std::optional<double> last_duration;  // of its last process, for the ETA
};

// The state of one measure() call: the plan (binaries, jobs) and the result so far. With lanes, several threads
// share it: `mutex` guards `binary`, `jobs`, `realtime_refused_noted` and `out` (sides, notes, rounds_run); a bench
// process runs, and its output is read, outside it. Without lanes the one thread takes it all the same.
struct Measurement {
  Measurement(const std::vector<Side>& s, const MeasureOptions& o) : sides(s), options(o), tell(o.observer.get()) {}

  const std::vector<Side>& sides;
  const MeasureOptions& options;
  Tell tell;
  Env device_env;                                // CUDA_VISIBLE_DEVICES of the ctest allotment
  std::vector<std::vector<BinaryState>> binary;  // [side][bench]
  std::vector<Job> jobs;
  bool realtime_refused_noted = false;
  MeasureResult out;
  std::mutex mutex;

  BinaryState& state(const Job& job) { return binary[job.side][job.bench]; }
  const BenchBinary& bench(const Job& job) const { return sides[job.side].benches[job.bench]; }
  Env env_of(std::size_t side) const {
    Env env = sides[side].env;
    env.insert(env.end(), device_env.begin(), device_env.end());
    return env;
  }
};

// ---- plan: what each binary runs, and in which order ----

// What a filter that matched nothing could have matched: the binary's first benchmark names, for the note.
std::string names_it_has(const BenchBinary& bench, const std::vector<std::pair<std::string, std::string>>& env,
                         const MeasureOptions& options) {
  std::vector<std::string> all;
  try {
    all = list_benchmarks(bench, "", env, std::min(options.timeout_seconds, 120.0));
  } catch (const std::exception&) { return {}; }
  if (all.empty()) return {};
  constexpr std::size_t kShown = 6;
  const std::size_t shown = std::min(all.size(), kShown);
  return fmt::format(" (a regex on Google Benchmark's names; it has {}: {}{})", all.size(),
                     fmt::join(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                     all.size() > shown ? ", ..." : "");
}

// Lists the benchmarks of one binary; a binary that cannot list them, or lists none, is dead.
void plan_binary(Measurement& m, std::size_t s, std::size_t b) {
  const BenchBinary& bench = m.sides[s].benches[b];
  BinaryState& st = m.binary[s][b];
  st.build = build_info_for(bench.path, m.options.environment.git_commit);
  try {
    st.expected = list_benchmarks(bench, m.options.filter, m.env_of(s), std::min(m.options.timeout_seconds, 120.0));
  } catch (const std::exception& e) {
    m.out.sides[s].failures.push_back(ProcessFailure{m.sides[s].label,
                                                     bench.suite,
                                                     bench.path.string(),
                                                     0,
                                                     "listing benchmarks failed",
                                                     e.what(),
                                                     {bench.suite + "/" + bench.path.filename().string()}});
    st.dead = true;
    return;
  }
  if (st.expected.empty()) {
    const std::string why = m.options.filter.empty()
                                ? "registers no benchmark"
                                : fmt::format("no benchmark matches the filter '{}'{}", m.options.filter,
                                              names_it_has(bench, m.env_of(s), m.options));
    const std::string binary = bench.path.filename().string();
    m.out.notes.push_back(fmt::format("{} ({}): {}", binary, m.sides[s].label, why));
    m.out.nothing_to_run.push_back(fmt::format("{}: {}", binary, why));
    st.dead = true;
  }
}

std::vector<std::string> suites_in_order(const std::vector<Side>& sides) {
  std::vector<std::string> suites;
  for (const auto& side : sides)
    for (const auto& b : side.benches)
      if (std::find(suites.begin(), suites.end(), b.suite) == suites.end()) suites.push_back(b.suite);
  return suites;
}

// The schedule: per round, suites in random order; per suite, the sides back to back, in random order.
std::vector<Job> schedule_jobs(const Measurement& m, const std::vector<std::string>& suites, std::mt19937_64& rng) {
  std::vector<Job> jobs;
  for (int round = 1; round <= m.options.rounds; ++round) {
    std::vector<std::string> order = suites;
    if (m.options.interleave) std::shuffle(order.begin(), order.end(), rng);
    for (const auto& suite : order) {
      std::vector<Job> group;
      for (std::size_t s = 0; s < m.sides.size(); ++s)
        for (std::size_t b = 0; b < m.sides[s].benches.size(); ++b)
          if (m.sides[s].benches[b].suite == suite && !m.binary[s][b].dead) group.push_back({s, b, round, {}, 0, ""});
      if (m.options.interleave) std::shuffle(group.begin(), group.end(), rng);
      jobs.insert(jobs.end(), group.begin(), group.end());
    }
  }
  return jobs;
}

// ---- spawn: one bench process ----

// The seconds left of the phase from job j on (`all`), and after it (`after`): each binary's last duration,
// unknown ones counted as the mean of the known.
struct Eta {
  double all = 0;
  double after = 0;
};

// The mean of the binaries' last durations; NAN when none is known.
double mean_known_duration(const Measurement& m) {
  double known_sum = 0;
  int known = 0;
  for (const auto& side : m.binary)
    for (const auto& st : side)
      if (st.last_duration) {
        known_sum += *st.last_duration;
        ++known;
      }
  return known == 0 ? NAN : known_sum / known;
}

// The expected seconds of a job: its binary's last duration, else `mean_known`; 0 for a dead binary.
double expected_seconds(const Measurement& m, const Job& job, double mean_known) {
  const BinaryState& st = m.binary[job.side][job.bench];
  return st.dead ? 0.0 : st.last_duration.value_or(mean_known);
}

// From jobs[j] on, jobs being the rest of the phase in the order they run.
Eta estimate_eta(const Measurement& m, const std::vector<Job>& jobs, std::size_t j) {
  const double mean_known = mean_known_duration(m);
  Eta eta;
  for (std::size_t k = j; k < jobs.size(); ++k) {
    const double d = expected_seconds(m, jobs[k], mean_known);
    eta.all += d;
    if (k > j) eta.after += d;
  }
  return eta;
}

// Where a process stands in its phase, for its progress line: "process number/total", and the ETA.
struct Slot {
  std::size_t number = 0;
  std::size_t total = 0;
  Eta eta;
};

// What this process runs: everything expected minus what already failed (or a retry's list).
std::vector<std::string> names_for(Measurement& m, const Job& job) {
  std::vector<std::string> names;
  const BinaryState& st = m.state(job);
  for (const auto& n : job.only.empty() ? st.expected : job.only)
    if (st.excluded.count(n) == 0) names.push_back(n);
  return names;
}

std::filesystem::path output_file(const Measurement& m, const Job& job) {
  return m.options.work_dir / fmt::format("{}.{}.{}.r{}{}.json", sanitise_for_file(m.options.phase_label),
                                          sanitise_for_file(m.sides[job.side].label),
                                          sanitise_for_file(m.bench(job).suite), job.round, job.retry_tag);
}

// The CPUs of a job's process: its lane's, else MeasureOptions::pin_cpus (empty: any).
const std::vector<int>& cpus_of(const Measurement& m, const Job& job) {
  return job.lane > 0 ? m.options.lanes[static_cast<std::size_t>(job.lane - 1)] : m.options.pin_cpus;
}

ProcessSpec bench_process(const Measurement& m, const Job& job, const std::vector<std::string>& names,
                          const std::filesystem::path& out_file) {
  const MeasureOptions& o = m.options;
  const bool narrowed = !job.only.empty() || !m.binary[job.side][job.bench].excluded.empty();
  const std::string filter = narrowed ? exact_filter(names) : o.filter;
  ProcessSpec spec;
  spec.argv = {m.bench(job).path.string(), "--benchmark_out=" + out_file.string(), "--benchmark_out_format=json",
               fmt::format("--benchmark_repetitions={}", repetitions_of(o, m.bench(job).suite))};
  if (o.interleave) spec.argv.push_back("--benchmark_enable_random_interleaving=true");
  if (!filter.empty()) spec.argv.push_back("--benchmark_filter=" + filter);
  if (o.min_time) spec.argv.push_back(fmt::format("--benchmark_min_time={}", *o.min_time));
  if (o.warmup) spec.argv.push_back(fmt::format("--benchmark_min_warmup_time={}", *o.warmup));
  spec.argv.insert(spec.argv.end(), o.extra_args.begin(), o.extra_args.end());
  spec.env = m.env_of(job.side);
  spec.timeout_seconds = o.timeout_seconds;
  spec.realtime_priority = o.realtime_priority;
  spec.cpus = cpus_of(m, job);
  return spec;
}

// Progress of the running process, one call per repetition line on its stdout: the ETA of this process from
// its last duration when known, else from its pace so far.
std::function<void(const std::string&)> progress_reporter(const Measurement& m, const std::string& where,
                                                          const std::vector<std::string>& names, int repetitions,
                                                          std::optional<double> this_known, double eta_after) {
  struct Pace {
    std::set<std::string> expected;
    long done = 0;
    long total = 0;
    Clock::time_point start = Clock::now();
  };
  auto pace = std::make_shared<Pace>();
  pace->expected = std::set<std::string>(names.begin(), names.end());
  pace->total = static_cast<long>(names.size()) * repetitions;
  const Tell tell = m.tell;
  return [pace, tell, where, this_known, eta_after](const std::string& line) {
    const std::string first = line.substr(0, line.find(' '));
    const std::string norm = normalise_benchmark_name(first);
    if (pace->expected.count(norm) == 0 && pace->expected.count(first) == 0) return;
    ++pace->done;
    const double el = seconds_since(pace->start);
    const double per_line = el / static_cast<double>(pace->done);
    const double left = this_known ? std::max(0.0, *this_known - el)
                                   : per_line * static_cast<double>(std::max(0L, pace->total - pace->done));
    tell.progress(fmt::format("{}: {} ({}/{}), ETA {}", where, norm, pace->done, pace->total,
                              format_duration(std::chrono::duration<double>(left + eta_after))));
  };
}

// ---- collect: the process's JSON into the side's results ----

// Why a process that exited cleanly left no JSON: a binary that ignores --benchmark_out is no Google Benchmark
// binary (a script, a wrapper that drops its arguments); what it printed says which.
std::string no_json_written(const std::filesystem::path& out_file, const ProcessResult& pr) {
  std::string said = trim(pr.stdout_tail.substr(0, 200));
  std::replace(said.begin(), said.end(), '\n', ' ');
  return fmt::format(
      "exited {} without writing its JSON to --benchmark_out={}: is it a Google Benchmark binary "
      "that passes its arguments to benchmark::Initialize?{}",
      pr.exit_code, out_file.string(), said.empty() ? " (it printed nothing)" : " It printed: " + said);
}

// The output of a finished process: its JSON when it succeeded (or skipped everything), else what can be
// salvaged of a file cut short. `load_error` says why a file that should be readable was not.
std::optional<ResultSet> read_output(bool usable_exit, const std::filesystem::path& out_file, const ProcessResult& pr,
                                     std::string& load_error) {
  try {
    std::error_code ec;
    if (usable_exit && !std::filesystem::exists(out_file, ec)) {
      load_error = no_json_written(out_file, pr);
      return std::nullopt;
    }
    if (usable_exit) return load_result_file(out_file.string());
    if (!std::filesystem::exists(out_file, ec)) return std::nullopt;
    std::ifstream in(out_file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (auto salvaged = salvage_benchmark_json(ss.str())) return parse_results(*salvaged, out_file.string());
  } catch (const std::exception& e) { load_error = e.what(); }
  return std::nullopt;
}

// The context the runner owns (runner.hpp, measure()), added to every process run it loaded.
void stamp_contexts(ResultSet& loaded, const Measurement& m, const Job& job, const ProcessResult& pr) {
  const MeasureOptions& o = m.options;
  const BuildInfo& build = m.binary[job.side][job.bench].build;
  const BenchBinary& bench = m.bench(job);
  const std::vector<int>& cpus = cpus_of(m, job);
  for (auto& ctx : loaded.contexts) {
    add_host_facts(ctx, o.environment, cpus);
    auto& f = ctx.fields;
    f[context_keys::kGitCommit] = build.commit;
    if (f.count(context_keys::kBuildType) == 0 || f[context_keys::kBuildType] == "none")
      f[context_keys::kBuildType] = build.build_type;
    f[context_keys::kRunSide] = m.sides[job.side].label;
    f[context_keys::kRunRound] = std::to_string(job.round);
    f[context_keys::kRunBinary] = bench.path.string();
    f[context_keys::kRunSeed] = std::to_string(m.out.seed);
    f[context_keys::kRunPhase] = o.phase_label;
    f[context_keys::kRunSched] =
        o.realtime_priority > 0 && !pr.realtime_refused ? fmt::format("fifo:{}", o.realtime_priority) : "normal";
    f[context_keys::kRunCpus] = cpus.empty() ? "any" : format_cpu_list(cpus);
    if (const std::string& mc = machine_class_override(); !mc.empty()) {
      f[context_keys::kMachineClass] = mc;
    } else {
      try {
        f[context_keys::kMachineClass] = derive_machine_class(ctx);
      } catch (const std::exception&) {
        // not derivable from this context: the loader's precedence decides later
      }
    }
    if (f.count(context_keys::kSuite) == 0) f[context_keys::kSuite] = bench.suite;
  }
}

// Adds a loaded process run to its suite's results; returns why it could not be merged ("" when it was).
std::string merge_into_side(SideResult& sr, const std::string& suite, ResultSet loaded) {
  sr.repetitions += count_latency_samples(loaded);
  auto it = sr.suites.find(suite);
  try {
    if (it == sr.suites.end()) {
      sr.suites.emplace(suite, std::move(loaded));
    } else {
      merge_results(it->second, std::move(loaded));
    }
  } catch (const std::exception& e) { return std::string("merging process runs: ") + e.what(); }
  return "";
}

// ---- judge: what a failed process means for its benchmarks ----

// The benchmarks of `names` that the process did not finish: fewer repetitions of it in the last process run of
// `rs` (the results holding this process's run last; nullptr when nothing of it was loaded).
std::vector<std::string> unfinished_benchmarks(const ResultSet* rs, const std::vector<std::string>& names,
                                               int repetitions) {
  std::vector<std::string> unfinished;
  for (const auto& n : names) {
    const BenchmarkResult* b = rs != nullptr ? rs->find(normalise_benchmark_name(n)) : nullptr;
    long in_this_process = 0;
    if (b != nullptr) {
      const int last_run = rs->process_runs() - 1;
      for (int run : b->time.process_run) in_this_process += run == last_run ? 1 : 0;
    }
    if (in_this_process < repetitions) unfinished.push_back(n);
  }
  return unfinished;
}

// A process killed by a signal of its own (a crash): running its benchmarks apart finds which, at the cost of a few
// short processes. Not a timeout: each half that hangs again would cost the whole timeout. Not an exit code of the
// bench's own choosing, which says nothing about which benchmark ran.
bool splittable(const ProcessResult& pr) { return pr.started && pr.signal != 0 && !pr.timed_out; }

// A failed process: what happened, the bench's own message, and the benchmarks to blame. `retry` gets the
// unfinished benchmarks that are not to blame (a crash or timeout cut them short). `wrote_no_json`: it exited cleanly
// without writing --benchmark_out. `this_process`: see unfinished_benchmarks.
ProcessFailure judge_failure(const Measurement& m, const Job& job, const ProcessResult& pr, bool usable_exit,
                             bool wrote_no_json, const ResultSet* this_process, const std::string& load_error,
                             const std::vector<std::string>& names, std::vector<std::string>& retry) {
  const BenchBinary& bench = m.bench(job);
  ProcessFailure f;
  f.side = m.sides[job.side].label;
  f.suite = bench.suite;
  f.binary = bench.path.string();
  f.round = job.round;
  f.what = !load_error.empty() && usable_exit ? "unreadable output" : pr.describe();
  const std::string failed_msg = failed_lines(pr.stderr_tail);
  f.message = !load_error.empty() ? load_error : (failed_msg.empty() ? last_lines(pr.stderr_tail, 4) : failed_msg);
  if (pr.timed_out)  // the limit is perfgate's, not the bench's: say which flag sets it
    f.message += fmt::format("{}a bench process may take --timeout {:g} s; raise it for longer benchmarks",
                             f.message.empty() ? "" : "; ", m.options.timeout_seconds);
  // A clean exit without the JSON: the binary ignored --benchmark_out, so its listing (what it printed for
  // --benchmark_list_tests) names no benchmarks it ran either. The binary is to blame, under its own name.
  if (wrote_no_json) {
    f.benchmarks.push_back(bench.suite + "/" + bench.path.filename().string());
    return f;
  }
  if (!failed_msg.empty() && load_error.empty() && pr.exit_code == 3 && pr.signal == 0 && !pr.timed_out) {
    // Failed checks: the JSON carries the errors; mark names only the stderr knows.
    for (const auto& n : names)
      if (failed_msg.find(n + ":") != std::string::npos) f.benchmarks.push_back(n);
    return f;
  }
  // Crash, timeout, other exit: the benchmarks it did not finish. Those the stderr names, when it names
  // some; else, after a crash with several unfinished, none yet: contain_failure runs them again in halves until
  // one alone crashes (one benchmark's crash must not fail the ones that never got to run); else every unfinished.
  const auto unfinished = unfinished_benchmarks(this_process, names, repetitions_of(m.options, bench.suite));
  for (const auto& n : unfinished)
    if (mentions(pr.stderr_tail, n)) f.benchmarks.push_back(n);
  if (f.benchmarks.empty() && unfinished.size() > 1 && splittable(pr)) {
    retry = unfinished;
    f.message += fmt::format("{}no benchmark named: its {} unfinished benchmarks run again in halves to find which",
                             f.message.empty() ? "" : "; ", unfinished.size());
    return f;
  }
  if (f.benchmarks.empty()) f.benchmarks = unfinished;
  for (const auto& n : unfinished)
    if (std::find(f.benchmarks.begin(), f.benchmarks.end(), n) == f.benchmarks.end()) retry.push_back(n);
  if (f.benchmarks.empty()) f.benchmarks.push_back(bench.suite + "/" + bench.path.filename().string());
  return f;
}

// `names` run again as two jobs of half each, in the round of `job`: the half that fails again is split again, so
// the benchmark that fails alone is found in about 2 log2(n) processes.
std::vector<Job> halves(const Job& job, const std::vector<std::string>& names) {
  const auto mid = names.begin() + static_cast<std::ptrdiff_t>(names.size() / 2);
  Job first = job, second = job;
  first.only.assign(names.begin(), mid);
  second.only.assign(mid, names.end());
  const std::string tag = job.retry_tag.empty() ? "-retry-" : job.retry_tag;
  first.retry_tag = tag + "a";
  second.retry_tag = tag + "b";
  return {first, second};
}

// The failed benchmarks are not run again; the others go on. A crash or timeout also cut short the
// benchmarks that were still running in this process: the job that re-runs those once, at once, without the
// failed ones, so this round keeps a sample of every healthy benchmark (the caller runs it next). A crash that
// named none of several unfinished benchmarks blamed none: their two halves run next instead.
std::vector<Job> contain_failure(Measurement& m, const Job& job, const ProcessResult& pr, const ProcessFailure& f,
                                 const std::vector<std::string>& names, const std::vector<std::string>& retry) {
  if (f.benchmarks.empty() && retry.size() > 1) return halves(job, retry);
  BinaryState& st = m.state(job);
  bool attributed = false;
  for (const auto& n : f.benchmarks) {
    if (std::find(names.begin(), names.end(), n) != names.end()) {
      st.excluded.insert(n);
      attributed = true;
    }
  }
  if (!attributed) {
    st.dead = true;  // cannot tell which benchmark broke it: stop running this binary (in every lane)
  } else if (job.only.empty() && (pr.signal != 0 || pr.timed_out) && !retry.empty()) {
    Job again = job;
    again.only = retry;
    again.retry_tag = "-retry";
    return {again};
  }
  return {};
}

// ---- one job, start to end ----

void note_realtime_refusal(Measurement& m, const ProcessResult& pr) {
  if (!pr.realtime_refused || m.realtime_refused_noted) return;
  m.realtime_refused_noted = true;
  m.out.notes.push_back(
      "realtime scheduling (SCHED_FIFO) was refused (needs CAP_SYS_NICE): measured at normal priority");
  m.tell.warning(m.out.notes.back());
}

// What one process of a lane gave, kept for the merge in round order (merge_in_round_order).
struct Finished {
  Job job;
  std::string raw_file;
  std::optional<ResultSet> loaded;
};

// Spawns the process of `job` and waits for it, reporting progress; books its cost on the side. `lock` holds
// m.mutex, released while the process runs. Without lanes (`keep` null) the raw file is listed at once.
ProcessResult spawn_job(Measurement& m, const Job& job, const Slot& slot, const std::vector<std::string>& names,
                        const std::filesystem::path& out_file, const std::string& where,
                        std::unique_lock<std::mutex>& lock, const std::vector<Finished>* keep) {
  const std::optional<double> this_known = m.state(job).last_duration;
  const int repetitions = repetitions_of(m.options, m.bench(job).suite);
  m.tell.process_start(fmt::format("{}: {} benchmark(s) x {} rep(s); process {}/{}, ETA {}", where, names.size(),
                                   repetitions, slot.number, slot.total,
                                   format_duration(std::chrono::duration<double>(slot.eta.all))));
  std::error_code ec;
  std::filesystem::remove(out_file, ec);
  ProcessSpec spec = bench_process(m, job, names, out_file);
  spec.on_stdout_line = progress_reporter(m, where, names, repetitions, this_known, slot.eta.after);
  lock.unlock();
  ProcessResult pr = run_process(spec);
  lock.lock();
  m.tell.process_done();
  note_realtime_refusal(m, pr);
  m.state(job).last_duration = pr.wall_seconds;
  SideResult& sr = m.out.sides[job.side];
  sr.processes += 1;
  sr.process_seconds += pr.wall_seconds;
  sr.suite_seconds[m.bench(job).suite] += pr.wall_seconds;
  if (keep == nullptr) sr.raw_files.push_back(out_file.string());
  return pr;
}

// Runs `job`: its process, then what its output or its failure means. Returns the jobs a failure asks for
// (contain_failure). `lock` holds m.mutex, released while the process runs and its output is read. `keep` null (no
// lanes): the output is merged into the side at once; else it goes to `keep`, merged in round order at the end.
std::vector<Job> run_job(Measurement& m, const Job& job, const Slot& slot, std::unique_lock<std::mutex>& lock,
                         std::vector<Finished>* keep) {
  if (m.state(job).dead) return {};
  const std::vector<std::string> names = names_for(m, job);
  if (names.empty()) return {};
  const BenchBinary& bench = m.bench(job);
  const std::string lane = job.lane > 0 ? fmt::format(" lane {}/{}", job.lane, m.options.lanes.size()) : "";
  const std::string where =
      fmt::format("{} {} [{}] round {}/{}{}{}", m.options.phase_label, bench.suite, m.sides[job.side].label, job.round,
                  m.options.rounds, lane, job.only.empty() ? "" : " (retry after a failure)");
  const std::filesystem::path out_file = output_file(m, job);
  const ProcessResult pr = spawn_job(m, job, slot, names, out_file, where, lock, keep);

  const bool skipped_all = pr.started && !pr.timed_out && pr.signal == 0 && pr.exit_code == 77;
  const bool usable_exit = pr.ok() || skipped_all;
  std::string load_error;
  lock.unlock();
  std::optional<ResultSet> loaded = read_output(usable_exit, out_file, pr, load_error);
  if (loaded) stamp_contexts(*loaded, m, job, pr);
  lock.lock();
  // The results whose last process run is this process's, for judging a failure.
  const ResultSet* this_process = nullptr;
  if (keep != nullptr) {
    this_process = loaded ? &*loaded : nullptr;
  } else if (loaded) {
    SideResult& sr = m.out.sides[job.side];
    if (std::string e = merge_into_side(sr, bench.suite, std::move(*loaded)); !e.empty()) load_error = std::move(e);
    const auto it = sr.suites.find(bench.suite);
    this_process = it != sr.suites.end() ? &it->second : nullptr;
  }
  std::vector<Job> again;
  if (!usable_exit || !load_error.empty()) {
    std::vector<std::string> retry;
    std::error_code ec;
    const bool wrote_no_json = usable_exit && !std::filesystem::exists(out_file, ec);
    ProcessFailure f = judge_failure(m, job, pr, usable_exit, wrote_no_json, this_process, load_error, names, retry);
    m.tell.warning(fmt::format("{}: FAILED ({}){}{}", where, f.what, f.message.empty() ? "" : ": ", f.message));
    again = contain_failure(m, job, pr, f, names, retry);
    m.out.sides[job.side].failures.push_back(std::move(f));
  }
  if (keep != nullptr) keep->push_back(Finished{job, out_file.string(), std::move(loaded)});
  return again;
}

// Why round `round` may not start: the first rounds_before_deadline rounds always run (fewer cannot judge
// anything); a later one does not when, at `per_round` seconds a round, it would end past options.deadline, or,
// with no round finished yet (`per_round` unset), when the deadline has passed. `where` names the lane, if any.
// nullopt: the round may start.
std::optional<std::string> deadline_stop(const MeasureOptions& o, int round, std::optional<double> per_round,
                                         const std::string& where) {
  if (!o.deadline || round <= std::max(1, o.rounds_before_deadline)) return std::nullopt;
  const double left = std::chrono::duration<double>(*o.deadline - Clock::now()).count();
  if (per_round ? *per_round <= left : left > 0) return std::nullopt;
  const std::string pace =
      per_round ? fmt::format("~{:.0f} s a round{}", *per_round, where) : fmt::format("no round finished yet{}", where);
  return fmt::format(
      "time budget: {} of {} rounds measured; round {} ({}) would have ended past the budget ({:.0f} s "
      "left)",
      round - 1, o.rounds, round, pace, std::max(0.0, left));
}

// deadline_stop for the one-at-a-time schedule, paced by the rounds so far; notes it when the round may not start.
bool round_would_pass_deadline(Measurement& m, int round, Clock::time_point t0) {
  const std::optional<std::string> why = deadline_stop(
      m.options, round, round > 1 ? std::optional<double>(seconds_since(t0) / (round - 1)) : std::nullopt, "");
  if (!why) return false;
  m.out.notes.push_back(*why);
  m.tell.warning(fmt::format("{}: {}", m.options.phase_label, m.out.notes.back()));
  return true;
}

// No lanes: one job at a time, in the schedule's order (a retry is inserted after the job that asks for it).
void run_in_order(Measurement& m, Clock::time_point t0) {
  std::unique_lock<std::mutex> lock(m.mutex);
  for (std::size_t j = 0; j < m.jobs.size(); ++j) {
    if (m.jobs[j].round > m.out.rounds_run) {
      if (round_would_pass_deadline(m, m.jobs[j].round, t0)) break;
      m.out.rounds_run = m.jobs[j].round;
    }
    const Job job = m.jobs[j];
    const Slot slot{j + 1, m.jobs.size(), estimate_eta(m, m.jobs, j)};
    std::vector<Job> again = run_job(m, job, slot, lock, nullptr);
    m.jobs.insert(m.jobs.begin() + static_cast<std::ptrdiff_t>(j) + 1, again.begin(), again.end());
  }
}

// ---- lanes: rounds measured at the same time, each lane on its own CPUs ----
//
// Each lane takes the next round no lane has taken and runs all of it (every suite, the sides back to back, in the
// schedule's order) on its CPUs, so a round's paired difference never spans two lanes. Rounds end out of order; the
// paired analysis pairs the sides' process runs by their order (analysis/compare_analyses.cpp, summarise_runs), so
// every process's output is kept and merged into the sides in round order once all lanes are done.

// What the lanes share, under Measurement::mutex.
struct LaneRun {
  std::vector<std::vector<Job>> rounds;            // [round - 1]: the schedule's jobs of that round
  std::vector<std::vector<Finished>> finished;     // [round - 1]: what its processes gave, in the order they ran
  int next_round = 1;                              // the first round no lane has taken
  std::size_t started = 0;                         // processes started (progress)
  std::size_t planned = 0;                         // processes planned: the schedule's, and retries
  std::vector<double> lane_seconds;                // [lane - 1]: seconds of the rounds it finished
  std::vector<int> lane_rounds;                    // [lane - 1]: rounds it finished
  std::optional<std::string> stopped_by_deadline;  // why the latest lane to stop for the deadline stopped
  std::exception_ptr error;                        // the first exception of a lane: measure() rethrows it
};

// The per-round seconds a lane expects: from the rounds it finished, else from those all lanes finished; nullopt
// when no round has finished yet.
std::optional<double> lane_seconds_per_round(const LaneRun& run, int lane) {
  const auto l = static_cast<std::size_t>(lane - 1);
  if (run.lane_rounds[l] > 0) return run.lane_seconds[l] / run.lane_rounds[l];
  double seconds = 0;
  int rounds = 0;
  for (std::size_t i = 0; i < run.lane_rounds.size(); ++i) {
    seconds += run.lane_seconds[i];
    rounds += run.lane_rounds[i];
  }
  if (rounds == 0) return std::nullopt;
  return seconds / rounds;
}

// deadline_stop for a lane about to take `round`, paced by lane_seconds_per_round; records why (the note is
// written once, at the end).
bool lane_round_would_pass_deadline(const Measurement& m, LaneRun& run, int lane, int round) {
  std::optional<std::string> why = deadline_stop(m.options, round, lane_seconds_per_round(run, lane),
                                                 fmt::format(" on lane {}/{}", lane, m.options.lanes.size()));
  if (!why) return false;
  run.stopped_by_deadline = std::move(why);
  return true;
}

// The progress slot of jobs[k] of a lane's round: this round's jobs from k on, and the rounds no lane has taken yet
// shared by the lanes.
Slot lane_slot(const Measurement& m, LaneRun& run, const std::vector<Job>& jobs, std::size_t k) {
  Slot slot{++run.started, run.planned, estimate_eta(m, jobs, k)};
  const double mean_known = mean_known_duration(m);
  double untaken = 0;
  for (std::size_t r = static_cast<std::size_t>(run.next_round - 1); r < run.rounds.size(); ++r)
    for (const Job& job : run.rounds[r]) untaken += expected_seconds(m, job, mean_known);
  untaken /= static_cast<double>(m.options.lanes.size());
  slot.eta.all += untaken;
  slot.eta.after += untaken;
  return slot;
}

// One lane: takes rounds until none is left, the deadline says stop, or another lane failed.
void run_lane(Measurement& m, LaneRun& run, int lane) {
  std::unique_lock<std::mutex> lock(m.mutex);
  while (!run.error && run.next_round <= m.options.rounds) {
    const int round = run.next_round;
    if (lane_round_would_pass_deadline(m, run, lane, round)) return;
    ++run.next_round;
    m.out.rounds_run = round;
    const auto round_start = Clock::now();
    std::vector<Job> jobs = run.rounds[static_cast<std::size_t>(round - 1)];
    for (Job& job : jobs) job.lane = lane;
    std::vector<Finished>& keep = run.finished[static_cast<std::size_t>(round - 1)];
    for (std::size_t k = 0; k < jobs.size(); ++k) {
      const Slot slot = lane_slot(m, run, jobs, k);
      std::vector<Job> again = run_job(m, jobs[k], slot, lock, &keep);
      run.planned += again.size();
      jobs.insert(jobs.begin() + static_cast<std::ptrdiff_t>(k) + 1, again.begin(), again.end());
    }
    run.lane_seconds[static_cast<std::size_t>(lane - 1)] += seconds_since(round_start);
    run.lane_rounds[static_cast<std::size_t>(lane - 1)] += 1;
  }
}

// Every lane's processes into the sides, round by round, each round's in the order its lane ran them: the order a
// run without lanes gives, so the sides' process runs of one round have the same index. A process whose output
// cannot be merged (it disagrees with the earlier rounds) is a failure of its benchmarks.
void merge_in_round_order(Measurement& m, LaneRun& run) {
  for (auto& round : run.finished) {
    for (Finished& f : round) {
      SideResult& sr = m.out.sides[f.job.side];
      sr.raw_files.push_back(f.raw_file);
      if (!f.loaded) continue;
      std::vector<std::string> names;
      for (const auto& b : f.loaded->benchmarks) names.push_back(b.raw_name.empty() ? b.name : b.raw_name);
      const BenchBinary& bench = m.bench(f.job);
      if (std::string e = merge_into_side(sr, bench.suite, std::move(*f.loaded)); !e.empty()) {
        ProcessFailure failure{sr.label, bench.suite, bench.path.string(), f.job.round, "unreadable output", e, names};
        m.tell.warning(fmt::format("{} {} [{}] round {}: FAILED ({}): {}", m.options.phase_label, bench.suite, sr.label,
                                   f.job.round, failure.what, e));
        sr.failures.push_back(std::move(failure));
      }
    }
  }
}

// With lanes: one thread per lane, then the merge in round order. Returns the process runs planned (retries too).
std::size_t run_in_lanes(Measurement& m) {
  LaneRun run;
  run.rounds.resize(static_cast<std::size_t>(std::max(0, m.options.rounds)));
  for (const Job& job : m.jobs) run.rounds[static_cast<std::size_t>(job.round - 1)].push_back(job);
  run.finished.resize(run.rounds.size());
  run.planned = m.jobs.size();
  run.lane_seconds.assign(m.options.lanes.size(), 0.0);
  run.lane_rounds.assign(m.options.lanes.size(), 0);
  std::vector<std::thread> lanes;
  for (std::size_t l = 0; l < m.options.lanes.size(); ++l) {
    lanes.emplace_back([&m, &run, l] {
      try {
        run_lane(m, run, static_cast<int>(l) + 1);
      } catch (...) {
        const std::lock_guard<std::mutex> hold(m.mutex);
        if (!run.error) run.error = std::current_exception();
      }
    });
  }
  for (auto& t : lanes) t.join();
  if (run.error) std::rethrow_exception(run.error);
  if (run.stopped_by_deadline) {
    m.out.notes.push_back(*run.stopped_by_deadline);
    m.tell.warning(fmt::format("{}: {}", m.options.phase_label, m.out.notes.back()));
  }
  merge_in_round_order(m, run);
  return run.planned;
}

std::string lanes_text(const std::vector<std::vector<int>>& lanes) {
  std::string out;
  for (const auto& cpus : lanes) out += (out.empty() ? "" : "; ") + format_cpu_list(cpus);
  return out;
}

}  // namespace

int repetitions_of(const MeasureOptions& options, const std::string& suite) {
  const auto it = options.suite_repetitions.find(suite);
  return it == options.suite_repetitions.end() ? options.repetitions : it->second;
}

MeasureResult measure(const std::vector<Side>& sides, const MeasureOptions& options) {
  const auto t0 = Clock::now();
  for (std::size_t l = 0; l < options.lanes.size(); ++l)
    if (options.lanes[l].empty()) throw std::invalid_argument(fmt::format("lane {} has no CPU", l + 1));
  Measurement m(sides, options);
  m.out.seed = options.seed != 0
                   ? options.seed
                   : static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  std::mt19937_64 rng(m.out.seed);
  std::filesystem::create_directories(options.work_dir);
  if (const auto& devices = options.environment.cuda_visible_devices)
    m.device_env.emplace_back("CUDA_VISIBLE_DEVICES", *devices);

  // plan
  for (std::size_t s = 0; s < sides.size(); ++s) {
    m.out.sides.push_back(SideResult{sides[s].label, {}, {}, {}, 0, 0, 0, {}});
    m.binary.emplace_back(sides[s].benches.size());
    for (std::size_t b = 0; b < sides[s].benches.size(); ++b) plan_binary(m, s, b);
  }
  const std::vector<std::string> suites = suites_in_order(sides);
  m.jobs = schedule_jobs(m, suites, rng);
  std::string where = options.pin_cpus.empty() ? "" : ", pinned to CPU(s) " + format_cpu_list(options.pin_cpus);
  if (!options.lanes.empty()) {
    where = fmt::format(", {} lane(s) at once on CPU(s) {}", options.lanes.size(), lanes_text(options.lanes));
    m.out.notes.push_back(fmt::format(
        "{}: rounds measured {} at a time in lanes on CPU(s) {}; each round's sides ran back to back on one lane",
        options.phase_label, options.lanes.size(), lanes_text(options.lanes)));
  }
  m.tell.phase(
      fmt::format("{}: {} process run(s): {} round(s) x {} suite(s) x {} side(s), {} repetition(s) each, "
                  "seed {}{}",
                  options.phase_label, m.jobs.size(), options.rounds, suites.size(), sides.size(), options.repetitions,
                  m.out.seed, where));
  // spawn, collect, judge
  std::size_t planned = 0;
  if (options.lanes.empty()) {
    run_in_order(m, t0);
    planned = m.jobs.size();
  } else {
    planned = run_in_lanes(m);
  }

  for (auto& sr : m.out.sides) apply_failures(sr);
  m.out.wall_seconds = seconds_since(t0);
  m.tell.phase(fmt::format("{}: done in {} ({} process run(s))", options.phase_label,
                           format_duration(std::chrono::duration<double>(m.out.wall_seconds)), planned));
  return std::move(m.out);
}

}  // namespace perfgate
