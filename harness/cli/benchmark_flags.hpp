#pragma once

#include <string>
#include <vector>

namespace perfgate::cli {

// Google Benchmark's own flags typed where perfgate's runner commands expect theirs (perfgate run
// --benchmark_repetitions=3): for each one, the option of perfgate's that sets it, or how to pass it through.
// Empty when the arguments hold none.
std::vector<std::string> google_benchmark_flag_hints(int argc, char** argv);

}  // namespace perfgate::cli
