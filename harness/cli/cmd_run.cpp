// perfgate run: run bench binaries in interleaved process rounds, gate against stored baselines with a
// confirm step, write reports. See docs/running.md.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.hpp"
#include "environment.hpp"
#include "learned_noise_cli.hpp"
#include "perfgate/baseline_store.hpp"
#include "perfgate/benchmark_filter.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/gate_plan.hpp"
#include "perfgate/host_fit.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/machine_class.hpp"
#include "perfgate/reference_build.hpp"
#include "perfgate/report.hpp"
#include "perfgate/runner.hpp"  // exact_filter
#include "perfgate/session.hpp"
#include "perfgate/text.hpp"  // first_and_more
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
  bool replace_baseline = false;  // --filter names the suite's whole baseline: drop what it leaves out
  int confirm_rounds = -1;        // -1: same as --rounds
  double time_budget = 0;         // seconds; 0: none
  std::string baseline_build;
  std::vector<std::string> baseline_env;
  bool allow_machine_mismatch = false;
  // The relative gate (suites with no fitting stored baseline): docs/running.md.
  std::string against;        // REV, "auto" (merge base) or "none"; empty: PERFGATE_AGAINST, else auto
  std::string against_build;  // an already built reference (build folder or binary)
  std::string source_dir;     // checkout holding REV (default: the current build's source)
  std::string reference_dir;  // worktree + build of REV (default: <current build>/reference)
  std::vector<std::string> reference_cmake_args;
  std::string reference_build_command;  // builds REV instead of CMake (ReferenceBuildOptions::build_command)
  std::string relative_filter;          // benchmarks measured against a reference (default: --filter)
  int against_rounds = 5;
  std::vector<std::string> against_repetitions;  // N or SUITE=N: repetitions per process against a reference
  std::string against_pin_cpus;                  // CPUs of the A/B against a reference (default: --pin-cpus)
  std::string against_lanes;                     // lanes of the A/B against a reference ("": none)
  int reference_jobs = 0;                        // 0: the CPUs this process may use
  cli::ExplainFlags explain;
  cli::LearnedNoiseFlags noise;
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
    } catch (const std::invalid_argument& e) { throw CLI::ValidationError("--bench", e.what()); }
  }
  if (!f.suites.empty()) {
    const std::filesystem::path dir = f.build_dir.empty() ? cli::own_build_dir() : std::filesystem::path(f.build_dir);
    try {
      add(resolve_benches(dir, f.suites));
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError("--suite", std::string(e.what()) + "; --build-dir names a build that has it");
    }
  }
  if (out.empty()) throw CLI::ValidationError("--bench/--suite", "give at least one bench binary or suite");
  return out;
}

GateOptions gate_options(const RunFlags& f, const Side& current) {
  GateOptions gate;
  gate.rule = cli::to_rule_sources(f.compare);
  gate.baseline_dir = f.baseline_dir;
  gate.runs_dir = std::filesystem::path(f.measure.report_dir) / "runs";  // where write_run_files puts them
  gate.learned_noise = cli::history_noise_source(f.noise);
  if (gate.learned_noise) gate.learned_noise_origin = cli::history_url(f.noise);
  gate.use_noise_snapshot = !f.noise.off;
  gate.allow_machine_mismatch = f.allow_machine_mismatch;
  gate.confirm_rounds = f.confirm_rounds < 0 ? f.measure.rounds : f.confirm_rounds;
  gate.time_budget_s = f.time_budget;
  cli::apply_adaptive_flags(f.adaptive, gate);
  if (!f.baseline_build.empty()) {
    std::set<std::string> suites;
    for (const auto& b : current.benches) suites.insert(b.suite);
    try {
      for (const auto& b : resolve_benches(f.baseline_build))
        if (suites.count(b.suite) != 0) gate.baseline_build.push_back(b);
    } catch (const std::invalid_argument& e) { throw CLI::ValidationError("--baseline-build", e.what()); }
    if (gate.baseline_build.empty())
      throw CLI::ValidationError("--baseline-build", "holds none of the suites being run");
  }
  gate.baseline_env = cli::parse_env(f.baseline_env, "--baseline-env");
  return gate;
}

// The flag that keeps every suite on the stored-baseline gate; empty when none does.
std::string stored_gate_forced_by(const RunFlags& f) {
  if (!f.baseline_build.empty()) return "--baseline-build";
  if (f.allow_machine_mismatch) return "--allow-machine-mismatch";
  if (f.against == "none") return "--against none";
  return {};
}

// The reference revision the user named and how: --against, else PERFGATE_AGAINST; {"", ""} when neither did.
std::pair<std::string, std::string> asked_revision(const RunFlags& f) {
  if (!f.against.empty()) return {f.against, "--against"};
  if (const auto env = cli::env_var("PERFGATE_AGAINST"); env && !env->empty()) return {*env, "PERFGATE_AGAINST"};
  return {};
}

