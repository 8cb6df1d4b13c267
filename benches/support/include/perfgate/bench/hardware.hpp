#pragma once
// Host hardware probe. GPU facts live in cuda.hpp (CUDA runtime) and nvml.hpp (driver, dlopen).
#include <string>
#include <string_view>

namespace perfgate::bench {

struct CpuInfo {
  std::string model;  // "Intel(R) Xeon(R) ..."
  // "AuthenticAMD family 26 model 2": the CPU generation, which a VM's "model name" ("AMD EPYC") hides.
  // Empty where /proc/cpuinfo does not give it (non-x86).
  std::string signature;
  int logical_cores = 0;  // what this process may run on (affinity mask)
  bool avx512f = false;
  bool avx512_bf16 = false;
  bool amx_bf16 = false;  // CPUID says so and the kernel granted the AMX tile state
  bool amx_int8 = false;
  std::string isa_summary() const;  // "avx512f avx512_bf16 amx_bf16 amx_int8"
};

const CpuInfo& cpu_info();

// Why the GPU benchmarks have no GPU here, in words a user can act on, from what the CUDA runtime said when asked for
// its devices: the error's name and text (cudaGetErrorName, cudaGetErrorString), and the CUDA versions of the
// installed driver (cudaDriverGetVersion: 0 where none is installed) and of this build's runtime (13000 = 13.0).
std::string no_gpu_reason_from(std::string_view error_name, std::string_view error_text, int driver_version,
                               int runtime_version);

}  // namespace perfgate::bench
