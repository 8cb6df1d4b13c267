// This host's CPU facts: /proc/cpuinfo read into the keys a bench binary records, and the runner giving them to the
// process runs of a Google Benchmark binary that records none, so that its baselines have a machine class and a CPU
// generation (a baseline recorded on another generation is then measured and reported, not compared).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "perfgate/baseline_store.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/cpu_facts.hpp"
#include "perfgate/host_identity.hpp"
#include "perfgate/machine_class.hpp"
#include "perfgate/runner.hpp"
#include "perfgate/session.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
namespace keys = perfgate::context_keys;

namespace {

// The first processor of a Zen 5 VM's /proc/cpuinfo, as it reads (abridged), then a second one that must not count.
const char* kZen5Text =
    "processor\t: 0\n"
    "vendor_id\t: AuthenticAMD\n"
    "cpu family\t: 26\n"
    "model\t\t: 2\n"
    "model name\t: AMD EPYC\n"
    "flags\t\t: fpu vme avx2 avx512f avx512dq avx512_bf16 avx512_vnni\n"
    "\n"
    "processor\t: 1\n"
    "vendor_id\t: GenuineIntel\n"
    "cpu family\t: 6\n"
    "model\t\t: 143\n"
    "model name\t: Intel(R) Xeon(R) Platinum 8480+\n"
    "flags\t\t: fpu amx_tile amx_bf16 amx_int8\n";

perfgate::CpuFacts parse(const std::string& text) {
  std::istringstream in(text);
  return perfgate::parse_cpuinfo(in);
}

perfgate::CpuFacts epyc(const std::string& family, const std::string& model) {
  return parse("vendor_id\t: AuthenticAMD\ncpu family\t: " + family + "\nmodel\t\t: " + model +
               "\nmodel name\t: AMD EPYC\nflags\t\t: avx512f avx512_bf16\n");
}

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("perfgate_host_facts_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// A Google Benchmark binary without perfgate's main: its JSON context holds `context` (no perfgate keys by default).
fs::path plain_bench(const fs::path& dir, const std::string& context = "") {
  return perfgate::test_support::write_fake_bench(
      dir, {"fake/a"},
      "cat > \"$out\" <<'J'\n"
      "{\"context\": {" +
          context +
          "}, \"benchmarks\": [{\"name\": \"fake/a\", \"run_name\": \"fake/a\", "
          "\"run_type\": \"iteration\", \"repetitions\": 1, \"repetition_index\": 0, "
          "\"iterations\": 1, \"real_time\": 1.0, \"cpu_time\": 1.0, \"time_unit\": \"ns\"}]}\n"
          "J\n");
}

perfgate::MeasureOptions options_on(const fs::path& dir, const perfgate::CpuFacts& host, int cores) {
  perfgate::MeasureOptions o = perfgate::test_support::fake_measure_options(dir, 3, 7);
  o.environment.host_cpu = host;
  o.environment.host_cores = cores;
  return o;
}

// The runs of `side`'s plain binary on `cpu` with `cores` CPUs, stored as its baseline under dir/baselines, as the
// runner's host facts file them; the file written.
fs::path record_baseline(const fs::path& dir, const perfgate::Side& side, const perfgate::CpuFacts& cpu, int cores) {
  const std::string suite = side.benches.front().suite;
  const perfgate::MeasureResult recorded = perfgate::measure({side}, options_on(dir / "recorded", cpu, cores));
  const perfgate::ResultSet& runs = recorded.sides.at(0).suites.at(suite);
  perfgate::BaselineInfo info;
  info.machine_class = perfgate::machine_class(runs);
  return perfgate::write_baseline(dir / "baselines", suite, runs, info);
}

// The stored-baseline gate over dir/baselines, no confirm step.
perfgate::GateOptions stored_gate(const fs::path& dir) {
  perfgate::GateOptions gate;
  gate.baseline_dir = dir / "baselines";
  gate.confirm_rounds = 0;
  return gate;
}

const perfgate::RunContext& first_run(const perfgate::MeasureResult& r) {
  return r.sides.at(0).suites.begin()->second.contexts.at(0);
}

}  // namespace

TEST(CpuFacts, TheFirstProcessorOfCpuinfoDecides) {
  const perfgate::CpuFacts zen5 = parse(kZen5Text);
  EXPECT_EQ(zen5.model, "AMD EPYC");
  EXPECT_EQ(zen5.signature, "AuthenticAMD family 26 model 2");
  EXPECT_TRUE(zen5.avx512f);
  EXPECT_TRUE(zen5.avx512_bf16);
  EXPECT_FALSE(zen5.amx_bf16);
  EXPECT_EQ(zen5.isa_summary(), "avx512f avx512_bf16");
}

TEST(CpuFacts, AmxNeedsTheTileAndTheBf16Flags) {
  const perfgate::CpuFacts xeon = parse(
      "vendor_id : GenuineIntel\ncpu family : 6\nmodel : 143\nmodel name : Intel(R) Xeon(R) Platinum 8480+\n"
      "flags : avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n");
  EXPECT_EQ(xeon.signature, "GenuineIntel family 6 model 143");
  EXPECT_EQ(xeon.isa_summary(), "avx512f avx512_bf16 amx_bf16 amx_int8");
  const perfgate::CpuFacts no_tile = parse("flags : amx_bf16 amx_int8\n");
  EXPECT_FALSE(no_tile.amx_bf16);
  EXPECT_FALSE(no_tile.amx_int8);
  // "avx512f" must be a whole flag, not the start of another one
  EXPECT_FALSE(parse("flags : avx512fp16\n").avx512f);
}

TEST(CpuFacts, TextWithoutAGenerationGivesNoSignature) {
  // no vendor_id, cpu family, model or CPU part lines; lines without a colon and empty values are passed over
  const perfgate::CpuFacts arm =
      parse("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\nno colon here\nflags\t:\n");
  EXPECT_TRUE(arm.model.empty());
  EXPECT_TRUE(arm.signature.empty());
  EXPECT_EQ(arm.isa_summary(), "");
  const auto ctx = perfgate::cpu_context(arm, 4);
  for (const auto& [key, value] : ctx) EXPECT_NE(key, keys::kCpuSignature) << "no signature key without one";
}

TEST(HostFacts, RunsThatRecordNoneGetThisHostsOnTheirCpus) {
  const fs::path dir = scratch("stamped");
  perfgate::MeasureOptions o = options_on(dir, epyc("26", "2"), 2);
  const perfgate::MeasureResult all =
      perfgate::measure({{"current", perfgate::resolve_benches(plain_bench(dir)), {}}}, o);
  const perfgate::RunContext& c = first_run(all);
  EXPECT_EQ(c.get(keys::kCpuModel), "AMD EPYC");
  EXPECT_EQ(c.get(keys::kCpuSignature), "AuthenticAMD family 26 model 2");
  EXPECT_EQ(c.get(keys::kCpuCores), "2");
  EXPECT_FALSE(c.get(keys::kRunHostFacts).empty());
  EXPECT_EQ(c.get(keys::kMachineClass), "cpu-epyc-avx512-2c");

  EXPECT_EQ(c.get(keys::kHostGpuCount), "");

  o.pin_cpus = {0};
  o.environment.host_gpus = 4;  // a GPU host: recorded, and the class stays the CPU's (the runner sees no devices)
  const perfgate::MeasureResult pinned =
      perfgate::measure({{"current", perfgate::resolve_benches(plain_bench(dir)), {}}}, o);
  EXPECT_EQ(first_run(pinned).get(keys::kCpuCores), "1");
  EXPECT_EQ(first_run(pinned).get(keys::kMachineClass), "cpu-epyc-avx512-1c");
  EXPECT_EQ(first_run(pinned).get(keys::kHostGpuCount), "4");
  fs::remove_all(dir.parent_path());
}

// A folder is searched for perfgate's bench_<suite> binaries only; a plain binary in it is named by the error's advice.
TEST(HostFacts, AFolderOfPlainBinariesIsRefusedWithTheFlagThatTakesOne) {
  perfgate::test_support::TempDir tmp;
  const fs::path bench = plain_bench(tmp.path);
  fs::rename(bench, tmp.path / "my_bench");
  fs::copy_file(tmp.path / "my_bench", tmp.path / "a_helper");  // listed first, but the example is the bench
  try {
    perfgate::resolve_benches(tmp.path);
    FAIL() << "a folder without bench_* binaries was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no bench_* executables in it or in its bin/"), std::string::npos) << what;
    EXPECT_NE(what.find("; it holds a_helper, my_bench: name the bench binary itself, e.g. " +
                        (tmp.path / "my_bench").string()),
              std::string::npos)
        << what;
  }
  EXPECT_EQ(perfgate::resolve_benches(tmp.path / "my_bench").size(), 1u);  // named itself, it runs
  // A suite the folder has no bench_<suite> of: the suites it has are named.
  fs::rename(tmp.path / "my_bench", tmp.path / "bench_saxpy");
  try {
    perfgate::resolve_benches(tmp.path, {"expert_gemm"});
    FAIL() << "a suite without its binary was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no bench_expert_gemm here (the suites it has: saxpy)"), std::string::npos)
        << e.what();
  }
}

