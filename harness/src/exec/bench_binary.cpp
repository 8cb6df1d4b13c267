#include "perfgate/bench_binary.hpp"

namespace perfgate {

std::string suite_from_binary(const std::filesystem::path& binary) {
  std::string name = binary.stem().string();
  if (binary.extension() != ".exe") name = binary.filename().string();
  if (name.rfind("bench_", 0) == 0) name = name.substr(6);
  return name;
}

}  // namespace perfgate
