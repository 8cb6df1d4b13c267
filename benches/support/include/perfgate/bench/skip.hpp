#pragma once
#include <string>
#include <string_view>

#include <benchmark/benchmark.h>

namespace perfgate::bench {

// Prefix reserved for skips (docs/architecture.md, "Conventions"); the harness and run_main() read it back.
inline constexpr std::string_view kSkipPrefix = "skipped: ";

// Missing hardware or an absent optional dependency: a skip with a reason, never a pass.
// Under Google Benchmark >= 1.8 this is a real SkipWithMessage; under 1.7 an error carrying the prefix.
void skip(benchmark::State& state, std::string_view reason);

// A wrong result, a CUDA error, a bad argument: the benchmark fails with this message.
void fail(benchmark::State& state, std::string_view message);

bool is_skip_message(std::string_view message);

}  // namespace perfgate::bench
