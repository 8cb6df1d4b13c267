#pragma once
// Host-dependent benchmarks: those whose time follows the host rather than the code under test (pageable
// and mapped copies go through the host's memory and CPU, which differ between machines of one class:
// unchanged code measured +25% on d2h/pageable on a fresh machine of the class, docs/transfers.md). A suite
// names them in its context, perfgate.host_dependent = an ECMAScript regex matched against the whole
// normalised name. Against a stored baseline (recorded on another machine of the class) such a benchmark is
// gated only with a threshold of its own; without one it is reported as informational, with the reason, and
// can never fail the run. A machine class can name more in its thresholds.json ("host_dependent"): benchmarks whose
// time follows the host on that class only (one-thread timings on a large shared VM). Interleaved comparisons (perfgate
// ab, a reference build) measure both sides on one host and gate it as usual.
#include <functional>
#include <optional>
#include <string>

#include "perfgate/compare.hpp"
#include "perfgate/context_pattern.hpp"
#include "perfgate/model.hpp"

namespace perfgate {

using HostDependence = ContextPattern;

// The first perfgate.host_dependent of the current side's contexts, else of the baseline's; nullopt when
// neither side names one. Throws InputError (file = the context's source file) when it is no valid regex.
std::optional<HostDependence> host_dependence(const ResultSet& baseline, const ResultSet& current);

// Does thresholds.json give this benchmark a threshold of its own (a "benchmarks" entry that matches it)?
bool has_own_threshold(const CompareOptions& options, const std::string& benchmark_name);

// Whether a host-dependent benchmark stays gated against a baseline from another machine of the class: only with a
// threshold of its own, a reviewer's decision. Noise learned from a handful of hosts is not enough, since hosts spread
// with a long tail (docs/statistics.md, "Host-dependent benchmarks").
bool gated_against_another_host(const CompareOptions& options, const std::string& benchmark_name);

// Makes the host-dependent benchmarks of a comparison against a stored baseline (the suite's context pattern, and
// `class_pattern`, the class's thresholds.json "host_dependent", when given) informational, unless
// has_band(name) says the benchmark has a band of its own (gated_against_another_host): their
// metrics are reported, not gated; a regression or improvement becomes "noisy" with the reason, and the
// counts and exit code are recomputed. Returns how many were made informational (and adds one note).
int make_host_dependent_informational(ComparisonReport& report, const ResultSet& baseline, const ResultSet& current,
                                      const std::function<bool(const std::string&)>& has_band,
                                      const std::optional<ContextPattern>& class_pattern = std::nullopt);

// The pass of a comparison with a baseline from another machine of the class (`perfgate run` against a stored
// baseline, `perfgate compare --across-hosts`): the above, with the class's thresholds.json pattern and
// gated_against_another_host from `options`.
int make_host_dependent_informational(ComparisonReport& report, const ResultSet& baseline, const ResultSet& current,
                                      const CompareOptions& options);

}  // namespace perfgate
