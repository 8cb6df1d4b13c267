// Machine classes: derivation from the context keys the bench support library writes, the
// PERFGATE_MACHINE_CLASS override, stored baseline classes, and the mismatch check.
#include "perfgate/machine_class.hpp"

#include <cstdlib>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "perfgate/loader.hpp"

using perfgate::InputError;
using perfgate::RunContext;

namespace {

std::string data(const std::string& rel) { return std::string(PERFGATE_TEST_DATA_DIR) + "/" + rel; }

RunContext ctx(std::map<std::string, std::string> fields) {
  RunContext c;
  c.source_file = "ctx.json";
  c.fields = std::move(fields);
  return c;
}

// One benchmark `name` with two samples in one process run of context `c`.
perfgate::ResultSet one_benchmark_run(const std::string& name, const RunContext& c) {
  perfgate::ResultSet rs;
  perfgate::BenchmarkResult b;
  b.name = name;
  b.raw_name = b.name;
  b.time.name = "time";
  b.time.samples = {1.0, 1.1};
  b.time.process_run = {0, 0};
  rs.index[b.name] = 0;
  rs.benchmarks.push_back(b);
  rs.contexts.push_back(c);
  return rs;
}

perfgate::ResultSet set_of(std::vector<RunContext> contexts) {
  perfgate::ResultSet rs;
  rs.contexts = std::move(contexts);
  return rs;
}

// Sets or clears the machine-class override (what the CLI installs from PERFGATE_MACHINE_CLASS) for one
// test and restores it afterwards.
class OverrideGuard {
 public:
  explicit OverrideGuard(const char* value) : old_(perfgate::machine_class_override()) {
    perfgate::set_machine_class_override(value != nullptr ? value : "");
  }
  ~OverrideGuard() { perfgate::set_machine_class_override(old_); }
  OverrideGuard(const OverrideGuard&) = delete;
  OverrideGuard& operator=(const OverrideGuard&) = delete;

 private:
  std::string old_;
};

}  // namespace

TEST(MachineClass, DerivesCpuClasses) {
  EXPECT_EQ(perfgate::derive_machine_class(ctx({{"perfgate.cpu_model", "Intel(R) Xeon(R) Platinum 8480+"},
                                                {"perfgate.amx", "yes"},
                                                {"perfgate.cpu_cores", "2"}})),
            "cpu-xeon-amx-2c");
  EXPECT_EQ(perfgate::derive_machine_class(ctx({{"perfgate.cpu_model", "AMD EPYC 9654 96-Core Processor"},
                                                {"perfgate.amx", "no"},
                                                {"perfgate.cpu_cores", "32"}})),
            "cpu-epyc-32c");
  // AVX-512 without AMX is its own class: the oneDNN variants run there and skip on AVX2-only CPUs.
  EXPECT_EQ(perfgate::derive_machine_class(ctx({{"perfgate.cpu_model", "AMD EPYC"},
                                                {"perfgate.amx", "no"},
                                                {"perfgate.cpu_isa", "avx512f avx512_bf16"},
                                                {"perfgate.cpu_cores", "2"}})),
            "cpu-epyc-avx512-2c");
  EXPECT_EQ(perfgate::derive_machine_class(ctx({{"perfgate.cpu_model", "AMD EPYC"},
                                                {"perfgate.amx", "no"},
                                                {"perfgate.cpu_isa", ""},
                                                {"perfgate.cpu_cores", "2"}})),
            "cpu-epyc-2c");
  // Without perfgate.cpu_cores: Google Benchmark's num_cpus.
  EXPECT_EQ(perfgate::derive_machine_class(ctx({{"perfgate.cpu_model", "AMD EPYC"}, {"num_cpus", "2"}})),
            "cpu-epyc-2c");
  // Nothing known: still a valid class.
  const std::string bare = perfgate::derive_machine_class(ctx({}));
  EXPECT_EQ(bare, "cpu-unknown");
  EXPECT_NO_THROW(perfgate::validate_machine_class(bare));
}

