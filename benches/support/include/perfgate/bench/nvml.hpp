#pragma once
// NVML loaded at run time (dlopen of libnvidia-ml.so.1): the CPU machines have no nvml.h, and a
// bench must still build and run there. Every query returns nullopt when NVML or the device is absent.
#include <cstdint>
#include <optional>
#include <string>

namespace perfgate::bench::nvml {

bool available();
std::string unavailable_reason();

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

}  // namespace perfgate::bench::nvml
