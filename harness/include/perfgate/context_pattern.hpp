#pragma once
// Benchmark-name patterns that a suite writes into its run context to mark some of its benchmarks
// (perfgate.compute_bound: cycle_space.hpp; perfgate.host_dependent: host_dependent.hpp; perfgate.floor_bound:
// run_level.hpp): an ECMAScript regex matched against the whole normalised name.
#include <optional>
#include <regex>
#include <string>

#include "perfgate/context_keys.hpp"
#include "perfgate/model.hpp"

namespace perfgate {

// The marks' keys live here, beside their type: compare() reads the host-dependent one to keep those benchmarks out
// of a suite's common mode, and host_dependent.hpp (which includes compare.hpp) everything else about them.
inline constexpr const char* kHostDependentKey = context_keys::kHostDependent;
// Benchmarks whose process runs are levelled by their fastest repetition (run_level.hpp).
inline constexpr const char* kFloorBoundKey = context_keys::kFloorBound;

struct ContextPattern {
  std::string pattern;  // as the suite wrote it
  std::regex regex;
};

// Whether `pattern` (a mark that may be absent) names the benchmark `name`.
bool names(const std::optional<ContextPattern>& pattern, const std::string& name);

// The first `key` of the current side's contexts, else of the baseline's; nullopt when neither side names
// one. Throws InputError (file = the context's source file, field = context.<key>) when it is no valid regex.
std::optional<ContextPattern> context_pattern(const ResultSet& baseline, const ResultSet& current,
                                              const std::string& key);

}  // namespace perfgate