TEST(MachineClass, DerivesGpuClasses) {
  EXPECT_EQ(perfgate::derive_machine_class(ctx({{"perfgate.gpu_count", "2"},
                                                {"perfgate.gpu0.name", "NVIDIA H200"},
                                                {"perfgate.cpu_model", "Intel(R) Xeon(R) Platinum 8480+"}})),
            "gpu-h200-x2");
  EXPECT_EQ(perfgate::derive_machine_class(
                ctx({{"perfgate.gpu_count", "1"}, {"perfgate.gpu0.name", "NVIDIA H100 80GB HBM3"}})),
            "gpu-h100-x1");
  EXPECT_EQ(perfgate::derive_machine_class(
                ctx({{"perfgate.gpu_count", "1"}, {"perfgate.gpu0.name", "NVIDIA GeForce RTX 4090"}})),
            "gpu-rtx4090-x1");
  EXPECT_EQ(perfgate::derive_machine_class(
                ctx({{"perfgate.gpu_count", "8"}, {"perfgate.gpu0.name", "NVIDIA A100-SXM4-80GB"}})),
            "gpu-a100-x8");
  // A GPU bench binary on a machine without a GPU reports gpu_count 0: a CPU class.
  EXPECT_EQ(perfgate::derive_machine_class(
                ctx({{"perfgate.gpu_count", "0"}, {"perfgate.cpu_model", "AMD EPYC"}, {"perfgate.cpu_cores", "2"}})),
            "cpu-epyc-2c");
}

// perfgate.host_gpu_count (NVML: every GPU of the host) marks a job that sees only part of a bigger host: a
// 1-GPU job on a 2-GPU host is not the machine a 1-GPU VM's baseline was recorded on.
TEST(MachineClass, HostWithMoreGpusThanTheJobSeesIsItsOwnClass) {
  const auto h200 = [](const char* visible, const char* host) {
    return perfgate::derive_machine_class(ctx(
        {{"perfgate.gpu_count", visible}, {"perfgate.host_gpu_count", host}, {"perfgate.gpu0.name", "NVIDIA H200"}}));
  };
  EXPECT_EQ(h200("1", "1"), "gpu-h200-x1");  // a 1-GPU VM
  EXPECT_EQ(h200("1", "2"), "gpu-h200-x1-of2");
  EXPECT_EQ(h200("2", "4"), "gpu-h200-x2-of4");
  EXPECT_EQ(h200("2", "2"), "gpu-h200-x2");  // the whole host
  EXPECT_NO_THROW(perfgate::validate_machine_class(h200("1", "8")));

  // Gated against a 1-GPU VM's baseline, a 1-GPU job of a 2-GPU host is a class mismatch.
  OverrideGuard machine_class_override(nullptr);
  const auto vm = set_of({ctx({{"perfgate.gpu_count", "1"}, {"perfgate.gpu0.name", "NVIDIA H200"}})});
  const auto part = set_of(
      {ctx({{"perfgate.gpu_count", "1"}, {"perfgate.host_gpu_count", "2"}, {"perfgate.gpu0.name", "NVIDIA H200"}})});
  const auto check = perfgate::check_machine_class(vm, part);
  EXPECT_FALSE(check.same);
  EXPECT_EQ(check.baseline_class, "gpu-h200-x1");
  EXPECT_EQ(check.current_class, "gpu-h200-x1-of2");
}

// Files without the key (no NVML, older bench binaries) and values that cannot be a larger host keep
// today's class, so every stored baseline keeps its folder.
TEST(MachineClass, MissingOrUnusableHostGpuCountKeepsTheVisibleCountClass) {
  EXPECT_EQ(perfgate::derive_machine_class(ctx({{"perfgate.gpu_count", "1"}, {"perfgate.gpu0.name", "NVIDIA H200"}})),
            "gpu-h200-x1");
  for (const char* host : {"", "two", "2x", "-2", "1", "0", "99999999999999999999"}) {
    EXPECT_EQ(
        perfgate::derive_machine_class(ctx(
            {{"perfgate.gpu_count", "2"}, {"perfgate.host_gpu_count", host}, {"perfgate.gpu0.name", "NVIDIA H200"}})),
        "gpu-h200-x2")
        << "host_gpu_count '" << host << "'";
  }
  // A CPU run ignores it: no GPU is visible, so the class is the CPU's.
  EXPECT_EQ(perfgate::derive_machine_class(ctx({{"perfgate.gpu_count", "0"},
                                                {"perfgate.host_gpu_count", "2"},
                                                {"perfgate.cpu_model", "AMD EPYC"},
                                                {"perfgate.cpu_cores", "2"}})),
            "cpu-epyc-2c");
}

TEST(MachineClass, FromRealFixtures) {
  OverrideGuard machine_class_override(nullptr);
  EXPECT_EQ(perfgate::machine_class(perfgate::load_result_file(data("loader/gbench_1_7_1.json"))), "cpu-epyc-2c");
  EXPECT_EQ(perfgate::machine_class(perfgate::load_result_file(data("loader/gbench_1_8_3_handmade.json"))),
            "gpu-h200-x2");
}

