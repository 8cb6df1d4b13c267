#include "perfgate/bench/nvml.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <mutex>

namespace perfgate::bench::nvml {
namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kSuccess = 0;
constexpr int kClockSm = 1;
constexpr int kClockMem = 2;
constexpr unsigned kMaxNvLinks = 18;          // NVML_NVLINK_MAX_LINKS on Hopper
constexpr unsigned kFieldPowerInstant = 186;  // NVML_FI_DEV_POWER_INSTANT (mW)

// nvmlFieldValue_t of nvml.h (no header here): the layout NVML writes into.
struct FieldValue {
  unsigned field_id;
  unsigned scope_id;
  long long timestamp;
  long long latency_us;
  int value_type;
  nvmlReturn_t nvml_return;
  union {
    double d;
    unsigned ui;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
    int si;
  } value;
};
static_assert(sizeof(FieldValue) == 40, "nvmlFieldValue_t is 40 bytes");

struct Api {
  void* handle = nullptr;
  std::string error;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*device_count)(unsigned*) = nullptr;
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
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*field_values)(nvmlDevice_t, int, FieldValue*) = nullptr;
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
    bind(a.handle, a.device_count, "nvmlDeviceGetCount_v2");
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
    bind(a.handle, a.power, "nvmlDeviceGetPowerUsage");
    bind(a.handle, a.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    bind(a.handle, a.field_values, "nvmlDeviceGetFieldValues");
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

nvmlDevice_t device_by_pci(const std::string& pci_bus_id) {
  Api& a = api();
  nvmlDevice_t dev = nullptr;
  if (!a.error.empty() || a.by_pci(pci_bus_id.c_str(), &dev) != kSuccess) return nullptr;
  return dev;
}

// Instantaneous power (NVML_FI_DEV_POWER_INSTANT, Hopper and later), else nvmlDeviceGetPowerUsage, which
// on these GPUs is an average over the last second and would smear a 10 ms repetition.
std::optional<double> power_watts(nvmlDevice_t dev) {
  Api& a = api();
  if (a.field_values) {
    FieldValue fv{};
    fv.field_id = kFieldPowerInstant;
    if (a.field_values(dev, 1, &fv) == kSuccess && fv.nvml_return == kSuccess) return fv.value.ui / 1000.0;
  }
  if (const auto mw = ask(a.power, dev)) return *mw / 1000.0;
  return std::nullopt;
}

Sample read_sample(nvmlDevice_t dev) {
  Api& a = api();
  Sample s;
  s.sm_clock_mhz = ask(a.clock, dev, kClockSm);
  s.power_w = power_watts(dev);
  unsigned long long reasons = 0;
  if (a.reasons && a.reasons(dev, &reasons) == kSuccess) s.reasons = reasons;
  return s;
}

}  // namespace

bool available() { return api().error.empty(); }
std::string unavailable_reason() { return api().error; }

std::optional<unsigned> device_count() {
  Api& a = api();
  if (!a.error.empty()) return std::nullopt;
  return ask(a.device_count);
}

DeviceFacts query(const std::string& pci_bus_id) {
  DeviceFacts f;
  Api& a = api();
  if (!a.error.empty()) return f;
  nvmlDevice_t dev = device_by_pci(pci_bus_id);
  if (dev == nullptr) return f;
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
// Bits of nvmlClocksEventReasons (nvml.h); idle, the user's application-clock setting, sync boost and
// display clocks are benign.
enum class Cause { benign, power, thermal };
struct Reason {
  std::uint64_t bit;
  const char* name;
  Cause cause;
};
constexpr Reason kReasons[] = {
    {0x1, "gpu_idle", Cause::benign},         {0x2, "applications_clocks", Cause::benign},
    {0x4, "sw_power_cap", Cause::power},      {0x8, "hw_slowdown", Cause::thermal},
    {0x10, "sync_boost", Cause::benign},      {0x20, "sw_thermal", Cause::thermal},
    {0x40, "hw_thermal", Cause::thermal},     {0x80, "hw_power_brake", Cause::power},
    {0x100, "display_clocks", Cause::benign},
};

bool any_of_cause(std::uint64_t reasons, Cause cause) {
  return std::any_of(std::begin(kReasons), std::end(kReasons),
                     [&](const Reason& r) { return r.cause == cause && (reasons & r.bit) != 0; });
}
}  // namespace

