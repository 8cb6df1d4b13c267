#include "perfgate/baseline_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <random>
#include <set>
#include <sstream>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perfgate/context_keys.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/machine_class.hpp"
#include "perfgate/model.hpp"  // threads_of_name

namespace perfgate {

namespace {

using Json = nlohmann::ordered_json;

// Google Benchmark writes these context keys as JSON numbers/booleans/arrays; the loader keeps such
// values as their minified JSON text. Write them back as JSON when the string is exactly that (canonical)
// text, so the file keeps Google Benchmark's types and reads back to the same string.
Json context_value(const std::string& key, const std::string& value) {
  static const std::set<std::string> raw_keys = {"num_cpus", "mhz_per_cpu", "cpu_scaling_enabled",
                                                 "caches",   "load_avg",    "json_schema_version"};
  if (raw_keys.count(key) == 0 || value.empty() || value.size() > 65536) return value;
  Json parsed = Json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || parsed.is_string() || parsed.dump() != value) return value;
  return parsed;
}

// The fields of one context, perfgate.baseline.* left out unless `keep_baseline_keys`.
Json context_object(const std::map<std::string, std::string>& fields, bool keep_baseline_keys) {
  Json out = Json::object();
  for (const auto& [key, value] : fields) {
    if (!keep_baseline_keys && key.rfind(context_keys::kBaselinePrefix, 0) == 0) continue;
    out[key] = context_value(key, value);
  }
  return out;
}

std::string now_iso8601() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void validate_component(const std::string& value, const std::string& what) {
  validate_machine_class(value, what);  // same alphabet for suites: a-z 0-9 . _ -
}

}  // namespace

std::string suite_file_stem(const std::string& suite) {
  if (suite.empty()) throw InputError("suite name", "", "", "empty suite name");
  const auto plain = [](unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  };
  if (suite.size() <= kMaxPlainSuiteStem && suite != "." && suite != ".." &&
      std::all_of(suite.begin(), suite.end(), plain))
    return suite;
  std::string stem;
  for (unsigned char c : suite.substr(0, kMaxPlainSuiteStem - 9)) {
    if (c >= 'A' && c <= 'Z') stem += static_cast<char>(c - 'A' + 'a');
    else stem += plain(c) && c != '.' ? static_cast<char>(c) : '_';
  }
  std::uint32_t hash = 2166136261u;  // FNV-1a of the whole name: names that map alike still get their own file
  for (unsigned char c : suite) hash = (hash ^ c) * 16777619u;
  return fmt::format("{}-{:08x}", stem, hash);
}

std::filesystem::path baseline_path(const std::filesystem::path& root, const std::string& machine_class,
                                    const std::string& suite) {
  validate_component(machine_class, "machine class");
  return root / machine_class / (suite_file_stem(suite) + ".json");
}

std::string cpu_generation_key(const std::string& cpu_signature) {
  std::istringstream words(cpu_signature);
  std::string vendor, key;
  words >> vendor;
  if (vendor.empty()) return "";
  if (vendor == "AuthenticAMD") vendor = "amd";
  else if (vendor == "GenuineIntel") vendor = "intel";
  key = vendor;
  for (std::string label, value; words >> label >> value;) {
    key += '-';
    key += label;
    key += value;
  }
  for (char& c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    else if (!ok) c = '_';
  }
  return key;
}

std::filesystem::path find_baseline(const std::filesystem::path& root, const std::string& machine_class,
                                    const std::string& cpu_signature, const std::string& suite) {
  std::filesystem::path class_level = baseline_path(root, machine_class, suite);
  const std::string generation = cpu_generation_key(cpu_signature);
  if (generation.empty()) return class_level;
  const std::filesystem::path own = class_level.parent_path() / generation / class_level.filename();
  std::error_code ec;
  return std::filesystem::exists(own, ec) ? own : class_level;
}

std::string new_baseline_generation(const std::filesystem::path& root, const std::string& machine_class,
                                    const std::string& cpu_signature, const std::string& suite) {
  const std::filesystem::path class_level = baseline_path(root, machine_class, suite);
  std::error_code ec;
  if (machine_class.rfind("cpu-", 0) != 0 || cpu_signature.empty() || !std::filesystem::exists(class_level, ec))
    return "";
  const ResultSet stored = load_result_file(class_level.string());
  const std::string theirs = stored.contexts.empty() ? "" : stored.contexts.front().get(context_keys::kCpuSignature);
  return theirs.empty() || theirs == cpu_signature ? "" : cpu_generation_key(cpu_signature);
}

