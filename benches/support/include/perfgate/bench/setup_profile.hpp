#pragma once
// Where a bench process spends its time outside measurement. With PERFGATE_SETUP_PROFILE=1 in the
// environment, run_main() prints on stderr, when the benchmarks are done, the process's wall time and the
// total of every labelled span (CUDA context, weights, reference check, timing loops, ...), e.g.
//   perfgate setup profile: 9.84 s since start; measure 2.31 s (25x); ffn_setup 3.02 s (25x); ...
// Spans may nest (a whole benchmark call and its parts); each label is summed on its own.
#include <string>

namespace perfgate::bench {

class SetupSpan {
 public:
  explicit SetupSpan(const char* label);
  ~SetupSpan();
  SetupSpan(const SetupSpan&) = delete;
  SetupSpan& operator=(const SetupSpan&) = delete;

 private:
  const char* label_;
  double start_s_;
};

// Seconds since this process's bench support was loaded (static initialisation).
double seconds_since_start();
// Adds `seconds` to `label` (SetupSpan does this on destruction).
void add_setup_time(const char* label, double seconds);
// The one line above; empty when nothing was recorded.
std::string setup_profile_line();
// Prints setup_profile_line() on stderr when PERFGATE_SETUP_PROFILE is set to a non-empty value other than 0.
void report_setup_profile();

}  // namespace perfgate::bench
