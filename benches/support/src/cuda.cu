#include <cmath>
#include <mutex>

#include <fmt/format.h>

#include "perfgate/bench/cuda.hpp"
#include "perfgate/bench/hardware.hpp"
#include "perfgate/bench/main.hpp"
#include "perfgate/bench/nvml.hpp"
#include "perfgate/bench/skip.hpp"
#include "perfgate/bench/timeline.hpp"
#include "perfgate/context_keys.hpp"

namespace perfgate::bench {
namespace {

struct Discovery {
  int count = 0;
  std::string reason;
};

const Discovery& discovery() {
  static Discovery d;
  static std::once_flag once;
  std::call_once(once, [] {
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      int driver = 0, runtime = 0;
      cudaDriverGetVersion(&driver);
      cudaRuntimeGetVersion(&runtime);
      d.reason = no_gpu_reason_from(cudaGetErrorName(err), cudaGetErrorString(err), driver, runtime);
      cudaGetLastError();
      return;
    }
    d.count = n;
    if (n == 0) d.reason = "no CUDA device present";
  });
  return d;
}

// The host's own GPU count, so that a job shown part of a bigger host gets its own machine class
// (machine_class.hpp). Nothing without NVML: the class then stays the visible count's.
void add_host_gpu_count() {
  if (const auto host = nvml::device_count())
    benchmark::AddCustomContext(perfgate::context_keys::kHostGpuCount, std::to_string(*host));
}

void add_gpu_context() {
  const int n = gpu_count();
  benchmark::AddCustomContext(perfgate::context_keys::kGpuCount, std::to_string(n));
  if (n == 0) {
    benchmark::AddCustomContext(perfgate::context_keys::kNoGpu, no_gpu_reason());
    return;
  }
  add_host_gpu_count();
  int runtime = 0;
  int driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  benchmark::AddCustomContext(perfgate::context_keys::kCudaRuntime, std::to_string(runtime));
  benchmark::AddCustomContext(perfgate::context_keys::kCudaDriver, std::to_string(driver));
  for (int dev = 0; dev < n; ++dev) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) continue;
    const auto key = [dev](const char* field) { return context_keys::gpu_key(dev, field); };
    benchmark::AddCustomContext(key(context_keys::kGpuName), prop.name);
    benchmark::AddCustomContext(key(context_keys::kGpuSmCount), std::to_string(prop.multiProcessorCount));
    benchmark::AddCustomContext(key(context_keys::kGpuMemoryGib),
                                fmt::format("{:.1f}", prop.totalGlobalMem / 1073741824.0));
    benchmark::AddCustomContext(key(context_keys::kGpuMemBandwidth),
                                fmt::format("{:.0f}", theoretical_memory_bandwidth(dev) / 1e9));
    const auto facts = nvml::query(pci_bus_id(dev));
    if (facts.sm_clock_mhz)
      benchmark::AddCustomContext(key(context_keys::kGpuSmClock), std::to_string(*facts.sm_clock_mhz));
    if (facts.max_sm_clock_mhz)
      benchmark::AddCustomContext(key(context_keys::kGpuMaxSmClock), std::to_string(*facts.max_sm_clock_mhz));
    benchmark::AddCustomContext(key(context_keys::kGpuClockEvents), facts.clock_event_summary());
    if (facts.pcie_gen_current && facts.pcie_width_current)
      benchmark::AddCustomContext(key(context_keys::kGpuPcie),
                                  fmt::format("gen{} x{}", *facts.pcie_gen_current, *facts.pcie_width_current));
    if (facts.nvlink_active_links)
      benchmark::AddCustomContext(key(context_keys::kGpuNvlinks), std::to_string(*facts.nvlink_active_links));
    if (dev == 0 && facts.driver_version)
      benchmark::AddCustomContext(perfgate::context_keys::kDriver, *facts.driver_version);
  }
  if (!nvml::available()) benchmark::AddCustomContext(perfgate::context_keys::kNvml, nvml::unavailable_reason());
}