// The flag or variable by which the user asked for a reference; empty when none did (the automatic merge base).
std::string reference_asked_by(const RunFlags& f) {
  if (!f.against_build.empty()) return "--against-build " + f.against_build;
  const auto [rev, how] = asked_revision(f);
  return rev.empty() ? std::string() : how + " " + rev;
}

// Asks every binary for its context and decides its gate (gate_plan.hpp). With --baseline-build,
// --allow-machine-mismatch or --against none the user has chosen the stored-baseline gate: every suite keeps it.
std::vector<SuitePlan> plan_suites(const RunFlags& f, const Side& current, const MeasureOptions& mo) {
  std::vector<SuitePlan> plans;
  const bool forced_stored = !stored_gate_forced_by(f).empty();
  for (const auto& b : current.benches) {
    std::string why;
    const auto context = forced_stored ? std::nullopt : probe_context(b, current.env, mo.pin_cpus, 120, &why);
    if (forced_stored) {
      plans.push_back(SuitePlan{b, GateMode::stored_baseline, "", "", "", "chosen by the flags"});
    } else if (context) {
      plans.push_back(plan_suite(b, context, f.baseline_dir, why));
    } else {
      plans.push_back(
          plan_unasked_suite(b, host_context(mo.environment, mo.pin_cpus), f.baseline_dir, why, reference_asked_by(f)));
    }
  }
  return plans;
}

// A run note on `suite`'s gate, "gate for <suite>: <what>": the plan's, and what later steps say of that gate
// (move_gate_note finds the plan's by this prefix).
std::string gate_note(const std::string& suite, const std::string& what) {
  return fmt::format("gate for {}: {}", suite, what);
}

std::vector<std::string> plan_notes(const std::vector<SuitePlan>& plans) {
  std::vector<std::string> notes;
  notes.reserve(plans.size());
  for (const auto& p : plans) {
    notes.push_back(
        gate_note(p.bench.suite,
                  fmt::format("{}{}: {}", to_string(p.mode),
                              p.machine_class.empty() ? "" : " (machine class " + p.machine_class + ")", p.reason)));
  }
  return notes;
}

// The suites whose plan note already says why they skip: the hardware they need is missing.
std::set<std::string> hardware_missing_suites(const std::vector<SuitePlan>& plans) {
  std::set<std::string> suites;
  for (const auto& p : plans)
    if (p.mode == GateMode::hardware_missing) suites.insert(p.bench.suite);
  return suites;
}

Side side_of(const Side& whole, const std::vector<SuitePlan>& plans, bool reference_mode) {
  Side s{whole.label, {}, whole.env};
  for (const auto& p : plans)
    if ((p.mode == GateMode::reference) == reference_mode) s.benches.push_back(p.bench);
  return s;
}

std::filesystem::path current_build_dir(const Side& current) {
  const auto bin = current.benches.front().path.parent_path();
  return bin.filename() == "bin" ? bin.parent_path() : bin;
}

// What to gate against when no stored baseline fits: the reference and how it was chosen.
struct ReferenceChoice {
  std::string rev;  // empty: none
  std::string how;  // "--against", "PERFGATE_AGAINST", "merge base of HEAD with origin/main", ...
  std::string why_none;
};

ReferenceChoice choose_reference(const RunFlags& f, const std::filesystem::path& source_dir) {
  const auto [rev, how] = asked_revision(f);
  if (rev == "none") return {"", "", "the reference gate is off (--against none)"};
  if (!rev.empty() && rev != "auto") return {resolve_revision(source_dir, rev), how + " " + rev, ""};
  const AutoReference a = automatic_reference(source_dir);
  return {a.commit, a.description, a.why_none};
}

std::filesystem::path source_dir_for(const RunFlags& f, const Side& current) {
  if (!f.source_dir.empty()) return f.source_dir;
  const BuildInfo info = build_info_for(current.benches.front().path, cli::given_git_commit());
  return info.source_dir.empty() ? std::filesystem::current_path() : std::filesystem::path(info.source_dir);
}

