#pragma once
// CUDA pieces shared by the GPU fixtures: error checks, device discovery with skip reasons,
// CUDA-event timing, L2 flushing for cold runs, and GPU facts for the JSON context.
#include <stdexcept>
#include <string>

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include "perfgate/bench/nvml.hpp"

namespace perfgate::bench {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);

#define PERFGATE_CUDA_CHECK(expr)                                                                                    \
  do {                                                                                                               \
    const cudaError_t perfgate_err_ = (expr);                                                                        \
    if (perfgate_err_ != cudaSuccess) ::perfgate::bench::throw_cuda_error(perfgate_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// Number of usable CUDA devices; 0 when there is no driver or no device (then no_gpu_reason() says why).
int gpu_count();
std::string no_gpu_reason();

// Skips the benchmark with a reason and returns false when fewer than `n` GPUs are present.
bool require_gpus(benchmark::State& state, int n);

// Times work queued on one stream with a pair of CUDA events.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start(cudaStream_t stream);
  void stop(cudaStream_t stream);
  float elapsed_ms();  // waits for the stop event

 private:
  cudaEvent_t start_{};
  cudaEvent_t stop_{};
};

// Evicts L2 between iterations (cold mode, as nvbench does) by writing a buffer of twice its size.
class L2Flusher {
 public:
  explicit L2Flusher(int device);
  ~L2Flusher();
  L2Flusher(const L2Flusher&) = delete;
  L2Flusher& operator=(const L2Flusher&) = delete;
  void flush(cudaStream_t stream);

 private:
  void* buffer_ = nullptr;
  size_t bytes_ = 0;
};

// Theoretical DRAM bandwidth (bytes/s) from the device's memory clock and bus width.
double theoretical_memory_bandwidth(int device);

// Per-benchmark clock state read once, at the end: counters "sm_clock_mhz" and "throttled" (1 when a
// throttling NVML clock-event reason is active).
void add_clock_counters(benchmark::State& state, int device);
// Clock state over the measurement, from an nvml::Monitor that ran during the timing loop (info
// counters, per repetition): "sm_clock_mhz" (mean) and "sm_clock_mhz_min", "power_w" (mean) and
// "power_w_max", "power_limit_w", the shares of samples throttled by any cause / by the power cap / by
// heat ("throttled_share", "power_capped_share", "thermal_share"), "throttled" (1 when any sample was)
// and "nvml_samples". Without samples (no NVML) it falls back to the one reading above.
void add_clock_counters(benchmark::State& state, int device, const nvml::MonitorSummary& during);
// A monitor of `device` for the timing loop that follows.
nvml::Monitor monitor_clocks(int device);

std::string pci_bus_id(int device);

}  // namespace perfgate::bench
