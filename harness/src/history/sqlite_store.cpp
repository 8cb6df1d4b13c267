// The SQLite backend of the history store (libsqlite3's C API).
//
// Safety: the database runs in WAL mode, so readers never block the writer. A session is written inside
// BEGIN IMMEDIATE ... COMMIT: the write lock is taken up front, so two writers never deadlock upgrading a
// read lock, and a writer killed mid-transaction leaves only an uncommitted WAL tail that SQLite
// discards on the next open. A writer that finds the lock held waits (busy timeout) and retries.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <sqlite3.h>

#include "internal.hpp"

namespace perfgate::history::detail {
namespace {

// How long a writer waits for others before giving up (a CI job recording while 7 others do).
constexpr int kBusyTimeoutMs = 60000;

class SqliteStore;

class Statement {
 public:
  Statement(sqlite3* db, const std::string& where, const char* sql) : where_(where) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK)
      throw HistoryError(where_, fmt::format("cannot read the history: {}", sqlite3_errmsg(db)));
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, const std::string& v) {
    check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Statement& bind(int i, std::int64_t v) {
    check(sqlite3_bind_int64(stmt_, i, v));
    return *this;
  }
  Statement& bind(int i, double v) {
    check(sqlite3_bind_double(stmt_, i, v));
    return *this;
  }
  // True while a row is available; throws on errors.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw HistoryError(where_, fmt::format("history database error: {}", sqlite3_errmsg(sqlite3_db_handle(stmt_))));
  }
  void run() {
    step();
    reset();
  }
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  std::int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) throw HistoryError(where_, fmt::format("history database error: {}", sqlite3_errstr(rc)));
  }
  std::string where_;
  sqlite3_stmt* stmt_ = nullptr;
};

// The schema (store_common.cpp) in this backend's words.
const std::vector<std::string>& migrations() {
  static const std::vector<std::string> steps =
      schema_migrations({"INTEGER PRIMARY KEY AUTOINCREMENT", "INTEGER", " WITHOUT ROWID"});
  return steps;
}

