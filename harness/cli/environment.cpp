#include "environment.hpp"

#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "perfgate/context_keys.hpp"
#include "perfgate/machine_class.hpp"

namespace perfgate::cli {

std::optional<std::string> env_var(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string search_path() { return env_var("PATH").value_or(""); }

std::string given_git_commit() { return env_var("PERFGATE_GIT_COMMIT").value_or(""); }

namespace {

// The logical CPUs this process may run on (its affinity mask), as a bench process would count them.
int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                      : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
}

// The NVIDIA GPUs the driver lists, one folder each; 0 without the driver.
int driver_gpus() {
  std::error_code ec;
  int n = 0;
  for (std::filesystem::directory_iterator it("/proc/driver/nvidia/gpus", ec), end; !ec && it != end; it.increment(ec))
    ++n;
  return n;
}

// This host's CPU, where /proc/cpuinfo names one.
std::optional<CpuFacts> host_cpu() {
  std::ifstream in("/proc/cpuinfo");
  if (!in) return std::nullopt;
  CpuFacts cpu = parse_cpuinfo(in);
  if (cpu.model.empty() && cpu.signature.empty()) return std::nullopt;
  return cpu;
}

}  // namespace

RunEnvironment run_environment() {
  RunEnvironment e;
  e.host_cpu = host_cpu();
  e.host_cores = usable_cpus();
  e.host_gpus = driver_gpus();
  e.git_commit = given_git_commit();
  e.cuda_visible_devices = cuda_devices_for_ctest(env_var);
  return e;
}

void install_machine_class_override() { set_machine_class_override(env_var("PERFGATE_MACHINE_CLASS").value_or("")); }

PlainRunFactsResult give_this_hosts_cpu_facts(RunContext& run, const HostIdentity& here, const RunEnvironment& env,
                                              const std::string& command) {
  if (!run.get(context_keys::kCpuModel).empty()) return {};
  if (auto other = written_elsewhere(run, here)) return {PlainRunFacts::written_elsewhere, std::move(other)};
  if (!add_host_facts(run, env, {})) return {PlainRunFacts::this_host_unknown, std::nullopt};
  run.fields[context_keys::kRunHostFacts] = "this host's /proc/cpuinfo, read by " + command +
                                            ": the file was written on this host (its host name, CPU count and "
                                            "caches) by a binary that records none";
  return {PlainRunFacts::added, std::nullopt};
}

}  // namespace perfgate::cli
