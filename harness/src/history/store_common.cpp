// The backend-independent half of the history store: URLs, times, and turning loaded result files into
// a session record.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "internal.hpp"
#include "perfgate/baseline_store.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/context_pattern.hpp"
#include "perfgate/history.hpp"
#include "perfgate/machine_class.hpp"
#include "perfgate/stats.hpp"
#include "perfgate/suites.hpp"

namespace perfgate::history {

HistoryError::HistoryError(const std::string& where, const std::string& message) : InputError(where, "", "", message) {}

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// postgresql://user:secret@host/db -> postgresql://user:***@host/db (messages end up in CI logs).
std::string mask_password(const std::string& url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return url;
  const auto authority_begin = scheme_end + 3;
  const auto at = url.find('@', authority_begin);
  const auto slash = url.find('/', authority_begin);
  if (at == std::string::npos || (slash != std::string::npos && slash < at)) return url;
  const auto colon = url.find(':', authority_begin);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

}  // namespace

HistoryUrl parse_history_url(const std::string& url) {
  if (url.empty()) throw HistoryError("history", "empty history URL (give --db URL or set PERFGATE_HISTORY)");
  HistoryUrl parsed;
  parsed.display = mask_password(url);
  if (starts_with(url, "postgresql://") || starts_with(url, "postgres://")) {
    parsed.backend = Backend::postgresql;
    parsed.target = url;
    return parsed;
  }
  if (starts_with(url, "sqlite:")) {
    parsed.target = url.substr(7);
    // sqlite:///abs/path is accepted too: the URI form some tools write.
    if (starts_with(parsed.target, "//")) parsed.target = parsed.target.substr(2);
  } else if (url.find("://") != std::string::npos) {
    throw HistoryError(parsed.display, "unsupported history URL scheme (use a path, sqlite:PATH or postgresql://...)");
  } else {
    parsed.target = url;
  }
  if (parsed.target.empty()) throw HistoryError(parsed.display, "no file path after sqlite:");
  parsed.backend = Backend::sqlite;
  return parsed;
}

bool backend_available(Backend backend) {
#ifdef PERFGATE_HAVE_SQLITE
  if (backend == Backend::sqlite) return true;
#endif
#ifdef PERFGATE_HAVE_LIBPQ
  if (backend == Backend::postgresql) return true;
#endif
  (void)backend;
  return false;
}

std::unique_ptr<Store> open_store(const std::string& url, OpenMode mode) {
  const HistoryUrl parsed = parse_history_url(url);
  (void)mode;
#ifdef PERFGATE_HAVE_SQLITE
  if (parsed.backend == Backend::sqlite) return detail::open_sqlite_store(parsed, mode);
#endif
#ifdef PERFGATE_HAVE_LIBPQ
  if (parsed.backend == Backend::postgresql) return detail::open_postgres_store(parsed, mode);
#endif
  // Only the backends whose client library was found at build time are compiled in.
  throw HistoryError(parsed.display, fmt::format("this perfgate was built without {} support",
                                                 parsed.backend == Backend::sqlite ? "SQLite (libsqlite3-dev)"
                                                                                   : "PostgreSQL (libpq-dev)"));
}

// ---- times -------------------------------------------------------------------------------------

namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
long long days_from_civil(long long y, unsigned m, unsigned d) {
  y -= m <= 2;
  const long long era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<long long>(doe) - 719468;
}

std::string format_unix_micros(long long micros) {
  const long long secs = micros >= 0 ? micros / 1000000 : -((-micros + 999999) / 1000000);
  const long long frac = micros - secs * 1000000;
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  std::string out = fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}", tm.tm_year + 1900, tm.tm_mon + 1,
                                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  if (frac) out += fmt::format(".{:06d}", frac);
  return out + "Z";
}

// Reads exactly `digits` decimal digits at text[pos].
bool read_digits(const std::string& text, std::size_t& pos, int digits, int& value) {
  value = 0;
  for (int i = 0; i < digits; ++i, ++pos) {
    if (pos >= text.size() || !std::isdigit(static_cast<unsigned char>(text[pos]))) return false;
    value = value * 10 + (text[pos] - '0');
  }
  return true;
}

