#pragma once
// Suites in a ResultSet: a benchmark's suite is the one its file's runs name (perfgate.suite, a bench_<suite>
// binary, else a plain binary's name), else the first component of its name; one ResultSet may hold several
// suites (several bench binaries in one run). Reports, the baseline store (one file per suite) and the
// per-suite machine-class checks all build on these functions.
#include <map>
#include <string>
#include <vector>

#include "perfgate/model.hpp"

namespace perfgate {

// The suite of a benchmark: the first path component of its name ("lora_backward/backward/..." ->
// "lora_backward").
std::string suite_of_benchmark(const std::string& normalised_name);

// The suite a run context names: perfgate.suite, else the name of its bench_<suite> binary (perfgate_add_suite);
// empty for any other binary.
std::string suite_of_context(const RunContext& c);

// Source file -> the suite a report files that file's benchmarks under: the suite its runs name (suite_of_context),
// else the name of the plain Google Benchmark binary that wrote it, so that one binary is one suite however its
// benchmarks are named (BM_Sort/1024, BM_Copy). Files that name neither are absent: use reported_suite.
std::map<std::string, std::string> suites_by_file(const ResultSet& results);

// The suite of `b` by the file it came from (suites_by_file), else suite_of_benchmark.
std::string reported_suite(const std::map<std::string, std::string>& by_file, const BenchmarkResult& b);

// suite (reported_suite) -> indices of the process runs (contexts) that belong to it: those with a sample of
// one of its benchmarks, those whose perfgate.suite names it, and, for a suite with no sample at all, those
// from the files that reported it.
std::map<std::string, std::vector<int>> process_runs_by_suite(const ResultSet& results);

// Splits a ResultSet (possibly several binaries) into one ResultSet per suite. Contexts that carry no
// benchmark of a suite are dropped from it and process_run indices are renumbered densely.
std::map<std::string, ResultSet> split_by_suite(const ResultSet& results);

}  // namespace perfgate
