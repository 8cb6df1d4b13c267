// The PostgreSQL backend of the history store (libpq).
//
// Safety: a session is written in one transaction (READ COMMITTED). New series are inserted with
// ON CONFLICT DO NOTHING in (benchmark, metric) order, so concurrent writers adding the same series wait
// for each other instead of failing, and never deadlock. A client killed mid-transaction loses its
// connection and the server rolls the transaction back. Schema creation and migrations hold an advisory
// lock, so that runners starting together on an empty database create it once.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <unordered_map>

#include <fmt/format.h>
#include <libpq-fe.h>

#include "internal.hpp"

namespace perfgate::history::detail {
namespace {

// An arbitrary key ("perf" in ASCII) for pg_advisory_xact_lock around schema changes.
constexpr long long kSchemaLockKey = 0x70657266;

// The schema (store_common.cpp) in this backend's words.
const std::vector<std::string>& migrations() {
  static const std::vector<std::string> steps = schema_migrations({"BIGSERIAL PRIMARY KEY", "BIGINT", ""});
  return steps;
}

// The tables of schema 1: finding one without schema_version means the database holds something else.
constexpr const char* kOurTables[] = {"sessions", "series", "samples", "session_medians", "process_runs"};

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

// COPY text format: backslash escapes for the characters that delimit fields and rows.
std::string copy_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      default: out += c;
    }
  }
  return out;
}

std::int64_t to_int(const char* text) { return std::strtoll(text, nullptr, 10); }
double to_double(const char* text) { return std::strtod(text, nullptr); }

void ignore_notice(void*, const char*) {}

class PostgresStore final : public Store {
 public:
  PostgresStore(const HistoryUrl& url, OpenMode mode) : Store(url) {
    // connect_timeout first: a value in the URI, processed later, wins.
    const char* keywords[] = {"connect_timeout", "dbname", nullptr};
    const char* values[] = {"10", url.target.c_str(), nullptr};
    conn_ = PQconnectdbParams(keywords, values, 1);
    if (!conn_) throw HistoryError(where(), "cannot connect to the history server: out of memory");
    if (PQstatus(conn_) != CONNECTION_OK) {
      const std::string msg = one_line(PQerrorMessage(conn_));
      PQfinish(conn_);
      conn_ = nullptr;
      throw HistoryError(where(), "cannot connect to the history server: " + msg);
    }
    PQsetNoticeProcessor(conn_, ignore_notice, nullptr);
    try {
      prepare_schema(mode);
    } catch (...) {
      PQfinish(conn_);
      conn_ = nullptr;
      throw;
    }
  }
  ~PostgresStore() override { PQfinish(conn_); }

  std::int64_t record(const SessionRecord& session) override;
  std::vector<SessionSummary> list_sessions(const SessionFilter& filter) override;
  std::vector<std::string> machine_classes() override;
  ClassHistory class_history(const std::string& machine_class, std::size_t last_sessions) override;
  Series series(const SeriesKey& key, std::size_t last_sessions) override;
  std::optional<StoredSession> load_session(std::int64_t id) override;
  int schema_version() override { return read_schema_version().value_or(0); }
  std::string session_report(std::int64_t id) override {
    auto r = query("SELECT report FROM sessions WHERE id = $1", {std::to_string(id)});
    return PQntuples(r.get()) ? std::string(PQgetvalue(r.get(), 0, 0)) : std::string();
  }
  std::map<std::string, double> benchmark_costs(const std::string& machine_class, double until_unix) override {
    // Oldest first: a later session's cost of a benchmark replaces an earlier one.
    auto r = query(
        "SELECT c.benchmark, c.seconds FROM benchmark_costs c JOIN sessions s ON s.id = c.session_id "
        "WHERE ($1 = '' OR s.machine_class = $1) AND s.recorded_unix <= $2::double precision "
        "ORDER BY s.recorded_unix, s.id",
        {machine_class, fmt::format("{}", std::min(until_unix, 1e300))});
    std::map<std::string, double> costs;
    for (int i = 0; i < PQntuples(r.get()); ++i)
      costs[PQgetvalue(r.get(), i, 0)] = to_double(PQgetvalue(r.get(), i, 1));
    return costs;
  }

 private:
  std::string where() const { return url().display; }