bool read_char(const std::string& text, std::size_t& pos, char c) {
  if (pos >= text.size() || text[pos] != c) return false;
  ++pos;
  return true;
}

// YYYY-MM-DD
bool read_date(const std::string& text, std::size_t& p, int& year, int& month, int& day) {
  if (!read_digits(text, p, 4, year) || !read_char(text, p, '-') || !read_digits(text, p, 2, month) ||
      !read_char(text, p, '-') || !read_digits(text, p, 2, day))
    return false;
  return month >= 1 && month <= 12 && day >= 1 && day <= 31;
}

// The digits after the decimal point of the seconds, as microseconds (at least one digit).
bool read_fraction(const std::string& text, std::size_t& p, long long& micros) {
  long long scale = 100000;
  const std::size_t start = p;
  while (p < text.size() && std::isdigit(static_cast<unsigned char>(text[p]))) {
    micros += (text[p] - '0') * scale;
    scale /= 10;
    ++p;
  }
  return p != start;
}

struct TimeOfDay {
  int hour = 0, minute = 0, second = 0;
  long long micros = 0;
};

// HH:MM[:SS[.fraction]]
bool read_time(const std::string& text, std::size_t& p, TimeOfDay& t) {
  if (!read_digits(text, p, 2, t.hour) || !read_char(text, p, ':') || !read_digits(text, p, 2, t.minute)) return false;
  if (read_char(text, p, ':')) {
    if (!read_digits(text, p, 2, t.second)) return false;
    if (p < text.size() && (text[p] == '.' || text[p] == ',')) {
      ++p;
      if (!read_fraction(text, p, t.micros)) return false;
    }
  }
  return t.hour <= 23 && t.minute <= 59 && t.second <= 60;
}

// Z, +HH[:MM], -HH[:MM] or nothing: the zone's offset from UTC in seconds. A time without a zone is read as UTC:
// the runners log in UTC and a silent local-time guess is worse.
bool read_zone(const std::string& text, std::size_t& p, long long& offset_seconds) {
  if (p < text.size() && (text[p] == 'Z' || text[p] == 'z')) {
    ++p;
    return true;
  }
  if (p < text.size() && (text[p] == '+' || text[p] == '-')) {
    const int sign = text[p++] == '+' ? 1 : -1;
    int oh, om = 0;
    if (!read_digits(text, p, 2, oh)) return false;
    (void)read_char(text, p, ':');
    if (p < text.size() && !read_digits(text, p, 2, om)) return false;
    offset_seconds = sign * (oh * 3600LL + om * 60LL);
    return true;
  }
  return p == text.size();
}

std::optional<long long> parse_iso8601_micros(const std::string& text) {
  std::size_t p = 0;
  int year, month, day;
  if (!read_date(text, p, year, month, day)) return std::nullopt;
  TimeOfDay t;
  long long offset_seconds = 0;
  if (p < text.size()) {
    if (text[p] != 'T' && text[p] != ' ') return std::nullopt;
    ++p;
    if (!read_time(text, p, t) || !read_zone(text, p, offset_seconds)) return std::nullopt;
  }
  if (p != text.size()) return std::nullopt;
  const long long days = days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const long long secs = days * 86400 + t.hour * 3600LL + t.minute * 60LL + t.second - offset_seconds;
  return secs * 1000000 + t.micros;
}

}  // namespace

std::string normalise_iso8601(const std::string& text, const std::string& what) {
  const auto micros = parse_iso8601_micros(text);
  if (!micros)
    throw InputError("", "", what, fmt::format("'{}' is not an ISO-8601 time (e.g. 2026-11-25T09:30:00Z)", text));
  return format_unix_micros(*micros);
}

std::string now_iso8601() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return format_unix_micros(std::chrono::duration_cast<std::chrono::microseconds>(now).count());
}

double iso8601_to_unix(const std::string& normalised) {
  const auto micros = parse_iso8601_micros(normalised);
  return micros ? static_cast<double>(*micros) / 1e6 : std::nan("");
}

// ---- the session record --------------------------------------------------------------------------

