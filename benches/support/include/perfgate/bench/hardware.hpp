#pragma once
// Host hardware probe. GPU facts live in cuda.hpp (CUDA runtime) and nvml.hpp (driver, dlopen).
#include <string>
#include <string_view>

#include "perfgate/cpu_facts.hpp"

namespace perfgate::bench {

// This host's CPU (perfgate/cpu_facts.hpp), with AMX only where the kernel granted this process the tile state.
struct CpuInfo : CpuFacts {
  int logical_cores = 0;  // what this process may run on (affinity mask)
};

const CpuInfo& cpu_info();

// Why the GPU benchmarks have no GPU here, in words a user can act on, from what the CUDA runtime said when asked for
// its devices: the error's name and text (cudaGetErrorName, cudaGetErrorString), and the CUDA versions of the
// installed driver (cudaDriverGetVersion: 0 where none is installed) and of this build's runtime (13000 = 13.0).
std::string no_gpu_reason_from(std::string_view error_name, std::string_view error_text, int driver_version,
                               int runtime_version);

}  // namespace perfgate::bench
