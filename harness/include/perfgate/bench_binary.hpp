#pragma once
// A bench binary: the suite it measures and where it is. The lowest floor (exec, with process.hpp), so that gate
// plans, reference builds and profiler runs can name a binary without including the runner.
#include <filesystem>
#include <string>

namespace perfgate {

struct BenchBinary {
  std::string suite;  // from the file name bench_<suite>
  std::filesystem::path path;
};

// "bench_lora_backward" -> "lora_backward"; other names are returned unchanged (minus extension).
std::string suite_from_binary(const std::filesystem::path& binary);

// A regular file this process may execute.
bool is_executable_file(const std::filesystem::path& path);

}  // namespace perfgate
