#pragma once
// Running bench binaries: `perfgate run` and `perfgate ab` (docs/running.md).
//
// The unit of between-run noise on a shared machine is the *process run*: a benchmark's median drifts
// between two processes far more than its repetitions vary inside one. So a measurement here is
// several process rounds of every binary, in random order, each process running its benchmarks'
// repetitions randomly interleaved (--benchmark_enable_random_interleaving). When two builds are
// measured (ab, or run's confirm step against a baseline build) their processes alternate A B / B A
// with a random order in each pair, so drift hits both sides alike.
//
// Failures are results too: a crash, a timeout, a non-zero exit or a failed correctness check becomes
// a failed benchmark carrying the bench's own message, and what was measured before the failure is kept.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "perfgate/bench_binary.hpp"
#include "perfgate/cpu_facts.hpp"
#include "perfgate/model.hpp"
#include "perfgate/observer.hpp"
#include "perfgate/process.hpp"

namespace perfgate {

// ---- bench binaries ----------------------------------------------------------------------------

// A bench binary, a build folder (<dir>/bin/bench_*), or a folder of binaries (<dir>/bench_*).
// `suites` (optional) keeps only those suites. Throws std::invalid_argument with a one-line reason.
std::vector<BenchBinary> resolve_benches(const std::filesystem::path& binary_or_dir,
                                         const std::vector<std::string>& suites = {});

// The benchmarks a binary would run with `filter` (--benchmark_list_tests). Empty when none match.
// Throws std::runtime_error (with the binary's own message) when listing fails.
std::vector<std::string> list_benchmarks(const BenchBinary& bench, const std::string& filter,
                                         const std::vector<std::pair<std::string, std::string>>& env,
                                         double timeout_seconds);

// A Google Benchmark JSON file cut short by a crash or a kill: keeps every complete benchmark entry,
// drops aggregates, renumbers each benchmark's repetitions 0..n-1 (random interleaving leaves gaps)
// and closes the document. nullopt when not even the context survived.
std::optional<std::string> salvage_benchmark_json(const std::string& text);

// Regex matching exactly these benchmark names (raw or normalised): "^(a|b)(/.*)?$" with
// metacharacters escaped; the optional tail admits Google Benchmark's /repeats:N-like suffixes.
std::string exact_filter(const std::vector<std::string>& names);

// Facts about the code a binary was built from: CMakeCache.txt next to (or above) it gives the source
// folder and build type; `git rev-parse HEAD` there gives the commit ("+dirty" when the tree has
// uncommitted changes to tracked files). Missing facts are "unknown".
struct BuildInfo {
  std::string commit = "unknown";
  std::string build_type = "unknown";
  std::string source_dir;
};
// `given_commit` non-empty (PERFGATE_GIT_COMMIT: a copy of the tree without .git) is the commit; git is
// not asked.
BuildInfo build_info_for(const std::filesystem::path& binary, const std::string& given_commit);

// One environment variable of the process: its value, or nullopt when unset. The library reads no
// environment itself: the CLI passes a lookup (harness/cli/environment.hpp), tests a map.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// CUDA_VISIBLE_DEVICES for the GPUs ctest allotted this test (CTEST_RESOURCE_GROUP_COUNT /
// CTEST_RESOURCE_GROUP_<i>_GPUS = "id:<n>,slots:<k>"), honouring an outer CUDA_VISIBLE_DEVICES.
// nullopt when ctest allotted nothing.
std::optional<std::string> cuda_devices_for_ctest(const EnvLookup& lookup);

// What a measurement needs from the process environment, read by the CLI and passed in.
struct RunEnvironment {
  std::string git_commit;                           // PERFGATE_GIT_COMMIT ("": ask git)
  std::optional<std::string> cuda_visible_devices;  // for every bench process (cuda_devices_for_ctest)
  // This host's CPU (/proc/cpuinfo, perfgate/cpu_facts.hpp): the runner records it in the process runs of a binary
  // that records no host facts (a Google Benchmark binary without perfgate's bench main), so that they get a machine
  // class and a CPU generation. Unset: such runs keep none.
  std::optional<CpuFacts> host_cpu;
  int host_cores = 0;  // the logical CPUs a bench process may run on when not pinned
  int host_gpus = 0;   // NVIDIA GPUs the host's driver lists (/proc/driver/nvidia/gpus), whatever a process sees
};

// The host facts the runner gives the process runs of a binary that records none (RunEnvironment::host_cpu), on
// `cpus` (empty: not pinned); nullopt when the host's CPU is unknown.
std::optional<RunContext> host_context(const RunEnvironment& env, const std::vector<int>& cpus);

// A process run that records no host facts (no perfgate.cpu_model) gets this host's (host_context); false when it
// records its own or the host's CPU is unknown, and nothing changed.
bool add_host_facts(RunContext& run, const RunEnvironment& env, const std::vector<int>& cpus);

// ---- measuring ---------------------------------------------------------------------------------

struct MeasureOptions {
  int rounds = 3;                                // process rounds per binary and side
  int repetitions = 5;                           // --benchmark_repetitions per process
  std::map<std::string, int> suite_repetitions;  // per suite, instead of `repetitions` (repetitions_of)
  std::optional<double> min_time;                // --benchmark_min_time (seconds per repetition)
  std::optional<double> warmup;                  // --benchmark_min_warmup_time (seconds)
  std::string filter;                            // --benchmark_filter ("" = all)
  bool interleave = true;                        // random interleaving inside a process, random order across
  double timeout_seconds = 900;                  // per process
  std::uint64_t seed = 0;                        // 0: from the clock (printed, so a run can be repeated)
  std::filesystem::path work_dir;                // raw JSON and logs go here
  std::vector<std::string> extra_args;           // passed to every bench process
  std::shared_ptr<RunObserver> observer;         // progress and warnings (observer.hpp); nullptr: silent
  int realtime_priority = 0;                     // > 0: bench processes run SCHED_FIFO (see ProcessSpec)
  // Non-empty: every bench process runs on these CPUs only. On a VM whose vCPUs are not equally fast
  // (docs/running.md, "--pin-cpus"), a process lands on either at random and that, not the code, decides
  // its median; pinning both sides to the same CPU takes that out of an A/B comparison.
  std::vector<int> pin_cpus;
  // Non-empty: rounds are measured several at a time, one lane (a CPU set) per thread, each lane's processes pinned
  // to its CPUs instead of pin_cpus. A lane takes the next round no lane has taken and runs all of it, the sides back
  // to back, so a round's paired difference stays within one lane; the results are merged in round order whatever
  // order the rounds end in. For many-core runners and benchmarks that leave memory bandwidth and caches to spare
  // (docs/running.md, "Lanes"). Empty: one process at a time.
  std::vector<std::vector<int>> lanes;
  std::string phase_label = "measure";  // shown in progress ("measure", "confirm", ...)
  RunEnvironment environment;           // what the CLI read from the environment for the runner
  // Set: a round after the first `rounds_before_deadline` is not started when the rounds so far say it would end
  // after this time, so that a run under a time budget ends with the rounds it measured instead of being killed
  // with none; the note says how many ran. Unset: every round runs.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  int rounds_before_deadline = 3;
};

// The repetitions per process of `suite`'s binaries: its entry in suite_repetitions, else `repetitions`.
int repetitions_of(const MeasureOptions& options, const std::string& suite);

// One side of a measurement: the binaries of one build, with their own environment.
struct Side {
  std::string label;  // "current", "baseline build", "A", "B"
  std::vector<BenchBinary> benches;
  std::vector<std::pair<std::string, std::string>> env;
};

struct ProcessFailure {
  std::string side;
  std::string suite;
  std::string binary;
  int round = 0;
  std::string what;                     // ProcessResult::describe()
  std::string message;                  // the bench's own message (FAILED lines, stderr tail)
  std::vector<std::string> benchmarks;  // benchmarks marked failed because of it
};

struct SideResult {
  std::string label;
  std::map<std::string, ResultSet> suites;  // per suite, merged over process rounds
  std::vector<ProcessFailure> failures;
  std::vector<std::string> raw_files;  // the JSON each process wrote
  int processes = 0;
  long repetitions = 0;                         // benchmark repetitions measured (samples of latency)
  double process_seconds = 0;                   // wall time spent in this side's processes
  std::map<std::string, double> suite_seconds;  // the same per suite
};

struct MeasureResult {
  std::vector<SideResult> sides;  // same order as the input sides
  double wall_seconds = 0;
  std::uint64_t seed = 0;
  std::vector<std::string> notes;           // e.g. "bench_x matched no benchmark"
  std::vector<std::string> nothing_to_run;  // those of the notes that say why a binary ran nothing
  int rounds_run = 0;  // rounds started; fewer than MeasureOptions::rounds when the deadline stopped them
};

// Runs rounds x (binaries x sides) processes. Within a round the binaries are visited in random
// order; with several sides the sides of one binary run back to back in random order. With lanes
// (MeasureOptions::lanes) rounds run concurrently, a round on one lane; the sides' process runs are merged in
// round order all the same. Throws std::invalid_argument for a lane without CPUs. A binary whose
// process failed is not run again (its failure is deterministic more often than not). Context the
// runner owns is added to every process run: perfgate.git_commit, perfgate.build_type,
// perfgate.run.side/round/binary/seed, perfgate.run.sched ("fifo:<prio>" or "normal"),
// perfgate.run.cpus (the pinned CPU list, the lane's with lanes, or "any"),
// perfgate.machine_class (when machine_class_override() is set: PERFGATE_MACHINE_CLASS, --machine-class).
MeasureResult measure(const std::vector<Side>& sides, const MeasureOptions& options);

// Where a run's file of `suite` goes under `runs_dir`, for its side `label` ("current", "before", "after"): the file
// perfgate run and ab write (<report-dir>/runs/<suite>.<label>.json) and the advice to store it names.
std::filesystem::path run_file(const std::filesystem::path& runs_dir, const std::string& suite,
                               const std::string& label);

// The binary that ran each suite of a side (perfgate.run.binary), under the suite it was run as: the suite its
// benchmarks are reported under (reported_suite), a plain binary's file name included.
std::map<std::string, std::string> binaries_by_suite(const SideResult& side);

// Applies the failures of a side to its results: every benchmark a failure names gets `error` set
// (a BenchmarkResult with no samples is added when the benchmark never produced one).
void apply_failures(SideResult& side);

}  // namespace perfgate
