#pragma once
// The CLI's reading of the process environment for the library, which reads none itself
// (docs/architecture.md, "Options"): PERFGATE_MACHINE_CLASS, PERFGATE_GIT_COMMIT, the ctest GPU allotment
// (CTEST_RESOURCE_GROUP_*, CUDA_VISIBLE_DEVICES), PATH, and this host's CPU and GPU count (/proc). Variables that
// belong to one command (PERFGATE_AGAINST, PERFGATE_CCACHE, PERFGATE_HISTORY) are read there, through env_var.
#include <optional>
#include <string>

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

// Installs PERFGATE_MACHINE_CLASS as the library's machine-class override (machine_class.hpp); main calls it
// before any command runs.
void install_machine_class_override();

}  // namespace perfgate::cli
