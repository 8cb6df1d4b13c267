#include "perfgate/bench/main.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "perfgate/bench/hardware.hpp"
#include "perfgate/bench/process_usage.hpp"
#include "perfgate/bench/setup_profile.hpp"
#include "perfgate/bench/skip.hpp"
#include "perfgate/context_keys.hpp"

#ifndef PERFGATE_GBENCH_VERSION_MAJOR
#error "PERFGATE_GBENCH_VERSION_MAJOR must be defined by the build"
#endif
#define PERFGATE_GBENCH_AT_LEAST_1_8 \
  (PERFGATE_GBENCH_VERSION_MAJOR > 1 || (PERFGATE_GBENCH_VERSION_MAJOR == 1 && PERFGATE_GBENCH_VERSION_MINOR >= 8))

namespace perfgate::bench {
namespace {

constexpr std::string_view kMinTimeFlag = "--benchmark_min_time=";
// perfgate asks a binary for its context before measuring: the machine class and CPU generation decide
// whether a stored baseline fits or a reference build must be measured beside it.
constexpr std::string_view kContextOnlyFlag = "--perfgate_context_only";

// 1.7 wants a bare number of seconds; 1.8 wants "<n>s" or "<n>x" (a bare number is deprecated).
// Returns false (after printing why) when the value cannot be expressed for this version.
bool normalise_min_time(std::string& arg) {
  if (arg.rfind(kMinTimeFlag, 0) != 0) return true;
  std::string value = arg.substr(kMinTimeFlag.size());
  if (value.empty()) return true;
#if PERFGATE_GBENCH_AT_LEAST_1_8
  const char last = value.back();
  if (last != 's' && last != 'x') value += 's';
#else
  if (value.back() == 's') {
    value.pop_back();
  } else if (value.back() == 'x') {
    std::fprintf(stderr, "error: --benchmark_min_time=%s: an iteration count needs Google Benchmark >= 1.8\n",
                 value.c_str());
    return false;
  }
#endif
  arg = std::string(kMinTimeFlag) + value;
  return true;
}

struct RunView {
  std::string name;
  bool aggregate = false;
  bool errored = false;
  bool skipped = false;
  std::string message;
};

RunView view_of(const benchmark::BenchmarkReporter::Run& run) {
  RunView v;
  v.name = run.benchmark_name();
  v.aggregate = run.run_type == benchmark::BenchmarkReporter::Run::RT_Aggregate;
#if PERFGATE_GBENCH_AT_LEAST_1_8
  v.message = run.skip_message;
  v.skipped = run.skipped == benchmark::internal::SkippedWithMessage ||
              (run.skipped == benchmark::internal::SkippedWithError && is_skip_message(v.message));
  v.errored = run.skipped == benchmark::internal::SkippedWithError && !v.skipped;
#else
  v.message = run.error_message;
  v.skipped = run.error_occurred && is_skip_message(v.message);
  v.errored = run.error_occurred && !v.skipped;
#endif
  return v;
}

// Forwards everything to the real display reporter and keeps score of failures and skips.
class OutcomeReporter final : public benchmark::BenchmarkReporter {
 public:
  explicit OutcomeReporter(std::unique_ptr<benchmark::BenchmarkReporter> inner) : inner_(std::move(inner)) {}

  bool ReportContext(const Context& context) override { return inner_->ReportContext(context); }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      const RunView v = view_of(run);
      if (v.aggregate) continue;
      if (v.errored) {
        if (failed_.insert(v.name).second) messages_.push_back(v.name + ": " + v.message);
      } else if (v.skipped) {
        skipped_.insert(v.name);
      } else {
        ran_.insert(v.name);
      }
    }
    inner_->ReportRuns(runs);
  }
  void Finalize() override { inner_->Finalize(); }

  int exit_code() const {
    if (!failed_.empty()) {
      for (const auto& m : messages_) std::fprintf(stderr, "perfgate: FAILED %s\n", m.c_str());
      return 3;
    }
    if (ran_.empty() && !skipped_.empty()) {
      std::fprintf(stderr, "perfgate: all %zu benchmarks skipped\n", skipped_.size());
      return 77;
    }
    return 0;
  }

