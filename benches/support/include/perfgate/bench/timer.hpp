#pragma once
#include <chrono>

namespace perfgate::bench {

// Host wall-clock stopwatch for synchronous CPU work. GPU work is timed with CUDA events instead.
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  void restart() { start_ = std::chrono::steady_clock::now(); }
  double elapsed_ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  }
  double elapsed_s() const { return elapsed_ms() / 1e3; }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace perfgate::bench