// The reference side: built from REV (or taken from --against-build). Adds what it cost to `notes`.
Side reference_side(const RunFlags& f, const Side& relative, const ReferenceChoice& ref,
                    const std::filesystem::path& source_dir, std::vector<std::string>& notes) {
  std::set<std::string> suites;
  for (const auto& b : relative.benches) suites.insert(b.suite);
  std::vector<std::string> names(suites.begin(), suites.end());
  // Environment per side, as in the confirm step: --env for the current build, --baseline-env for the reference.
  Side side{"reference", {}, cli::parse_env(f.baseline_env, "--baseline-env")};
  if (!f.against_build.empty()) {
    try {
      side.benches = resolve_benches(f.against_build, names);
    } catch (const std::invalid_argument& e) { throw CLI::ValidationError("--against-build", e.what()); }
    notes.push_back(fmt::format("reference: the build in {} (--against-build), not rebuilt", f.against_build));
    return side;
  }
  ReferenceBuildOptions o;
  o.source_dir = source_dir;
  o.commit = ref.rev;
  o.root = f.reference_dir.empty() ? current_build_dir(relative) / "reference" : std::filesystem::path(f.reference_dir);
  for (const auto& b : relative.benches) o.targets.push_back(b.path.filename().string());
  o.cmake_args = f.reference_cmake_args;
  o.build_command = f.reference_build_command;
  o.build_command_flag = "--reference-build-command";
  o.use_ccache = cli::env_var("PERFGATE_CCACHE").value_or("") != "0";
  o.search_path = cli::search_path();
  o.jobs = f.reference_jobs > 0 ? f.reference_jobs : static_cast<int>(allowed_cpus().size());
  o.progress = [](const std::string& line) { std::fprintf(stderr, "perfgate run: %s\n", line.c_str()); };
  const ReferenceBuild b = build_reference(o);
  side.label = "reference " + b.commit.substr(0, 12);
  for (const auto& bench : relative.benches) {
    const std::string target = bench.path.filename().string();
    const auto built = b.binaries.find(target);
    if (built != b.binaries.end()) side.benches.push_back(BenchBinary{bench.suite, built->second});
    else if (std::find(b.missing_targets.begin(), b.missing_targets.end(), target) == b.missing_targets.end())
      notes.push_back(fmt::format("reference {} built {} but left no executable of that name in {}",
                                  b.commit.substr(0, 12), target, b.build_dir.string()));
  }
  if (b.reused) {
    notes.push_back(fmt::format("reference {} ({}): reused the build in {}", b.commit.substr(0, 12), ref.how,
                                b.build_dir.string()));
  } else {
    notes.push_back(fmt::format(
        "reference {} ({}): built in {:.1f} s (checkout {:.1f} s, configure {:.1f} s, build "
        "{:.1f} s{}); log {}",
        b.commit.substr(0, 12), ref.how, b.checkout_seconds + b.configure_seconds + b.build_seconds, b.checkout_seconds,
        b.configure_seconds, b.build_seconds, b.ccache ? ", ccache" : ", no ccache", b.log_file.string()));
  }
  for (const auto& t : b.missing_targets)
    notes.push_back(fmt::format("reference {} has no target {}: that suite is new there", b.commit.substr(0, 12), t));
  return side;
}

// One --against-repetitions entry: N (every suite: the suite is empty) or SUITE=N.
std::pair<std::string, int> against_repetition(const std::string& entry) {
  const auto eq = entry.find('=');
  const std::string count = eq == std::string::npos ? entry : entry.substr(eq + 1);
  int n = 0;
  const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), n);
  if (ec != std::errc() || end != count.data() + count.size() || n < 1)
    throw std::invalid_argument(fmt::format("'{}': expected N or SUITE=N with N a whole number >= 1", entry));
  return {eq == std::string::npos ? std::string() : entry.substr(0, eq), n};
}

// --against-repetitions, later entries winning.
void apply_against_repetitions(const std::vector<std::string>& entries, MeasureOptions& ab) {
  for (const std::string& e : entries) {
    const auto [suite, n] = against_repetition(e);
    if (suite.empty()) {
      ab.repetitions = n;
    } else {
      ab.suite_repetitions[suite] = n;
    }
  }
}

SessionResult relative_session(const RunFlags& f, const Side& reference, const Side& relative, const MeasureOptions& mo,
                               const GateOptions& stored_gate) {
  MeasureOptions ab = mo;
  ab.rounds = std::max(mo.rounds, f.against_rounds);
  apply_against_repetitions(f.against_repetitions, ab);
  ab.work_dir = mo.work_dir / "relative";
  ab.phase_label = "relative";
  if (!f.relative_filter.empty()) ab.filter = f.relative_filter;
  if (!f.against_pin_cpus.empty()) {
    try {
      ab.pin_cpus = parse_cpu_list(f.against_pin_cpus);
    } catch (const std::invalid_argument& e) { throw CLI::ValidationError("--against-pin-cpus", e.what()); }
  }
  ab.lanes = cli::lanes_flag(f.against_lanes, "--against-lanes");
  if (stored_gate.time_budget_s > 0)
    ab.deadline = stored_gate.started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                            std::chrono::duration<double>(stored_gate.time_budget_s));
  GateOptions gate = stored_gate;
  gate.paired = true;
  gate.rule.base.sides.baseline = "reference";
  SessionResult s = gate_ab(reference, relative, ab, gate);
  mark_reference_gate(s, reference.label);
  return s;
}