TEST(MachineClass, EnvironmentOverridesDerivation) {
  OverrideGuard machine_class_override("cpu-xeon-amx-2c");
  const auto rs = set_of({ctx({{"perfgate.cpu_model", "AMD EPYC"}, {"perfgate.cpu_cores", "2"}})});
  EXPECT_EQ(perfgate::machine_class(rs), "cpu-xeon-amx-2c");
}

TEST(MachineClass, ContextKeyUsedWithoutOverride) {
  OverrideGuard machine_class_override(nullptr);
  const auto rs = set_of({ctx({{"perfgate.machine_class", "lab-box-3"}, {"perfgate.cpu_model", "AMD EPYC"}})});
  EXPECT_EQ(perfgate::machine_class(rs), "lab-box-3");
}

TEST(MachineClass, StoredBaselineClassWinsOverEnvironment) {
  OverrideGuard machine_class_override("cpu-other-4c");
  const auto baseline = set_of({ctx({{"perfgate.baseline.machine", "gpu-h200-x2"}})});
  EXPECT_EQ(perfgate::machine_class(baseline), "gpu-h200-x2");
}

TEST(MachineClass, InvalidOverrideIsInputError) {
  OverrideGuard machine_class_override("../../etc");
  const auto rs = set_of({ctx({})});
  try {
    (void)perfgate::machine_class(rs);
    FAIL();
  } catch (const InputError& e) { EXPECT_EQ(e.file, "PERFGATE_MACHINE_CLASS"); }
  EXPECT_THROW(perfgate::validate_machine_class("Upper"), InputError);
  EXPECT_THROW(perfgate::validate_machine_class(".."), InputError);
  EXPECT_THROW(perfgate::validate_machine_class(""), InputError);
  EXPECT_THROW(perfgate::validate_machine_class("a/b"), InputError);
  EXPECT_NO_THROW(perfgate::validate_machine_class("gpu-h200-x2"));
}

TEST(MachineClass, MixedClassesInOneSetAreRefused) {
  OverrideGuard machine_class_override(nullptr);
  const auto rs = set_of({ctx({{"perfgate.cpu_model", "AMD EPYC"}, {"perfgate.cpu_cores", "2"}}),
                          ctx({{"perfgate.gpu_count", "2"}, {"perfgate.gpu0.name", "NVIDIA H200"}})});
  EXPECT_THROW((void)perfgate::machine_class(rs), InputError);
  EXPECT_THROW((void)perfgate::machine_class(perfgate::ResultSet{}), InputError);
}

TEST(MachineClass, CheckReportsMismatch) {
  OverrideGuard machine_class_override(nullptr);
  const auto cpu = set_of({ctx({{"perfgate.cpu_model", "AMD EPYC"}, {"perfgate.cpu_cores", "2"}})});
  const auto gpu = set_of({ctx({{"perfgate.gpu_count", "2"}, {"perfgate.gpu0.name", "NVIDIA H200"}})});
  const auto same = perfgate::check_machine_class(cpu, cpu);
  EXPECT_TRUE(same.same);
  EXPECT_EQ(same.baseline_class, "cpu-epyc-2c");
  const auto diff = perfgate::check_machine_class(gpu, cpu);
  EXPECT_FALSE(diff.same);
  EXPECT_EQ(diff.baseline_class, "gpu-h200-x2");
  EXPECT_EQ(diff.current_class, "cpu-epyc-2c");
  EXPECT_NE(diff.message.find("gpu-h200-x2"), std::string::npos);
  // What the flag does is the caller's to say (compare refuses, a stored gate compares anyway): not twice.
  EXPECT_EQ(diff.message.find("--allow-machine-mismatch"), std::string::npos) << diff.message;
  EXPECT_EQ(diff.message.find('\n'), std::string::npos);
}

