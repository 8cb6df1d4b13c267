#include "perfgate/bench/hardware.hpp"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>

namespace perfgate::bench {
namespace {

// A CUDA version as the runtime and the driver number it (13000) in the form users know (13.0).
std::string cuda_version(int v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); }

// Linux hands out the AMX tile state only on request (arch_prctl ARCH_REQ_XCOMP_PERM).
bool request_amx_permission() {
#if defined(__x86_64__) && defined(SYS_arch_prctl)
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

CpuInfo probe() {
  CpuInfo info;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::string flags;
  std::string vendor, family, model_number;
  while (std::getline(cpuinfo, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && info.model.empty()) info.model = value;
    if (key == "vendor_id" && vendor.empty()) vendor = value;
    if (key == "cpu family" && family.empty()) family = value;
    if (key == "model" && model_number.empty()) model_number = value;
    if (key == "flags" && flags.empty()) flags = " " + value + " ";
  }
  if (!vendor.empty() && !family.empty() && !model_number.empty())
    info.signature = vendor + " family " + family + " model " + model_number;
  auto has = [&](const char* flag) { return flags.find(" " + std::string(flag) + " ") != std::string::npos; };
  info.avx512f = has("avx512f");
  info.avx512_bf16 = has("avx512_bf16");
  const bool amx_cpu = has("amx_tile") && has("amx_bf16");
  const bool amx_granted = amx_cpu && request_amx_permission();
  info.amx_bf16 = amx_granted;
  info.amx_int8 = amx_granted && has("amx_int8");

  cpu_set_t set;
  CPU_ZERO(&set);
  info.logical_cores =
      sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return info;
}

}  // namespace

std::string CpuInfo::isa_summary() const {
  std::ostringstream out;
  const char* sep = "";
  auto add = [&](bool on, const char* name) {
    if (on) {
      out << sep << name;
      sep = " ";
    }
  };
  add(avx512f, "avx512f");
  add(avx512_bf16, "avx512_bf16");
  add(amx_bf16, "amx_bf16");
  add(amx_int8, "amx_int8");
  return out.str();
}

const CpuInfo& cpu_info() {
  static const CpuInfo info = probe();
  return info;
}

// The runtime reports a machine without any NVIDIA driver as "CUDA driver version is insufficient for CUDA runtime
// version", which reads as "update the driver" on a CI runner that has no GPU at all.
std::string no_gpu_reason_from(std::string_view error_name, std::string_view error_text, int driver_version,
                               int runtime_version) {
  if (error_name == "cudaErrorInsufficientDriver" && driver_version == 0)
    return "no GPU: no NVIDIA driver is installed on this machine";
  if (error_name == "cudaErrorInsufficientDriver")
    return fmt::format(
        "no usable GPU: the NVIDIA driver supports CUDA {}, older than the CUDA {} this build needs; "
        "update the driver",
        cuda_version(driver_version), cuda_version(runtime_version));
  if (error_name == "cudaErrorNoDevice")
    return "no GPU: the NVIDIA driver sees no device (none installed, or CUDA_VISIBLE_DEVICES hides them all)";
  return fmt::format("no usable GPU ({}: {})", error_name, error_text);
}

}  // namespace perfgate::bench
