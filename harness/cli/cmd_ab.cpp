// perfgate ab: the local before/after comparison. Two builds run alternately (A B / B A, random order
// in each pair) in one session, so machine drift hits both sides alike; the process runs are the
// units of between-run noise. See docs/running.md.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "commands.hpp"
#include "perfgate/profile_run.hpp"
#include "perfgate/session.hpp"
#include "run_common.hpp"

namespace perfgate {

namespace {

struct AbFlags {
  cli::MeasureFlags measure;
  cli::CompareFlags compare;
  cli::AdaptiveFlags adaptive;
  std::string before;
  std::string after;
  std::vector<std::string> suites;
  std::vector<std::string> env;
  std::vector<std::string> before_env;
  std::vector<std::string> after_env;
  std::string baseline_dir = "baselines";
  bool unpaired = false;
  std::string lanes;  // MeasureOptions::lanes ("": none)
  cli::ExplainFlags explain;
};

// One binary on each side is one suite whatever the file names say (bench_gemm_v1 against
// bench_gemm_v2): the before side takes the after side's suite name. Returns the note for the report.
std::optional<std::string> pair_single_binaries(std::vector<BenchBinary>& before,
                                                const std::vector<BenchBinary>& after) {
  if (before.size() != 1 || after.size() != 1 || before.front().suite == after.front().suite) return std::nullopt;
  const std::string note =
      fmt::format("one binary on each side: {} (before) paired with {} (after) as suite {}",
                  before.front().path.filename().string(), after.front().path.filename().string(), after.front().suite);
  before.front().suite = after.front().suite;
  return note;
}

std::vector<BenchBinary> resolve_side(const std::string& path, const std::vector<std::string>& suites,
                                      const std::string& flag) {
  try {
    return resolve_benches(path, suites);
  } catch (const std::invalid_argument& e) { throw CLI::ValidationError(flag, e.what()); }
}

// The two sides of the session, with their environments; `notes` gets how single binaries were paired.
std::pair<Side, Side> ab_sides(const AbFlags& f, std::vector<std::string>& notes) {
  std::vector<BenchBinary> before = resolve_side(f.before, f.suites, "--before");
  const std::vector<BenchBinary> after = resolve_side(f.after, f.suites, "--after");
  if (const auto note = pair_single_binaries(before, after)) notes.push_back(*note);
  // Suites present on one side only are reported (missing / new) but not run twice for nothing.
  std::set<std::string> b_suites;
  for (const auto& b : after) b_suites.insert(b.suite);
  const bool common =
      std::any_of(before.begin(), before.end(), [&](const BenchBinary& b) { return b_suites.count(b.suite) != 0; });
  if (!common) throw CLI::ValidationError("--before/--after", "the two builds have no suite in common");
  const auto env = cli::parse_env(f.env, "--env");
  auto a_env = env;
  auto b_env = env;
  for (const auto& kv : cli::parse_env(f.before_env, "--before-env")) a_env.push_back(kv);
  for (const auto& kv : cli::parse_env(f.after_env, "--after-env")) b_env.push_back(kv);
  return {Side{"before", before, a_env}, Side{"after", after, b_env}};
}

GateOptions ab_gate_options(const AbFlags& f) {
  GateOptions gate;
  gate.rule = cli::to_rule_sources(f.compare);
  gate.baseline_dir = f.baseline_dir;
  gate.paired = !f.unpaired;
  gate.rule.base.sides = SideNames{"before", "after", true};
  cli::apply_adaptive_flags(f.adaptive, gate);
  return gate;
}

int ab_command(AbFlags f) {
  if (f.measure.report_name == "perf-report") f.measure.report_name = "ab-report";
  std::vector<std::string> pairing_notes;
  const auto [a, b] = ab_sides(f, pairing_notes);
  const auto work = cli::raw_dir(f.measure.report_dir, "ab");
  MeasureOptions mo = cli::to_measure_options(f.measure, work);
  mo.phase_label = "ab";
  mo.lanes = cli::lanes_flag(f.lanes, "--lanes");
  SessionResult s = gate_ab(a, b, mo, ab_gate_options(f));
  s.notes.insert(s.notes.begin(), pairing_notes.begin(), pairing_notes.end());
  s.combined.notes.insert(s.combined.notes.begin(), pairing_notes.begin(), pairing_notes.end());
  std::vector<Explanation> explained;
  if (f.explain.explain) explained = cli::explain_regressions(s, a, b, mo, f.measure.report_dir, f.explain);
  const auto files = cli::write_session_reports(s, f.measure.report_dir, f.measure.report_name, "perfgate ab",
                                                f.measure.summary, cli::likeliest_causes(explained));
  if (!explained.empty() && !files.empty()) {
    std::ofstream(files.front(), std::ios::app) << cli::explanations_markdown(explained, f.measure.report_dir);
  }
  const std::string command = cli::command_line();
  cli::write_run_files(s.measurement.sides.at(0), f.measure.report_dir, "before", command);
  cli::write_run_files(s.measurement.sides.at(1), f.measure.report_dir, "after", command);
  std::fprintf(stderr, "perfgate ab: exit %d; report %s; raw JSON in %s\n", s.exit_code,
               files.empty() ? "-" : files.front().c_str(), work.string().c_str());
  return s.exit_code;
}

}  // namespace

void add_ab_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<AbFlags>();
  auto* cmd = app.add_subcommand("ab", "before/after: run two builds alternately in one session and compare");
  cmd->add_option("--before", flags->before, "bench binary or build folder of the code before the change")->required();
  cmd->add_option("--after", flags->after, "bench binary or build folder of the code after the change")->required();
  cmd->add_option("--suite", flags->suites, "only these suites (repeatable)");
  cmd->add_option("--env", flags->env, "KEY=VALUE for both sides' processes (repeatable)");
  cmd->add_option("--before-env", flags->before_env, "KEY=VALUE for the before side only (repeatable)");
  cmd->add_option("--after-env", flags->after_env, "KEY=VALUE for the after side only (repeatable)");
  cmd->add_option("--baseline-dir", flags->baseline_dir,
                  "only for its <machine-class>/thresholds.json (thresholds, run noise), as perfgate run")
      ->capture_default_str();
  cmd->add_flag("--unpaired", flags->unpaired,
                "judge the two sides as independent samples of runs instead of per-round differences");
  cli::add_measure_flags(cmd, flags->measure);
  cmd->add_option("--lanes", flags->lanes,
                  "measure rounds several at a time, one lane per CPU set, e.g. '56;58;60;62' or '0-1;2-3': each "
                  "round's two sides run back to back on one lane, pinned to its CPUs (instead of --pin-cpus); for "
                  "single-threaded benchmarks on a many-core host")
      ->check(cli::check_lanes);
  cli::add_summary_flags(cmd, flags->measure.summary);
  cli::add_compare_flags(cmd, flags->compare);
  cli::add_adaptive_flags(cmd, flags->adaptive, "after --rounds");
  cli::add_explain_flags(cmd, flags->explain, "against the before build");
  cmd->callback([flags, &exit_code] { exit_code = ab_command(*flags); });
}

}  // namespace perfgate
