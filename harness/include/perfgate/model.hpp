#pragma once
// The results model: what the harness knows of a run after loading Google Benchmark JSON.
// Everything downstream (statistics, compare, report, baselines) reads only this.
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace perfgate {

// How a metric is gated. Counter names carry their kind (see benches/support/counters.hpp):
//   latency     the benchmark's time per iteration (manual time where the bench used it)  lower is better
//   rate        counters whose name ends in "/s", bytes_per_second, items_per_second     higher is better
//   phase       counters named "phase.<NAME>" (ms per iteration)                         lower is better
//   info        everything else ("pct.*" included): reported, never gated
enum class MetricKind { latency, rate, phase, info };

MetricKind classify_counter(const std::string& counter_name);
bool higher_is_better(MetricKind kind);
const char* metric_kind_name(MetricKind kind);  // "latency" | "rate" | "phase" | "info"

// One metric of one benchmark, every sample kept. Samples are per-repetition values, in the order
// they were loaded; `process_run` says which process run (input file) each sample came from.
struct Metric {
  std::string name;  // "time" for latency, else the counter name
  MetricKind kind = MetricKind::info;
  std::vector<double> samples;
  std::vector<int> process_run;  // same length as samples
};

struct BenchmarkResult {
  std::string name;                           // normalised: Google Benchmark's suffixes removed
  std::string raw_name;                       // as first seen in the JSON (for reproduce commands)
  std::string time_kind;                      // "manual_time" | "real_time"
  Metric time;                                // latency in nanoseconds per iteration
  Metric cpu_time;                            // Google Benchmark's cpu_time in ns per iteration (kind info; kept so a
                                              // baseline is complete Google Benchmark JSON; not gated)
  std::vector<long long> iterations;          // Google Benchmark's iteration count, one per latency sample
  std::vector<Metric> counters;               // sorted by name
  std::optional<std::string> error;           // the bench's own failure message (verdict: failed)
  std::optional<std::string> skip_reason;     // "skipped: ..." message, prefix removed
  std::string source_file;                    // where it was first seen, for error messages
  std::string aggregate_level;                // "median"/"mean"/...: the file held aggregates only, one sample a run
  std::string label;                          // Google Benchmark's label (State::SetLabel), the last one set
  std::set<std::string> non_finite_counters;  // left out of `counters`: NaN or infinite in some repetition

  const Metric* counter(const std::string& counter_name) const;
};

// Facts about one process run: Google Benchmark's context plus perfgate.* keys, all as strings.
struct RunContext {
  std::string source_file;
  std::map<std::string, std::string> fields;
  std::string get(const std::string& key, const std::string& fallback = "") const;
};

// What the loader accepted but could not use in full, and the files where it found that: one note for every file
// with the same finding, so that nine process runs of one binary make one line, not nine.
struct LoadNote {
  std::string text;
  std::vector<std::string> files;
  std::string line() const;  // "FILE: text", or "FILE and N more files: text"
};

// A run, possibly merged from several files (several binaries, or several process runs of one).
struct ResultSet {
  std::vector<RunContext> contexts;                    // one per loaded file
  std::vector<BenchmarkResult> benchmarks;             // in first-seen order
  std::unordered_map<std::string, std::size_t> index;  // normalised name -> position
  std::vector<LoadNote> load_notes;

  const BenchmarkResult* find(const std::string& normalised_name) const;
  int process_runs() const { return static_cast<int>(contexts.size()); }
  // Notes `note` for `file`, in the note already made for its text if there is one.
  void add_load_note(const std::string& file, const std::string& text);
  // Every note of `notes` for every file it holds for (add_load_note): another set's notes merged into these.
  void add_load_notes(const std::vector<LoadNote>& notes);
  // At least one benchmark, and every one skipped (GPU suites on a CPU runner): nothing was measured.
  bool every_benchmark_skipped() const;
};

// Removes the suffixes Google Benchmark appends: /manual_time, /real_time, /process_time,
// /repeats:N, /min_time:X, /min_warmup_time:X, /iterations:N; /threads:N, which follows them, stays (it changes the
// work).
std::string normalise_benchmark_name(const std::string& raw);
// "manual_time" where the raw name says the benchmark reports its own time (/manual_time), else "real_time".
std::string time_kind_of_name(std::string_view raw);
// The threads a name asks for (Google Benchmark's /threads:N), 1 without.
int threads_of_name(std::string_view name);

}  // namespace perfgate
