// A stored baseline must fit this host (host_fit.hpp), and a class with too few sessions borrows a sibling's
// learned noise, widened (learned_noise.hpp).
#include "perfgate/host_fit.hpp"

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "perfgate/errors.hpp"
#include "perfgate/learned_noise.hpp"
#include "test_support.hpp"

using namespace perfgate;
using namespace perfgate::test_support;

namespace {

BenchmarkComparison compared(const std::string& name, double change, double threshold, double band = 0) {
  BenchmarkComparison b;
  b.name = name;
  b.verdict = Verdict::unchanged;
  b.driver = "time";
  MetricComparison t;
  t.name = "time";
  t.kind = MetricKind::latency;
  t.gated = true;
  t.change = change;
  t.threshold = threshold;
  t.learned_noise = band > 0;
  t.run_noise = band;
  b.metrics.push_back(t);
  return b;
}

void write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace

TEST(HostFit, CalibrationBenchmarksDecideAgainstTheClassSpread) {
  ComparisonReport r;
  r.benchmarks = {compared("s/calibration/matmul", 0.34, 0.05), compared("s/calibration/stream", 0.23, 0.05),
                  compared("s/work", 0.30, 0.05)};
  HostFit fit = host_fit(r);
  EXPECT_TRUE(fit.checked);
  EXPECT_FALSE(fit.fits) << fit.explain();
  EXPECT_NEAR(fit.shift, std::expm1(0.5 * (std::log1p(0.34) + std::log1p(0.23))), 1e-12);
  EXPECT_DOUBLE_EQ(fit.limit, 0.10);  // no learned band: twice the threshold
  EXPECT_NE(fit.explain().find("(beyond the 10.0% that the class's hosts differ by)"), std::string::npos)
      << fit.explain();
  // The direction in words, as the report's change column gives it: +28.4% time is a slower host.
  EXPECT_EQ(
      fit.explain().rfind("this host runs 28.4% slower than the baseline's host by its calibration benchmarks (2)", 0),
      0u)
      << fit.explain();
  r.benchmarks = {compared("s/calibration/matmul", -0.151, 0.05)};
  EXPECT_EQ(host_fit(r).explain().rfind("this host runs 15.1% faster than the baseline's host", 0), 0u)
      << host_fit(r).explain();
  r.benchmarks = {compared("s/calibration/matmul", 0.0001, 0.05)};
  EXPECT_EQ(host_fit(r).explain().rfind("this host runs as fast as the baseline's host", 0), 0u)
      << host_fit(r).explain();
  // With a learned band of 1%, the limit is 3 x sqrt 2 x 1% = 4.2%: a 3% host difference fits.
  r.benchmarks = {compared("s/calibration/matmul", 0.03, 0.02, 0.01)};
  fit = host_fit(r);
  EXPECT_TRUE(fit.fits) << fit.explain();
  EXPECT_NEAR(fit.limit, 3 * std::sqrt(2.0) * 0.01, 1e-12);
}

TEST(HostFit, CommonModeStandsInWithEnoughBenchmarks) {
  EXPECT_LE(kMinCommonModeBenchmarks, 6);  // the synthetic suite's six gated benchmarks get a check
  ComparisonReport r;
  for (int i = 0; i < kMinCommonModeBenchmarks - 1; ++i)
    r.benchmarks.push_back(compared("s/b" + std::to_string(i), 0.5, 0.05));
  EXPECT_FALSE(host_fit(r).checked);  // too few benchmarks: nothing to say
  EXPECT_TRUE(host_fit(r).fits);
  r.benchmarks.push_back(compared("s/last", 0.5, 0.05));
  const HostFit fit = host_fit(r);
  EXPECT_TRUE(fit.checked);
  EXPECT_FALSE(fit.fits);
  EXPECT_NE(fit.basis.find("common mode"), std::string::npos);
  // One real regression among quiet benchmarks moves no common mode.
  ComparisonReport quiet;
  for (int i = 0; i < 10; ++i)
    quiet.benchmarks.push_back(compared("s/q" + std::to_string(i), i == 0 ? 0.5 : 0.001, 0.05));
  EXPECT_TRUE(host_fit(quiet).fits);
}

TEST(BorrowedNoise, SiblingBandsWidenedUnderThisClass) {
  TempDir d;
  write(d.path / "gpu-h100-x1" / "noise.json",
        R"({"perfgate_noise": 1, "machine_class": "gpu-h100-x1", "min_sessions": 5, "history_sessions": 14,
            "bands": [{"benchmark": "s/a", "metric": "time", "relative_sd": 0.002, "sessions": 14,
                       "relative_sd_common_mode": 0.001, "sessions_common_mode": 14}]})");
  write(d.path / "gpu-h200-x1" / "noise.json",
        R"({"perfgate_noise": 1, "machine_class": "gpu-h200-x1", "borrow_from": "../gpu-h100-x1/noise.json",
            "widen": 1.5, "own_sessions": 2})");
  const LearnedNoiseTable t = load_noise_snapshot((d.path / "gpu-h200-x1" / "noise.json").string());
  EXPECT_EQ(t.machine_class, "gpu-h200-x1");
  EXPECT_EQ(t.borrowed_from, "gpu-h100-x1");
  EXPECT_EQ(t.own_sessions, 2);
  EXPECT_EQ(t.history_sessions, 14);
  const LearnedBand* band = t.usable("s/a", "time");
  ASSERT_NE(band, nullptr);
  EXPECT_DOUBLE_EQ(band->relative_sd, 0.003);
  EXPECT_DOUBLE_EQ(*band->relative_sd_common_mode, 0.0015);
}

TEST(BorrowedNoise, RefusesNarrowingChainsAndBandsOfItsOwn) {
  TempDir d;
  const std::string head = R"({"perfgate_noise": 1, "machine_class": "c", )";
  EXPECT_THROW((void)parse_noise_snapshot(head + R"("borrow_from": "x.json", "widen": 0.8})", "n.json"), InputError);
  EXPECT_THROW((void)parse_noise_snapshot(head + R"("borrow_from": "x.json"})", "n.json"), InputError);
  EXPECT_THROW((void)parse_noise_snapshot(head + R"("borrow_from": "x.json", "widen": 1, "bands": []})", "n.json"),
               InputError);
  write(d.path / "a" / "noise.json", head + R"("borrow_from": "../b/noise.json", "widen": 1.2})");
  write(d.path / "b" / "noise.json", head + R"("borrow_from": "../a/noise.json", "widen": 1.2})");
  try {
    (void)load_noise_snapshot((d.path / "a" / "noise.json").string());
    FAIL() << "a chain of borrowing was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("borrows in turn"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)load_noise_snapshot((d.path / "missing" / "noise.json").string()), InputError);
}
