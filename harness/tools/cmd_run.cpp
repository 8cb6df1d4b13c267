// perfgate run: run bench binaries in interleaved process rounds, gate against stored baselines with a
// confirm step, write reports. See docs/running.md.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "commands.hpp"
#include "perfgate/baseline_store.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/machine_class.hpp"
#include "perfgate/session.hpp"
#include "run_common.hpp"

namespace perfgate {

namespace {

struct RunFlags {
  cli::MeasureFlags measure;
  cli::CompareFlags compare;
  cli::AdaptiveFlags adaptive;
  std::vector<std::string> benches;
  std::vector<std::string> suites;
  std::string build_dir;
  std::vector<std::string> env;
  std::string baseline_dir = "baselines";
  std::string machine_class;
  bool record_only = false;
  bool update_baseline = false;
  int confirm_rounds = -1;  // -1: same as --rounds
  std::string baseline_build;
  std::vector<std::string> baseline_env;
  bool allow_machine_mismatch = false;
};

std::vector<BenchBinary> resolve_targets(const RunFlags& f) {
  std::vector<BenchBinary> out;
  std::set<std::string> seen;
  auto add = [&](const std::vector<BenchBinary>& list) {
    for (const auto& b : list) {
      if (!seen.insert(b.suite).second)
        throw CLI::ValidationError("--bench/--suite", "suite '" + b.suite + "' given twice");
      out.push_back(b);
    }
  };
  for (const auto& b : f.benches) {
    try {
      add(resolve_benches(b));
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError("--bench", e.what());
    }
  }
  if (!f.suites.empty()) {
    const std::filesystem::path dir = f.build_dir.empty() ? cli::own_build_dir() : std::filesystem::path(f.build_dir);
    try {
      add(resolve_benches(dir, f.suites));
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError("--suite", std::string(e.what()) + " (set --build-dir)");
    }
  }
  if (out.empty()) throw CLI::ValidationError("--bench/--suite", "give at least one bench binary or suite");
  return out;
}

int run_command(const RunFlags& f) {
  if (!f.machine_class.empty()) {
    validate_machine_class(f.machine_class, "--machine-class");
    ::setenv("PERFGATE_MACHINE_CLASS", f.machine_class.c_str(), 1);
  }
  const Side current{"current", resolve_targets(f), cli::parse_env(f.env, "--env")};
  const auto work = cli::raw_dir(f.measure.report_dir, "run");
  MeasureOptions mo = cli::to_measure_options(f.measure, work);
  const std::string command = cli::command_line();
  const bool record = f.record_only || f.update_baseline;

  if (record) {
    RecordResult r = record_run(current, mo);
    const SideResult& side = r.measurement.sides.at(0);
    std::filesystem::create_directories(f.measure.report_dir);
    const auto md = std::filesystem::path(f.measure.report_dir) / (f.measure.report_name + ".md");
    const auto js = std::filesystem::path(f.measure.report_dir) / (f.measure.report_name + ".json");
    write_file_atomically(md, measurement_markdown(r.measurement, "perfgate run (record only)"));
    write_file_atomically(js, measurement_json(r.measurement));
    const auto runs = cli::write_run_files(side, f.measure.report_dir, "current", command);
    std::fprintf(stderr, "perfgate run: recorded %d process run(s); report %s; run files:", side.processes,
                 md.string().c_str());
    for (const auto& file : runs) std::fprintf(stderr, " %s", file.c_str());
    std::fprintf(stderr, "\n");
    if (f.update_baseline) {
      if (r.exit_code == 3) {
        std::fprintf(stderr, "perfgate run: a bench failed; baselines left unchanged\n");
        return 3;
      }
      for (const auto& [suite, rs] : side.suites) {
        if (rs.contexts.empty()) continue;
        // A suite with nothing measured (GPU suites on a CPU runner) would be a baseline of skips.
        if (rs.every_benchmark_skipped()) {
          std::fprintf(stderr, "perfgate run: suite %s: every benchmark skipped (%s); no baseline written\n",
                       suite.c_str(), rs.benchmarks.front().skip_reason->c_str());
          continue;
        }
        BaselineInfo info;
        info.machine_class = machine_class(rs);
        info.commit = rs.contexts.front().get("perfgate.git_commit", "unknown");
        info.command = command;
        const auto path = write_baseline(f.baseline_dir, suite, rs, info);
        std::fprintf(stderr, "perfgate run: baseline written: %s (%d process runs)\n", path.string().c_str(),
                     rs.process_runs());
      }
    }
    return r.exit_code;
  }

  GateOptions gate;
  gate.compare = cli::to_compare_options(f.compare);
  if (f.compare.alpha > 0) gate.alpha = f.compare.alpha;
  if (f.compare.run_noise >= 0) gate.run_noise = f.compare.run_noise;
  if (f.compare.run_noise_df >= 0) gate.run_noise_df = f.compare.run_noise_df;
  if (f.compare.session_noise >= 0) gate.session_noise = f.compare.session_noise;
  if (f.compare.max_dispersion >= 0) gate.max_dispersion = f.compare.max_dispersion;
  gate.baseline_dir = f.baseline_dir;
  gate.allow_machine_mismatch = f.allow_machine_mismatch;
  gate.confirm_rounds = f.confirm_rounds < 0 ? f.measure.rounds : f.confirm_rounds;
  gate.max_extra_rounds = f.adaptive.max_extra_rounds;
  gate.extra_rounds_step = f.adaptive.extra_rounds_step;
  gate.max_extra_time_factor = f.adaptive.max_extra_time_factor;
  if (!f.baseline_build.empty()) {
    std::set<std::string> suites;
    for (const auto& b : current.benches) suites.insert(b.suite);
    try {
      for (const auto& b : resolve_benches(f.baseline_build))
        if (suites.count(b.suite) != 0) gate.baseline_build.push_back(b);
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError("--baseline-build", e.what());
    }
    if (gate.baseline_build.empty())
      throw CLI::ValidationError("--baseline-build", "holds none of the suites being run");
  }
  gate.baseline_env = cli::parse_env(f.baseline_env, "--baseline-env");

  SessionResult s = gate_run(current, mo, gate);
  const auto files = cli::write_session_reports(s, f.measure.report_dir, f.measure.report_name, "perfgate run");
  cli::write_run_files(s.measurement.sides.at(0), f.measure.report_dir, "current", command);
  std::fprintf(stderr, "perfgate run: exit %d; report %s\n", s.exit_code, files.empty() ? "-" : files.front().c_str());
  return s.exit_code;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<RunFlags>();
  auto* cmd = app.add_subcommand("run", "run bench binaries in interleaved process rounds and gate against baselines");
  cmd->add_option("--bench", flags->benches, "bench binary, or a build folder (its bin/bench_*) (repeatable)");
  cmd->add_option("--suite", flags->suites, "suite name, resolved to <build-dir>/bin/bench_<NAME> (repeatable)");
  cmd->add_option("--build-dir", flags->build_dir, "build folder for --suite (default: this perfgate's build)");
  cmd->add_option("--env", flags->env, "KEY=VALUE for the bench processes (repeatable)");
  cli::add_measure_flags(cmd, flags->measure);
  cli::add_compare_flags(cmd, flags->compare);
  cli::add_adaptive_flags(cmd, flags->adaptive, "in the confirm step with --baseline-build");
  cmd->add_option("--baseline-dir", flags->baseline_dir, "root of baselines/<machine-class>/<suite>.json")
      ->capture_default_str();
  cmd->add_option("--machine-class", flags->machine_class, "override the machine class (PERFGATE_MACHINE_CLASS)");
  cmd->add_flag("--no-gate,--record-only", flags->record_only,
                "run and write the report and run files without comparing (exit 0, 3 on failures, 77 nothing ran)");
  cmd->add_flag("--update-baseline", flags->update_baseline,
                "record only, then write the runs as baselines/<class>/<suite>.json");
  cmd->add_option("--confirm-rounds", flags->confirm_rounds,
                  "process rounds re-measuring what looks regressed (default: --rounds; 0: no confirm step)")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--baseline-build", flags->baseline_build,
                  "bench binary or build folder of the baseline code: re-run, alternating, in the confirm step");
  cmd->add_option("--baseline-env", flags->baseline_env, "KEY=VALUE for the baseline build's processes (repeatable)");
  cmd->add_flag("--allow-machine-mismatch", flags->allow_machine_mismatch,
                "compare even when the baseline's machine class differs");
  cmd->callback([flags, &exit_code] { exit_code = run_command(*flags); });
}

}  // namespace perfgate
