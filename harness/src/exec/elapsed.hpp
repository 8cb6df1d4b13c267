#pragma once
// Wall time of a child process and of the run steps (runner, adaptive session): one clock, one conversion.
#include <chrono>

namespace perfgate {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace perfgate
