#pragma once
// The results history (docs/history.md): every recorded session in one database, SQLite (a file, the
// embedded default) or PostgreSQL (one server for a fleet of runners), behind one interface and one
// schema.
//
// A session is one `perfgate history record`: the machine class, host, commit, branch, time and perfgate
// version, the context of every process run, and every process run's samples of every gated metric
// (time, rates "*/s", phases "phase.*") of every benchmark. Each (machine class, benchmark, metric) is a
// *series*; a session contributes one median to each of its series (the median of its process runs'
// medians, so that every process run weighs the same however many repetitions it made).
//
// Guarantees (tested in harness/tests/history_store_test.cpp):
//   - a session is written in one transaction: a writer killed at any point leaves it absent or whole;
//   - concurrent writers lose nothing (SQLite: WAL, BEGIN IMMEDIATE, busy waits; PostgreSQL: transactions);
//   - the schema is versioned (table schema_version) and migrated forward on open;
//   - a bad URL, an unreachable server, a corrupt or foreign file or a newer schema is a HistoryError
//     (an InputError: the CLI prints one line naming the URL and exits 2) before anything is written.
//
// The library never reads the environment: PERFGATE_HISTORY is the CLI's default for --db.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "perfgate/loader.hpp"
#include "perfgate/model.hpp"
#include "perfgate/run_level.hpp"

namespace perfgate::history {

// The schema this build writes. Opening a database with a higher schema_version is refused; a lower one
// is migrated forward (version 2: shards, exit codes, reports, benchmark costs, the spread of a median;
// version 3: each series' suite).
inline constexpr int kSchemaVersion = 3;

// A problem with the history itself (URL, server, file, schema). what() is one line that names the
// URL (a password in it is masked) or the file.
struct HistoryError : InputError {
  HistoryError(const std::string& where, const std::string& message);
};

enum class Backend { sqlite, postgresql };

struct HistoryUrl {
  Backend backend = Backend::sqlite;
  std::string target;   // SQLite: the file path; PostgreSQL: the libpq connection URI, unchanged
  std::string display;  // for messages: the URL as given, password masked
};

// "PATH" or "sqlite:PATH" -> SQLite; "postgresql://..." or "postgres://..." -> PostgreSQL (libpq URI form,
// e.g. postgresql:///perfgate?host=/tmp/sock&port=5433). Any other "scheme://" or an empty URL is a
// HistoryError.
HistoryUrl parse_history_url(const std::string& url);

// ---- what goes in ------------------------------------------------------------------------------

struct SessionInfo {
  std::string machine_class;  // validated as a class name; empty: history_class() of the results
  std::string host;
  std::string commit;  // required
  std::string branch;
  std::string time;  // ISO-8601; normalised to UTC "YYYY-MM-DDTHH:MM:SS(.ffffff)Z" when recorded
  std::string perfgate_version;
  // A shard of a sharded run (ci/perf.sh --shard I/N): index 1..count; 0/0 for an unsharded session.
  int shard_index = 0;
  int shard_count = 0;
  // The exit code of the run that produced the session (perfgate run: 0, 1, 2, 3 or 77); -1 unknown.
  int exit_code = -1;
};

// One gated metric of one benchmark in one session.
struct SeriesSamples {
  std::string benchmark;  // normalised name
  std::string metric;     // "time" or the counter name
  // The suite a report files the benchmark under (reported_suite): a plain Google Benchmark binary's
  // benchmarks are one suite named after the binary, whatever their names.
  std::string suite;
  MetricKind kind = MetricKind::latency;
  std::vector<int> process_run;       // per sample
  std::vector<double> values;         // per sample; time in ns, counters as reported
  RunLevel level = RunLevel::median;  // how a process run's repetitions make its level (the suite's floor_bound)
  double median = 0;                  // the session's level: the median of its process runs' levels
};

struct ProcessRunContext {
  std::string source_file;
  std::map<std::string, std::string> fields;
};

struct SessionRecord {
  SessionInfo info;
  std::vector<ProcessRunContext> process_runs;
  std::vector<SeriesSamples> series;  // sorted by (benchmark, metric)
  // The run's JSON report (perfgate.report/1), kept for `perfgate history merge`; may be empty.
  std::string report;
  // Benchmark -> measured cost in seconds per process run: the timed loops' iterations x time per
  // iteration, summed over the repetitions (setup outside the timed loop is not seen). Shard planning
  // balances on it (docs/history.md, "Sharding").
  std::map<std::string, double> costs;
};

// The lowest and highest process-run level of a series' samples (the spread of its session level).
std::pair<double, double> run_level_range(const SeriesSamples& series);

// The class a session is kept under: the machine class (machine_class.hpp), and for a CPU class (cpu-*)
// whose runs record a CPU signature, ".<generation>" (cpu_generation_key, e.g.
// "cpu-epyc-avx512-2c.amd-family25-model17"): CPU generations that share a class name differ by up to 1.6x on
// the same binary, so each gets its own series, change points and learned noise. Throws InputError when the
// runs belong to different classes.
std::string history_class(const ResultSet& results);

// Builds a record from loaded result files: every benchmark that has samples (failed and skipped ones
// have none and are left out), its time and every rate and phase counter ("info" counters are not gated
// and not kept). Normalises info.time (empty = now). Throws InputError for a bad time or class.
SessionRecord make_session_record(const ResultSet& results, SessionInfo info);

// "2026-11-25T09:30:00+01:00", "2026-11-25 08:30:00Z", "2026-11-25" -> "2026-11-25T08:30:00Z"; fractional
// seconds are kept to microseconds. Throws InputError (field `what`) for anything else.
std::string normalise_iso8601(const std::string& text, const std::string& what = "--time");
std::string now_iso8601();
// Seconds since the epoch of a normalised time (microsecond resolution).
double iso8601_to_unix(const std::string& normalised);

// ---- what comes out (the query API, for the CLI, the gate and the dashboard) --------------------

struct SessionSummary {
  std::int64_t id = 0;
  SessionInfo info;  // time normalised
  int process_runs = 0;
  int series = 0;  // how many series the session has a median for
};

struct SessionFilter {
  std::string machine_class;  // empty: every class
  std::string commit;         // empty: every commit; else an exact commit
  std::size_t limit = 0;      // 0: all; else the most recent `limit` sessions (still returned oldest first)
};

struct SeriesKey {
  std::string machine_class;
  std::string benchmark;
  std::string metric;
  MetricKind kind = MetricKind::latency;
  auto operator<=>(const SeriesKey& o) const {
    if (auto c = machine_class <=> o.machine_class; c != 0) return c;
    if (auto c = benchmark <=> o.benchmark; c != 0) return c;
    return metric <=> o.metric;
  }
  bool operator==(const SeriesKey& o) const {
    return machine_class == o.machine_class && benchmark == o.benchmark && metric == o.metric;
  }
};

struct SeriesPoint {
  std::int64_t session_id = 0;
  double median = 0;
  int samples = 0;
  // The lowest and highest process-run level (run_level_range) of the session.
  double low = 0;
  double high = 0;
};

struct Series {
  SeriesKey key;
  // As the series' latest recording named it; for a series last recorded before schema 3, which stored
  // none, suite_of_benchmark of its name. The common mode of `history changes` is a suite's.
  std::string suite;
  std::vector<SeriesPoint> points;  // in session order (time, then id)
};

// Series of session medians of one machine class, with the sessions they index into.
struct ClassHistory {
  std::string machine_class;
  std::vector<SessionSummary> sessions;  // time order; SeriesPoint::session_id refers to these
  std::vector<Series> series;            // sorted by key; points in the sessions' order
  const SessionSummary* session(std::int64_t id) const;
};

// The stored samples of one session, as recorded; each series' suite is the one its latest recording named
// (Series::suite), which a later session may have changed.
struct StoredSession {
  SessionSummary summary;
  std::vector<ProcessRunContext> process_runs;
  std::vector<SeriesSamples> series;
};

class Store {
 public:
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Writes one session in one transaction; returns its id. Waits for concurrent writers.
  virtual std::int64_t record(const SessionRecord& session) = 0;