TEST(HostFacts, RunsThatRecordTheirOwnKeepThem) {
  const fs::path dir = scratch("own");
  const fs::path bench =
      plain_bench(dir,
                  "\"perfgate.cpu_model\": \"Intel(R) Xeon(R) Platinum 8480+\", \"perfgate.amx\": \"yes\", "
                  "\"perfgate.cpu_cores\": \"16\"");
  const perfgate::MeasureResult r =
      perfgate::measure({{"current", perfgate::resolve_benches(bench), {}}}, options_on(dir, epyc("26", "2"), 2));
  const perfgate::RunContext& c = first_run(r);
  EXPECT_EQ(c.get(keys::kCpuModel), "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(c.get(keys::kCpuSignature), "");
  EXPECT_EQ(c.get(keys::kRunHostFacts), "");
  EXPECT_EQ(c.get(keys::kMachineClass), "cpu-xeon-amx-16c");

  perfgate::MeasureOptions unknown_host = perfgate::test_support::fake_measure_options(dir / "unknown", 3, 7);
  const perfgate::MeasureResult none =
      perfgate::measure({{"current", perfgate::resolve_benches(plain_bench(dir)), {}}}, unknown_host);
  EXPECT_EQ(first_run(none).get(keys::kCpuModel), "");
  fs::remove_all(dir.parent_path());
}

// The first-contact case: a plain Google Benchmark binary's baseline recorded on Zen 4 and the same binary run on
// Zen 5, one machine class by name. Without host facts both were "cpu-unknown-2c" with no generation, and Zen 4's
// times were compared with Zen 5's; now the baseline is measured against and reported, not compared.
TEST(HostFacts, APlainBinarysBaselineFromAnotherGenerationIsNotCompared) {
  const fs::path dir = scratch("generation");
  const perfgate::Side side{"current", perfgate::resolve_benches(plain_bench(dir)), {}};
  const fs::path zen4_file = record_baseline(dir, side, epyc("25", "17"), 2);
  ASSERT_EQ(zen4_file.parent_path().filename(), "cpu-epyc-avx512-2c");
  const perfgate::GateOptions gate = stored_gate(dir);
  const auto verdict_on = [&](const std::string& family, const std::string& model) {
    const perfgate::SessionResult s =
        perfgate::gate_run(side, options_on(dir / (family + model), epyc(family, model), 2), gate);
    EXPECT_EQ(s.suites.size(), 1u);
    return s.suites.at(0).report;
  };
  const perfgate::ComparisonReport on_zen5 = verdict_on("26", "2");
  ASSERT_EQ(on_zen5.benchmarks.size(), 1u);
  EXPECT_EQ(on_zen5.benchmarks[0].verdict, perfgate::Verdict::new_benchmark);
  const perfgate::ComparisonReport on_zen4 = verdict_on("25", "17");
  ASSERT_EQ(on_zen4.benchmarks.size(), 1u);
  EXPECT_NE(on_zen4.benchmarks[0].verdict, perfgate::Verdict::new_benchmark);
  fs::remove_all(dir.parent_path());
}

// A baseline a plain binary got before its runs carried this host's facts sits under the class its bare context
// names (cpu-unknown...): the run that no longer finds it there says where it is and what to do.
TEST(HostFacts, ABaselineFiledBeforeHostFactsIsPointedOut) {
  const fs::path dir = scratch("moved");
  const perfgate::Side side{"current", perfgate::resolve_benches(plain_bench(dir)), {}};
  const std::string suite = side.benches.front().suite;
  const perfgate::MeasureResult old =
      perfgate::measure({side}, perfgate::test_support::fake_measure_options(dir / "old", 3, 7));
  const perfgate::ResultSet& runs = old.sides.at(0).suites.at(suite);
  perfgate::BaselineInfo info;
  info.machine_class = perfgate::machine_class(runs);
  ASSERT_EQ(info.machine_class.rfind("cpu-unknown", 0), 0u) << info.machine_class;
  const fs::path old_file = perfgate::write_baseline(dir / "baselines", suite, runs, info);

  perfgate::GateOptions gate;
  gate.baseline_dir = dir / "baselines";
  gate.confirm_rounds = 0;
  const perfgate::SessionResult now = perfgate::gate_run(side, options_on(dir / "now", epyc("26", "2"), 2), gate);
  ASSERT_EQ(now.suites.size(), 1u);
  const std::vector<std::string>& notes = now.suites[0].report.notes;
  const auto pointed = std::find_if(notes.begin(), notes.end(), [&](const std::string& n) {
    return n.rfind(old_file.string() + " holds a baseline of this binary", 0) == 0 &&
           n.find((dir / "baselines" / "cpu-epyc-avx512-2c" / (suite + ".json")).string()) != std::string::npos;
  });
  EXPECT_NE(pointed, notes.end()) << ::testing::PrintToString(notes);
  ASSERT_EQ(now.suites[0].report.benchmarks.size(), 1u);
  EXPECT_NE(now.suites[0].report.benchmarks[0].reason.find(old_file.string() + " is one from before"),
            std::string::npos)
      << now.suites[0].report.benchmarks[0].reason;
  fs::remove_all(dir.parent_path());
}

// A CPU class counts the CPUs a bench process may use: a run pinned to one CPU does not find the baseline recorded
// on two, and its "no baseline" line names that file and why.
TEST(HostFacts, ABaselineOnAnotherCpuCountIsPointedOut) {
  const fs::path dir = scratch("cores");
  const perfgate::Side side{"current", perfgate::resolve_benches(plain_bench(dir)), {}};
  const fs::path on_two = record_baseline(dir, side, epyc("26", "2"), 2);
  ASSERT_EQ(on_two.parent_path().filename(), "cpu-epyc-avx512-2c");
  const perfgate::GateOptions gate = stored_gate(dir);
  const perfgate::SessionResult one = perfgate::gate_run(side, options_on(dir / "one", epyc("26", "2"), 1), gate);
  ASSERT_EQ(one.suites.size(), 1u);
  ASSERT_EQ(one.suites[0].report.benchmarks.size(), 1u);
  const std::string& reason = one.suites[0].report.benchmarks[0].reason;
  EXPECT_NE(reason.find("cpu-epyc-avx512-1c"), std::string::npos) << reason;
  EXPECT_NE(
      reason.find(on_two.string() + " is its baseline on 2 CPUs, and this run's processes may use 1 (--pin-cpus)"),
      std::string::npos)
      << reason;
  // Another CPU family's baseline is not this one's.
  fs::create_directories(dir / "baselines" / "cpu-xeon-amx-2c");
  fs::rename(on_two, dir / "baselines" / "cpu-xeon-amx-2c" / on_two.filename());
  const perfgate::SessionResult other = perfgate::gate_run(side, options_on(dir / "other", epyc("26", "2"), 1), gate);
  EXPECT_EQ(other.suites.at(0).report.benchmarks.at(0).reason.find("is its baseline on"), std::string::npos);
  fs::remove_all(dir.parent_path());
}

// Arm's /proc/cpuinfo has no "model name": the implementer and part give the core and the generation, so a Grace
// host (Neoverse-V2) gets the class cpu-neoverse-<N>c, not cpu-unknown-<N>c.
TEST(CpuFacts, ArmCoresAreNamedFromTheirPart) {
  const std::string grace =
      "processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd sve bf16\nCPU implementer\t: 0x41\n"
      "CPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\nCPU revision\t: 0\n";
  const perfgate::CpuFacts v2 = parse(grace);
  EXPECT_EQ(v2.model, "ARM Neoverse-V2");
  EXPECT_EQ(v2.signature, "ARM implementer 0x41 part 0xd4f");
  perfgate::RunContext c;
  for (const auto& [key, value] : perfgate::cpu_context(v2, 72)) c.fields[key] = value;
  EXPECT_EQ(perfgate::derive_machine_class(c), "cpu-neoverse-72c");
  EXPECT_EQ(perfgate::cpu_generation_key(v2.signature), "arm-implementer0x41-part0xd4f");  // a generation folder
  const perfgate::CpuFacts other = parse("CPU implementer\t: 0xc0\nCPU part\t: 0xac3\n");
  EXPECT_EQ(other.model, "ARM CPU implementer 0xc0 part 0xac3");
  EXPECT_EQ(other.signature, "ARM implementer 0xc0 part 0xac3");
}

// This host's caches are read as Google Benchmark reads them (cpu0/cache/index<N>, "48K" = 49152 bytes), so that
// a plain binary's JSON written here shows the same layout.
TEST(HostIdentity, ReadsTheCachesAsGoogleBenchmarkDoes) {
  const fs::path sysfs = scratch("sysfs") / "cpu";
  const auto cache = [&](int index, const char* level, const char* type, const char* size) {
    const fs::path dir = sysfs / "cpu0" / "cache" / ("index" + std::to_string(index));
    fs::create_directories(dir);
    std::ofstream(dir / "level") << level << "\n";
    std::ofstream(dir / "type") << type << "\n";
    std::ofstream(dir / "size") << size << "\n";
  };
  cache(0, "1", "Data", "48K");
  cache(1, "1", "Instruction", "32K");
  cache(2, "2", "Unified", "1024K");
  cache(3, "3", "Unified", "32768K");
  const perfgate::HostIdentity here = perfgate::this_host(sysfs);
  EXPECT_EQ(here.caches, "L1 Data 48 KiB, L1 Instruction 32 KiB, L2 Unified 1 MiB, L3 Unified 32 MiB");
  EXPECT_GT(here.cpus, 0);
  EXPECT_FALSE(here.name.empty());
  perfgate::RunContext written;  // the same caches as Google Benchmark writes them
  written.fields["caches"] =
      R"([{"type":"Data","level":1,"size":49152,"num_sharing":1},{"type":"Instruction","level":1,"size":32768},)"
      R"({"type":"Unified","level":2,"size":1048576},{"type":"Unified","level":3,"size":33554432}])";
  EXPECT_EQ(perfgate::cache_layout(written), here.caches);
  EXPECT_EQ(perfgate::this_host(sysfs.parent_path() / "none").caches, "");  // no cache folders: unknown
  fs::remove_all(sysfs.parent_path().parent_path());
}

// A plain binary's JSON is this host's only when its host name, CPU count and caches all are; the first that is
// missing or differs is named.
TEST(HostIdentity, ARunWrittenElsewhereIsToldApartByNameCpusAndCaches) {
  const perfgate::HostIdentity here{"vm", 2, "L1 Data 48 KiB, L2 Unified 1 MiB"};
  const auto run = [](const std::string& name, int cpus, const std::string& l2) {
    perfgate::RunContext c;
    if (!name.empty()) c.fields["host_name"] = name;
    c.fields["num_cpus"] = std::to_string(cpus);
    if (!l2.empty())
      c.fields["caches"] = R"([{"type":"Data","level":1,"size":49152},{"type":"Unified","level":2,"size":)" + l2 + "}]";
    return c;
  };
  EXPECT_FALSE(perfgate::written_elsewhere(run("vm", 2, "1048576"), here).has_value());
  EXPECT_FALSE(perfgate::written_elsewhere(run("vm", 2, ""), here).has_value());  // no caches written: not checked
  const auto other = perfgate::written_elsewhere(run("gpu-7", 2, "1048576"), here);
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->field, "context.host_name");
  EXPECT_EQ(other->message, "written on host 'gpu-7', not this one ('vm')");
  const auto unnamed = perfgate::written_elsewhere(run("", 2, "1048576"), here);
  ASSERT_TRUE(unnamed.has_value());
  EXPECT_EQ(unnamed->field, "context.host_name");
  const auto cpus = perfgate::written_elsewhere(run("vm", 16, "1048576"), here);
  ASSERT_TRUE(cpus.has_value());
  EXPECT_EQ(cpus->field, "context.num_cpus");
  EXPECT_NE(cpus->message.find("16 CPUs, not this host's 2"), std::string::npos) << cpus->message;
  const auto zen3 = perfgate::written_elsewhere(run("vm", 2, "524288"), here);  // a Zen 3 VM of the same name
  ASSERT_TRUE(zen3.has_value());
  EXPECT_EQ(zen3->field, "context.caches");
  EXPECT_NE(zen3->message.find("L2 Unified 512 KiB, not this host's L1 Data 48 KiB, L2 Unified 1 MiB"),
            std::string::npos)
      << zen3->message;
  perfgate::HostIdentity unknown_caches = here;
  unknown_caches.caches.clear();
  EXPECT_FALSE(perfgate::written_elsewhere(run("vm", 2, "524288"), unknown_caches).has_value());
}