  [[noreturn]] void fail(const std::string& what, const PGresult* r = nullptr) {
    const char* msg = r ? PQresultErrorMessage(r) : PQerrorMessage(conn_);
    throw HistoryError(where(), fmt::format("{}: {}", what, one_line(msg ? msg : "unknown error")));
  }

  Result exec(const std::string& sql, ExecStatusType expected = PGRES_COMMAND_OK) {
    Result r(PQexec(conn_, sql.c_str()));
    if (!r || PQresultStatus(r.get()) != expected) fail("history database error", r.get());
    return r;
  }

  Result query(const std::string& sql, const std::vector<std::string>& params) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p.c_str());
    Result r(
        PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0));
    const auto status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) fail("history database error", r.get());
    return r;
  }

  void rollback_quietly() { PQclear(PQexec(conn_, "ROLLBACK")); }

  // Streams `rows` (already in COPY text format) into `table`.
  void copy_in(const std::string& copy_sql, const std::string& rows) {
    Result start(PQexec(conn_, copy_sql.c_str()));
    if (!start || PQresultStatus(start.get()) != PGRES_COPY_IN) fail("history database error", start.get());
    if (PQputCopyData(conn_, rows.data(), static_cast<int>(rows.size())) != 1 || PQputCopyEnd(conn_, nullptr) != 1)
      fail("cannot send data to the history server");
    Result done(PQgetResult(conn_));
    if (!done || PQresultStatus(done.get()) != PGRES_COMMAND_OK) fail("history database error", done.get());
    while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);
  }

  // Calls on_row with each line (without its newline) of COPY (query) TO STDOUT.
  template <class OnRow>
  void copy_out(const std::string& copy_sql, OnRow on_row) {
    Result start(PQexec(conn_, copy_sql.c_str()));
    if (!start || PQresultStatus(start.get()) != PGRES_COPY_OUT) fail("history database error", start.get());
    char* buffer = nullptr;
    int n;
    while ((n = PQgetCopyData(conn_, &buffer, 0)) > 0) {
      on_row(std::string_view(buffer, static_cast<std::size_t>(n) - (n > 0 && buffer[n - 1] == '\n' ? 1 : 0)));
      PQfreemem(buffer);
    }
    if (n == -2) fail("cannot read from the history server");
    Result done(PQgetResult(conn_));
    if (!done || PQresultStatus(done.get()) != PGRES_COMMAND_OK) fail("history database error", done.get());
    while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);
  }

  // A plain catalog query, not to_regclass(): it reads with the statement's snapshot, so after the schema
  // lock it sees a schema another runner has just committed.
  bool has_table(const std::string& name) {
    auto r = query("SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = $1",
                   {name});
    return std::string(PQgetvalue(r.get(), 0, 0)) != "0";
  }

  std::optional<int> read_schema_version() {
    if (!has_table("schema_version")) return std::nullopt;
    auto r = exec("SELECT coalesce(max(version), 0) FROM schema_version", PGRES_TUPLES_OK);
    return static_cast<int>(to_int(PQgetvalue(r.get(), 0, 0)));
  }

  bool schema_is_current(OpenMode mode) {
    const auto version = read_schema_version();
    if (version && *version > kSchemaVersion) throw HistoryError(where(), newer_schema_message(*version));
    if (!version) {
      for (const char* table : kOurTables)
        if (has_table(table))
          throw HistoryError(where(),
                             fmt::format("not a perfgate history: table '{}' exists without schema_version", table));
      if (mode == OpenMode::existing_only)
        throw HistoryError(where(), "no perfgate history in this database (no schema_version table)");
    }
    return version && *version == kSchemaVersion;
  }

  // schema_is_current in one snapshot: its statements must not see a schema that another runner commits
  // between them (tables without schema_version would look like a foreign database).
  bool schema_is_current_now(OpenMode mode) {
    exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    try {
      const bool current = schema_is_current(mode);
      exec("COMMIT");
      return current;
    } catch (...) {
      rollback_quietly();
      throw;
    }
  }

  void prepare_schema(OpenMode mode) {
    if (schema_is_current_now(mode)) return;
    exec("BEGIN");
    try {
      exec(fmt::format("SELECT pg_advisory_xact_lock({})", kSchemaLockKey), PGRES_TUPLES_OK);
      if (!schema_is_current(mode)) {
        const int from = read_schema_version().value_or(0);
        for (int v = from; v < kSchemaVersion; ++v) exec(migrations()[static_cast<std::size_t>(v)]);
      }
      exec("COMMIT");
    } catch (...) {
      rollback_quietly();
      throw;
    }
  }

  std::unordered_map<std::string, std::int64_t> ensure_series(const SessionRecord& s);
  std::int64_t insert_session(const SessionRecord& s);

  PGconn* conn_ = nullptr;
};