TEST(MachineClass, CheckWorksSuiteBySuite) {
  OverrideGuard machine_class_override(nullptr);
  // One comparison spanning a CPU suite and a GPU suite run on the same GPU machine.
  auto make = [](const std::string& suite, const RunContext& c, int run) {
    perfgate::BenchmarkResult b;
    b.name = suite + "/case";
    b.raw_name = b.name;
    b.time.name = "time";
    b.time.samples = {1.0, 1.1};
    b.time.process_run = {run, run};
    return std::make_pair(b, c);
  };
  auto build = [&](const std::vector<std::pair<perfgate::BenchmarkResult, RunContext>>& parts) {
    perfgate::ResultSet rs;
    for (const auto& [b, c] : parts) {
      rs.index[b.name] = rs.benchmarks.size();
      rs.benchmarks.push_back(b);
      rs.contexts.push_back(c);
    }
    return rs;
  };
  const RunContext cpu = ctx({{"perfgate.cpu_model", "Intel(R) Xeon(R) Platinum 8480+"},
                              {"perfgate.amx", "yes"},
                              {"perfgate.cpu_cores", "32"}});
  RunContext gpu = cpu;
  gpu.fields["perfgate.gpu_count"] = "2";
  gpu.fields["perfgate.gpu0.name"] = "NVIDIA H200";
  const auto base = build({make("lora_backward", cpu, 0), make("expert_gemm", gpu, 1)});
  const auto cur = build({make("lora_backward", cpu, 0), make("expert_gemm", gpu, 1)});
  EXPECT_THROW((void)perfgate::machine_class(cur), InputError);  // one class for the whole set: no
  const auto same = perfgate::check_machine_class(base, cur);
  EXPECT_TRUE(same.same) << same.message;
  EXPECT_EQ(same.current_class, "gpu-h200-x2 (expert_gemm), cpu-xeon-amx-32c (lora_backward)");

  // The GPU suite measured on a single-GPU machine: mismatch, named by suite.
  RunContext one_gpu = gpu;
  one_gpu.fields["perfgate.gpu_count"] = "1";
  auto other = build({make("lora_backward", cpu, 0), make("expert_gemm", one_gpu, 1)});
  auto named_base = base;
  for (auto* rs : {&named_base, &other})
    for (std::size_t k = 0; k < rs->contexts.size(); ++k)
      rs->contexts[k].source_file = fmt::format("{}-{}.json", rs == &other ? "current" : "baseline", k);
  const auto diff = perfgate::check_machine_class(named_base, other);
  EXPECT_FALSE(diff.same);
  EXPECT_NE(diff.message.find("expert_gemm: baseline gpu-h200-x2, current gpu-h200-x1"), std::string::npos)
      << diff.message;
  // The files named are the differing suite's, not each side's first file (lora_backward's, which agree).
  EXPECT_EQ(diff.baseline_file, "baseline-1.json");
  EXPECT_EQ(diff.current_file, "current-1.json");
  EXPECT_TRUE(same.baseline_file.empty() && same.current_file.empty());
}

// One class name ("AMD EPYC", AVX-512, 2 cores) can cover two CPU generations with the same binary 1.6x
// apart (docs/baselines.md, "Machine classes", CPU generation).
TEST(MachineClass, CpuGenerationWithinOneClassIsAMismatch) {
  OverrideGuard machine_class_override(nullptr);
  auto suite_set = [](const RunContext& c) { return one_benchmark_run("lora_backward/case", c); };
  const std::map<std::string, std::string> epyc = {
      {"perfgate.cpu_model", "AMD EPYC"}, {"perfgate.cpu_isa", "avx512f avx512_bf16"}, {"perfgate.cpu_cores", "2"}};
  RunContext zen4 = ctx(epyc), zen5 = ctx(epyc), unknown = ctx(epyc);
  zen4.fields["perfgate.cpu_signature"] = "AuthenticAMD family 25 model 17";
  zen5.fields["perfgate.cpu_signature"] = "AuthenticAMD family 26 model 2";

  const auto same = perfgate::check_machine_class(suite_set(zen5), suite_set(zen5));
  EXPECT_TRUE(same.same) << same.message;
  EXPECT_FALSE(same.cpu_changed);
  EXPECT_TRUE(same.unknown_cpu_note.empty());

  const auto changed = perfgate::check_machine_class(suite_set(zen4), suite_set(zen5));
  EXPECT_FALSE(changed.same);
  EXPECT_TRUE(changed.cpu_changed);
  EXPECT_EQ(changed.baseline_class, changed.current_class);
  EXPECT_NE(changed.message.find("family 25 model 17"), std::string::npos) << changed.message;
  EXPECT_NE(changed.message.find("family 26 model 2"), std::string::npos) << changed.message;

  // A baseline from before the signature existed: compared, with a note that names the current CPU.
  const auto old = perfgate::check_machine_class(suite_set(unknown), suite_set(zen5));
  EXPECT_TRUE(old.same) << old.message;
  EXPECT_NE(old.unknown_cpu_note.find("family 26 model 2"), std::string::npos) << old.unknown_cpu_note;

  // GPU classes do not hinge on the host CPU.
  RunContext h200a = zen4, h200b = zen5;
  for (RunContext* c : {&h200a, &h200b}) {
    c->fields["perfgate.gpu_count"] = "1";
    c->fields["perfgate.gpu0.name"] = "NVIDIA H200";
  }
  const auto gpu = perfgate::check_machine_class(suite_set(h200a), suite_set(h200b));
  EXPECT_TRUE(gpu.same) << gpu.message;
}

