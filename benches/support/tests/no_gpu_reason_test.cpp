// The skip reason of the GPU benchmarks on a machine without a usable GPU, from what the CUDA runtime said.
#include <string>

#include <gtest/gtest.h>

#include "perfgate/bench/hardware.hpp"

using perfgate::bench::no_gpu_reason_from;

namespace {
constexpr const char* kInsufficient = "CUDA driver version is insufficient for CUDA runtime version";
}

// No driver at all (a CPU-only CI runner): the runtime's "insufficient driver" must not read as "update the driver".
TEST(NoGpuReason, NoDriverInstalledSaysSoInsteadOfAnOldDriver) {
  const std::string r = no_gpu_reason_from("cudaErrorInsufficientDriver", kInsufficient, 0, 13000);
  EXPECT_EQ(r, "no GPU: no NVIDIA driver is installed on this machine");
}

TEST(NoGpuReason, AnOldDriverNamesBothCudaVersions) {
  EXPECT_EQ(no_gpu_reason_from("cudaErrorInsufficientDriver", kInsufficient, 12080, 13000),
            "no usable GPU: the NVIDIA driver supports CUDA 12.8, older than the CUDA 13.0 this build needs; update "
            "the driver");
}

TEST(NoGpuReason, NoDeviceNamesTheVisibleDevicesSetting) {
  const std::string r = no_gpu_reason_from("cudaErrorNoDevice", "no CUDA-capable device is detected", 13000, 13000);
  EXPECT_NE(r.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << r;
  EXPECT_EQ(r.rfind("no GPU: ", 0), 0u) << r;
}

TEST(NoGpuReason, AnyOtherErrorKeepsTheRuntimesNameAndText) {
  EXPECT_EQ(no_gpu_reason_from("cudaErrorDevicesUnavailable", "CUDA-capable device(s) is/are busy or unavailable",
                               13000, 13000),
            "no usable GPU (cudaErrorDevicesUnavailable: CUDA-capable device(s) is/are busy or unavailable)");
}
