// perfgate/bench/nvml.hpp: what a repetition's NVML samples sum up to, and the monitor and the host's GPU
// count on any machine;
// perfgate/bench/setup_profile.hpp: the one-line profile of a process.
#include <cmath>
#include <thread>

#include <gtest/gtest.h>

#include "perfgate/bench/nvml.hpp"
#include "perfgate/bench/setup_profile.hpp"

namespace nvml = perfgate::bench::nvml;

TEST(NvmlReasons, PowerThermalAndBenignBits) {
  EXPECT_FALSE(nvml::is_throttling(0x0));
  EXPECT_FALSE(nvml::is_throttling(0x1 | 0x2 | 0x10 | 0x100));  // idle, app clocks, sync boost, display
  EXPECT_TRUE(nvml::is_power_cap(0x4));                         // sw_power_cap
  EXPECT_TRUE(nvml::is_power_cap(0x80));                        // hw_power_brake
  EXPECT_FALSE(nvml::is_thermal(0x4));
  EXPECT_TRUE(nvml::is_thermal(0x8));  // hw_slowdown
  EXPECT_TRUE(nvml::is_thermal(0x20));
  EXPECT_TRUE(nvml::is_thermal(0x40));
  EXPECT_EQ(nvml::reason_names(0x4 | 0x1), "gpu_idle sw_power_cap");
  EXPECT_EQ(nvml::reason_names(0), "none");
}

TEST(NvmlSummary, MeansMinimaSharesAndTheUnionOfReasons) {
  std::vector<nvml::Sample> s(4);
  s[0] = {1980u, 500.0, 0x0ull};
  s[1] = {1500u, 700.0, 0x4ull};                      // power cap
  s[2] = {1200u, 720.0, 0x4ull | 0x20};               // power cap and heat
  s[3] = {std::nullopt, std::nullopt, std::nullopt};  // NVML did not answer
  const auto m = nvml::summarise(s, 700.0);
  EXPECT_EQ(m.samples, 4);
  EXPECT_DOUBLE_EQ(m.sm_clock_mhz_mean, (1980.0 + 1500 + 1200) / 3);
  EXPECT_DOUBLE_EQ(m.sm_clock_mhz_min, 1200.0);
  EXPECT_DOUBLE_EQ(m.power_w_mean, (500.0 + 700 + 720) / 3);
  EXPECT_DOUBLE_EQ(m.power_w_max, 720.0);
  EXPECT_DOUBLE_EQ(m.power_limit_w, 700.0);
  EXPECT_DOUBLE_EQ(m.throttled_share, 2.0 / 3);  // of the 3 samples with reasons
  EXPECT_DOUBLE_EQ(m.power_capped_share, 2.0 / 3);
  EXPECT_DOUBLE_EQ(m.thermal_share, 1.0 / 3);
  EXPECT_EQ(m.reasons_seen, 0x4ull | 0x20);
}

TEST(NvmlSummary, NoReasonsMeansUnknownShares) {
  std::vector<nvml::Sample> s(2);
  s[0].sm_clock_mhz = 1000;
  s[1].sm_clock_mhz = 2000;
  const auto m = nvml::summarise(s, 0.0);
  EXPECT_DOUBLE_EQ(m.sm_clock_mhz_mean, 1500.0);
  EXPECT_DOUBLE_EQ(m.power_w_mean, 0.0);
  EXPECT_TRUE(std::isnan(m.throttled_share));
}

TEST(NvmlMonitor, SamplesTheGpuWhereNvmlIsAndNothingElsewhere) {
  nvml::Monitor monitor("0000:00:00.0");  // no such GPU anywhere
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto m = monitor.stop();
  EXPECT_EQ(m.samples, 0);
  EXPECT_EQ(monitor.stop().samples, 0);  // stop() again returns the same
}

// Without NVML there is no host GPU count to record (the machine class then stays the visible count's);
// with it, the count comes back.
TEST(NvmlDeviceCount, AnswersExactlyWhereNvmlIs) {
  EXPECT_EQ(nvml::device_count().has_value(), nvml::available()) << nvml::unavailable_reason();
}

TEST(SetupProfile, OneLineWithEveryLabelInFirstSeenOrder) {
  perfgate::bench::add_setup_time("test_weights", 0.25);
  perfgate::bench::add_setup_time("test_check", 1.5);
  perfgate::bench::add_setup_time("test_weights", 0.5);
  { perfgate::bench::SetupSpan span("test_span"); }
  const std::string line = perfgate::bench::setup_profile_line();
  EXPECT_EQ(line.rfind("perfgate setup profile: ", 0), 0u) << line;
  const auto w = line.find("test_weights 0.750 s (2x)");
  const auto c = line.find("test_check 1.500 s (1x)");
  ASSERT_NE(w, std::string::npos) << line;
  ASSERT_NE(c, std::string::npos) << line;
  EXPECT_LT(w, c);
  EXPECT_NE(line.find("test_span 0.0"), std::string::npos) << line;
}
