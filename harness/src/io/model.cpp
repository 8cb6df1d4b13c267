#include "perfgate/model.hpp"

#include <algorithm>
#include <regex>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace perfgate {

MetricKind classify_counter(const std::string& counter_name) {
  if (counter_name.rfind("phase.", 0) == 0) return MetricKind::phase;
  if (counter_name.rfind("pct.", 0) == 0) return MetricKind::info;
  if (counter_name == "bytes_per_second" || counter_name == "items_per_second") return MetricKind::rate;
  if (counter_name.size() > 2 && counter_name.compare(counter_name.size() - 2, 2, "/s") == 0) return MetricKind::rate;
  return MetricKind::info;
}

bool higher_is_better(MetricKind kind) { return kind == MetricKind::rate; }

const char* metric_kind_name(MetricKind kind) {
  switch (kind) {
    case MetricKind::latency: return "latency";
    case MetricKind::rate: return "rate";
    case MetricKind::phase: return "phase";
    case MetricKind::info: return "info";
  }
  return "info";
}

const Metric* BenchmarkResult::counter(const std::string& counter_name) const {
  auto it = std::lower_bound(counters.begin(), counters.end(), counter_name,
                             [](const Metric& m, const std::string& n) { return m.name < n; });
  return it != counters.end() && it->name == counter_name ? &*it : nullptr;
}

std::string LoadNote::line() const {
  if (files.empty()) return text;
  if (files.size() == 1) return files.front() + ": " + text;
  return fmt::format("{} and {} more file{}: {}", files.front(), files.size() - 1, files.size() == 2 ? "" : "s", text);
}

void ResultSet::add_load_note(const std::string& file, const std::string& text) {
  const auto same =
      std::find_if(load_notes.begin(), load_notes.end(), [&](const LoadNote& n) { return n.text == text; });
  if (same == load_notes.end()) return load_notes.push_back(LoadNote{text, {file}});
  if (std::find(same->files.begin(), same->files.end(), file) == same->files.end()) same->files.push_back(file);
}

void ResultSet::add_load_notes(const std::vector<LoadNote>& notes) {
  for (const LoadNote& note : notes)
    for (const std::string& file : note.files) add_load_note(file, note.text);
}

bool ResultSet::every_benchmark_skipped() const {
  return !benchmarks.empty() && std::all_of(benchmarks.begin(), benchmarks.end(),
                                            [](const BenchmarkResult& b) { return b.skip_reason.has_value(); });
}

std::string RunContext::get(const std::string& key, const std::string& fallback) const {
  auto it = fields.find(key);
  return it == fields.end() ? fallback : it->second;
}

const BenchmarkResult* ResultSet::find(const std::string& normalised_name) const {
  auto it = index.find(normalised_name);
  return it == index.end() ? nullptr : &benchmarks[it->second];
}

namespace {
// The name without Google Benchmark's "/threads:N", and that part: it comes last, after every suffix that
// normalise_benchmark_name removes (BenchmarkName::str()), so "x/real_time/threads:2" is "x/threads:2".
std::pair<std::string_view, std::string_view> split_threads(std::string_view raw) {
  const auto pos = raw.rfind("/threads:");
  if (pos == std::string_view::npos || pos == 0 || raw.find('/', pos + 1) != std::string_view::npos) return {raw, {}};
  return {raw.substr(0, pos), raw.substr(pos)};
}

// `name` ends with `suffix` and holds more than it: a name that is nothing but a suffix stays a name.
bool ends_with_more_than(std::string_view name, std::string_view suffix) {
  return name.size() > suffix.size() && name.ends_with(suffix);
}
}  // namespace

std::string time_kind_of_name(std::string_view raw) {
  return ends_with_more_than(split_threads(raw).first, "/manual_time") ? "manual_time" : "real_time";
}

int threads_of_name(std::string_view name) {
  const auto pos = name.rfind("/threads:");
  if (pos == std::string_view::npos) return 1;
  int n = 0;
  for (std::size_t i = pos + 9; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) n = n * 10 + (name[i] - '0');
  return std::max(n, 1);
}

std::string normalise_benchmark_name(const std::string& raw) {
  static constexpr std::string_view kSuffixes[] = {"/manual_time", "/real_time", "/process_time"};
  static const char* const kKeyed[] = {"/repeats:", "/min_time:", "/min_warmup_time:", "/iterations:"};
  const auto [head, threads] = split_threads(raw);
  std::string name(head);
  bool changed = true;
  while (changed) {
    changed = false;
    for (const std::string_view suffix : kSuffixes) {
      if (ends_with_more_than(name, suffix)) {
        name.erase(name.size() - suffix.size());
        changed = true;
      }
    }
    for (const char* k : kKeyed) {
      const auto pos = name.rfind(k);
      if (pos != std::string::npos && pos > 0 && name.find('/', pos + 1) == std::string::npos) {
        name.erase(pos);
        changed = true;
      }
    }
  }
  return name + std::string(threads);
}

}  // namespace perfgate