// What measuring against a reference cost beyond measuring this build alone (the build is in its own note).
std::string relative_cost_note(const SessionResult& s) {
  const auto& sides = s.measurement.sides;
  const double reference = sides.empty() ? 0 : sides.front().process_seconds;
  double total = 0;
  for (const auto& side : sides) total += side.process_seconds;
  return fmt::format(
      "relative gate cost: {:.1f} s wall for the interleaved measurement, {:.1f} s of it in the "
      "reference's processes (the doubled measurement), plus {:.1f} s of adaptive extra rounds",
      s.measurement.wall_seconds, reference * (s.measurement.wall_seconds / std::max(total, 1e-9)), s.adaptive.seconds);
}

// A suite that leaves the stored-baseline gate for the reference build: its gate note saying `what` replaces the
// plan's, so that the report names each suite's gate once, as it ended (a stored-baseline note followed by a
// reference-build one for the same suite reads as two gates). Printed as it happens.
void move_gate_note(std::vector<std::string>& notes, const std::string& suite, const std::string& what) {
  const std::string prefix = gate_note(suite, ""), text = gate_note(suite, what);
  const auto planned =
      std::find_if(notes.begin(), notes.end(), [&prefix](const std::string& n) { return n.starts_with(prefix); });
  if (planned == notes.end()) notes.push_back(text);
  else *planned = text;
  std::fprintf(stderr, "perfgate run: %s\n", text.c_str());
}

// Why a stored-baseline suite cannot be gated by its baseline on this host; empty when it can.
std::string why_stored_gate_fails(const SuiteReport& sr, std::vector<std::string>& notes) {
  if (!sr.baseline_found) return {};
  const HostFit fit = host_fit(sr.report);
  if (!fit.fits) return "the stored baseline fits this runner's class but not this host: " + fit.explain();
  if (fit.checked) notes.push_back(fmt::format("host check for {}: {}", sr.suite, fit.explain()));
  const VerdictCounts& c = sr.report.counts;
  if (c.compared() > 0 && c.judged == 0 && c.failed == 0)
    return fmt::format(
        "the stored baseline judged none of its {} compared benchmarks on this host (every one noisy "
        "or reported only)",
        c.compared());
  return {};
}

// Suites that their stored baseline cannot gate on this host (it does not describe this host, or it could judge
// nothing here) leave the stored-baseline gate for the reference gate: their stored verdicts are dropped, and the
// report says why.
// `no_reference`: why no reference build can be had (empty: one can); the suites then keep their stored verdicts.
void move_unfit_suites(SessionResult& s, const Side& stored, Side& relative, const std::string& no_reference,
                       std::vector<std::string>& notes) {
  std::vector<SuiteReport> kept;
  for (auto& sr : s.suites) {
    const std::string why = why_stored_gate_fails(sr, notes);
    if (!why.empty() && !no_reference.empty())
      notes.push_back(
          gate_note(sr.suite, fmt::format("the stored baseline's verdicts stand, though {}: no reference build "
                                          "to gate against instead ({})",
                                          why, no_reference)));
    if (why.empty() || !no_reference.empty()) {
      kept.push_back(std::move(sr));
      continue;
    }
    move_gate_note(notes, sr.suite, "reference build, since " + why);
    for (const auto& b : stored.benches)
      if (b.suite == sr.suite) relative.benches.push_back(b);
  }
  s.suites = std::move(kept);
}

// A filter selecting exactly the calibration benchmarks of `plan`'s stored baseline that `run_filter` selects;
// empty when it holds none.
std::string stored_calibration_filter(const SuitePlan& plan, const std::string& run_filter) {
  std::error_code ec;
  if (plan.baseline_file.empty() || !std::filesystem::exists(plan.baseline_file, ec)) return {};
  ResultSet base = load_result_file(plan.baseline_file);
  drop_unselected(base, BenchmarkFilter(run_filter));
  std::set<std::string> names;
  for (const auto& b : base.benchmarks)
    if (is_calibration_benchmark(b.name)) names.insert(b.name);
  return names.empty() ? std::string() : exact_filter({names.begin(), names.end()});
}

// The host check of one stored-baseline suite on its calibration benchmarks alone, measured before the suite.
HostFit host_fit_first(const SuitePlan& plan, const Side& stored, const std::string& filter, const MeasureOptions& mo,
                       const GateOptions& gate, double& seconds) {
  MeasureOptions calibration = mo;
  calibration.filter = filter;
  calibration.work_dir = mo.work_dir / ("host-check-" + suite_file_stem(plan.bench.suite));
  calibration.phase_label = "host check";
  GateOptions only_measure = gate;
  only_measure.confirm_rounds = 0;
  const SessionResult s = gate_run(Side{stored.label, {plan.bench}, stored.env}, calibration, only_measure);
  seconds = s.measurement.wall_seconds;
  return s.suites.empty() ? HostFit{} : host_fit(s.suites.front().report);
}

