// Which gate a suite gets: a stored baseline only when it fits the machine class and CPU generation,
// a reference build otherwise, and nothing to gate where the hardware is missing.
#include "perfgate/gate_plan.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "perfgate/baseline_store.hpp"

namespace fs = std::filesystem;
using perfgate::GateMode;

namespace {

const char* kZen5 = "AuthenticAMD family 26 model 2";
const char* kZen4 = "AuthenticAMD family 25 model 17";

perfgate::RunContext epyc(const std::string& signature) {
  perfgate::RunContext c;
  c.source_file = "probe";
  c.fields = {{"perfgate.cpu_model", "AMD EPYC"},
              {"perfgate.cpu_cores", "2"},
              {"perfgate.cpu_isa", "avx512f avx512_bf16"},
              {"perfgate.amx", "no"},
              {"perfgate.cpu_signature", signature}};
  return c;
}

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("perfgate_gate_plan_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// A one-benchmark baseline of suite `s` recorded on `signature`, in <class>/ or <class>/<generation>/.
void write_baseline(const fs::path& dir, const std::string& signature, const std::string& generation = "") {
  const fs::path folder = dir / "cpu-epyc-avx512-2c" / generation;
  fs::create_directories(folder);
  std::ofstream(folder / "s.json") << R"({"context": {"perfgate.cpu_model": "AMD EPYC",
    "perfgate.cpu_cores": "2", "perfgate.cpu_isa": "avx512f", "perfgate.amx": "no",
    "perfgate.cpu_signature": ")" << signature
                                   << R"("},
    "benchmarks": [{"name": "s/a", "run_name": "s/a", "run_type": "iteration", "repetitions": 1,
                    "repetition_index": 0, "threads": 1, "iterations": 10, "real_time": 1.5, "cpu_time": 1.5,
                    "time_unit": "ns"}]})";
}

perfgate::BenchBinary bench_in(const fs::path& build, int gpus = -1) {
  fs::create_directories(build / "bin");
  fs::create_directories(build / "suites");
  if (gpus >= 0) std::ofstream(build / "suites" / "s.gpus") << gpus;
  return {"s", build / "bin" / "bench_s"};
}

}  // namespace

TEST(GatePlan, StoredBaselineOfThisGenerationIsUsed) {
  const fs::path d = scratch("fits");
  write_baseline(d / "baselines", kZen5);
  const auto p = perfgate::plan_suite(bench_in(d / "build"), epyc(kZen5), d / "baselines");
  EXPECT_EQ(p.mode, GateMode::stored_baseline) << p.reason;
  EXPECT_EQ(p.machine_class, "cpu-epyc-avx512-2c");
  EXPECT_NE(p.reason.find("fits"), std::string::npos) << p.reason;
}

TEST(GatePlan, AnotherCpuGenerationGoesToTheReference) {
  const fs::path d = scratch("generation");
  write_baseline(d / "baselines", kZen5);
  const auto p = perfgate::plan_suite(bench_in(d / "build"), epyc(kZen4), d / "baselines");
  EXPECT_EQ(p.mode, GateMode::reference);
  EXPECT_NE(p.reason.find(kZen5), std::string::npos) << p.reason;
  EXPECT_NE(p.reason.find(kZen4), std::string::npos) << p.reason;
}

TEST(GatePlan, AGenerationFolderServesItsGenerationBesideTheClassLevelBaseline) {
  const fs::path d = scratch("generation_folder");
  write_baseline(d / "baselines", kZen5);
  write_baseline(d / "baselines", kZen4, "amd-family25-model17");
  const auto zen4 = perfgate::plan_suite(bench_in(d / "build"), epyc(kZen4), d / "baselines");
  EXPECT_EQ(zen4.mode, GateMode::stored_baseline) << zen4.reason;
  EXPECT_EQ(fs::path(zen4.baseline_file).parent_path().filename(), "amd-family25-model17");
  const auto zen5 = perfgate::plan_suite(bench_in(d / "build"), epyc(kZen5), d / "baselines");
  EXPECT_EQ(zen5.mode, GateMode::stored_baseline) << zen5.reason;
  EXPECT_EQ(fs::path(zen5.baseline_file).parent_path().filename(), "cpu-epyc-avx512-2c");
  EXPECT_EQ(perfgate::plan_suite(bench_in(d / "build"), epyc("AuthenticAMD family 25 model 1"), d / "baselines").mode,
            GateMode::reference);
}

TEST(GatePlan, GenerationKeysAreFolderNames) {
  EXPECT_EQ(perfgate::cpu_generation_key(kZen4), "amd-family25-model17");
  EXPECT_EQ(perfgate::cpu_generation_key("GenuineIntel family 6 model 143"), "intel-family6-model143");
  EXPECT_EQ(perfgate::cpu_generation_key(""), "");
  EXPECT_EQ(perfgate::cpu_generation_key("Odd/Vendor family 1"), "odd_vendor-family1");
}

