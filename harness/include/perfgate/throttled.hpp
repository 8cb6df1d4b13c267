#pragma once
// Repetitions measured while the GPU misbehaved (docs/statistics.md, "Throttled repetitions"). The GPU benches
// write per-repetition NVML counters (docs/writing-a-bench.md, "Counters"). A repetition is discarded from every
// metric of its benchmark, on its side only, when
//   - thermal_share > 0: some NVML sample during it carried a thermal or hardware-slowdown clock-event reason
//     (sw/hw thermal, hw slowdown). The power cap alone is not a reason: it is the steady state of compute-bound
//     kernels, and cycle space (cycle_space.hpp) handles the clock it costs;
//   - or its mean SM clock over NVML samples (sm_clock_mhz, where nvml_samples > 0) is below min_clock_share of
//     the highest such clock among the benchmark's clean repetitions on the same side. nvbench discards a
//     measurement below 75% of the device's default clock; here the reference is the benchmark's own fastest
//     repetition (a benchmark the power cap holds at a steady 1500 MHz keeps every repetition), and the share is
//     70% because power-capped repetitions that were not slower reach down to 76% of the fastest one
//     (docs/statistics.md, "Throttled repetitions").
// The discard never leaves a benchmark with fewer than min_samples repetitions, nor empties a process run (run
// medians and the pairing of perfgate ab's rounds are per process run): then every repetition is kept and the
// benchmark is flagged. Results without these counters come back untouched.
#include <optional>
#include <string>
#include <vector>

#include "perfgate/gpu_counters.hpp"
#include "perfgate/model.hpp"

namespace perfgate {

struct ThrottleRule {
  double min_clock_share = 0.70;  // of the benchmark's highest repetition clock on its side
  int min_samples = 4;            // repetitions a benchmark keeps at least (RuleOptions::min_samples)
};

// What the rule found on one side.
struct ThrottledSide {
  int thermal_repetitions = 0;              // discarded: thermal or hardware slowdown
  int low_clock_repetitions = 0;            // discarded: clock below the share (and not thermal)
  std::vector<std::string> discarded_from;  // benchmarks that lost repetitions
  std::vector<std::string> kept_flagged;    // benchmarks whose throttled repetitions had to be kept
  int kept_repetitions = 0;                 // throttled repetitions kept in those

  int discarded_repetitions() const { return thermal_repetitions + low_clock_repetitions; }
  bool empty() const { return discarded_from.empty() && kept_flagged.empty(); }
};

// The side without its throttled repetitions, with `summary` filled; nullopt when the rule changes nothing (the
// caller keeps using its own ResultSet, so results without the counters are never copied). A flagged-only side
// (kept_flagged) is also nullopt: its samples are unchanged.
std::optional<ResultSet> discard_throttled(const ResultSet& side, const ThrottleRule& rule, ThrottledSide& summary);

// compare()'s first step: both sides with the rule applied (nullopt rule: off), the summaries written to
// baseline_summary / current_summary and a note per side appended to `notes`, each named by its label.
class UnthrottledSides {
 public:
  UnthrottledSides(const ResultSet& baseline, const ResultSet& current, const std::optional<ThrottleRule>& rule,
                   ThrottledSide& baseline_summary, ThrottledSide& current_summary, std::vector<std::string>& notes,
                   const std::string& baseline_label = "baseline", const std::string& current_label = "current");
  const ResultSet& baseline() const { return baseline_ ? *baseline_ : loaded_baseline_; }
  const ResultSet& current() const { return current_ ? *current_ : loaded_current_; }

 private:
  const ResultSet& loaded_baseline_;
  const ResultSet& loaded_current_;
  std::optional<ResultSet> baseline_, current_;  // nullopt: the rule changed nothing there
};

// The report's notes for one side ("baseline" / "current", "before" / "after"): none when the summary is empty.
std::vector<std::string> throttled_notes(const std::string& side_label, const ThrottledSide& summary,
                                         const ThrottleRule& rule);

}  // namespace perfgate