namespace {

std::vector<double> run_levels(const SeriesSamples& series) {
  std::map<int, std::vector<double>> by_run;
  for (std::size_t i = 0; i < series.values.size(); ++i) by_run[series.process_run[i]].push_back(series.values[i]);
  std::vector<double> levels;
  levels.reserve(by_run.size());
  for (auto& [run, v] : by_run) levels.push_back(run_level(v, series.level, series.kind));
  return levels;
}

// Every process run weighs the same: the median of the per-run levels.
double median_of_run_levels(const SeriesSamples& series) {
  std::vector<double> levels = run_levels(series);
  return stats::median_inplace(levels);
}

// Seconds the timed loops of a benchmark took per process run: iterations x time per iteration (ns),
// summed over the samples, divided by the process runs that measured it.
double cost_per_process_run(const BenchmarkResult& b) {
  if (b.iterations.size() != b.time.samples.size()) return 0;
  double ns = 0;
  for (std::size_t i = 0; i < b.time.samples.size(); ++i)
    ns += static_cast<double>(b.iterations[i]) * b.time.samples[i];
  std::vector<int> runs = b.time.process_run;
  std::sort(runs.begin(), runs.end());
  const auto distinct = std::unique(runs.begin(), runs.end()) - runs.begin();
  return distinct > 0 ? ns / 1e9 / static_cast<double>(distinct) : 0;
}

SeriesSamples series_of(const std::string& benchmark, const std::string& suite, const Metric& metric, RunLevel level) {
  SeriesSamples s;
  s.benchmark = benchmark;
  s.suite = suite;
  s.metric = metric.name;
  s.kind = metric.kind;
  s.values = metric.samples;
  s.process_run = metric.process_run;
  s.level = level;
  s.median = median_of_run_levels(s);
  return s;
}

bool gated(MetricKind kind) { return kind != MetricKind::info; }

}  // namespace

std::string history_class(const ResultSet& results) {
  std::string cls = machine_class(results);
  if (cls.rfind("cpu-", 0) != 0) return cls;
  std::string generation;
  for (const auto& c : results.contexts) {
    const std::string key = cpu_generation_key(c.get(context_keys::kCpuSignature));
    if (key.empty()) continue;
    if (!generation.empty() && key != generation)
      throw InputError(c.source_file, "", context_keys::kCpuSignature,
                       fmt::format("process runs from different CPU generations merged: {} and {}", generation, key));
    generation = key;
  }
  return generation.empty() ? cls : cls + "." + generation;
}

SessionRecord make_session_record(const ResultSet& results, SessionInfo info) {
  if (info.commit.empty()) throw InputError("", "", "--commit", "a session needs the commit it measured");
  if (info.machine_class.empty()) info.machine_class = history_class(results);
  validate_machine_class(info.machine_class, "--machine-class");
  info.time = info.time.empty() ? now_iso8601() : normalise_iso8601(info.time);

  SessionRecord record;
  for (const auto& c : results.contexts) {
    record.process_runs.push_back({c.source_file, c.fields});
    if (info.host.empty()) info.host = c.get("host_name");
  }
  const auto floor_bound = context_pattern(results, results, kFloorBoundKey);
  const auto suite_by_file = suites_by_file(results);
  for (const auto& b : results.benchmarks) {
    if (b.time.samples.empty()) continue;  // failed or skipped: nothing was measured
    const RunLevel level = run_level_of(b.name, floor_bound);
    const std::string suite = reported_suite(suite_by_file, b);
    record.series.push_back(series_of(b.name, suite, b.time, level));
    if (const double seconds = cost_per_process_run(b); seconds > 0) record.costs[b.name] = seconds;
    for (const auto& counter : b.counters)
      if (gated(counter.kind) && !counter.samples.empty())
        record.series.push_back(series_of(b.name, suite, counter, level));
  }
  std::sort(record.series.begin(), record.series.end(), [](const SeriesSamples& a, const SeriesSamples& b) {
    return std::tie(a.benchmark, a.metric) < std::tie(b.benchmark, b.metric);
  });
  if (record.series.empty())
    throw InputError("", "", "benchmarks", "no measured benchmark in the given files: nothing to record");
  record.info = std::move(info);
  return record;
}

