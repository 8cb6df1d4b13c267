// perfgate CLI: a thin layer over libperfgate. Each subcommand lives in its own cli/cmd_*.cpp and is
// registered through cli/commands.hpp.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <system_error>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "benchmark_flags.hpp"
#include "commands.hpp"
#include "environment.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/reference_build.hpp"

#ifndef PERFGATE_VERSION_STRING
#define PERFGATE_VERSION_STRING "unknown"
#endif

namespace {

int run_cli(int argc, char** argv) {
  perfgate::cli::install_machine_class_override();
  CLI::App app{"perfgate: performance-regression gate for MoE kernels"};
  app.require_subcommand(0, 1);  // none only with --version (or --help)
  app.set_version_flag("--version", "perfgate " PERFGATE_VERSION_STRING);
  int exit_code = 0;
  app.add_subcommand("version", "print the version")->callback([] {
    fmt::print("perfgate {}\n", PERFGATE_VERSION_STRING);
  });
  perfgate::add_compare_command(app, exit_code);
  perfgate::add_baseline_command(app, exit_code);
  perfgate::add_history_command(app, exit_code);
  // ---- "runner": one line each ----
  perfgate::add_run_command(app, exit_code);
  perfgate::add_ab_command(app, exit_code);
  perfgate::add_bisect_command(app, exit_code);
  perfgate::add_timeline_command(app, exit_code);
  try {
    if (const char* bytes = std::getenv("PERFGATE_MAX_INPUT_BYTES"); bytes != nullptr && *bytes != '\0')
      perfgate::set_default_load_options({perfgate::parse_byte_count(bytes, "PERFGATE_MAX_INPUT_BYTES")});
    app.parse(argc, argv);
    if (app.get_subcommands().empty()) throw CLI::RequiredError("A subcommand");
  } catch (const CLI::ParseError& e) {
    // --help / --version are "errors" with exit 0; every real parse error is a usage error: 2.
    if (app.exit(e) == 0) return 0;
    for (const std::string& hint : perfgate::cli::google_benchmark_flag_hints(argc, argv))
      std::fprintf(stderr, "perfgate: %s\n", hint.c_str());
    return 2;
  } catch (const perfgate::InputError& e) {
    std::fprintf(stderr, "perfgate: error: %s\n", e.what());
    return 2;
  } catch (const perfgate::ReferenceError& e) {
    std::fprintf(stderr, "perfgate: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "perfgate: error: out of memory\n");
    return 2;
  } catch (const std::system_error& e) {
    // A report or a folder that cannot be written (std::filesystem_error is one too): the environment, not a bug.
    std::fprintf(stderr, "perfgate: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    // Anything else is a bug or an environment problem; never let it read as a pass.
    std::fprintf(stderr, "perfgate: internal error: %s\n", e.what());
    return 2;
  }
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  // Setting up the commands can throw too (out of memory): never let that read as a pass.
  try {
    return run_cli(argc, argv);
  } catch (...) {
    std::fprintf(stderr, "perfgate: internal error while setting up the commands\n");
    return 2;
  }
}
