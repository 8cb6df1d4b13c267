#pragma once
// Shared between the backends of the history store; not a public header.
#include <memory>
#include <string>

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

// Collapses a (possibly multi-line) library message to one line.
std::string one_line(std::string text);

// The message for a database whose schema_version is higher than this build's.
std::string newer_schema_message(int found);

}  // namespace perfgate::history::detail