// Suites whose stored baseline does not describe this host, told by measuring the baseline's calibration benchmarks
// first (one process per round, running only them): they go to the reference gate before the stored gate spends any
// time on them, so that a runner faster or slower than the baseline's host keeps its time budget for the gate that can
// judge it. A suite that fits here is measured as before, and checked again on the whole measurement.
void move_unfit_hosts_first(const std::vector<SuitePlan>& plans, Side& stored, Side& relative, const MeasureOptions& mo,
                            const GateOptions& gate, std::vector<std::string>& notes) {
  for (const auto& p : plans) {
    if (p.mode != GateMode::stored_baseline) continue;
    const std::string filter = stored_calibration_filter(p, mo.filter);
    if (filter.empty()) continue;
    double seconds = 0;
    const HostFit fit = host_fit_first(p, stored, filter, mo, gate, seconds);
    if (!fit.checked || fit.fits) {
      notes.push_back(fmt::format("host check first for {}: {} ({:.1f} s): {}", p.bench.suite,
                                  fit.checked ? "fits" : "not checked", seconds, fit.explain()));
      continue;
    }
    move_gate_note(notes, p.bench.suite,
                   fmt::format("reference build, since the stored baseline fits this runner's class but not this "
                               "host: {} (its calibration benchmarks measured first, {:.1f} s; the suite was not "
                               "measured against the stored baseline)",
                               fit.explain(), seconds));
    relative.benches.push_back(p.bench);
    std::erase_if(stored.benches, [&](const BenchBinary& b) { return b.suite == p.bench.suite; });
  }
}

// With the stored-baseline gate forced (`why_forced`: the flag), each suite's host check is still noted, and where
// the baseline does not fit this host, or judged nothing here, a note says that its verdicts stand all the same.
void note_forced_stored_gate(const SessionResult& s, const std::string& why_forced, std::vector<std::string>& notes) {
  for (const auto& sr : s.suites) {
    const std::string why = why_stored_gate_fails(sr, notes);
    if (!why.empty())
      notes.push_back(
          gate_note(sr.suite, fmt::format("the stored baseline's verdicts stand ({}), though {}", why_forced, why)));
  }
}

// Why no reference build could be had for `side` (no revision, or one that names no commit); empty when one can.
std::string why_no_reference(const RunFlags& f, const Side& side) {
  if (!f.against_build.empty()) return {};
  try {
    const ReferenceChoice ref = choose_reference(f, source_dir_for(f, side));
    return ref.rev.empty() ? ref.why_none : std::string();
  } catch (const std::exception& e) { return e.what(); }
}

// The reference side for the suites without a fitting stored baseline, or nullopt (with the reason in `notes`).
// -1 in `exit_code`: go on; otherwise the run ends with it (nothing at all to gate).
std::optional<Side> reference_for(const RunFlags& f, const Side& relative, bool anything_gated,
                                  std::vector<std::string>& notes, int& exit_code) {
  exit_code = -1;
  if (relative.benches.empty()) return std::nullopt;
  const auto source_dir = source_dir_for(f, relative);
  // With --against-build the reference is that build; no revision is resolved.
  const ReferenceChoice ref = f.against_build.empty() ? choose_reference(f, source_dir) : ReferenceChoice{};
  if (ref.rev.empty() && f.against_build.empty()) {
    std::string suites;
    for (const auto& b : relative.benches) suites += (suites.empty() ? "" : ", ") + b.suite;
    const std::string line = fmt::format(
        "no stored baseline fits {} and there is no reference revision ({}): pass --against REV (ci/perf.sh "
        "--against REV, or PERFGATE_AGAINST=REV) to gate against REV built here, or record a baseline with "
        "--update-baseline",
        suites, ref.why_none);
    if (!anything_gated) {
      std::fprintf(stderr, "perfgate run: SKIPPED: %s (exit 77)\n", line.c_str());
      exit_code = 77;
      return std::nullopt;
    }
    notes.push_back("not gated: " + line);
    return std::nullopt;
  }
  if (!ref.rev.empty()) {
    const CheckoutState state = checkout_state(source_dir);
    if (ref.rev == state.head)
      notes.push_back(state.dirty ? "current: HEAD with uncommitted changes, against HEAD as committed"
                                  : "reference and current are the same commit: an A/A run");
  }
  return reference_side(f, relative, ref, source_dir, notes);
}

