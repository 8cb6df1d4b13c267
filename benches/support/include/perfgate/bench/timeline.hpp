#pragma once
// The GPU timeline recorder (docs/profiling.md, "The timeline"). With PERFGATE_TIMELINE=<file> in its
// environment a GPU bench process records every kernel, memcpy and memset (start, end, stream, the API call
// that launched it), the runtime and driver API calls and the fixture's NVTX ranges through the CUPTI
// Activity API, and writes them to <file> as JSON when it ends. perfgate's --explain runs such a pass of its
// own, apart from the measured repetitions, whose timings the recording would disturb.
//
// libcupti is loaded at run time (dlopen): a machine without it, or where tracing is not permitted, still
// runs the benchmarks, prints one line and writes a file that says why nothing was recorded.
namespace perfgate::bench {

inline constexpr const char* kTimelineVar = "PERFGATE_TIMELINE";

// Starts recording when PERFGATE_TIMELINE is set (the CUDA support's context hook calls it); a finish hook
// writes the file.
void start_timeline_from_environment();

}  // namespace perfgate::bench
