#pragma once
// Baselines: baselines/<machine-class>/<suite>.json, written atomically as Google Benchmark JSON.
//
// The file is ordinary Google Benchmark JSON (so compare.py and spreadsheets read it): one
// "benchmarks" array holding the per-repetition entries of every stored process run, times in ns.
// perfgate additions, all ignorable by other tools:
//   context."perfgate.baseline.machine|date|commit|command|process_runs"
//   "perfgate_process_runs": [ {context of run 0}, {context of run 1}, ... ]   (top level)
//   "perfgate_process_run": k    in every benchmark entry (which stored run the entry came from)
// load_result_file() reads it back losslessly: one RunContext per stored run (each with the
// perfgate.baseline.* keys added), samples with their process_run index.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "perfgate/atomic_file.hpp"  // write_file_atomically, which write_baseline uses
#include "perfgate/errors.hpp"
#include "perfgate/model.hpp"
#include "perfgate/suites.hpp"  // split_by_suite: a baseline file holds one suite

namespace perfgate {

struct BaselineInfo {
  std::string machine_class;  // required: the folder name
  std::string date;           // ISO 8601 UTC; empty -> now
  std::string commit;         // git commit of the code measured (may be empty -> "unknown")
  std::string command;        // the command that produced the runs
  // Non-empty: a CPU generation key (cpu_generation_key): the file goes to <class>/<generation>/, beside a
  // class-level baseline recorded on another generation of the same class name.
  std::string generation;
};

// <root>/<machine_class>/<suite>.json; both components validated (InputError when unsafe).
// The file name (without .json) of a suite's baseline. A suite named with a-z 0-9 . _ - only (at most 100
// characters) is its own stem; any other name (a Google Benchmark name such as "BM_Sort" or "BM_Fill<int>")
// is lower-cased, every other character becomes '_', it is cut to 91 characters, and "-" plus the FNV-1a hash
// of the whole name (8 hex digits) is appended: "BM_Sort" -> "bm_sort-<hash>". Distinct suites never share a file,
// on case-insensitive file systems too.
inline constexpr std::size_t kMaxPlainSuiteStem = 100;
std::string suite_file_stem(const std::string& suite);

std::filesystem::path baseline_path(const std::filesystem::path& root, const std::string& machine_class,
                                    const std::string& suite);

// A folder name for a CPU generation: "AuthenticAMD family 25 model 17" -> "amd-family25-model17",
// "GenuineIntel family 6 model 143" -> "intel-family6-model143"; "" for an empty or unusable signature.
std::string cpu_generation_key(const std::string& cpu_signature);

// The baseline of a suite for this machine class and CPU generation: <root>/<class>/<generation>/<suite>.json
// when it exists, else <root>/<class>/<suite>.json (which may hold another generation: the caller compares
// the signatures it records).
std::filesystem::path find_baseline(const std::filesystem::path& root, const std::string& machine_class,
                                    const std::string& cpu_signature, const std::string& suite);

// The generation folder (BaselineInfo::generation) for a new baseline of `suite` recorded on `cpu_signature`: ""
// (the class level) when the class level is free, holds this generation or names none, or when the class is not a CPU
// class or the signature is unknown; else cpu_generation_key(cpu_signature), so that the class level's other
// generation is kept. Reads the class-level file's context (InputError when it is unreadable).
std::string new_baseline_generation(const std::filesystem::path& root, const std::string& machine_class,
                                    const std::string& cpu_signature, const std::string& suite);

// Google Benchmark JSON text of `results` with the perfgate additions above.
std::string to_baseline_json(const ResultSet& results, const BaselineInfo& info);

// Where a baseline of `suite` with `info` lives: baseline_path, in info.generation's folder when it names one.
std::filesystem::path baseline_file(const std::filesystem::path& root, const std::string& suite,
                                    const BaselineInfo& info);

// to_baseline_json + write_file_atomically at baseline_file. Returns the path written.
std::filesystem::path write_baseline(const std::filesystem::path& root, const std::string& suite,
                                     const ResultSet& results, const BaselineInfo& info);

}  // namespace perfgate
