#pragma once
// NVML loaded at run time (dlopen of libnvidia-ml.so.1): the CPU machines have no nvml.h, and a
// bench must still build and run there. Every query returns nullopt when NVML or the device is absent.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace perfgate::bench::nvml {

bool available();
std::string unavailable_reason();

// Every GPU of the host (nvmlDeviceGetCount_v2), including those CUDA_VISIBLE_DEVICES hides from this
// process: a job that sees one GPU of a 2-GPU host runs on another machine type than a 1-GPU VM.
// nullopt without NVML.
std::optional<unsigned> device_count();

// `pci_bus_id` as cudaDeviceGetPCIBusId prints it ("0000:18:00.0"), so CUDA and NVML agree on the device.
struct DeviceFacts {
  std::optional<unsigned> sm_clock_mhz;
  std::optional<unsigned> max_sm_clock_mhz;
  std::optional<unsigned> mem_clock_mhz;
  std::optional<std::uint64_t> clock_event_reasons;  // NVML bitmask; 0 or idle-only means not throttled
  std::optional<unsigned> pcie_gen_current;
  std::optional<unsigned> pcie_gen_max;
  std::optional<unsigned> pcie_width_current;
  std::optional<unsigned> pcie_width_max;
  std::optional<unsigned> nvlink_active_links;
  std::optional<unsigned> temperature_c;
  std::optional<std::string> driver_version;

  // True when a reason other than "GPU idle" / "applications clocks setting" holds clocks down.
  bool throttled() const;
  std::string clock_event_summary() const;  // "none", or names like "sw_power_cap hw_slowdown"
};

DeviceFacts query(const std::string& pci_bus_id);

// Clock-event reason bits (nvmlClocksEventReasons in nvml.h) that hold clocks down for a cause
// other than idleness or a user setting.
bool is_throttling(std::uint64_t reasons);
bool is_power_cap(std::uint64_t reasons);  // sw_power_cap or hw_power_brake
bool is_thermal(std::uint64_t reasons);    // sw_thermal, hw_thermal or hw_slowdown
// "none", or names like "sw_power_cap hw_slowdown".
std::string reason_names(std::uint64_t reasons);

// One reading of the GPU during a measurement; a field NVML did not answer is nullopt.
struct Sample {
  std::optional<unsigned> sm_clock_mhz;
  std::optional<double> power_w;         // instantaneous board power where NVML has it, else its 1 s average
  std::optional<std::uint64_t> reasons;  // clock-event reasons
};

// What a benchmark repetition ran at: clock, power, and how much of it the GPU spent throttled.
// Shares are of the samples that carried clock-event reasons (NaN when none did).
struct MonitorSummary {
  int samples = 0;
  double sm_clock_mhz_mean = 0.0, sm_clock_mhz_min = 0.0;  // 0: no clock reading
  double power_w_mean = 0.0, power_w_max = 0.0;            // 0: no power reading
  double power_limit_w = 0.0;                              // enforced limit (0: unknown)
  double throttled_share = 0.0;                            // any throttling reason (is_throttling)
  double power_capped_share = 0.0;                         // is_power_cap
  double thermal_share = 0.0;                              // is_thermal
  std::uint64_t reasons_seen = 0;                          // union of every sample's reasons
};
MonitorSummary summarise(const std::vector<Sample>& samples, double power_limit_w);

// Samples one GPU from a background thread (SM clock, power, clock-event reasons) from construction to
// stop(), as nvbench watches the clock during its measurement. Without NVML it samples nothing and
// stop() returns samples = 0. One NVML round trip costs 10-200 us on a host thread; the GPU is untouched.
class Monitor {
 public:
  explicit Monitor(const std::string& pci_bus_id, std::chrono::microseconds interval = std::chrono::microseconds(2000));
  ~Monitor();
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;
  MonitorSummary stop();  // idempotent: a second call returns the first call's summary

 private:
  void loop();
  void* device_ = nullptr;
  std::chrono::microseconds interval_;
  std::atomic<bool> running_{false};
  std::thread thread_;
  std::vector<Sample> samples_;
  std::optional<MonitorSummary> summary_;
  double power_limit_w_ = 0.0;
};

}  // namespace perfgate::bench::nvml
