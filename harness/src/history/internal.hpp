#pragma once
// Shared between the backends of the history store; not a public header.
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "perfgate/history.hpp"

namespace perfgate::history::detail {

std::unique_ptr<Store> open_sqlite_store(const HistoryUrl& url, OpenMode mode);
std::unique_ptr<Store> open_postgres_store(const HistoryUrl& url, OpenMode mode);

// Process-run contexts <-> the JSON text stored in the process_runs table.
std::string context_to_json(const ProcessRunContext& context);
ProcessRunContext context_from_json(const std::string& source_file, const std::string& json_text);

// "latency" <-> MetricKind (the series table stores the name).
MetricKind metric_kind_from_name(const std::string& name);

// Assembles a ClassHistory from rows in any order: the backends stream (series, session, median) rows
// into it and it puts each series' points in the sessions' time order.
class ClassHistoryBuilder {
 public:
  ClassHistoryBuilder(std::string machine_class, std::vector<SessionSummary> sessions_in_time_order);
  // The suite as stored: stored_or_named_suite makes it.
  void add_series(std::int64_t series_id, SeriesKey key, std::string suite);
  // Rows of unknown series or of sessions outside the window are ignored.
  void add_point(std::int64_t series_id, std::int64_t session_id, double median, int samples, double low, double high);
  ClassHistory finish();

 private:
  ClassHistory history_;
  std::unordered_map<std::int64_t, std::size_t> position_;      // session id -> time order
  std::unordered_map<std::int64_t, std::size_t> series_index_;  // series id -> index in history_.series
  std::vector<std::vector<std::pair<std::size_t, SeriesPoint>>> points_;
};

// The words in which the two backends' SQL schemas differ.
struct SqlDialect {
  const char* serial_id;      // an auto-incremented primary key
  const char* id_type;        // a column holding such a key
  const char* without_rowid;  // after a table with its own primary key (SQLite: " WITHOUT ROWID")
};

// migrations[v] takes a database from schema version v to v + 1 (v = 0: an empty database), in the dialect's words.
std::vector<std::string> schema_migrations(const SqlDialect& dialect);

// A series' stored suite, or for one recorded before schema 3 (stored '') suite_of_benchmark of its name.
std::string stored_or_named_suite(const std::string& stored, const std::string& benchmark);

// Collapses a (possibly multi-line) library message to one line.
std::string one_line(std::string text);

// The message for a database whose schema_version is higher than this build's.
std::string newer_schema_message(int found);

}  // namespace perfgate::history::detail
