#pragma once
// Which evidence gates each suite of `perfgate run` (docs/running.md, "Which gate a run uses"):
//
//   1. a stored baseline of this machine class and CPU generation  -> gate_run against it
//   2. otherwise a reference revision, built here                    -> interleaved A/B against it
//   3. otherwise nothing: the suite is measured and reported, not judged
//
// The decision is taken before measuring, from the context each bench binary prints when asked
// (--perfgate_context_only), so no suite is measured twice. A suite whose binary cannot be asked (built
// without perfgate's bench main) is gated by the stored baseline of the class its runs name: this host's CPU,
// which the runner records in runs that carry no host facts of their own; where that baseline does not exist,
// by a reference the user asked for, else not at all (its benchmarks are new).
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "perfgate/bench_binary.hpp"
#include "perfgate/model.hpp"

namespace perfgate {

enum class GateMode {
  stored_baseline,   // a stored baseline fits (or the binary could not be asked: gated as before)
  reference,         // no stored baseline fits: measure against a reference build
  hardware_missing,  // the suite needs hardware this machine lacks: measured, its skips reported
};
const char* to_string(GateMode mode);

struct SuitePlan {
  BenchBinary bench;
  GateMode mode = GateMode::stored_baseline;
  std::string machine_class;  // from the binary's context; empty when it could not be asked
  std::string cpu_signature;  // "AuthenticAMD family 25 model 1"; empty when unknown
  std::string baseline_file;  // baselines/<class>/<suite>.json (whether or not it exists)
  std::string reason;         // one line: why this mode
};

// The context a bench binary reports before measuring (`<binary> --perfgate_context_only`), run on the
// CPUs the measurement will use (the core count is part of the machine class). nullopt when the binary
// does not know the flag or fails; `why` then says what happened.
std::optional<RunContext> probe_context(const BenchBinary& bench,
                                        const std::vector<std::pair<std::string, std::string>>& env,
                                        const std::vector<int>& cpus, double timeout_seconds,
                                        std::string* why = nullptr);

// The GPUs a suite needs, from <build>/suites/<suite>.gpus beside its binary's bin/ folder (written by
// perfgate_add_suite); 0 when the file is absent.
int gpus_needed(const BenchBinary& bench);

// The plan of a suite whose binary could not be asked (`probe_failure` says why): the stored-baseline gate, by the
// class its runs will name. `host`: the host facts the runner gives runs that record none (runner.hpp,
// host_context), which name that class and CPU generation now; nullopt: the class is known only once measured.
// `reference_asked_by`: the flag or variable that asked for a reference ("--against origin/main"; empty: none), which
// gates the suite instead where the class's baseline file does not exist.
SuitePlan plan_unasked_suite(const BenchBinary& bench, const std::optional<RunContext>& host,
                             const std::filesystem::path& baseline_dir, const std::string& probe_failure,
                             const std::string& reference_asked_by = "");

// Decides one suite's mode from its probed context (nullopt: could not be asked). Reads the baseline file
// to compare CPU generations. Throws InputError for an unreadable baseline.
SuitePlan plan_suite(const BenchBinary& bench, const std::optional<RunContext>& context,
                     const std::filesystem::path& baseline_dir, const std::string& probe_failure = "");

}  // namespace perfgate
