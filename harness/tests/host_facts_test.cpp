// This host's CPU facts: /proc/cpuinfo read into the keys a bench binary records, and the runner giving them to the
// process runs of a Google Benchmark binary that records none, so that its baselines have a machine class and a CPU
// generation (a baseline recorded on another generation is then measured and reported, not compared).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "perfgate/baseline_store.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/cpu_facts.hpp"
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
  try {
    perfgate::resolve_benches(tmp.path);
    FAIL() << "a folder without bench_* binaries was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no bench_* executables in it or in its bin/"), std::string::npos) << what;
    EXPECT_NE(what.find("--bench " + (tmp.path / "my_bench").string()), std::string::npos) << what;
  }
  EXPECT_EQ(perfgate::resolve_benches(tmp.path / "my_bench").size(), 1u);  // named itself, it runs
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
  const std::string suite = side.benches.front().suite;
  const perfgate::MeasureResult zen4 = perfgate::measure({side}, options_on(dir / "zen4", epyc("25", "17"), 2));
  const perfgate::ResultSet& runs = zen4.sides.at(0).suites.at(suite);
  perfgate::BaselineInfo info;
  info.machine_class = perfgate::machine_class(runs);
  ASSERT_EQ(info.machine_class, "cpu-epyc-avx512-2c");
  perfgate::write_baseline(dir / "baselines", suite, runs, info);

  perfgate::GateOptions gate;
  gate.baseline_dir = dir / "baselines";
  gate.confirm_rounds = 0;
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