// Inserts the session's new series (sorted: concurrent writers take row locks in one order), gives the
// existing ones the suite this session names, and returns the id of every series of its class.
std::unordered_map<std::string, std::int64_t> PostgresStore::ensure_series(const SessionRecord& s) {
  exec("CREATE TEMP TABLE incoming_series (benchmark TEXT, metric TEXT, kind TEXT, suite TEXT) ON COMMIT DROP");
  std::string rows;
  for (const auto& series : s.series)
    rows += fmt::format("{}\t{}\t{}\t{}\n", copy_escape(series.benchmark), copy_escape(series.metric),
                        metric_kind_name(series.kind), copy_escape(series.suite));
  copy_in("COPY incoming_series FROM STDIN", rows);
  query(
      "INSERT INTO series (machine_class, benchmark, metric, kind, suite) "
      "SELECT $1, benchmark, metric, kind, suite FROM incoming_series ORDER BY benchmark, metric "
      "ON CONFLICT (machine_class, benchmark, metric) DO UPDATE SET suite = EXCLUDED.suite "
      "WHERE EXCLUDED.suite <> '' AND series.suite <> EXCLUDED.suite",
      {s.info.machine_class});
  auto r = query("SELECT id, benchmark, metric FROM series WHERE machine_class = $1", {s.info.machine_class});
  std::unordered_map<std::string, std::int64_t> ids;
  for (int i = 0; i < PQntuples(r.get()); ++i)
    ids.emplace(std::string(PQgetvalue(r.get(), i, 1)) + '\n' + PQgetvalue(r.get(), i, 2),
                to_int(PQgetvalue(r.get(), i, 0)));
  return ids;
}

std::int64_t PostgresStore::insert_session(const SessionRecord& s) {
  auto r = query(
      "INSERT INTO sessions (machine_class, host, commit_sha, branch, recorded_at, recorded_unix, perfgate_version, "
      "process_runs, series_count, shard_index, shard_count, exit_code, report) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING id",
      {s.info.machine_class, s.info.host, s.info.commit, s.info.branch, s.info.time,
       fmt::format("{}", iso8601_to_unix(s.info.time)), s.info.perfgate_version, std::to_string(s.process_runs.size()),
       std::to_string(s.series.size()), std::to_string(s.info.shard_index), std::to_string(s.info.shard_count),
       std::to_string(s.info.exit_code), s.report});
  const std::int64_t session_id = to_int(PQgetvalue(r.get(), 0, 0));
  std::string costs;
  for (const auto& [benchmark, seconds] : s.costs)
    costs += fmt::format("{}\t{}\t{}\n", session_id, copy_escape(benchmark), seconds);
  if (!costs.empty()) copy_in("COPY benchmark_costs (session_id, benchmark, seconds) FROM STDIN", costs);
  return session_id;
}

std::int64_t PostgresStore::record(const SessionRecord& s) {
  exec("BEGIN");
  try {
    const auto ids = ensure_series(s);
    const std::int64_t session_id = insert_session(s);

    std::string runs;
    for (std::size_t i = 0; i < s.process_runs.size(); ++i)
      runs += fmt::format("{}\t{}\t{}\t{}\n", session_id, i, copy_escape(s.process_runs[i].source_file),
                          copy_escape(context_to_json(s.process_runs[i])));
    copy_in("COPY process_runs (session_id, process_run, source_file, context) FROM STDIN", runs);

    std::string medians, samples;
    for (const auto& series : s.series) {
      const std::int64_t series_id = ids.at(series.benchmark + '\n' + series.metric);
      const auto [low, high] = run_level_range(series);
      medians += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\n", series_id, session_id, series.median, series.values.size(),
                             low, high);
      std::unordered_map<int, int> repetition;
      for (std::size_t i = 0; i < series.values.size(); ++i)
        samples += fmt::format("{}\t{}\t{}\t{}\t{}\n", session_id, series_id, series.process_run[i],
                               repetition[series.process_run[i]]++, series.values[i]);
    }
    copy_in("COPY session_medians (series_id, session_id, median, samples, low, high) FROM STDIN", medians);
    copy_in("COPY samples (session_id, series_id, process_run, repetition, value) FROM STDIN", samples);
    exec("COMMIT");
    return session_id;
  } catch (...) {
    rollback_quietly();
    throw;
  }
}

