#pragma once
// Google Benchmark JSON -> ResultSet (see model.hpp).
//
// Reads the JSON that Google Benchmark 1.7.x and 1.8.x write with --benchmark_format=json /
// --benchmark_out, plus the baselines perfgate writes (the same JSON, several process runs merged;
// see baseline_store.hpp). Per-repetition entries (run_type "iteration") become samples; aggregates
// (mean/median/stddev/cv) are ignored where the repetitions are there, and complexity fits (BigO/RMS) are
// noted, never compared (ResultSet::load_notes).
//
// Every problem with an input is an InputError naming the file, the benchmark and the field; the
// CLI prints what() (one line, control characters escaped) and exits 2. The loader never crashes on
// any byte sequence (fuzzed: harness/fuzz/loader_fuzz.cpp).
//
// Rules (documented for users in docs/harness.md):
//   - the top level is an object with a "context" object and a "benchmarks" array;
//   - latency = "real_time" (which is the manual time for /manual_time benchmarks), normalised to ns;
//     it must be a finite number > 0; "cpu_time" finite and >= 0; "time_unit" one of ns/us/ms/s and the
//     same for every repetition of one benchmark in one file;
//   - counters = every other numeric field that Google Benchmark does not define itself;
//     every counter appears in every repetition of a benchmark; values must be finite;
//   - "error_occurred": true + "error_message" (1.7) or "skipped"/"skip_message" (1.8): a message
//     starting with "skipped: " or a 1.8 SkippedWithMessage is a skip, anything else a failure;
//   - repetitions: the repetition_index values of a (non-failed) benchmark are exactly 0..repetitions-1;
//     a benchmark with aggregates but no per-repetition entry (--benchmark_report_aggregates_only) gets one
//     sample per process run, its median aggregate (else the mean), with a note; files without run_type
//     (Google Benchmark before 1.5) have their "<name>_mean"-style aggregates recognised by name;
//   - one name (after normalise_benchmark_name) belongs to one benchmark per process run: the same name
//     reported twice for one repetition, or two raw names normalising to one, is a duplicate;
//   - files above max_file_bytes are refused before they are read.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "perfgate/errors.hpp"  // InputError, thrown by everything below
#include "perfgate/model.hpp"

namespace perfgate {

struct LoadOptions {
  // Files larger than this are refused before reading. The default (512 MiB) is ~3x the largest
  // file the performance target asks for (10,000 benchmarks x 20 repetitions x 3 counters ~ 150 MB).
  // The CLI lowers or raises it from the environment variable PERFGATE_MAX_INPUT_BYTES.
  std::uint64_t max_file_bytes = 512ull << 20;
};

// The options of every load that passes none: LoadOptions{} until the program sets others. The library never
// reads the environment; the CLI sets these once, before any load, from PERFGATE_MAX_INPUT_BYTES.
const LoadOptions& default_load_options();
void set_default_load_options(const LoadOptions& options);
// A byte count as a user writes it: a positive decimal integer, else InputError naming `source`.
std::uint64_t parse_byte_count(std::string_view text, const std::string& source);

// Loads one file: one process run, or a perfgate baseline holding several process runs
// (then ResultSet::contexts has one entry per stored run). Throws InputError.
ResultSet load_result_file(const std::string& file, const LoadOptions& options = default_load_options());

// The whole of a small configuration file (thresholds.json, noise.json). InputError naming the file for a folder,
// an unreadable file or one larger than max_bytes; `what` names the kind of file in the message.
std::string read_config_file(const std::string& file, const std::string& what, std::size_t max_bytes);

// Loads several files and merges them into one ResultSet: the files may come from several bench
// binaries (disjoint names) or from several process runs of one binary (the same names: their samples
// are appended, Metric::process_run telling them apart). contexts[i] is process run i; process runs are
// numbered in file order. Throws InputError (for the first bad file).
ResultSet load_results(const std::vector<std::string>& files, const LoadOptions& options = default_load_options());

// Parses JSON text already in memory; `source_name` is used in errors and RunContext::source_file.
// (The fuzzer and the tests use this; the file functions call it.)
ResultSet parse_results(std::string_view json, const std::string& source_name);

// The file loaders keep their buffers (one simdjson parser and one input buffer per thread, ~2.7x the
// largest file read) between calls. Long-running users can hand that memory back with this.
void release_loader_memory();

// Appends `from` to `into` as further process runs (contexts appended, process_run indices shifted).
// A benchmark failed or skipped on either side stays failed/skipped (the first message wins).
// Throws InputError when the same benchmark is latency-timed differently (manual vs real time) or
// its counter sets differ between the process runs.
void merge_results(ResultSet& into, ResultSet&& from);

}  // namespace perfgate