std::pair<double, double> run_level_range(const SeriesSamples& series) {
  const std::vector<double> levels = run_levels(series);
  if (levels.empty()) return {series.median, series.median};
  const auto [low, high] = std::minmax_element(levels.begin(), levels.end());
  return {*low, *high};
}

const SessionSummary* ClassHistory::session(std::int64_t id) const {
  auto it = std::lower_bound(sessions.begin(), sessions.end(), id,
                             [](const SessionSummary& s, std::int64_t v) { return s.id < v; });
  if (it != sessions.end() && it->id == id) return &*it;
  for (const auto& s : sessions)  // sessions are in time order, not id order, when times were given out of order
    if (s.id == id) return &s;
  return nullptr;
}

namespace detail {

ClassHistoryBuilder::ClassHistoryBuilder(std::string machine_class, std::vector<SessionSummary> sessions) {
  history_.machine_class = std::move(machine_class);
  history_.sessions = std::move(sessions);
  for (std::size_t i = 0; i < history_.sessions.size(); ++i) position_.emplace(history_.sessions[i].id, i);
}

void ClassHistoryBuilder::add_series(std::int64_t series_id, SeriesKey key, std::string suite) {
  series_index_.emplace(series_id, history_.series.size());
  suite = stored_or_named_suite(suite, key.benchmark);
  history_.series.push_back({std::move(key), std::move(suite), {}});
  points_.emplace_back();
}

void ClassHistoryBuilder::add_point(std::int64_t series_id, std::int64_t session_id, double median, int samples,
                                    double low, double high) {
  const auto series = series_index_.find(series_id);
  const auto session = position_.find(session_id);
  if (series == series_index_.end() || session == position_.end()) return;
  points_[series->second].push_back({session->second, {session_id, median, samples, low, high}});
}

ClassHistory ClassHistoryBuilder::finish() {
  for (std::size_t i = 0; i < points_.size(); ++i) {
    auto& pts = points_[i];
    const auto by_time = [](const auto& a, const auto& b) { return a.first < b.first; };
    if (!std::is_sorted(pts.begin(), pts.end(), by_time)) std::sort(pts.begin(), pts.end(), by_time);
    auto& out = history_.series[i].points;
    out.reserve(pts.size());
    for (const auto& [position, point] : pts) out.push_back(point);
  }
  std::erase_if(history_.series, [](const Series& s) { return s.points.empty(); });
  return std::move(history_);
}

std::string context_to_json(const ProcessRunContext& context) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : context.fields) j[k] = v;
  return j.dump();
}

ProcessRunContext context_from_json(const std::string& source_file, const std::string& json_text) {
  ProcessRunContext c;
  c.source_file = source_file;
  const auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it)
      c.fields[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
  return c;
}

MetricKind metric_kind_from_name(const std::string& name) {
  if (name == "latency") return MetricKind::latency;
  if (name == "rate") return MetricKind::rate;
  if (name == "phase") return MetricKind::phase;
  return MetricKind::info;
}

std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  std::string out;
  for (char c : text)
    if (!(c == ' ' && !out.empty() && out.back() == ' ')) out += c;
  return out;
}

std::string stored_or_named_suite(const std::string& stored, const std::string& benchmark) {
  return stored.empty() ? suite_of_benchmark(benchmark) : stored;
}

std::string newer_schema_message(int found) {
  return fmt::format("history schema version {} is newer than this perfgate understands ({}); upgrade perfgate", found,
                     kSchemaVersion);
}

}  // namespace detail
// ---- the schema ------------------------------------------------------------------------------------