// Registered from this translation unit, which every GPU fixture pulls in through gpu_count().
const bool registered = [] {
  add_context_hook(&add_gpu_context);
  add_context_hook(&start_timeline_from_environment);
  return true;
}();

}  // namespace

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  throw CudaError(
      fmt::format("CUDA error {} ({}) at {}:{}: {}", static_cast<int>(err), cudaGetErrorString(err), file, line, expr));
}

int gpu_count() {
  (void)registered;
  return discovery().count;
}

std::string no_gpu_reason() { return discovery().reason; }

bool require_gpus(benchmark::State& state, int n) {
  const int have = gpu_count();
  if (have >= n) return true;
  if (have == 0) {
    skip(state, no_gpu_reason());
  } else {
    skip(state, fmt::format("needs {} GPUs, {} present", n, have));
  }
  return false;
}

EventTimer::EventTimer() {
  PERFGATE_CUDA_CHECK(cudaEventCreate(&start_));
  PERFGATE_CUDA_CHECK(cudaEventCreate(&stop_));
}

EventTimer::~EventTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}

void EventTimer::start(cudaStream_t stream) { PERFGATE_CUDA_CHECK(cudaEventRecord(start_, stream)); }
void EventTimer::stop(cudaStream_t stream) { PERFGATE_CUDA_CHECK(cudaEventRecord(stop_, stream)); }

float EventTimer::elapsed_ms() {
  PERFGATE_CUDA_CHECK(cudaEventSynchronize(stop_));
  float ms = 0.0f;
  PERFGATE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return ms;
}

L2Flusher::L2Flusher(int device) {
  int l2 = 0;
  PERFGATE_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  bytes_ = static_cast<size_t>(l2) * 2;
  if (bytes_ > 0) PERFGATE_CUDA_CHECK(cudaMalloc(&buffer_, bytes_));
}

L2Flusher::~L2Flusher() {
  if (buffer_) cudaFree(buffer_);
}

void L2Flusher::flush(cudaStream_t stream) {
  if (buffer_) PERFGATE_CUDA_CHECK(cudaMemsetAsync(buffer_, 0, bytes_, stream));
}

double theoretical_memory_bandwidth(int device) {
  int clock_khz = 0;
  int bus_bits = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) {
    cudaGetLastError();
    return 0.0;
  }
  // Double data rate: two transfers per clock.
  return 2.0 * clock_khz * 1e3 * (bus_bits / 8.0);
}

void add_clock_counters(benchmark::State& state, int device) {
  const auto facts = nvml::query(pci_bus_id(device));
  if (facts.sm_clock_mhz) state.counters["sm_clock_mhz"] = *facts.sm_clock_mhz;
  state.counters["throttled"] = facts.throttled() ? 1.0 : 0.0;
}

void add_clock_counters(benchmark::State& state, int device, const nvml::MonitorSummary& during) {
  if (during.samples == 0) {
    add_clock_counters(state, device);
    return;
  }
  state.counters["nvml_samples"] = during.samples;
  if (during.sm_clock_mhz_mean > 0) {
    state.counters["sm_clock_mhz"] = during.sm_clock_mhz_mean;
    state.counters["sm_clock_mhz_min"] = during.sm_clock_mhz_min;
  }
  if (during.power_w_mean > 0) {
    state.counters["power_w"] = during.power_w_mean;
    state.counters["power_w_max"] = during.power_w_max;
  }
  if (during.power_limit_w > 0) state.counters["power_limit_w"] = during.power_limit_w;
  if (!std::isnan(during.throttled_share)) {
    state.counters["throttled_share"] = during.throttled_share;
    state.counters["power_capped_share"] = during.power_capped_share;
    state.counters["thermal_share"] = during.thermal_share;
    state.counters["throttled"] = during.throttled_share > 0 ? 1.0 : 0.0;
  }
}

nvml::Monitor monitor_clocks(int device) { return nvml::Monitor(pci_bus_id(device)); }

std::string pci_bus_id(int device) {
  char id[32] = {};
  if (cudaDeviceGetPCIBusId(id, sizeof(id), device) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  return id;
}

}  // namespace perfgate::bench