int gate_command(const RunFlags& f, const Side& current, const MeasureOptions& mo, const std::string& command) {
  const GateOptions gate = gate_options(f, current);
  const std::vector<SuitePlan> plans = plan_suites(f, current, mo);
  std::vector<std::string> notes = plan_notes(plans);
  for (const auto& n : notes) std::fprintf(stderr, "perfgate run: %s\n", n.c_str());
  Side stored = side_of(current, plans, false);
  Side relative = side_of(current, plans, true);

  std::vector<SessionResult> parts;
  const std::string forced_by = stored_gate_forced_by(f);
  const bool forced_stored = !forced_by.empty();
  const std::string no_reference =
      forced_stored || stored.benches.empty() ? std::string() : why_no_reference(f, stored);
  if (!stored.benches.empty() && !forced_stored && no_reference.empty())
    move_unfit_hosts_first(plans, stored, relative, mo, gate, notes);
  if (!stored.benches.empty()) {
    GateOptions stored_gate = gate;
    stored_gate.skips_explained = hardware_missing_suites(plans);
    if (!forced_stored && no_reference.empty())
      stored_gate.leaves_stored_gate = [](const SuiteReport& sr) {
        std::vector<std::string> unused_notes;
        return !why_stored_gate_fails(sr, unused_notes).empty();
      };
    parts.push_back(gate_run(stored, mo, stored_gate));
    if (forced_stored) note_forced_stored_gate(parts.back(), forced_by, notes);
    else move_unfit_suites(parts.back(), stored, relative, no_reference, notes);
  }
  int early_exit = -1;
  const bool anything_stored = !parts.empty() && !parts.back().suites.empty();
  const std::optional<Side> reference = reference_for(f, relative, anything_stored, notes, early_exit);
  if (early_exit >= 0) return early_exit;
  if (reference) {
    parts.push_back(relative_session(f, *reference, relative, mo, gate));
    notes.push_back(relative_cost_note(parts.back()));
  }
  SessionResult s = merge_sessions(std::move(parts), notes);
  std::vector<Explanation> explained;
  if (f.explain.explain) {
    // The profiles need a binary of the baseline code: a --baseline-build, or the reference build.
    if (!gate.baseline_build.empty())
      explained = cli::explain_regressions(s, Side{"baseline", gate.baseline_build, gate.baseline_env}, current, mo,
                                           f.measure.report_dir, f.explain);
    else if (reference)
      explained = cli::explain_regressions(s, Side{"reference", reference->benches, reference->env}, current, mo,
                                           f.measure.report_dir, f.explain);
    else
      s.combined.notes.push_back(
          "--explain needs the baseline code as binaries (--baseline-build, or a reference "
          "build): a stored baseline has none to profile");
  }
  const auto files = cli::write_session_reports(s, f.measure.report_dir, f.measure.report_name, "perfgate run",
                                                f.measure.summary, cli::likeliest_causes(explained));
  if (!explained.empty() && !files.empty())
    std::ofstream(files.front(), std::ios::app) << cli::explanations_markdown(explained, f.measure.report_dir);
  cli::write_run_files(s.measurement.sides.at(0), f.measure.report_dir, "current", command);
  std::fprintf(stderr, "perfgate run: exit %d; report %s\n", s.exit_code, files.empty() ? "-" : files.front().c_str());
  return s.exit_code;
}

// Why --update-baseline stored nothing, and the two ways on: without the failed benchmarks, or with them, from the
// run files just written under `report_dir`.
std::string failed_baseline_advice(const SideResult& side, const std::string& report_dir,
                                   const std::string& baseline_dir) {
  std::vector<std::string> failed;
  for (const auto& [suite, rs] : side.suites)
    for (const auto& b : rs.benchmarks)
      if (b.error) failed.push_back(b.name);
  std::string out = failed.empty() ? "a bench failed" : fmt::format("failed: {}", fmt::join(failed, ", "));
  out += "; baselines left unchanged. Leave the failed benchmarks out with --filter, or store the runs as they are";
  const std::string root = baseline_dir == "baselines" ? "" : " --baseline-dir " + shell_quote(baseline_dir);
  const char* separator = ":";
  for (const auto& [suite, rs] : side.suites) {
    if (rs.contexts.empty()) continue;  // write_run_files wrote no file for it
    out +=
        fmt::format("{} perfgate baseline update --suite {} --from {} --allow-failed{}", separator, shell_quote(suite),
                    shell_quote(run_file(std::filesystem::path(report_dir) / "runs", suite, "current").string()), root);
    separator = ";";
  }
  return out;
}

// The baseline file an update would overwrite, read once for both questions asked of it (what a filtered run would
// drop, what the update replaces): `runs` unset where no file is stored, `error` where one is but cannot be read.
struct StoredBaseline {
  std::optional<ResultSet> runs;
  std::exception_ptr error;
};

StoredBaseline read_stored_baseline(const std::filesystem::path& file) {
  StoredBaseline out;
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return out;
  try {
    out.runs = load_result_file(file.string());
  } catch (const std::exception&) { out.error = std::current_exception(); }
  return out;
}