constexpr const char* kSessionColumns =
    "id, machine_class, host, commit_sha, branch, recorded_at, perfgate_version, process_runs, series_count, "
    "shard_index, shard_count, exit_code";

SessionSummary read_session_row(const PGresult* r, int row) {
  SessionSummary s;
  s.id = to_int(PQgetvalue(r, row, 0));
  s.info.machine_class = PQgetvalue(r, row, 1);
  s.info.host = PQgetvalue(r, row, 2);
  s.info.commit = PQgetvalue(r, row, 3);
  s.info.branch = PQgetvalue(r, row, 4);
  s.info.time = PQgetvalue(r, row, 5);
  s.info.perfgate_version = PQgetvalue(r, row, 6);
  s.process_runs = static_cast<int>(to_int(PQgetvalue(r, row, 7)));
  s.series = static_cast<int>(to_int(PQgetvalue(r, row, 8)));
  s.info.shard_index = static_cast<int>(to_int(PQgetvalue(r, row, 9)));
  s.info.shard_count = static_cast<int>(to_int(PQgetvalue(r, row, 10)));
  s.info.exit_code = static_cast<int>(to_int(PQgetvalue(r, row, 11)));
  return s;
}

std::string limit_clause(std::size_t limit) { return limit ? fmt::format("LIMIT {}", limit) : "LIMIT ALL"; }

std::vector<SessionSummary> PostgresStore::list_sessions(const SessionFilter& filter) {
  auto r = query(
      fmt::format("SELECT {} FROM sessions WHERE ($1 = '' OR machine_class = $1) AND ($2 = '' OR commit_sha = $2) "
                  "ORDER BY recorded_unix DESC, id DESC {}",
                  kSessionColumns, limit_clause(filter.limit)),
      {filter.machine_class, filter.commit});
  std::vector<SessionSummary> out;
  for (int i = PQntuples(r.get()) - 1; i >= 0; --i) out.push_back(read_session_row(r.get(), i));
  return out;
}

std::vector<std::string> PostgresStore::machine_classes() {
  auto r = exec("SELECT DISTINCT machine_class FROM sessions ORDER BY 1", PGRES_TUPLES_OK);
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(PQntuples(r.get())));
  for (int i = 0; i < PQntuples(r.get()); ++i) out.emplace_back(PQgetvalue(r.get(), i, 0));
  return out;
}

