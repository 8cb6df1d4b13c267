#pragma once
// The exceptions libperfgate throws for problems the user can fix. The CLI maps each to an exit code
// (docs/harness.md): InputError -> 2 (bad input), ReferenceError -> 2 or the advice its kind names.
// Programming errors stay std::logic_error and friends; I/O failures are std::system_error.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace perfgate {

// A problem with an input: a results file, a baseline, a flag value, an environment variable.
struct InputError : std::runtime_error {
  // what() == "<file>: benchmark '<benchmark>': field '<field>': <detail>" (parts left out when empty),
  // always one line.
  InputError(std::string file, std::string benchmark, std::string field, std::string detail);

  std::string file;
  std::string benchmark;  // raw name as in the JSON; empty when the problem is not inside a benchmark
  std::string field;      // JSON key (e.g. "real_time", "context", "benchmarks[3]"); may be empty
  std::string detail;     // what is wrong
};

// Why a reference build (reference_build.hpp) could not be had. `kind` tells the CLI which exit code
// and advice fit.
struct ReferenceError : std::runtime_error {
  enum class Kind {
    not_a_checkout,    // the source folder is not inside a git work tree
    unknown_revision,  // REV does not name a commit here (a shallow clone, or a typo)
    build_failed,      // configure or build of REV failed (log_file has the output)
    tool_failed,       // git or cmake could not be run
  };
  ReferenceError(Kind kind, const std::string& message, std::string log_file = "");
  Kind kind;
  std::string log_file;
};

// `text` made safe for a one-line message: newline, tab and other control characters escaped
// (\n, \t, \x01), cut after `max_chars` with "...". InputError::what() is built from these.
std::string one_line(std::string_view text, std::size_t max_chars = 300);

}  // namespace perfgate
