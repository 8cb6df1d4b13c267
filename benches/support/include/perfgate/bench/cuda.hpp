#pragma once
// CUDA pieces shared by the GPU fixtures: error checks, device discovery with skip reasons,
// CUDA-event timing, L2 flushing for cold runs, and GPU facts for the JSON context.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace perfgate::bench {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);

#define PERFGATE_CUDA_CHECK(expr)                                                              \
  do {                                                                                         \
    const cudaError_t perfgate_err_ = (expr);                                                  \
    if (perfgate_err_ != cudaSuccess)                                                          \
      ::perfgate::bench::throw_cuda_error(perfgate_err_, #expr, __FILE__, __LINE__);           \
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

// Per-benchmark clock state: counters "sm_clock_mhz" and "throttled" (1 when a non-benign NVML
// clock-event reason is active), so a report can flag a throttled run.
void add_clock_counters(benchmark::State& state, int device);

std::string pci_bus_id(int device);

}  // namespace perfgate::bench