 private:
  std::unique_ptr<benchmark::BenchmarkReporter> inner_;
  std::set<std::string> ran_, skipped_, failed_;
  std::vector<std::string> messages_;
};

std::unique_ptr<benchmark::BenchmarkReporter> make_display_reporter(const std::vector<std::string>& args) {
  std::string format = "console";  // csv is deprecated upstream and not offered
  for (const auto& a : args) {
    if (a.rfind("--benchmark_format=", 0) == 0) format = a.substr(std::strlen("--benchmark_format="));
  }
  if (format == "json") return std::make_unique<benchmark::JSONReporter>();
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  return std::make_unique<benchmark::ConsoleReporter>(tty ? benchmark::ConsoleReporter::OO_ColorTabular
                                                          : benchmark::ConsoleReporter::OO_Tabular);
}

std::vector<ContextHook>& context_hooks() {
  static std::vector<ContextHook> hooks;
  return hooks;
}

void add_host_context() {
  const CpuInfo& cpu = cpu_info();
  for (const auto& [key, value] : perfgate::cpu_context(cpu, cpu.logical_cores))
    benchmark::AddCustomContext(key, value);
  benchmark::AddCustomContext(perfgate::context_keys::kBuildType, PERFGATE_BUILD_TYPE);
  benchmark::AddCustomContext(perfgate::context_keys::kGbenchVersion, PERFGATE_GBENCH_VERSION);
}

// Google Benchmark JSON with the context and no benchmarks, on stdout.
int print_context_only() {
  benchmark::JSONReporter reporter;
  reporter.ReportContext(benchmark::BenchmarkReporter::Context());
  reporter.Finalize();
  return 0;
}

// Removes the flag from args; true when it was there.
bool take_flag(std::vector<std::string>& args, std::string_view flag) {
  const auto it = std::find(args.begin(), args.end(), flag);
  if (it == args.end()) return false;
  args.erase(it);
  return true;
}

std::vector<FinishHook>& finish_hooks() {
  static std::vector<FinishHook> hooks;
  return hooks;
}

double& default_min_time() {
  static double seconds = 0;  // 0: Google Benchmark's default
  return seconds;
}

// Appends the suite's default min time unless the command line gives one.
void add_default_min_time(std::vector<std::string>& args) {
  if (default_min_time() <= 0) return;
  const bool given = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a.rfind(kMinTimeFlag, 0) == 0 || a == "--benchmark_min_time";
  });
  if (!given) args.push_back(fmt::format("{}{}", kMinTimeFlag, default_min_time()));
}

}  // namespace

void add_context_hook(ContextHook hook) { context_hooks().push_back(hook); }
void add_finish_hook(FinishHook hook) { finish_hooks().push_back(hook); }
void set_default_min_time(double seconds) { default_min_time() = seconds; }

int run_main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  const bool context_only = take_flag(args, kContextOnlyFlag);
  add_default_min_time(args);
  for (auto& a : args) {
    if (!normalise_min_time(a)) return 2;
  }
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  int cargc = static_cast<int>(args.size());
  benchmark::Initialize(&cargc, cargs.data());
  if (benchmark::ReportUnrecognizedArguments(cargc, cargs.data())) return 2;
  {
    SetupSpan span("context");  // host facts, and the GPU's: the CUDA runtime and NVML start here
    add_host_context();
    for (ContextHook hook : context_hooks()) hook();
  }
  if (context_only) return print_context_only();

  OutcomeReporter reporter(make_display_reporter(args));
  start_process_usage();
  const std::size_t matched = benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  finish_process_usage();
  for (FinishHook hook : finish_hooks()) hook();
  report_setup_profile();
  if (matched == 0) {
    std::fprintf(stderr, "perfgate: no benchmark matched the filter\n");
    return 2;
  }
  return reporter.exit_code();
}

}  // namespace perfgate::bench