// What an update replaces, said beside what it wrote (the file is overwritten): "" where nothing was stored.
std::string replaced_baseline(const StoredBaseline& stored) {
  if (stored.error) {
    try {
      std::rethrow_exception(stored.error);
    } catch (const std::exception& e) {
      return fmt::format(", replacing a file perfgate could not read ({})", e.what());
    }
  }
  if (!stored.runs) return "";
  const SideInfo old = describe_side(*stored.runs);
  return fmt::format(", replacing the one recorded {} at commit {} ({} process runs)",
                     old.date.empty() ? "on an unknown date" : old.date, old.commit.empty() ? "unknown" : old.commit,
                     old.process_runs);
}

// The stored baseline's benchmarks that a --filter run did not measure: writing the run as the baseline would drop
// them. Empty without a filter (the whole suite measured: a benchmark gone from the binary is meant to go) or without
// a stored file; a stored file that cannot be read stops the update with its load error.
std::vector<std::string> left_out_by_filter(const StoredBaseline& stored, const ResultSet& run,
                                            const std::string& filter) {
  std::vector<std::string> out;
  if (filter.empty()) return out;
  if (stored.error) std::rethrow_exception(stored.error);
  if (!stored.runs) return out;
  for (const auto& b : stored.runs->benchmarks)
    if (run.find(b.name) == nullptr) out.push_back(b.name);
  return out;
}

// Why a --filter run was not written over a baseline that holds more, and the two ways on.
std::string partial_baseline_refusal(const std::filesystem::path& file, const std::vector<std::string>& left_out,
                                     const std::string& filter, const std::string& suite,
                                     const std::string& report_dir) {
  constexpr std::size_t kShown = 3;
  return fmt::format(
      "suite {}: {} holds {} benchmark(s) this run did not measure (--filter {}: {}); writing the run would drop "
      "them, so the baseline is left unchanged. Record the whole suite without --filter, or store this run alone "
      "anyway (--replace-baseline, or perfgate baseline update --suite {} --from {})",
      suite, file.string(), left_out.size(), shell_quote(filter), first_and_more(left_out, kShown), shell_quote(suite),
      shell_quote(run_file(std::filesystem::path(report_dir) / "runs", suite, "current").string()));
}

