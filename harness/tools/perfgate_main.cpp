// perfgate CLI: a thin layer over libperfgate. Subcommands are added by the harness modules.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

int main(int argc, char** argv) {
  CLI::App app{"perfgate: performance-regression gate for MoE kernels"};
  app.require_subcommand(1);
  app.add_subcommand("version", "print the version")->callback([] { fmt::print("perfgate 0.1.0\n"); });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return 0;
}
