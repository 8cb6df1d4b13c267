#pragma once
// Suites in a ResultSet: a benchmark's suite is the first component of its name, and one ResultSet may
// hold several suites (several bench binaries in one run). The baseline store keeps one file per suite
// and machine classes are checked per suite; both build on these functions.
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

// suite -> indices of the process runs (contexts) that belong to it: those with a sample of one of its
// benchmarks, those whose perfgate.suite names it, and, for a suite with no sample at all, those from
// the files that reported it.
std::map<std::string, std::vector<int>> process_runs_by_suite(const ResultSet& results);

// Splits a ResultSet (possibly several binaries) into one ResultSet per suite. Contexts that carry no
// benchmark of a suite are dropped from it and process_run indices are renumbered densely.
std::map<std::string, ResultSet> split_by_suite(const ResultSet& results);

// The process runs whose perfgate.suite names `suite`, with every benchmark they measured or reported, whatever its
// name. That is how `perfgate run` files a plain Google Benchmark binary: its suite is the binary's name, while its
// benchmarks' names (BM_Sort/1024) carry suites of their own. Empty when no run names the suite.
ResultSet runs_naming_suite(const ResultSet& results, const std::string& suite);

}  // namespace perfgate