namespace {

// Schema version 1. Times are stored twice: the normalised ISO text for people, seconds since the epoch
// for ordering.
constexpr const char* kSchemaV1 = R"SQL(
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE sessions (
  id {serial_id},
  machine_class TEXT NOT NULL,
  host TEXT NOT NULL,
  commit_sha TEXT NOT NULL,
  branch TEXT NOT NULL,
  recorded_at TEXT NOT NULL,
  recorded_unix DOUBLE PRECISION NOT NULL,
  perfgate_version TEXT NOT NULL,
  process_runs INTEGER NOT NULL,
  series_count INTEGER NOT NULL);
CREATE INDEX sessions_by_class_time ON sessions(machine_class, recorded_unix, id);
CREATE TABLE process_runs (
  session_id {id_type} NOT NULL,
  process_run INTEGER NOT NULL,
  source_file TEXT NOT NULL,
  context TEXT NOT NULL,
  PRIMARY KEY (session_id, process_run)){without_rowid};
CREATE TABLE series (
  id {serial_id},
  machine_class TEXT NOT NULL,
  benchmark TEXT NOT NULL,
  metric TEXT NOT NULL,
  kind TEXT NOT NULL,
  UNIQUE (machine_class, benchmark, metric));
CREATE TABLE session_medians (
  series_id {id_type} NOT NULL,
  session_id {id_type} NOT NULL,
  median DOUBLE PRECISION NOT NULL,
  samples INTEGER NOT NULL,
  PRIMARY KEY (session_id, series_id)){without_rowid};
CREATE TABLE samples (
  session_id {id_type} NOT NULL,
  series_id {id_type} NOT NULL,
  process_run INTEGER NOT NULL,
  repetition INTEGER NOT NULL,
  value DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (session_id, series_id, process_run, repetition)){without_rowid};
INSERT INTO schema_version (version) VALUES (1);
)SQL";

// Schema version 2 (the dashboard and the fleet): sessions know their shard, exit code and report;
// session medians carry their spread (lowest and highest process-run median), filled here from the samples
// for the sessions recorded before; each session keeps its benchmarks' measured costs.
constexpr const char* kSchemaV2 = R"SQL(
ALTER TABLE sessions ADD COLUMN shard_index INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN shard_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN exit_code INTEGER NOT NULL DEFAULT -1;
ALTER TABLE sessions ADD COLUMN report TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_by_commit ON sessions(commit_sha, shard_count, shard_index);
ALTER TABLE session_medians ADD COLUMN low DOUBLE PRECISION;
ALTER TABLE session_medians ADD COLUMN high DOUBLE PRECISION;
UPDATE session_medians SET low = r.low, high = r.high FROM (
  SELECT session_id, series_id, min(m) AS low, max(m) AS high FROM (
    SELECT session_id, series_id, process_run, avg(value) AS m FROM (
      SELECT session_id, series_id, process_run, value,
             row_number() OVER (PARTITION BY session_id, series_id, process_run ORDER BY value) AS rn,
             count(*) OVER (PARTITION BY session_id, series_id, process_run) AS n
      FROM samples) ranked
    WHERE rn IN ((n + 1) / 2, (n + 2) / 2) GROUP BY session_id, series_id, process_run) run_medians
  GROUP BY session_id, series_id) r
WHERE session_medians.session_id = r.session_id AND session_medians.series_id = r.series_id;
CREATE TABLE benchmark_costs (
  session_id {id_type} NOT NULL,
  benchmark TEXT NOT NULL,
  seconds DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (session_id, benchmark)){without_rowid};
UPDATE schema_version SET version = 2;
)SQL";

// Schema version 3: each series names its suite (SeriesSamples::suite); '' for those recorded before, which
// readers take as suite_of_benchmark of the name.
constexpr const char* kSchemaV3 = R"SQL(
ALTER TABLE series ADD COLUMN suite TEXT NOT NULL DEFAULT '';
UPDATE schema_version SET version = 3;
)SQL";

std::string in_dialect(const char* schema, const detail::SqlDialect& d) {
  return fmt::format(fmt::runtime(schema), fmt::arg("serial_id", d.serial_id), fmt::arg("id_type", d.id_type),
                     fmt::arg("without_rowid", d.without_rowid));
}

}  // namespace

std::vector<std::string> detail::schema_migrations(const SqlDialect& dialect) {
  return {in_dialect(kSchemaV1, dialect), in_dialect(kSchemaV2, dialect), in_dialect(kSchemaV3, dialect)};
}

}  // namespace perfgate::history
