#include "perfgate/bench/hardware.hpp"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
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
  static_cast<CpuFacts&>(info) = parse_cpuinfo(cpuinfo);
  if (info.amx_bf16 && !request_amx_permission()) info.amx_bf16 = info.amx_int8 = false;

  cpu_set_t set;
  CPU_ZERO(&set);
  info.logical_cores =
      sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return info;
}

}  // namespace

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
