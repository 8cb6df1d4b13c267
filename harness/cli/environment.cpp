#include "environment.hpp"

#include <cstdlib>

#include "perfgate/machine_class.hpp"

namespace perfgate::cli {

std::optional<std::string> env_var(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string search_path() { return env_var("PATH").value_or(""); }

RunEnvironment run_environment() {
  RunEnvironment e;
  e.git_commit = env_var("PERFGATE_GIT_COMMIT").value_or("");
  e.cuda_visible_devices = cuda_devices_for_ctest(env_var);
  return e;
}

void install_machine_class_override() { set_machine_class_override(env_var("PERFGATE_MACHINE_CLASS").value_or("")); }

}  // namespace perfgate::cli
