#include "perfgate/bench_binary.hpp"

#include <unistd.h>

namespace perfgate {

std::string suite_from_binary(const std::filesystem::path& binary) {
  std::string name = binary.stem().string();
  if (binary.extension() != ".exe") name = binary.filename().string();
  if (name.rfind("bench_", 0) == 0) name = name.substr(6);
  return name;
}

bool is_executable_file(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace perfgate
