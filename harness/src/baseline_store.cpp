#include "perfgate/baseline_store.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <random>
#include <set>
#include <sstream>
#include <system_error>

#include "perfgate/machine_class.hpp"

namespace perfgate {

namespace {

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

// Shortest text that reads back as the same double (fmt uses Dragonbox): lossless round trip.
void append_number(std::string& out, double v) { fmt::format_to(std::back_inserter(out), "{}", v); }

// Google Benchmark writes these context keys as JSON numbers/booleans/arrays; the loader keeps such
// values as their minified JSON text. Write them back raw when the string is exactly that (canonical)
// text, so the file keeps Google Benchmark's types and reads back to the same string.
bool write_raw_context_value(simdjson::dom::parser& parser, const std::string& key, const std::string& value) {
  static const std::set<std::string> raw_keys = {"num_cpus", "mhz_per_cpu", "cpu_scaling_enabled", "caches",
                                                 "load_avg", "json_schema_version"};
  if (raw_keys.count(key) == 0 || value.empty() || value.size() > 65536) return false;
  simdjson::dom::element el;
  if (parser.parse(simdjson::padded_string(value)).get(el) != simdjson::SUCCESS) return false;
  if (el.type() == simdjson::dom::element_type::STRING) return false;
  return simdjson::minify(el) == value;
}

void append_context(simdjson::dom::parser& parser, std::string& out, const std::map<std::string, std::string>& fields,
                    const std::string& indent) {
  out += "{";
  bool first = true;
  for (const auto& [key, value] : fields) {
    out += first ? "\n" : ",\n";
    first = false;
    out += indent;
    out += "  ";
    append_json_string(out, key);
    out += ": ";
    if (write_raw_context_value(parser, key, value)) {
      out += value;
    } else {
      append_json_string(out, value);
    }
  }
  out += first ? "}" : "\n" + indent + "}";
}

std::string now_iso8601() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int threads_from_name(const std::string& name) {
  const auto pos = name.rfind("/threads:");
  if (pos == std::string::npos) return 1;
  try {
    return std::max(1, std::stoi(name.substr(pos + 9)));
  } catch (...) {
    return 1;
  }
}

void validate_component(const std::string& value, const std::string& what) {
  validate_machine_class(value, what);  // same alphabet for suites: a-z 0-9 . _ -
}

}  // namespace

std::filesystem::path baseline_path(const std::filesystem::path& root, const std::string& machine_class,
                                    const std::string& suite) {
  validate_component(machine_class, "machine class");
  validate_component(suite, "suite name");
  return root / machine_class / (suite + ".json");
}

std::string cpu_generation_key(const std::string& cpu_signature) {
  std::istringstream words(cpu_signature);
  std::string vendor, key;
  words >> vendor;
  if (vendor.empty()) return "";
  if (vendor == "AuthenticAMD") vendor = "amd";
  else if (vendor == "GenuineIntel") vendor = "intel";
  key = vendor;
  for (std::string label, value; words >> label >> value;) key += "-" + label + value;
  for (char& c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    else if (!ok) c = '_';
  }
  return key;
}

std::filesystem::path find_baseline(const std::filesystem::path& root, const std::string& machine_class,
                                    const std::string& cpu_signature, const std::string& suite) {
  const std::filesystem::path class_level = baseline_path(root, machine_class, suite);
  const std::string generation = cpu_generation_key(cpu_signature);
  if (generation.empty()) return class_level;
  const std::filesystem::path own = class_level.parent_path() / generation / class_level.filename();
  std::error_code ec;
  return std::filesystem::exists(own, ec) ? own : class_level;
}

std::string to_baseline_json(const ResultSet& results, const BaselineInfo& info) {
  validate_machine_class(info.machine_class, "baseline machine class");
  const int runs = std::max(1, results.process_runs());
  std::map<std::string, std::string> top =
      results.contexts.empty() ? std::map<std::string, std::string>{} : results.contexts.front().fields;
  for (auto it = top.begin(); it != top.end();) {
    it = it->first.rfind("perfgate.baseline.", 0) == 0 ? top.erase(it) : std::next(it);
  }
  top["perfgate.baseline.machine"] = info.machine_class;
  top["perfgate.baseline.date"] = info.date.empty() ? now_iso8601() : info.date;
  top["perfgate.baseline.commit"] = info.commit.empty() ? "unknown" : info.commit;
  top["perfgate.baseline.command"] = info.command;
  top["perfgate.baseline.process_runs"] = std::to_string(runs);

  std::string out;
  std::size_t samples = 0;
  for (const BenchmarkResult& b : results.benchmarks) samples += b.time.samples.size() + 1;
  out.reserve(4096 + samples * 400);
  out += "{\n  \"context\": ";
  simdjson::dom::parser parser;
  append_context(parser, out, top, "  ");
  out += ",\n  \"perfgate_process_runs\": [";
  for (int k = 0; k < runs; ++k) {
    std::map<std::string, std::string> fields;
    if (k < results.process_runs()) fields = results.contexts[static_cast<std::size_t>(k)].fields;
    for (auto it = fields.begin(); it != fields.end();) {
      it = it->first.rfind("perfgate.baseline.", 0) == 0 ? fields.erase(it) : std::next(it);
    }
    out += k == 0 ? "\n    " : ",\n    ";
    append_context(parser, out, fields, "    ");
  }
  out += "\n  ],\n  \"benchmarks\": [";
  bool first_entry = true;
  auto open_entry = [&](const BenchmarkResult& b, std::size_t family, int run, long long repetitions,
                        long long rep_index) {
    out += first_entry ? "\n    {\n" : ",\n    {\n";
    first_entry = false;
    out += "      \"name\": ";
    append_json_string(out, b.raw_name);
    out += fmt::format(",\n      \"family_index\": {},\n      \"per_family_instance_index\": 0,\n", family);
    out += "      \"run_name\": ";
    append_json_string(out, b.raw_name);
    out += fmt::format(",\n      \"run_type\": \"iteration\",\n      \"repetitions\": {},\n"
                       "      \"repetition_index\": {},\n      \"threads\": {},\n      \"perfgate_process_run\": {}",
                       repetitions, rep_index, threads_from_name(b.raw_name), run);
  };
  for (std::size_t family = 0; family < results.benchmarks.size(); ++family) {
    const BenchmarkResult& b = results.benchmarks[family];
    // Per stored run: its samples in load order, repetition_index 0..n-1.
    std::map<int, long long> per_run;
    for (int r : b.time.process_run) ++per_run[r];
    // A failed/skipped benchmark gets one more entry (two when both were recorded by merged runs) in
    // the run of its first sample: Google Benchmark 1.7's convention, read by every compare.py:
    // error_occurred + error_message, a skip being a message that starts "skipped: ".
    std::vector<std::string> failures;
    if (b.error) failures.push_back(*b.error);
    if (b.skip_reason) failures.push_back("skipped: " + *b.skip_reason);
    const int failed_run = b.time.process_run.empty() ? 0 : b.time.process_run.front();
    const auto extra = static_cast<long long>(failures.size());
    std::map<int, long long> next_index;
    for (std::size_t j = 0; j < b.time.samples.size(); ++j) {
      const int run = b.time.process_run[j];
      const long long total = per_run[run] + (run == failed_run ? extra : 0);
      open_entry(b, family, run, total, next_index[run]++);
      out += fmt::format(",\n      \"iterations\": {},\n      \"real_time\": ",
                         j < b.iterations.size() ? b.iterations[j] : 1LL);
      append_number(out, b.time.samples[j]);
      out += ",\n      \"cpu_time\": ";
      append_number(out, j < b.cpu_time.samples.size() ? b.cpu_time.samples[j] : 0.0);
      out += ",\n      \"time_unit\": \"ns\"";
      for (const Metric& c : b.counters) {
        if (j >= c.samples.size()) continue;
        out += ",\n      ";
        append_json_string(out, c.name);
        out += ": ";
        append_number(out, c.samples[j]);
      }
      out += "\n    }";
    }
    for (const std::string& message : failures) {
      open_entry(b, family, failed_run, per_run[failed_run] + extra, next_index[failed_run]++);
      out += ",\n      \"error_occurred\": true,\n      \"error_message\": ";
      append_json_string(out, message);
      out += ",\n      \"iterations\": 0,\n      \"real_time\": 0,\n      \"cpu_time\": 0,\n      \"time_unit\": \"ns\"\n    }";
    }
  }
  out += first_entry ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

void write_file_atomically(const std::filesystem::path& file, const std::string& content) {
  namespace fs = std::filesystem;
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  fs::create_directories(dir);
  std::random_device rd;
  const fs::path tmp = dir / fmt::format(".{}.tmp.{}.{:08x}", file.filename().string(), ::getpid(), rd());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "cannot create " + tmp.string());
  auto fail = [&](const char* what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::system_error(err, std::generic_category(), fmt::format("{} {}", what, tmp.string()));
  };
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("cannot fsync");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::system_error(err, std::generic_category(), "cannot close " + tmp.string());
  }
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::system_error(err, std::generic_category(), "cannot rename to " + file.string());
  }
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::filesystem::path write_baseline(const std::filesystem::path& root, const std::string& suite,
                                     const ResultSet& results, const BaselineInfo& info) {
  std::filesystem::path path = baseline_path(root, info.machine_class, suite);
  if (!info.generation.empty()) {
    validate_component(info.generation, "CPU generation");
    path = path.parent_path() / info.generation / path.filename();
  }
  write_file_atomically(path, to_baseline_json(results, info));
  return path;
}

}  // namespace perfgate
