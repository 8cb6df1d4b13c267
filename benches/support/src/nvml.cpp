#include "perfgate/bench/nvml.hpp"

#include <dlfcn.h>

#include <mutex>

namespace perfgate::bench::nvml {
namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kSuccess = 0;
constexpr int kClockSm = 1;
constexpr int kClockMem = 2;
constexpr unsigned kMaxNvLinks = 18;  // NVML_NVLINK_MAX_LINKS on Hopper

struct Api {
  void* handle = nullptr;
  std::string error;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*max_clock)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*pcie_gen)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*pcie_gen_max)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*pcie_width)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*pcie_width_max)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*driver)(char*, unsigned) = nullptr;
};

template <typename Fn>
void bind(void* handle, Fn& fn, const char* name, const char* fallback = nullptr) {
  void* sym = dlsym(handle, name);
  if (!sym && fallback) sym = dlsym(handle, fallback);
  fn = reinterpret_cast<Fn>(sym);
}

Api& api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    a.handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!a.handle) {
      a.error = "libnvidia-ml.so.1 not loadable (no NVIDIA driver)";
      return;
    }
    bind(a.handle, a.init, "nvmlInit_v2");
    bind(a.handle, a.by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    bind(a.handle, a.clock, "nvmlDeviceGetClockInfo");
    bind(a.handle, a.max_clock, "nvmlDeviceGetMaxClockInfo");
    bind(a.handle, a.reasons, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons");
    bind(a.handle, a.pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
    bind(a.handle, a.pcie_gen_max, "nvmlDeviceGetMaxPcieLinkGeneration");
    bind(a.handle, a.pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
    bind(a.handle, a.pcie_width_max, "nvmlDeviceGetMaxPcieLinkWidth");
    bind(a.handle, a.nvlink_state, "nvmlDeviceGetNvLinkState");
    bind(a.handle, a.temperature, "nvmlDeviceGetTemperature");
    bind(a.handle, a.driver, "nvmlSystemGetDriverVersion");
    if (!a.init || !a.by_pci) {
      a.error = "libnvidia-ml.so.1 lacks nvmlInit_v2 / nvmlDeviceGetHandleByPciBusId_v2";
    } else if (a.init() != kSuccess) {
      a.error = "nvmlInit_v2 failed";
    }
  });
  return a;
}

template <typename Fn, typename... Args>
std::optional<unsigned> ask(Fn fn, Args... args) {
  unsigned value = 0;
  if (fn && fn(args..., &value) == kSuccess) return value;
  return std::nullopt;
}

}  // namespace

bool available() { return api().error.empty(); }
std::string unavailable_reason() { return api().error; }

DeviceFacts query(const std::string& pci_bus_id) {
  DeviceFacts f;
  Api& a = api();
  if (!a.error.empty()) return f;
  nvmlDevice_t dev = nullptr;
  if (a.by_pci(pci_bus_id.c_str(), &dev) != kSuccess) return f;
  f.sm_clock_mhz = ask(a.clock, dev, kClockSm);
  f.mem_clock_mhz = ask(a.clock, dev, kClockMem);
  f.max_sm_clock_mhz = ask(a.max_clock, dev, kClockSm);
  unsigned long long reasons = 0;
  if (a.reasons && a.reasons(dev, &reasons) == kSuccess) f.clock_event_reasons = reasons;
  f.pcie_gen_current = ask(a.pcie_gen, dev);
  f.pcie_gen_max = ask(a.pcie_gen_max, dev);
  f.pcie_width_current = ask(a.pcie_width, dev);
  f.pcie_width_max = ask(a.pcie_width_max, dev);
  f.temperature_c = ask(a.temperature, dev, 0 /* NVML_TEMPERATURE_GPU */);
  if (a.nvlink_state) {
    unsigned active = 0;
    for (unsigned link = 0; link < kMaxNvLinks; ++link) {
      int is_active = 0;
      if (a.nvlink_state(dev, link, &is_active) == kSuccess && is_active) ++active;
    }
    f.nvlink_active_links = active;
  }
  char version[96] = {};
  if (a.driver && a.driver(version, sizeof(version)) == kSuccess) f.driver_version = version;
  return f;
}

namespace {
// Bits of nvmlClocksEventReasons (nvml.h); idle and the user's application-clock setting are benign.
struct Reason {
  std::uint64_t bit;
  const char* name;
  bool benign;
};
constexpr Reason kReasons[] = {
    {0x1, "gpu_idle", true},          {0x2, "applications_clocks", true}, {0x4, "sw_power_cap", false},
    {0x8, "hw_slowdown", false},      {0x10, "sync_boost", true},         {0x20, "sw_thermal", false},
    {0x40, "hw_thermal", false},      {0x80, "hw_power_brake", false},    {0x100, "display_clocks", true},
};
}  // namespace

bool DeviceFacts::throttled() const {
  if (!clock_event_reasons) return false;
  for (const auto& r : kReasons) {
    if (!r.benign && (*clock_event_reasons & r.bit)) return true;
  }
  return false;
}

std::string DeviceFacts::clock_event_summary() const {
  if (!clock_event_reasons) return "unknown";
  std::string out;
  for (const auto& r : kReasons) {
    if (*clock_event_reasons & r.bit) out += (out.empty() ? "" : " ") + std::string(r.name);
  }
  return out.empty() ? "none" : out;
}

}  // namespace perfgate::bench::nvml
