#pragma once
// Entry point every perfgate bench binary uses instead of BENCHMARK_MAIN().
//
// On top of Google Benchmark's own main it
//  * accepts --benchmark_min_time as "0.5" or "0.5s" whatever the linked library version wants,
//  * records host facts in the JSON context (CPU model and ISA, AMX, build type, perfgate version),
//  * turns the run's outcome into the exit codes of docs/architecture.md: 0 ran, 3 a benchmark failed
//    (any error that is not a "skipped: " message), 77 everything was skipped.
namespace perfgate::bench {

int run_main(int argc, char** argv);

}  // namespace perfgate::bench

#define PERFGATE_BENCH_MAIN() \
  int main(int argc, char** argv) { return ::perfgate::bench::run_main(argc, argv); }

namespace perfgate::bench {

// Called by run_main() after flag parsing and before the first benchmark, so a library (the CUDA
// support, say) can add facts to the JSON context: Google Benchmark writes the context first.
using ContextHook = void (*)();
void add_context_hook(ContextHook hook);

// Called by run_main() after the last benchmark, before it returns (the timeline recorder writes its file).
using FinishHook = void (*)();
void add_finish_hook(FinishHook hook);

// The --benchmark_min_time (seconds per repetition) a suite runs with when the command line names none
// (call during static initialisation, before main). Google Benchmark's own default is 0.5 s.
void set_default_min_time(double seconds);

}  // namespace perfgate::bench
