#pragma once
// The synthetic suite's workload: a calibrated amount of CPU work counted in "units", with an
// injectable slowdown, so the gate itself can be tested with a change of known size.
//
//   chain   one unit = one step of a 64-bit LCG, x = x * A + C (a dependent multiply-add chain:
//           latency bound, ~1 ns per unit, no memory traffic)
//   walk    one unit = one step of a pointer chase through a random single-cycle permutation
//           (latency bound on the cache level the working set fits in)
//
// Slowdown: with slowdown s, a benchmark of N units executes exactly llround(N * (1 + s)) units,
// so "+10%" means 10% more work, not "about 10% more time". Configuration (flags win over env):
//   PERFGATE_SYNTHETIC_SLOWDOWN=0.10          --slowdown=0.10          fraction of extra work (> -1)
//   PERFGATE_SYNTHETIC_SLOWDOWN_FILTER=REGEX  --slowdown_filter=REGEX  only benchmarks whose name matches
//   PERFGATE_SYNTHETIC_SLOWDOWN_PHASE=A|B     --slowdown_phase=A|B     only that phase of the phased benches
// Failure injection, to test how the harness reports broken benches (regex on the benchmark name):
//   PERFGATE_SYNTHETIC_FAIL=REGEX   the correctness check sees a wrong value and the benchmark fails
//   PERFGATE_SYNTHETIC_CRASH=REGEX  the process aborts (SIGABRT) when that benchmark starts
//   PERFGATE_SYNTHETIC_HANG=REGEX   the benchmark sleeps forever (for --timeout tests)
#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace perfgate::synthetic {

struct Config {
  double slowdown = 0.0;
  std::string slowdown_filter;  // empty: every benchmark
  std::string slowdown_phase;   // empty: every phase (and every unphased benchmark)
  std::string fail_filter;
  std::string crash_filter;
  std::string hang_filter;

  // Reads PERFGATE_SYNTHETIC_* from the environment. Throws std::invalid_argument on a bad value.
  static Config from_env();
  // Removes --slowdown*, applies them over `this`; the remaining arguments are left in `args`.
  // Throws std::invalid_argument on a bad value.
  void apply_flags(std::vector<std::string>& args);
  void validate() const;
};

// Does `name` match `regex` (search semantics)? An empty regex matches nothing.
bool name_matches(const std::string& regex, const std::string& name);

// Units a benchmark (or one phase of it, phase == "" for unphased benchmarks) really executes.
std::uint64_t planned_units(const Config& config, const std::string& benchmark_name, std::uint64_t base_units,
                            const std::string& phase = "");

// ---- chain -----------------------------------------------------------------------------------
inline constexpr std::uint64_t kChainMul = 6364136223846793005ULL;  // Knuth's MMIX LCG
inline constexpr std::uint64_t kChainAdd = 1442695040888963407ULL;
inline constexpr std::uint64_t kChainSeed = 0x9E3779B97F4A7C15ULL;

// Runs `units` dependent steps from `seed`; the state after n steps identifies n.
std::uint64_t run_chain(std::uint64_t units, std::uint64_t seed = kChainSeed);
// Same value in O(log units) by LCG jump-ahead: the independent reference for the correctness check.
std::uint64_t chain_reference(std::uint64_t units, std::uint64_t seed = kChainSeed);

// ---- walk ------------------------------------------------------------------------------------
class Walk {
 public:
  // A random single cycle through `slots` slots (seeded, deterministic).
  explicit Walk(std::uint32_t slots, std::uint64_t seed = 42);
  // Follows `units` links from the cycle's start; returns the slot reached.
  std::uint32_t run(std::uint64_t units) const;
  // The slot after `units` links, from the cycle order: the reference.
  std::uint32_t reference(std::uint64_t units) const;
  std::size_t bytes() const { return next_.size() * sizeof(std::uint32_t); }

 private:
  std::vector<std::uint32_t> next_;
  std::vector<std::uint32_t> order_;
};

}  // namespace perfgate::synthetic