namespace {

// One entry of the "benchmarks" array as Google Benchmark 1.7 writes it, up to "perfgate_process_run".
Json entry_head(const BenchmarkResult& b, std::size_t family, int run, long long repetitions, long long rep_index) {
  Json head{{"name", b.raw_name},
            {"family_index", family},
            {"per_family_instance_index", 0},
            {"run_name", b.raw_name},
            {"run_type", "iteration"},
            {"repetitions", repetitions},
            {"repetition_index", rep_index},
            {"threads", threads_of_name(b.raw_name)},
            {"perfgate_process_run", run}};
  if (!b.label.empty()) head["label"] = b.label;
  return head;
}

// The entries of one benchmark: its samples per stored run in load order (repetition_index 0..n-1),
// then one entry per failure or skip (Google Benchmark 1.7's convention, read by every compare.py:
// error_occurred + error_message, a skip being a message that starts "skipped: "), in the run of its
// first sample.
void append_entries(Json& entries, const BenchmarkResult& b, std::size_t family) {
  std::map<int, long long> per_run;
  for (int r : b.time.process_run) ++per_run[r];
  std::vector<std::string> failures;
  if (b.error) failures.push_back(*b.error);
  if (b.skip_reason) failures.push_back("skipped: " + *b.skip_reason);
  const int failed_run = b.time.process_run.empty() ? 0 : b.time.process_run.front();
  const auto extra = static_cast<long long>(failures.size());
  std::map<int, long long> next_index;
  for (std::size_t j = 0; j < b.time.samples.size(); ++j) {
    const int run = b.time.process_run[j];
    const long long total = per_run[run] + (run == failed_run ? extra : 0);
    Json e = entry_head(b, family, run, total, next_index[run]++);
    e["iterations"] = j < b.iterations.size() ? b.iterations[j] : 1LL;
    e["real_time"] = b.time.samples[j];
    e["cpu_time"] = j < b.cpu_time.samples.size() ? b.cpu_time.samples[j] : 0.0;
    e["time_unit"] = "ns";
    for (const Metric& c : b.counters) {
      if (j < c.samples.size()) e[c.name] = c.samples[j];
    }
    entries.push_back(std::move(e));
  }
  for (const std::string& message : failures) {
    Json e = entry_head(b, family, failed_run, per_run[failed_run] + extra, next_index[failed_run]++);
    e["error_occurred"] = true;
    e["error_message"] = message;
    e["iterations"] = 0;
    e["real_time"] = 0;
    e["cpu_time"] = 0;
    e["time_unit"] = "ns";
    entries.push_back(std::move(e));
  }
}

// The context indented, then one benchmark entry a line: committed baselines stay diffable entry by entry
// and take a quarter less room than fully indented JSON. Names and messages are bytes from the bench output:
// invalid UTF-8 becomes U+FFFD, never an exception.
std::string baseline_document_text(const Json& context, const Json& process_runs, const Json& entries) {
  constexpr auto kReplace = Json::error_handler_t::replace;
  std::string out = "{\n\"context\": " + context.dump(1, ' ', false, kReplace) +
                    ",\n\"perfgate_process_runs\": " + process_runs.dump(-1, ' ', false, kReplace) +
                    ",\n\"benchmarks\": [";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    out += i == 0 ? "\n" : ",\n";
    out += entries[i].dump(-1, ' ', false, kReplace);
  }
  return out + "\n]\n}\n";
}

}  // namespace

std::string to_baseline_json(const ResultSet& results, const BaselineInfo& info) {
  validate_machine_class(info.machine_class, "baseline machine class");
  const int runs = std::max(1, results.process_runs());
  std::map<std::string, std::string> top =
      results.contexts.empty() ? std::map<std::string, std::string>{} : results.contexts.front().fields;
  for (auto it = top.begin(); it != top.end();) {
    it = it->first.rfind(context_keys::kBaselinePrefix, 0) == 0 ? top.erase(it) : std::next(it);
  }
  top[context_keys::kBaselineMachine] = info.machine_class;
  top[context_keys::kBaselineDate] = info.date.empty() ? now_iso8601() : info.date;
  top[context_keys::kBaselineCommit] = info.commit.empty() ? "unknown" : info.commit;
  top[context_keys::kBaselineCommand] = info.command;
  top[context_keys::kBaselineProcessRuns] = std::to_string(runs);

  Json process_runs = Json::array();
  for (int k = 0; k < runs; ++k) {
    process_runs.push_back(k < results.process_runs()
                               ? context_object(results.contexts[static_cast<std::size_t>(k)].fields, false)
                               : Json::object());
  }
  Json entries = Json::array();
  for (std::size_t family = 0; family < results.benchmarks.size(); ++family) {
    append_entries(entries, results.benchmarks[family], family);
  }
  return baseline_document_text(context_object(top, /*keep_baseline_keys=*/true), process_runs, entries);
}

std::filesystem::path baseline_file(const std::filesystem::path& root, const std::string& suite,
                                    const BaselineInfo& info) {
  std::filesystem::path path = baseline_path(root, info.machine_class, suite);
  if (info.generation.empty()) return path;
  validate_component(info.generation, "CPU generation");
  return path.parent_path() / info.generation / path.filename();
}

std::filesystem::path write_baseline(const std::filesystem::path& root, const std::string& suite,
                                     const ResultSet& results, const BaselineInfo& info) {
  const std::filesystem::path path = baseline_file(root, suite, info);
  write_file_atomically(path, to_baseline_json(results, info));
  return path;
}

}  // namespace perfgate
