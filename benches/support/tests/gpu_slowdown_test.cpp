// perfgate/bench/gpu_slowdown.hpp: the planted-slowdown knob of the GPU suites.
#include "perfgate/bench/gpu_slowdown.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace pb = perfgate::bench;

namespace {

std::string error_of(const char* fraction, const char* filter) {
  try {
    pb::GpuSlowdown::parse(fraction, filter);
  } catch (const std::invalid_argument& e) { return e.what(); }
  return "";
}

TEST(GpuSlowdown, UnsetOrZeroPlantsNothing) {
  for (const char* text : {static_cast<const char*>(nullptr), "", "0", "0.0"}) {
    const pb::GpuSlowdown s = pb::GpuSlowdown::parse(text, nullptr);
    EXPECT_FALSE(s.active());
    EXPECT_EQ(s.fraction_for("expert_gemm/ffn/per_expert/shape:deepseek-v3"), 0.0);
  }
}

TEST(GpuSlowdown, FractionAppliesToEveryBenchmarkWithoutFilter) {
  const pb::GpuSlowdown s = pb::GpuSlowdown::parse("0.03", nullptr);
  EXPECT_TRUE(s.active());
  EXPECT_DOUBLE_EQ(s.fraction(), 0.03);
  EXPECT_DOUBLE_EQ(s.fraction_for("transfers/d2d/gpu:0/bytes:268435456"), 0.03);
  EXPECT_DOUBLE_EQ(s.fraction_for("anything"), 0.03);
}

TEST(GpuSlowdown, FilterSelectsByRegexSearch) {
  const pb::GpuSlowdown s = pb::GpuSlowdown::parse("0.1", "routing:zipf");
  EXPECT_DOUBLE_EQ(s.fraction_for("expert_gemm/ffn/bucketed/shape:deepseek-v3/tokens:4096/routing:zipf/mode:cold"),
                   0.1);
  EXPECT_EQ(s.fraction_for("expert_gemm/ffn/bucketed/shape:deepseek-v3/tokens:4096/routing:uniform/mode:cold"), 0.0);
  EXPECT_EQ(s.filter(), "routing:zipf");
}

TEST(GpuSlowdown, BadValuesNameTheVariable) {
  for (const char* bad : {"abc", "0.03x", "-0.01", "1.5", "nan", "inf", " "}) {
    const std::string err = error_of(bad, nullptr);
    EXPECT_NE(err.find("PERFGATE_GPU_SLOWDOWN="), std::string::npos) << bad << ": " << err;
  }
  const std::string err = error_of("0.05", "(unclosed");
  EXPECT_NE(err.find("PERFGATE_GPU_SLOWDOWN_FILTER="), std::string::npos) << err;
}

TEST(GpuSlowdownDeathTest, BadEnvironmentExitsTwo) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        ::setenv("PERFGATE_GPU_SLOWDOWN", "three percent", 1);
        pb::gpu_slowdown();
      },
      ::testing::ExitedWithCode(2), "PERFGATE_GPU_SLOWDOWN='three percent'");
}

}  // namespace