  virtual std::vector<SessionSummary> list_sessions(const SessionFilter& filter = {}) = 0;
  virtual std::vector<std::string> machine_classes() = 0;
  // Every series of the class over its most recent `last_sessions` sessions (0: all).
  virtual ClassHistory class_history(const std::string& machine_class, std::size_t last_sessions = 0) = 0;
  // One series (key.kind is ignored) over the class's most recent `last_sessions` sessions (0: all), in
  // time order: one index lookup per session, whatever the number of series. Empty points when the
  // series is unknown. The dashboard's plot of one benchmark.
  virtual Series series(const SeriesKey& key, std::size_t last_sessions = 0) = 0;
  // std::nullopt when there is no such session.
  virtual std::optional<StoredSession> load_session(std::int64_t id) = 0;
  virtual int schema_version() = 0;
  // The JSON report stored with a session ("" when none was recorded or there is no such session).
  virtual std::string session_report(std::int64_t id) = 0;
  // Benchmark -> cost in seconds per process run (SessionRecord::costs), from the most recent session of
  // the class (every class when empty) recorded at or before `until_unix` (seconds since the epoch) that
  // measured it. Empty when no such session recorded costs. The shards of one run must plan from the same
  // costs: they pass one cutoff (ci/perf.sh: the commit's time), so a session recorded meanwhile is not seen.
  virtual std::map<std::string, double> benchmark_costs(const std::string& machine_class, double until_unix) = 0;

  const HistoryUrl& url() const { return url_; }

 protected:
  explicit Store(HistoryUrl url) : url_(std::move(url)) {}

 private:
  HistoryUrl url_;
};

enum class OpenMode {
  create,         // a missing SQLite file is created, an empty database gets the schema (record)
  existing_only,  // a missing file is a HistoryError (list, changes, the gate)
};

// Opens (and migrates) a history. Throws HistoryError.
std::unique_ptr<Store> open_store(const std::string& url, OpenMode mode = OpenMode::existing_only);

// Whether this build has the backend (the libraries are optional at build time).
bool backend_available(Backend backend);

}  // namespace perfgate::history