// Splits a COPY text row of numbers on tabs.
std::vector<std::string_view> split_tabs(std::string_view row) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= row.size(); ++i)
    if (i == row.size() || row[i] == '\t') {
      out.push_back(row.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

template <class T>
T parse_number(std::string_view text) {
  T value{};
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

ClassHistory PostgresStore::class_history(const std::string& machine_class, std::size_t last_sessions) {
  // One snapshot for the sessions and their medians.
  exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  try {
    ClassHistoryBuilder builder(machine_class, list_sessions({machine_class, "", last_sessions}));
    auto r = query(
        "SELECT id, benchmark, metric, kind, suite FROM series WHERE machine_class = $1 ORDER BY benchmark, metric",
        {machine_class});
    for (int i = 0; i < PQntuples(r.get()); ++i)
      builder.add_series(to_int(PQgetvalue(r.get(), i, 0)),
                         {machine_class, PQgetvalue(r.get(), i, 1), PQgetvalue(r.get(), i, 2),
                          metric_kind_from_name(PQgetvalue(r.get(), i, 3))},
                         PQgetvalue(r.get(), i, 4));
    // COPY streams the (possibly millions of) medians without holding them all in one PGresult.
    std::unique_ptr<char, decltype(&PQfreemem)> quoted(
        PQescapeLiteral(conn_, machine_class.c_str(), machine_class.size()), &PQfreemem);
    if (!quoted) fail("history database error");
    copy_out(
        fmt::format("COPY (SELECT m.series_id, m.session_id, m.median, m.samples, m.low, m.high FROM session_medians m "
                    "WHERE m.session_id IN (SELECT id FROM sessions WHERE machine_class = {} "
                    "ORDER BY recorded_unix DESC, id DESC {})) TO STDOUT",
                    quoted.get(), limit_clause(last_sessions)),
        [&](std::string_view row) {
          const auto f = split_tabs(row);
          if (f.size() == 6)
            builder.add_point(parse_number<std::int64_t>(f[0]), parse_number<std::int64_t>(f[1]),
                              parse_number<double>(f[2]), parse_number<int>(f[3]), parse_number<double>(f[4]),
                              parse_number<double>(f[5]));
        });
    exec("COMMIT");
    return builder.finish();
  } catch (...) {
    rollback_quietly();
    throw;
  }
}

Series PostgresStore::series(const SeriesKey& key, std::size_t last_sessions) {
  Series out;
  out.key = key;
  // Newest first (for the limit), one primary-key lookup per session; reversed below. One statement:
  // one snapshot.
  auto r = query(fmt::format("SELECT m.session_id, m.median, m.samples, r.kind, m.low, m.high, r.suite FROM series r "
                             "JOIN sessions s ON s.machine_class = r.machine_class "
                             "JOIN session_medians m ON m.session_id = s.id AND m.series_id = r.id "
                             "WHERE r.machine_class = $1 AND r.benchmark = $2 AND r.metric = $3 "
                             "ORDER BY s.recorded_unix DESC, s.id DESC {}",
                             limit_clause(last_sessions)),
                 {key.machine_class, key.benchmark, key.metric});
  for (int i = PQntuples(r.get()) - 1; i >= 0; --i) {
    out.points.push_back({to_int(PQgetvalue(r.get(), i, 0)), to_double(PQgetvalue(r.get(), i, 1)),
                          static_cast<int>(to_int(PQgetvalue(r.get(), i, 2))), to_double(PQgetvalue(r.get(), i, 4)),
                          to_double(PQgetvalue(r.get(), i, 5))});
    out.key.kind = metric_kind_from_name(PQgetvalue(r.get(), i, 3));
    out.suite = stored_or_named_suite(PQgetvalue(r.get(), i, 6), key.benchmark);
  }
  return out;
}

std::optional<StoredSession> PostgresStore::load_session(std::int64_t id) {
  exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  try {
    StoredSession out;
    const std::string sid = std::to_string(id);
    auto s = query(fmt::format("SELECT {} FROM sessions WHERE id = $1", kSessionColumns), {sid});
    if (PQntuples(s.get()) == 0) {
      exec("COMMIT");
      return std::nullopt;
    }
    out.summary = read_session_row(s.get(), 0);
    auto runs =
        query("SELECT source_file, context FROM process_runs WHERE session_id = $1 ORDER BY process_run", {sid});
    for (int i = 0; i < PQntuples(runs.get()); ++i)
      out.process_runs.push_back(context_from_json(PQgetvalue(runs.get(), i, 0), PQgetvalue(runs.get(), i, 1)));
    auto rows = query(
        "SELECT r.benchmark, r.metric, r.kind, m.median, s.process_run, s.value, r.suite "
        "FROM samples s JOIN series r ON r.id = s.series_id "
        "JOIN session_medians m ON m.series_id = s.series_id AND m.session_id = s.session_id "
        "WHERE s.session_id = $1 ORDER BY r.benchmark, r.metric, s.process_run, s.repetition",
        {sid});
    const PGresult* r = rows.get();
    for (int i = 0; i < PQntuples(r); ++i) {
      if (out.series.empty() || out.series.back().benchmark != PQgetvalue(r, i, 0) ||
          out.series.back().metric != PQgetvalue(r, i, 1)) {
        SeriesSamples series;
        series.benchmark = PQgetvalue(r, i, 0);
        series.metric = PQgetvalue(r, i, 1);
        series.kind = metric_kind_from_name(PQgetvalue(r, i, 2));
        series.median = to_double(PQgetvalue(r, i, 3));
        series.suite = stored_or_named_suite(PQgetvalue(r, i, 6), series.benchmark);
        out.series.push_back(std::move(series));
      }
      out.series.back().process_run.push_back(static_cast<int>(to_int(PQgetvalue(r, i, 4))));
      out.series.back().values.push_back(to_double(PQgetvalue(r, i, 5)));
    }
    exec("COMMIT");
    return out;
  } catch (...) {
    rollback_quietly();
    throw;
  }
}

}  // namespace

std::unique_ptr<Store> open_postgres_store(const HistoryUrl& url, OpenMode mode) {
  return std::make_unique<PostgresStore>(url, mode);
}

}  // namespace perfgate::history::detail
