#pragma once
// The computed result of a record-only run (`perfgate run --record-only`, `--update-baseline`): per side and
// suite, each benchmark's samples, process runs, median and spreads, and the process failures. The session
// computes it (summarise_record, session.hpp); the reporters print it (render_record_markdown /
// render_record_json, report.hpp).
#include <cstdint>
#include <string>
#include <vector>

namespace perfgate {

struct RecordedBenchmark {
  std::string name;
  std::size_t samples = 0;
  int runs = 0;
  double median = 0;          // NaN when there are no samples
  double within_cv = 0;       // max robust CV inside one process run
  double between_spread = 0;  // (max - min) / median of per-run medians
  std::string status;         // "ok", "failed: ...", "skipped: ..."
};

struct RecordedSuite {
  std::string name;
  bool has_context = false;  // some process run produced results
  std::string commit;        // perfgate.git_commit of its first run ("unknown")
  std::string build_type;    // perfgate.build_type of its first run ("unknown")
  int process_runs = 0;
  std::vector<RecordedBenchmark> benchmarks;
};

struct RecordedFailure {
  std::string suite, side, binary;
  int round = 0;
  std::string what, message;
  std::vector<std::string> benchmarks;
};

struct RecordedSide {
  std::string label;
  int processes = 0;
  long repetitions = 0;
  double process_seconds = 0;
  std::vector<std::string> raw_files;
  std::vector<RecordedFailure> failures;
  std::vector<RecordedSuite> suites;  // by suite name
};

struct RecordReport {
  double wall_seconds = 0;
  std::uint64_t seed = 0;
  std::vector<std::string> notes;
  std::vector<RecordedSide> sides;
};

}  // namespace perfgate
