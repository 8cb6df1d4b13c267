#pragma once
// The GPU timeline behind a benchmark (docs/profiling.md, "The timeline"): what a per-kernel profile cannot
// see. A bench process run with PERFGATE_TIMELINE=<file> records every kernel, memcpy and memset (start, end,
// stream, the API call that launched it) and the fixture's NVTX ranges; this reads that file, cuts it into
// repetitions of the fixture's work, measures each (busy time, idle gaps, concurrency, copy/compute overlap,
// launches, the critical path) and diffs two sides. Pure: no CUDA here.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace perfgate::timeline {

// ---- the recording -----------------------------------------------------------------------------------

enum class Kind { kernel, memcpy, memset };

struct Activity {
  Kind kind = Kind::kernel;
  std::string name;  // the kernel's (demangled) name; "memcpy HtoD", "memset", ...
  std::uint32_t stream = 0;
  std::uint64_t start_ns = 0, end_ns = 0;
  std::uint32_t correlation = 0;  // the API call that launched it (a graph launch: all its nodes share one)
  std::uint64_t bytes = 0;        // copies and sets
  double duration() const { return static_cast<double>(end_ns - start_ns); }
  bool is_copy() const { return kind != Kind::kernel; }
};

struct ApiCall {
  std::string name;  // "cudaLaunchKernel", "cudaStreamSynchronize", ...
  std::uint64_t start_ns = 0, end_ns = 0;
  std::uint32_t correlation = 0;
};

struct Range {
  std::string name;
  std::uint64_t start_ns = 0, end_ns = 0;
  int depth = 0;  // 0: not inside another range
};

struct Recording {
  std::vector<Activity> activities;
  std::vector<ApiCall> api_calls;
  std::vector<Range> ranges;
  std::string unavailable;    // why nothing was recorded (no CUPTI, permission denied); empty when recorded
  std::uint64_t dropped = 0;  // records CUPTI could not keep
};

// Reads the recorder's JSON (benches/support, timeline_recorder.cpp). Throws std::invalid_argument naming
// `source` and the field that is missing or of the wrong type.
Recording parse_recording(std::string_view json, const std::string& source);

// ---- one repetition ------------------------------------------------------------------------------------

enum class GapCause { sync, launch };

struct Gap {
  double start_ns = 0, length_ns = 0;  // from the repetition's start
  GapCause cause = GapCause::launch;   // sync: a host synchronisation returned inside it
  std::string after;                   // the activity that ended where the gap starts
  std::string after_range;             // its NVTX range
  std::uint32_t stream = 0;            // its stream
  std::string sync_call;               // the synchronising call, for sync gaps
};

struct Step {
  std::vector<const Activity*> activities;    // launched inside the repetition's ranges, by start
  std::vector<std::string> activity_ranges;   // the innermost range of each one's launch
  std::uint64_t start_ns = 0, end_ns = 0;     // first start, last end
  double span_ns = 0;                         // end - start: the repetition's GPU wall time
  double busy_ns = 0;                         // time with any activity running
  double kernel_ns = 0, copy_ns = 0;          // summed durations
  double overlap_ns = 0;                      // summed durations - busy: time that ran concurrently
  double kernel_overlapped_ns = 0;            // kernel time during which other work ran
  double copy_compute_overlap_ns = 0;         // time with a copy and a kernel running at once
  double sync_gap_ns = 0, launch_gap_ns = 0;  // idle time by cause
  std::vector<Gap> gaps;
  int launches = 0;                              // host API calls that put work on the GPU (a graph launch counts once)
  std::map<std::string, double> critical_ns;     // time on the critical path per activity name
  std::map<std::string, double> kernel_time_ns;  // summed duration per kernel name
  std::map<std::string, int> kernel_count;
  double idle_ns() const { return sync_gap_ns + launch_gap_ns; }
};

// "layer_X_ffn" -> a pattern for layer_0_ffn, layer_17_ffn, ...: X and Y stand for numbers.
bool range_matches(const std::string& pattern, const std::string& name);

// The repetitions of a recording: a repetition begins at each top-level instance of the first fixture range
// the process opened (Expert_Forward, ensure_layer_0) and holds the GPU work launched inside the top-level
// fixture ranges up to the next one. `fixture_ranges` are the suite's perfgate.nvtx_ranges (empty: every
// top-level range).
std::vector<Step> split_steps(const Recording& r, const std::vector<std::string>& fixture_ranges);

// ---- a side: the repetitions summarised ----------------------------------------------------------------

struct Summary {
  int steps = 0;  // repetitions kept (the first ones and outliers of 3x the median left out)
  double span_ns = 0, busy_ns = 0, kernel_ns = 0, copy_ns = 0, overlap_ns = 0;  // means per repetition
  double kernel_overlapped_ns = 0, copy_compute_overlap_ns = 0, sync_gap_ns = 0, launch_gap_ns = 0;
  double gaps = 0, largest_gap_ns = 0, launches = 0, kernels = 0;
  std::map<std::string, double> critical_ns, kernel_time_ns, kernel_count;  // means per repetition
  std::optional<Gap> typical_sync_gap;  // the largest sync gap of the median repetition
  std::size_t median_step = 0;          // index (into the split) of the repetition with the median span
  double copy_critical_ns() const;
  double idle_ns() const { return sync_gap_ns + launch_gap_ns; }
};

Summary summarise(const std::vector<Step>& steps);

// ---- two sides ------------------------------------------------------------------------------------

// What changed in the repetition's wall time, term by term: span = kernels + copies - overlap + idle.
struct Terms {
  double span = 0, kernels = 0, copies = 0, lost_overlap = 0, sync_gaps = 0, launch_gaps = 0, copy_critical = 0;
};
Terms change_terms(const Summary& before, const Summary& after);

struct TimelineDiff {
  Terms terms;
  // The timeline's own account of the change, the cause that explains the most of the wall-time change
  // first; each with the nanoseconds per repetition it explains.
  std::vector<std::pair<double, std::string>> causes;
  bool kernels_explain = false;  // the summed kernel change accounts for the wall-time change
  Summary before, after;         // both sides, for the report's table (render_timeline_table)
};

TimelineDiff diff_timelines(const Summary& before, const Summary& after);

// How the diff's causes and the report's table write a time ("1.234 ms") and a share of a whole ("42%", "-").
std::string ms_text(double ns);
std::string share_text(double part, double whole);

// Whether a summed kernel change of `kernels` explains a wall-time change of `wall` (same units): the same
// direction and at least half of it.
bool kernels_account_for(double kernels, double wall);

// ---- the picture ---------------------------------------------------------------------------------------

// One repetition as a small SVG: a lane per stream, kernels coloured by NVTX range, copies outlined, idle
// gaps shaded. Self-contained (no script, no font or file from the network).
std::string render_svg(const Step& step, const std::string& title);

}  // namespace perfgate::timeline