TEST(GatePlan, NoBaselineGoesToTheReference) {
  const fs::path d = scratch("none");
  const auto p = perfgate::plan_suite(bench_in(d / "build"), epyc(kZen4), d / "baselines");
  EXPECT_EQ(p.mode, GateMode::reference);
  EXPECT_NE(p.reason.find("no stored baseline for machine class cpu-epyc-avx512-2c"), std::string::npos) << p.reason;
}

TEST(GatePlan, MissingGpusMeanNothingToGate) {
  const fs::path d = scratch("gpus");
  const auto b = bench_in(d / "build", 1);
  EXPECT_EQ(perfgate::gpus_needed(b), 1);
  const auto p = perfgate::plan_suite(b, epyc(kZen4), d / "baselines");
  EXPECT_EQ(p.mode, GateMode::hardware_missing);
  EXPECT_NE(p.reason.find("needs 1 GPU(s), this machine has 0"), std::string::npos) << p.reason;
}

TEST(GatePlan, ABinaryThatCannotBeAskedIsGatedAsBefore) {
  const fs::path d = scratch("unknown");
  const auto p = perfgate::plan_suite(bench_in(d / "build"), std::nullopt, d / "baselines", "exit code 2");
  EXPECT_EQ(p.mode, GateMode::stored_baseline);
  EXPECT_NE(p.reason.find("exit code 2"), std::string::npos) << p.reason;
}

// A binary that cannot be asked but whose runs will get this host's CPU facts: the plan names the class, the CPU
// generation and the baseline file those runs will be gated by, still on the stored-baseline gate.
TEST(GatePlan, ABinaryThatCannotBeAskedIsPlannedWithThisHostsFacts) {
  const fs::path d = scratch("host_facts");
  write_baseline(d / "baselines", kZen4);
  write_baseline(d / "baselines", kZen5, perfgate::cpu_generation_key(kZen5));
  const auto p = perfgate::plan_unasked_suite(bench_in(d / "build"), epyc(kZen5), d / "baselines", "exit code 1");
  EXPECT_EQ(p.mode, GateMode::stored_baseline);
  EXPECT_EQ(p.machine_class, "cpu-epyc-avx512-2c");
  EXPECT_EQ(p.cpu_signature, kZen5);
  EXPECT_EQ(p.baseline_file,
            (d / "baselines" / "cpu-epyc-avx512-2c" / perfgate::cpu_generation_key(kZen5) / "s.json").string());
  EXPECT_NE(p.reason.find("exit code 1"), std::string::npos) << p.reason;
  EXPECT_NE(p.reason.find("this host's CPU (" + std::string(kZen5) + ") names its machine class"), std::string::npos)
      << p.reason;
  EXPECT_NE(p.reason.find(p.baseline_file + " gates it"), std::string::npos) << p.reason;
  EXPECT_EQ(p.reason.find("NVIDIA GPU"), std::string::npos) << p.reason;
  const auto unrecorded = perfgate::plan_unasked_suite(bench_in(d / "build"), epyc(kZen5), d / "none", "exit code 1");
  EXPECT_EQ(unrecorded.mode, GateMode::stored_baseline);
  EXPECT_NE(unrecorded.reason.find("no baseline recorded yet (" + unrecorded.baseline_file +
                                   " does not exist): its benchmarks are new until --update-baseline records one"),
            std::string::npos)
      << unrecorded.reason;
  perfgate::RunContext gpu_host = epyc(kZen5);
  gpu_host.fields["perfgate.host_gpu_count"] = "2";
  const auto on_gpu_host =
      perfgate::plan_unasked_suite(bench_in(d / "build"), gpu_host, d / "baselines", "exit code 1");
  EXPECT_EQ(on_gpu_host.machine_class, "cpu-epyc-avx512-2c");
  EXPECT_NE(on_gpu_host.reason.find("this host has 2 NVIDIA GPU(s)"), std::string::npos) << on_gpu_host.reason;
  EXPECT_NE(on_gpu_host.reason.find("PERFGATE_MACHINE_CLASS"), std::string::npos) << on_gpu_host.reason;
  const auto unknown =
      perfgate::plan_unasked_suite(bench_in(d / "build"), std::nullopt, d / "baselines", "exit code 1");
  EXPECT_TRUE(unknown.machine_class.empty());
  EXPECT_NE(unknown.reason.find("could not be asked"), std::string::npos) << unknown.reason;
}

TEST(GatePlan, ProbeOfANonBenchFailsCleanly) {
  std::string why;
  const auto c = perfgate::probe_context({"s", "/bin/false"}, {}, {}, 10, &why);
  EXPECT_FALSE(c.has_value());
  EXPECT_NE(why.find("--perfgate_context_only"), std::string::npos) << why;
}
