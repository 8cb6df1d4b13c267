#pragma once
// A fleet of runners (docs/history.md, "Sharding"): one suite split into N shards that run on N machines,
// balanced by the benchmarks' measured cost from the history, each recording into one shared history
// (PostgreSQL), then merged into one report and one exit code.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "perfgate/history.hpp"

namespace perfgate::history {

struct ShardSpec {
  int index = 0;  // 1..count
  int count = 0;
};

// "2/3" -> {2, 3}. Throws InputError (field `what`) unless 1 <= index <= count.
ShardSpec parse_shard(const std::string& text, const std::string& what = "--shard");

struct ShardPlan {
  std::vector<std::vector<std::string>> shards;  // benchmark names per shard (shard i at [i-1]), sorted
  std::vector<double> seconds;                   // each shard's summed cost (1 per benchmark without costs)
  std::size_t costed = 0;                        // benchmarks whose cost came from the history
  bool balanced_by_cost = false;                 // false: no cost known, split by name
};

// Assigns every benchmark to one shard. With costs (keyed by normalised name; the names themselves may be
// raw), longest processing time first: the costliest benchmark goes to the shard with the least cost so
// far (ties: by name, then the lowest shard). A benchmark without a cost gets the median known cost. With
// no cost at all every benchmark costs 1 and the names, sorted, are dealt round robin. Deterministic:
// every shard computes the same plan. Throws InputError when a shard would be empty.
ShardPlan plan_shards(std::vector<std::string> benchmarks, const std::map<std::string, double>& costs, int count);

// "^(a|b|c)$" with the names regex-escaped: Google Benchmark's --benchmark_filter for exactly these names.
std::string exact_filter(const std::vector<std::string>& names);

// ---- merging the shards of a commit ----------------------------------------------------------------

// bugprone-exception-escape flags this struct falsely: its implicit default constructor is noexcept and
// default-constructs nlohmann::json (null), whose json_value(value_t) throws only in the `discarded` branch
// that a null value never takes (any struct with a plain json member is flagged the same way).
// NOLINTNEXTLINE(bugprone-exception-escape)
struct ShardOutcome {
  int index = 0;
  std::optional<SessionSummary> session;  // the most recent session of this shard for the commit
  nlohmann::json report;                  // its perfgate.report/1 (null when none)
  std::string problem;                    // why this shard cannot count ("" when it can)
};

struct MergeResult {
  std::string commit;
  int shard_count = 0;
  std::vector<ShardOutcome> shards;
  nlohmann::json benchmarks = nlohmann::json::array();  // every shard's report entries, each with "shard"
  std::map<std::string, int> counts;                    // verdict -> benchmarks
  std::vector<std::string> problems;                    // missing or crashed shards, duplicates
  int exit_code = 0;
};

// Collects the shards 1..count of `commit` (of `machine_class` when given) from the history. Exit code:
// 3 when a shard is missing (no session recorded: it never ran, or crashed before recording), exited 3 (a
// bench crashed or failed) or has no report; else 2 when a shard had bad input; else 1 when any shard
// found a regression; else 77 when every shard had nothing to judge; else 0.
MergeResult merge_shards(Store& store, const std::string& commit, int count, const std::string& machine_class = "");

// The exit code a shard reported: as recorded, else its report's.
int shard_exit_code(const ShardOutcome& shard);

// The merged report, rendered with the other reports (report/fleet_report.cpp).
std::string merge_markdown(const MergeResult& merged, const std::string& history);
std::string merge_junit(const MergeResult& merged);
nlohmann::json merge_json(const MergeResult& merged);

}  // namespace perfgate::history