bool is_throttling(std::uint64_t reasons) { return is_power_cap(reasons) || is_thermal(reasons); }
bool is_power_cap(std::uint64_t reasons) { return any_of_cause(reasons, Cause::power); }
bool is_thermal(std::uint64_t reasons) { return any_of_cause(reasons, Cause::thermal); }

std::string reason_names(std::uint64_t reasons) {
  std::string out;
  for (const auto& r : kReasons) {
    if (reasons & r.bit) out += (out.empty() ? "" : " ") + std::string(r.name);
  }
  return out.empty() ? "none" : out;
}

bool DeviceFacts::throttled() const { return clock_event_reasons && is_throttling(*clock_event_reasons); }

std::string DeviceFacts::clock_event_summary() const {
  return clock_event_reasons ? reason_names(*clock_event_reasons) : "unknown";
}

MonitorSummary summarise(const std::vector<Sample>& samples, double power_limit_w) {
  MonitorSummary m;
  m.samples = static_cast<int>(samples.size());
  m.power_limit_w = power_limit_w;
  double clock_sum = 0, power_sum = 0;
  int clocks = 0, powers = 0, with_reasons = 0, throttled = 0, capped = 0, thermal = 0;
  for (const Sample& s : samples) {
    if (s.sm_clock_mhz) {
      clock_sum += *s.sm_clock_mhz;
      m.sm_clock_mhz_min = clocks == 0 ? *s.sm_clock_mhz : std::min<double>(m.sm_clock_mhz_min, *s.sm_clock_mhz);
      ++clocks;
    }
    if (s.power_w) {
      power_sum += *s.power_w;
      m.power_w_max = std::max(m.power_w_max, *s.power_w);
      ++powers;
    }
    if (s.reasons) {
      ++with_reasons;
      m.reasons_seen |= *s.reasons;
      throttled += is_throttling(*s.reasons) ? 1 : 0;
      capped += is_power_cap(*s.reasons) ? 1 : 0;
      thermal += is_thermal(*s.reasons) ? 1 : 0;
    }
  }
  if (clocks > 0) m.sm_clock_mhz_mean = clock_sum / clocks;
  if (powers > 0) m.power_w_mean = power_sum / powers;
  const double nan = std::nan("");
  m.throttled_share = with_reasons > 0 ? static_cast<double>(throttled) / with_reasons : nan;
  m.power_capped_share = with_reasons > 0 ? static_cast<double>(capped) / with_reasons : nan;
  m.thermal_share = with_reasons > 0 ? static_cast<double>(thermal) / with_reasons : nan;
  return m;
}

Monitor::Monitor(const std::string& pci_bus_id, std::chrono::microseconds interval) : interval_(interval) {
  device_ = device_by_pci(pci_bus_id);
  if (device_ == nullptr) return;
  if (const auto mw = ask(api().power_limit, device_)) power_limit_w_ = *mw / 1000.0;
  samples_.reserve(4096);
  samples_.push_back(read_sample(device_));  // a repetition shorter than the interval still gets one
  running_ = true;
  thread_ = std::thread([this] { loop(); });
}

Monitor::~Monitor() { stop(); }

void Monitor::loop() {
  while (running_.load(std::memory_order_relaxed)) {
    std::this_thread::sleep_for(interval_);
    if (!running_.load(std::memory_order_relaxed)) break;
    samples_.push_back(read_sample(device_));
  }
}

MonitorSummary Monitor::stop() {
  if (summary_) return *summary_;
  if (thread_.joinable()) {
    running_ = false;
    thread_.join();
  }
  summary_ = summarise(samples_, power_limit_w_);
  return *summary_;
}

}  // namespace perfgate::bench::nvml
