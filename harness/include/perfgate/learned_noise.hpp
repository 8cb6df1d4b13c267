#pragma once
// Learned noise: the between-session noise of each benchmark's gated metrics on one machine class,
// learned from the results history (docs/history.md) and used by the stored-baseline gate in place of
// the class prior (docs/statistics.md, "Learned noise").
//
// A band is the relative SD of a *session median* (the median of a session's process-run medians) of one
// (benchmark, metric), estimated robustly from recent sessions since the series' last change point, with
// as many degrees of freedom as sessions. Comparing two sessions (a stored baseline and today's run) then
// has a log-difference SD of band x sqrt 2.
//
// Two sources, the same table:
//   - a live history (`--history URL`), through history::learned_noise_table (history.hpp);
//   - a reviewed text snapshot, baselines/<class>[/<generation>]/noise.json, written by
//     `perfgate baseline noise` from a history, so that a clone without database access gates the same way.
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace perfgate {

struct LearnedBand {
  double relative_sd = 0;  // between-session SD of log(session median)
  int sessions = 0;        // sessions it was learned from (= its degrees of freedom)
  // The same with the suite's common mode removed from every session first (history::common_mode); absent
  // when the suite had too few benchmarks for a common mode.
  std::optional<double> relative_sd_common_mode;
  int sessions_common_mode = 0;
};

struct LearnedNoiseTable {
  std::string machine_class;  // the history class the bands were learned on (class[.generation])
  std::string source;         // for reports: "history <url>" or the snapshot file
  std::string learned_at;     // ISO-8601 time of the learning (snapshot: when it was written)
  int window = 30;            // most recent sessions considered per series
  int min_sessions = 5;       // a band with fewer sessions is not used: the class prior stays
  int history_sessions = 0;   // sessions of the class in the history at the time
  std::map<std::pair<std::string, std::string>, LearnedBand> bands;  // (benchmark, metric) -> band
  // A class with too few sessions of its own borrows a sibling's bands (the same chip in another memory size, say),
  // widened by what its own sessions showed against them: the sibling's class, the factor, its own sessions.
  std::string borrowed_from;
  std::string borrow_file;  // the sibling's snapshot, as the borrowing file names it (relative to that file)
  double widen = 1.0;
  int own_sessions = 0;

  // The band of one metric when it has at least min_sessions sessions; nullptr otherwise.
  const LearnedBand* usable(const std::string& benchmark, const std::string& metric) const;
  std::size_t usable_count() const;
};

// The snapshot file (baselines/<class>[/<generation>]/noise.json): one series per line so that a review
// diff shows which bands moved.
//   {"perfgate_noise": 1, "machine_class": ..., "source": ..., "learned_at": ..., "window": 30,
//    "min_sessions": 5, "history_sessions": 40,
//    "bands": [{"benchmark": ..., "metric": "time", "relative_sd": 0.0123, "sessions": 14,
//               "relative_sd_common_mode": 0.008, "sessions_common_mode": 14}, ...]}
// Throws InputError naming the file and the field for malformed JSON, unknown keys, wrong types, negative
// or non-finite noise, a newer format version.
//
// A borrowing snapshot holds no bands of its own:
//   {"perfgate_noise": 1, "machine_class": "gpu-h200-x1", "borrow_from": "../gpu-h100-x1/noise.json",
//    "widen": 1.4, "own_sessions": 2, "source": ...}
// load_noise_snapshot then reads the sibling's snapshot (a path relative to the borrowing file; it must not
// borrow itself), multiplies every band by `widen` (>= 1) and keeps this file's machine class.
LearnedNoiseTable parse_noise_snapshot(const std::string& json_text, const std::string& source);
LearnedNoiseTable load_noise_snapshot(const std::string& file);
std::string noise_snapshot_json(const LearnedNoiseTable& table);

// The note for a history that gave no noise for `history_class` (a file not created yet, or no session of that
// class in it); `judged_by` names what judges instead ("the class prior", a noise.json).
std::string empty_history_note(const std::string& history_url, const std::string& history_class,
                               const std::string& judged_by);

inline constexpr int kNoiseSnapshotVersion = 1;
inline constexpr const char* kNoiseSnapshotFile = "noise.json";

}  // namespace perfgate