int run_command(const RunFlags& f) {
  if (!f.machine_class.empty()) {
    validate_machine_class(f.machine_class, "--machine-class");
    set_machine_class_override(f.machine_class);
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
    write_file_atomically(md, render_record_markdown(r.report, "perfgate run (record only)"));
    write_file_atomically(js, render_record_json(r.report));
    const auto runs = cli::write_run_files(side, f.measure.report_dir, "current", command);
    std::fprintf(stderr, "perfgate run: recorded %d process run(s); report %s; run files:", side.processes,
                 md.string().c_str());
    for (const auto& file : runs) std::fprintf(stderr, " %s", file.c_str());
    std::fprintf(stderr, "\n");
    if (f.update_baseline) {
      if (r.exit_code == 3) {
        std::fprintf(stderr, "perfgate run: %s\n",
                     failed_baseline_advice(side, f.measure.report_dir, f.baseline_dir).c_str());
        return 3;
      }
      int exit_code = r.exit_code;
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
        info.commit = rs.contexts.front().get(context_keys::kGitCommit, "unknown");
        info.command = command;
        info.generation = new_baseline_generation(f.baseline_dir, info.machine_class,
                                                  rs.contexts.front().get(context_keys::kCpuSignature), suite);
        const auto stored = baseline_file(f.baseline_dir, suite, info);
        const StoredBaseline previous = read_stored_baseline(stored);
        const auto left_out =
            f.replace_baseline ? std::vector<std::string>{} : left_out_by_filter(previous, rs, f.measure.filter);
        if (!left_out.empty()) {
          std::fprintf(
              stderr, "perfgate run: %s\n",
              partial_baseline_refusal(stored, left_out, f.measure.filter, suite, f.measure.report_dir).c_str());
          exit_code = 2;
          continue;
        }
        const std::string replaced = replaced_baseline(previous);
        const auto path = write_baseline(f.baseline_dir, suite, rs, info);
        std::fprintf(stderr, "perfgate run: baseline written: %s (%d process runs)%s\n", path.string().c_str(),
                     rs.process_runs(), replaced.c_str());
      }
      return exit_code;
    }
    return r.exit_code;
  }

  return gate_command(f, current, mo, command);
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
  cli::add_summary_flags(cmd, flags->measure.summary);
  cli::add_compare_flags(cmd, flags->compare);
  cli::add_adaptive_flags(cmd, flags->adaptive, "in the confirm step with --baseline-build");
  cli::add_learned_noise_flags(cmd, flags->noise, false);
  const std::size_t baselines = cmd->get_options().size();
  cmd->add_option("--baseline-dir", flags->baseline_dir, "root of baselines/<machine-class>/<suite>.json")
      ->capture_default_str();
  cmd->add_option("--machine-class", flags->machine_class, "override the machine class (PERFGATE_MACHINE_CLASS)");
  cmd->add_flag("--no-gate,--record-only", flags->record_only,
                "run and write the report and run files without comparing (exit 0, 3 on failures, 77 nothing ran)");
  cmd->add_flag("--update-baseline", flags->update_baseline,
                "record only, then write the runs as baselines/<class>/<suite>.json");
  cmd->add_flag("--replace-baseline", flags->replace_baseline,
                "with --update-baseline under --filter: write each suite's run as its whole baseline even where the "
                "stored file holds benchmarks the filter left out, which are dropped (ci/perf.sh: its case lists are "
                "the suites' gated sets)");
  cli::name_option_group(cmd, baselines, cli::kBaselinesGroup);
  const std::size_t confirm = cmd->get_options().size();
  cmd->add_option("--confirm-rounds", flags->confirm_rounds,
                  "process rounds re-measuring what looks regressed (default: --rounds; 0: no confirm step)")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--time-budget", flags->time_budget,
                  "seconds this run may take (0: no limit): the reference gate's rounds after the third stop where the "
                  "next would end past it; the confirm step re-measures only the suites whose "
                  "estimated cost still fits; the others keep the first look's verdict (ci/perf.sh passes what is "
                  "left of PERFGATE_TIME_BUDGET)")
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--baseline-build", flags->baseline_build,
                  "bench binary or build folder of the baseline code: re-run, alternating, in the confirm step");
  cmd->add_option("--baseline-env", flags->baseline_env,
                  "KEY=VALUE for the processes of the baseline build or the reference (repeatable)");
  cli::name_option_group(cmd, confirm, cli::kConfirmGroup);
  cmd->add_flag("--allow-machine-mismatch", flags->allow_machine_mismatch,
                "compare even when the baseline's machine class differs")
      ->group(cli::kBaselinesGroup);
  const std::size_t reference = cmd->get_options().size();
  cmd->add_option("--against", flags->against,
                  "reference revision for suites with no fitting stored baseline: built here and measured "
                  "interleaved with the current build (default: PERFGATE_AGAINST, else 'auto', the merge base with "
                  "the default branch; 'none': no reference)");
  cmd->add_option("--against-build", flags->against_build,
                  "an already built reference (build folder or bench binary) instead of building --against");
  cmd->add_option("--source-dir", flags->source_dir,
                  "git checkout holding the reference revision (default: the current build's source folder)");
  cmd->add_option("--reference-dir", flags->reference_dir,
                  "where the reference worktree and build go (default: <current build>/reference)");
  cmd->add_option("--reference-cmake-arg", flags->reference_cmake_args,
                  "configure argument for the reference build (repeatable), e.g. -DPERFGATE_WITH_CUDA=OFF");
  cmd->add_option("--reference-build-command", flags->reference_build_command,
                  "shell command that builds the reference instead of CMake: run in its checkout with "
                  "PERFGATE_BUILD_DIR set, it leaves the bench binaries (by their file names) there, in its bin/ "
                  "or a folder below");
  cmd->add_option("--relative-filter", flags->relative_filter,
                  "the benchmarks measured against a reference (default: --filter); both builds are measured, so a "
                  "main job that must stay short keeps the most valuable ones");
  cmd->add_option("--against-rounds", flags->against_rounds,
                  "interleaved rounds against the reference before adaptive extra rounds (at least --rounds)")
      ->capture_default_str()
      ->check(CLI::Range(2, 1000));
  cmd->add_option("--against-repetitions", flags->against_repetitions,
                  "repetitions per process against the reference, N or SUITE=N (repeatable; default: --repetitions); "
                  "a floor-bound benchmark's fastest of more repetitions reaches its floor more often on a busy host")
      ->check([](const std::string& entry) {
        try {
          against_repetition(entry);
          return std::string();
        } catch (const std::invalid_argument& e) { return std::string(e.what()); }
      });
  cmd->add_option("--against-pin-cpus", flags->against_pin_cpus,
                  "CPUs of the bench processes measured against a reference (default: --pin-cpus); on a VM whose "
                  "vCPUs differ in speed, one CPU takes that lottery out of the A/B");
  cmd->add_option("--against-lanes", flags->against_lanes,
                  "measure the rounds against a reference several at a time, one lane per CPU set, e.g. "
                  "'56;58;60;62' or '0-1;2-3': each round's two builds run back to back on one lane, pinned to its "
                  "CPUs (instead of --against-pin-cpus); for single-threaded benchmarks on a many-core host")
      ->check(cli::check_lanes);
  cmd->add_option("--reference-jobs", flags->reference_jobs, "parallel jobs of the reference build (default: CPUs)")
      ->check(CLI::Range(1, 4096));
  cli::name_option_group(cmd, reference, cli::kReferenceGroup);
  cli::add_explain_flags(cmd, flags->explain, "against --baseline-build or the reference build");
  cmd->callback([flags, &exit_code] { exit_code = run_command(*flags); });
}

}  // namespace perfgate