class SqliteStore final : public Store {
 public:
  SqliteStore(const HistoryUrl& url, OpenMode mode) : Store(url) {
    const std::string& path = url.target;
    std::error_code ec;
    if (mode == OpenMode::existing_only && !std::filesystem::exists(path, ec))
      throw HistoryError(where(), "no such history file");
    const int flags = SQLITE_OPEN_READWRITE | (mode == OpenMode::create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
      const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      db_ = nullptr;
      throw HistoryError(where(), "cannot open the history: " + msg);
    }
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, kBusyTimeoutMs);
    try {
      check_readable();
      prepare_schema(mode);
    } catch (...) {
      sqlite3_close(db_);
      db_ = nullptr;
      throw;
    }
  }
  ~SqliteStore() override { sqlite3_close(db_); }

  std::int64_t record(const SessionRecord& session) override;
  std::vector<SessionSummary> list_sessions(const SessionFilter& filter) override;
  std::vector<std::string> machine_classes() override;
  ClassHistory class_history(const std::string& machine_class, std::size_t last_sessions) override;
  Series series(const SeriesKey& key, std::size_t last_sessions) override;
  std::optional<StoredSession> load_session(std::int64_t id) override;
  int schema_version() override { return read_schema_version().value_or(0); }
  std::string session_report(std::int64_t id) override;
  std::map<std::string, double> benchmark_costs(const std::string& machine_class, double until_unix) override;

 private:
  std::string where() const { return url().display; }

  void exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string msg = err ? err : sqlite3_errmsg(db_);
      sqlite3_free(err);
      throw HistoryError(where(), "history database error: " + msg);
    }
  }

  // The write lock, waiting past the busy timeout too: every writer gets its turn.
  void begin_immediate() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(4 * kBusyTimeoutMs);
    for (;;) {
      const int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) return;
      if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() > deadline)
        throw HistoryError(where(), fmt::format("cannot lock the history for writing: {}", sqlite3_errmsg(db_)));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  // A file that is not SQLite fails on its first read ("file is not a database").
  void check_readable() {
    char* err = nullptr;
    const int rc = sqlite3_exec(db_, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      const std::string msg = err ? err : sqlite3_errmsg(db_);
      sqlite3_free(err);
      throw HistoryError(where(), "not a readable SQLite history: " + msg);
    }
  }

  bool has_table(const char* name) {
    Statement q(db_, where(), "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
    q.bind(1, std::string(name));
    return q.step();
  }
  int table_count() {
    Statement q(db_, where(), "SELECT count(*) FROM sqlite_master");
    q.step();
    return static_cast<int>(q.integer(0));
  }

  // nullopt: no schema_version table.
  std::optional<int> read_schema_version() {
    if (!has_table("schema_version")) return std::nullopt;
    Statement q(db_, where(), "SELECT max(version) FROM schema_version");
    if (!q.step()) return 0;
    return static_cast<int>(q.integer(0));
  }

  // Checks the schema and brings it to kSchemaVersion. Foreign, newer and (for readers) empty databases
  // are refused before anything is written to them, the journal mode included.
  void prepare_schema(OpenMode mode) {
    exec("PRAGMA synchronous = NORMAL");  // per connection; with WAL durable against a killed process
    if (schema_is_current_now(mode)) return;
    set_wal_mode();
    begin_immediate();
    try {
      if (!schema_is_current(mode)) {
        const int from = read_schema_version().value_or(0);
        for (int v = from; v < kSchemaVersion; ++v) exec(migrations()[static_cast<std::size_t>(v)].c_str());
      }
      exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  // schema_is_current in one read transaction: its statements see one snapshot, not a schema that another
  // writer commits between them (which would look like a foreign database: tables, no schema_version).
  bool schema_is_current_now(OpenMode mode) {
    exec("BEGIN");
    try {
      const bool current = schema_is_current(mode);
      exec("COMMIT");
      return current;
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  // WAL mode (outside a transaction; it persists in the file). Writers that create a history together race
  // to switch it: the loser is told the database is locked at once, without the busy timeout, so it retries.
  void set_wal_mode() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(4 * kBusyTimeoutMs);
    for (;;) {
      const int rc = sqlite3_exec(db_, "PRAGMA journal_mode = WAL", nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) return;
      const int primary = rc & 0xff;
      if ((primary != SQLITE_BUSY && primary != SQLITE_LOCKED) || std::chrono::steady_clock::now() > deadline)
        throw HistoryError(where(), fmt::format("cannot switch the history to WAL mode: {}", sqlite3_errmsg(db_)));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  // True when nothing needs doing; throws for what must not be touched; false when migrations are due.
  bool schema_is_current(OpenMode mode) {
    const auto version = read_schema_version();
    if (version && *version > kSchemaVersion) throw HistoryError(where(), newer_schema_message(*version));
    if (!version && table_count() > 0)
      throw HistoryError(where(), "not a perfgate history: a SQLite database without a schema_version table");
    if (!version && mode == OpenMode::existing_only)
      throw HistoryError(where(), "empty database: no session has been recorded here");
    return version && *version == kSchemaVersion;
  }

  struct StoredSeries {
    std::int64_t id;
    std::string suite;
  };
  // "benchmark\nmetric" -> the class's stored series.
  std::unordered_map<std::string, StoredSeries> stored_series(const std::string& machine_class) {
    std::unordered_map<std::string, StoredSeries> out;
    Statement q(db_, where(), "SELECT id, benchmark, metric, suite FROM series WHERE machine_class = ?");
    q.bind(1, machine_class);
    while (q.step()) out.emplace(q.text(1) + '\n' + q.text(2), StoredSeries{q.integer(0), q.text(3)});
    return out;
  }

  std::unordered_map<std::string, std::int64_t> ensure_series(const SessionRecord& s);
  std::int64_t insert_session(const SessionRecord& s);
  void insert_samples(std::int64_t session_id, const SessionRecord& s,
                      const std::unordered_map<std::string, std::int64_t>& ids);

  sqlite3* db_ = nullptr;
};

// Every series of the session gets an id: existing ones are looked up (and take the suite this session
// names), new ones inserted.
std::unordered_map<std::string, std::int64_t> SqliteStore::ensure_series(const SessionRecord& s) {
  std::unordered_map<std::string, std::int64_t> ids;
  const auto stored = stored_series(s.info.machine_class);
  for (const auto& [key, series] : stored) ids.emplace(key, series.id);
  Statement add(db_, where(),
                "INSERT INTO series (machine_class, benchmark, metric, kind, suite) VALUES (?, ?, ?, ?, ?)");
  Statement rename(db_, where(), "UPDATE series SET suite = ? WHERE id = ?");
  for (const auto& series : s.series) {
    const std::string key = series.benchmark + '\n' + series.metric;
    if (const auto it = stored.find(key); it != stored.end()) {
      if (!series.suite.empty() && it->second.suite != series.suite) {
        rename.bind(1, series.suite).bind(2, it->second.id);
        rename.run();
      }
      continue;
    }
    add.bind(1, s.info.machine_class)
        .bind(2, series.benchmark)
        .bind(3, series.metric)
        .bind(4, std::string(metric_kind_name(series.kind)))
        .bind(5, series.suite);
    add.run();
    ids.emplace(key, sqlite3_last_insert_rowid(db_));
  }
  return ids;
}

std::int64_t SqliteStore::insert_session(const SessionRecord& s) {
  Statement add(db_, where(),
                "INSERT INTO sessions (machine_class, host, commit_sha, branch, recorded_at, recorded_unix, "
                "perfgate_version, process_runs, series_count, shard_index, shard_count, exit_code, report) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  add.bind(1, s.info.machine_class)
      .bind(2, s.info.host)
      .bind(3, s.info.commit)
      .bind(4, s.info.branch)
      .bind(5, s.info.time)
      .bind(6, iso8601_to_unix(s.info.time))
      .bind(7, s.info.perfgate_version)
      .bind(8, static_cast<std::int64_t>(s.process_runs.size()))
      .bind(9, static_cast<std::int64_t>(s.series.size()))
      .bind(10, std::int64_t{s.info.shard_index})
      .bind(11, std::int64_t{s.info.shard_count})
      .bind(12, std::int64_t{s.info.exit_code})
      .bind(13, s.report);
  add.run();
  const std::int64_t session_id = sqlite3_last_insert_rowid(db_);
  Statement add_cost(db_, where(), "INSERT INTO benchmark_costs (session_id, benchmark, seconds) VALUES (?, ?, ?)");
  for (const auto& [benchmark, seconds] : s.costs) {
    add_cost.bind(1, session_id).bind(2, benchmark).bind(3, seconds);
    add_cost.run();
  }
  Statement add_run(db_, where(),
                    "INSERT INTO process_runs (session_id, process_run, source_file, context) VALUES (?, ?, ?, ?)");
  for (std::size_t r = 0; r < s.process_runs.size(); ++r) {
    add_run.bind(1, session_id)
        .bind(2, static_cast<std::int64_t>(r))
        .bind(3, s.process_runs[r].source_file)
        .bind(4, context_to_json(s.process_runs[r]));
    add_run.run();
  }
  return session_id;
}

void SqliteStore::insert_samples(std::int64_t session_id, const SessionRecord& s,
                                 const std::unordered_map<std::string, std::int64_t>& ids) {
  Statement add_median(
      db_, where(),
      "INSERT INTO session_medians (series_id, session_id, median, samples, low, high) VALUES (?, ?, ?, ?, ?, ?)");
  Statement add_sample(
      db_, where(),
      "INSERT INTO samples (session_id, series_id, process_run, repetition, value) VALUES (?, ?, ?, ?, ?)");
  for (const auto& series : s.series) {
    const std::int64_t series_id = ids.at(series.benchmark + '\n' + series.metric);
    const auto [low, high] = run_level_range(series);
    add_median.bind(1, series_id)
        .bind(2, session_id)
        .bind(3, series.median)
        .bind(4, static_cast<std::int64_t>(series.values.size()))
        .bind(5, low)
        .bind(6, high);
    add_median.run();
    std::unordered_map<int, std::int64_t> repetition;  // next repetition index per process run
    for (std::size_t i = 0; i < series.values.size(); ++i) {
      add_sample.bind(1, session_id)
          .bind(2, series_id)
          .bind(3, static_cast<std::int64_t>(series.process_run[i]))
          .bind(4, repetition[series.process_run[i]]++)
          .bind(5, series.values[i]);
      add_sample.run();
    }
  }
}

std::int64_t SqliteStore::record(const SessionRecord& s) {
  begin_immediate();
  try {
    const auto ids = ensure_series(s);
    const std::int64_t session_id = insert_session(s);
    insert_samples(session_id, s, ids);
    exec("COMMIT");
    return session_id;
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

constexpr const char* kSessionColumns =
    "id, machine_class, host, commit_sha, branch, recorded_at, perfgate_version, process_runs, series_count, "
    "shard_index, shard_count, exit_code";

SessionSummary read_session_row(const Statement& q) {
  SessionSummary s;
  s.id = q.integer(0);
  s.info.machine_class = q.text(1);
  s.info.host = q.text(2);
  s.info.commit = q.text(3);
  s.info.branch = q.text(4);
  s.info.time = q.text(5);
  s.info.perfgate_version = q.text(6);
  s.process_runs = static_cast<int>(q.integer(7));
  s.series = static_cast<int>(q.integer(8));
  s.info.shard_index = static_cast<int>(q.integer(9));
  s.info.shard_count = static_cast<int>(q.integer(10));
  s.info.exit_code = static_cast<int>(q.integer(11));
  return s;
}

std::vector<SessionSummary> SqliteStore::list_sessions(const SessionFilter& filter) {
  // Newest first with the limit, then reversed: the most recent `limit` sessions, oldest first.
  const std::string sql = fmt::format(
      "SELECT {} FROM sessions WHERE (?1 = '' OR machine_class = ?1) AND (?2 = '' OR commit_sha = ?2) "
      "ORDER BY recorded_unix DESC, id DESC LIMIT ?3",
      kSessionColumns);
  Statement q(db_, where(), sql.c_str());
  q.bind(1, filter.machine_class)
      .bind(2, filter.commit)
      .bind(3, filter.limit ? static_cast<std::int64_t>(filter.limit) : std::int64_t{-1});
  std::vector<SessionSummary> out;
  while (q.step()) out.push_back(read_session_row(q));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> SqliteStore::machine_classes() {
  Statement q(db_, where(), "SELECT DISTINCT machine_class FROM sessions ORDER BY 1");
  std::vector<std::string> out;
  while (q.step()) out.push_back(q.text(0));
  return out;
}

ClassHistory SqliteStore::class_history(const std::string& machine_class, std::size_t last_sessions) {
  // One read transaction: the sessions and their medians are one consistent snapshot.
  exec("BEGIN");
  try {
    ClassHistoryBuilder builder(machine_class, list_sessions({machine_class, "", last_sessions}));
    {
      Statement q(db_, where(),
                  "SELECT id, benchmark, metric, kind, suite FROM series WHERE machine_class = ? "
                  "ORDER BY benchmark, metric");
      q.bind(1, machine_class);
      while (q.step())
        builder.add_series(q.integer(0), {machine_class, q.text(1), q.text(2), metric_kind_from_name(q.text(3))},
                           q.text(4));
    }
    // session_medians is keyed (session, series): each session's medians are one contiguous range.
    Statement q(db_, where(),
                "SELECT m.series_id, m.session_id, m.median, m.samples, m.low, m.high FROM session_medians m "
                "WHERE m.session_id IN (SELECT id FROM sessions WHERE machine_class = ?1 "
                "ORDER BY recorded_unix DESC, id DESC LIMIT ?2)");
    q.bind(1, machine_class).bind(2, last_sessions ? static_cast<std::int64_t>(last_sessions) : std::int64_t{-1});
    while (q.step())
      builder.add_point(q.integer(0), q.integer(1), q.real(2), static_cast<int>(q.integer(3)), q.real(4), q.real(5));
    exec("COMMIT");
    return builder.finish();
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

Series SqliteStore::series(const SeriesKey& key, std::size_t last_sessions) {
  exec("BEGIN");
  try {
    Series out;
    out.key = key;
    std::int64_t series_id = 0;
    {
      Statement q(db_, where(),
                  "SELECT id, kind, suite FROM series WHERE machine_class = ? AND benchmark = ? AND metric = ?");
      q.bind(1, key.machine_class).bind(2, key.benchmark).bind(3, key.metric);
      if (q.step()) {
        series_id = q.integer(0);
        out.key.kind = metric_kind_from_name(q.text(1));
        out.suite = stored_or_named_suite(q.text(2), key.benchmark);
      }
    }
    if (series_id) {
      // Newest first (for the limit), one primary-key lookup per session; reversed below.
      Statement q(db_, where(),
                  "SELECT m.session_id, m.median, m.samples, m.low, m.high FROM sessions s "
                  "JOIN session_medians m ON m.session_id = s.id AND m.series_id = ?2 "
                  "WHERE s.machine_class = ?1 ORDER BY s.recorded_unix DESC, s.id DESC LIMIT ?3");
      q.bind(1, key.machine_class)
          .bind(2, series_id)
          .bind(3, last_sessions ? static_cast<std::int64_t>(last_sessions) : std::int64_t{-1});
      while (q.step())
        out.points.push_back({q.integer(0), q.real(1), static_cast<int>(q.integer(2)), q.real(3), q.real(4)});
      std::reverse(out.points.begin(), out.points.end());
    }
    exec("COMMIT");
    return out;
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::optional<StoredSession> SqliteStore::load_session(std::int64_t id) {
  exec("BEGIN");
  try {
    StoredSession out;
    {
      const std::string sql = fmt::format("SELECT {} FROM sessions WHERE id = ?", kSessionColumns);
      Statement q(db_, where(), sql.c_str());
      q.bind(1, id);
      if (!q.step()) {
        exec("COMMIT");
        return std::nullopt;
      }
      out.summary = read_session_row(q);
    }
    {
      Statement q(db_, where(),
                  "SELECT source_file, context FROM process_runs WHERE session_id = ? ORDER BY process_run");
      q.bind(1, id);
      while (q.step()) out.process_runs.push_back(context_from_json(q.text(0), q.text(1)));
    }
    {
      Statement q(db_, where(),
                  "SELECT r.benchmark, r.metric, r.kind, m.median, s.process_run, s.value, r.suite "
                  "FROM samples s JOIN series r ON r.id = s.series_id "
                  "JOIN session_medians m ON m.series_id = s.series_id AND m.session_id = s.session_id "
                  "WHERE s.session_id = ? ORDER BY r.benchmark, r.metric, s.process_run, s.repetition");
      q.bind(1, id);
      while (q.step()) {
        if (out.series.empty() || out.series.back().benchmark != q.text(0) || out.series.back().metric != q.text(1)) {
          SeriesSamples s;
          s.benchmark = q.text(0);
          s.metric = q.text(1);
          s.kind = metric_kind_from_name(q.text(2));
          s.median = q.real(3);
          s.suite = stored_or_named_suite(q.text(6), s.benchmark);
          out.series.push_back(std::move(s));
        }
        out.series.back().process_run.push_back(static_cast<int>(q.integer(4)));
        out.series.back().values.push_back(q.real(5));
      }
    }
    exec("COMMIT");
    return out;
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::string SqliteStore::session_report(std::int64_t id) {
  Statement q(db_, where(), "SELECT report FROM sessions WHERE id = ?");
  q.bind(1, id);
  return q.step() ? q.text(0) : std::string();
}

std::map<std::string, double> SqliteStore::benchmark_costs(const std::string& machine_class, double until_unix) {
  // Oldest first: a later session's cost of a benchmark replaces an earlier one.
  Statement q(db_, where(),
              "SELECT c.benchmark, c.seconds FROM benchmark_costs c JOIN sessions s ON s.id = c.session_id "
              "WHERE (?1 = '' OR s.machine_class = ?1) AND s.recorded_unix <= ?2 ORDER BY s.recorded_unix, s.id");
  q.bind(1, machine_class).bind(2, std::min(until_unix, 1e300));
  std::map<std::string, double> costs;
  while (q.step()) costs[q.text(0)] = q.real(1);
  return costs;
}

}  // namespace

std::unique_ptr<Store> open_sqlite_store(const HistoryUrl& url, OpenMode mode) {
  return std::make_unique<SqliteStore>(url, mode);
}

}  // namespace perfgate::history::detail