// Plain Google Benchmark JSON records no perfgate.cpu_signature; its own "caches" still tell two CPUs apart (a Zen 3
// runner's 512 KiB L2 against a Zen 5 runner's 1 MiB, both "cpu-unknown-2c"), so such runs are not compared.
TEST(MachineClass, PlainRunsFromCpusWithOtherCachesAreAnotherGeneration) {
  OverrideGuard machine_class_override(nullptr);
  auto runs_with = [](const std::map<std::string, std::string>& fields) {
    return one_benchmark_run("BM_Sum/1024", ctx(fields));
  };
  auto caches = [](int l2_kib) {
    return R"([{"type":"Data","level":1,"size":49152,"num_sharing":1},{"type":"Unified","level":2,"size":)" +
           std::to_string(l2_kib * 1024) +
           R"(,"num_sharing":1},{"type":"Unified","level":3,"size":33554432,"num_sharing":2}])";
  };
  const auto zen3 = runs_with({{"num_cpus", "2"}, {"caches", caches(512)}});
  const auto zen5 = runs_with({{"num_cpus", "2"}, {"caches", caches(1024)}});

  const auto changed = perfgate::check_machine_class(zen3, zen5);
  EXPECT_FALSE(changed.same);
  EXPECT_TRUE(changed.cpu_changed);
  EXPECT_EQ(changed.baseline_class, "cpu-unknown-2c");
  EXPECT_NE(changed.message.find("BM_Sum: Google Benchmark's context shows the baseline's CPU with caches L1 Data 48 "
                                 "KiB, L2 Unified 512 KiB, L3 Unified 32 MiB, the current one's with L1 Data 48 KiB, "
                                 "L2 Unified 1 MiB, L3 Unified 32 MiB"),
            std::string::npos)
      << changed.message;

  EXPECT_TRUE(perfgate::check_machine_class(zen5, zen5).same);
  // Caches on one side only, or unreadable ones: no evidence either way, compared as before.
  EXPECT_TRUE(perfgate::check_machine_class(runs_with({{"num_cpus", "2"}}), zen5).same);
  EXPECT_TRUE(perfgate::check_machine_class(runs_with({{"num_cpus", "2"}, {"caches", "[{\"level\": 2}]"}}), zen5).same);
  EXPECT_TRUE(perfgate::check_machine_class(runs_with({{"num_cpus", "2"}, {"caches", "not json"}}), zen5).same);
  // Where both sides name their CPU, the signature decides and the caches are not read.
  auto signed_runs = [&](int l2_kib) {
    return runs_with({{"perfgate.cpu_model", "AMD EPYC"},
                      {"perfgate.cpu_cores", "2"},
                      {"perfgate.cpu_signature", "AuthenticAMD family 26 model 2"},
                      {"caches", caches(l2_kib)}});
  };
  EXPECT_TRUE(perfgate::check_machine_class(signed_runs(512), signed_runs(1024)).same);
}

// One side's files of one suite from two machines (a glob that caught another host's run): the error names the file
// of each class, so the one that does not belong can be told from the rest.
TEST(MachineClass, RunsOfOneSuiteFromTwoMachinesNameBothFiles) {
  OverrideGuard machine_class_override(nullptr);
  perfgate::ResultSet side = one_benchmark_run("bm/a", ctx({{"num_cpus", "64"}}));
  side.contexts.front().source_file = "a-other-host.json";
  RunContext here = ctx({{"num_cpus", "2"}});
  here.source_file = "a1.json";
  side.contexts.push_back(here);
  side.benchmarks.front().time.samples.push_back(1.2);
  side.benchmarks.front().time.process_run.push_back(1);
  try {
    (void)perfgate::check_machine_class(side, side);
    FAIL() << "two machines' runs of one suite merged";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file, "a1.json");
    EXPECT_NE(std::string(e.what()).find("cpu-unknown-2c here, cpu-unknown-64c in a-other-host.json"),
              std::string::npos)
        << e.what();
  }
}
