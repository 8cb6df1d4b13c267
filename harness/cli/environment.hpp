#pragma once
// The CLI's reading of the process environment for the library, which reads none itself
// (docs/architecture.md, "Options"): PERFGATE_MACHINE_CLASS, PERFGATE_GIT_COMMIT, the ctest GPU allotment
// (CTEST_RESOURCE_GROUP_*, CUDA_VISIBLE_DEVICES), PATH, and this host's CPU and GPU count (/proc). Variables that
// belong to one command (PERFGATE_AGAINST, PERFGATE_CCACHE, PERFGATE_HISTORY) are read there, through env_var.
#include <optional>
#include <string>

#include "perfgate/host_identity.hpp"
#include "perfgate/runner.hpp"

namespace perfgate::cli {

// The value of one variable; nullopt when unset. The EnvLookup the library's functions take.
std::optional<std::string> env_var(const std::string& name);

// PATH, for find_executable / find_tool.
std::string search_path();

// PERFGATE_GIT_COMMIT ("": ask git), alone: what a caller needs who does not measure.
std::string given_git_commit();

// What the runner needs (MeasureOptions::environment): also reads this host's CPU and GPU count.
RunEnvironment run_environment();

// A plain Google Benchmark binary's own JSON records no CPU facts. A process run of one written on this host (its
// host name, CPU count and caches) takes this host's, as `perfgate run` gives them, with the `command` that read them
// ("perfgate compare") in its context (perfgate.run.host_facts). Returns how it went; nothing changes unless `added`.
enum class PlainRunFacts { has_its_own, added, written_elsewhere, this_host_unknown };
struct PlainRunFactsResult {
  PlainRunFacts outcome = PlainRunFacts::has_its_own;
  std::optional<HostMismatch> elsewhere;  // with written_elsewhere: which field says so
};
PlainRunFactsResult give_this_hosts_cpu_facts(RunContext& run, const HostIdentity& here, const RunEnvironment& env,
                                              const std::string& command);

// Installs PERFGATE_MACHINE_CLASS as the library's machine-class override (machine_class.hpp); main calls it
// before any command runs.
void install_machine_class_override();

}  // namespace perfgate::cli
