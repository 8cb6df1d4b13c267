// perfgate bisect: the first commit between --good and --bad that made a suite's benchmarks slower (or
// faster, --improvement). Candidates are built with the reference builder and judged against the good
// revision in interleaved A/B sessions (perfgate ab's rule and adaptive rounds). See docs/running.md.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.hpp"
#include "environment.hpp"
#include "perfgate/baseline_store.hpp"
#include "perfgate/bench_binary.hpp"
#include "perfgate/bisect.hpp"
#include "perfgate/reference_build.hpp"
#include "perfgate/session.hpp"
#include "run_common.hpp"

namespace perfgate {

namespace {

namespace fs = std::filesystem;

struct BisectFlags {
  cli::MeasureFlags measure;
  cli::CompareFlags compare;
  cli::AdaptiveFlags adaptive;
  std::string good, bad, bench;
  std::string build_command;
  std::vector<std::string> cmake_args;
  std::string source_dir = ".";
  std::string work_dir = "build/bisect";
  std::string log;
  bool improvement = false;
  int jobs = 0;
};

struct Bisector {
  const BisectFlags& f;
  fs::path source;
  MeasureOptions mo;
  GateOptions gate;
  Side good_side;
  std::map<std::string, EndChange> watched;  // the bad end's changes; empty: every benchmark

  // A perfgate suite's binary is bench_NAME; any other Google Benchmark binary is found by its own name.
  std::vector<std::string> targets() const { return {"bench_" + f.bench, f.bench}; }

  ReferenceBuild build(const std::string& commit, const std::string& slot) const {
    ReferenceBuildOptions o;
    o.source_dir = source;
    o.commit = commit;
    o.root = fs::path(f.work_dir) / slot;
    o.targets = targets();
    o.cmake_args = f.cmake_args;
    o.build_command = f.build_command;
    o.jobs = f.jobs > 0 ? f.jobs : static_cast<int>(allowed_cpus().size());
    o.search_path = cli::search_path();
    o.progress = [](const std::string& line) { std::fprintf(stderr, "perfgate bisect: %s\n", line.c_str()); };
    return build_reference(o);
  }

  // The bench of a built commit, as the side of an A/B session. Throws ReferenceError when the build has none.
  Side bench_side(const ReferenceBuild& b, const std::string& label) const {
    for (const auto& t : targets()) {
      const auto it = b.binaries.find(t);
      if (it != b.binaries.end()) return Side{label, {{suite_from_binary(it->second), it->second}}, {}};
    }
    const std::string names = fmt::format("bench_{} or {}", f.bench, f.bench);
    throw ReferenceError(
        ReferenceError::Kind::build_failed,
        f.build_command.empty()
            ? fmt::format("{} builds no executable {} (CMake targets; --build-command for a build of your own)",
                          b.commit.substr(0, 12), names)
            : fmt::format("the build command left no executable {} for {} in {}/bin, {} ($PERFGATE_BUILD_DIR) or "
                          "a folder below it",
                          names, b.commit.substr(0, 12), b.build_dir.string(), b.build_dir.string()));
  }

  // Bad: the candidate shows the change (a regression, or an improvement with --improvement) in a
  // benchmark; good: every benchmark decided without it; otherwise unclear, and skipped.
  BisectStep judge(const std::string& commit) const {
    const auto t0 = std::chrono::steady_clock::now();
    BisectStep step;
    step.commit = commit;
    try {
      const Side candidate = bench_side(build(commit, "candidate"), commit.substr(0, 12));
      MeasureOptions m = mo;
      m.work_dir = mo.work_dir / commit.substr(0, 12);
      const SessionResult s = gate_ab(good_side, candidate, m, gate);
      step = classify(s.combined);
    } catch (const ReferenceError& e) {
      step.outcome = StepOutcome::skip;
      step.detail = std::string("does not build: ") + e.what();
    }
    step.commit = commit;
    step.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "perfgate bisect: %s: %s (%s)\n", commit.substr(0, 12).c_str(), to_string(step.outcome),
                 step.detail.c_str());
    return step;
  }

  // A watched benchmark the rule could not decide, placed by the bad end's change: nearer the good end, nearer the
  // bad end, or unclear (nearer_end). Before the bad end is known every benchmark is watched and none is placed.
  StepOutcome placed(const BenchmarkComparison& b) const {
    const auto end = watched.find(b.name);
    if (end == watched.end()) return StepOutcome::skip;
    const MetricComparison* m = b.metric(end->second.metric);
    return m == nullptr ? StepOutcome::skip : nearer_end(*m, end->second, f.improvement);
  }

  // Bad: a watched benchmark shows the change (or lies nearer the bad end's change than the good end's); good:
  // every watched one decided without it (or nearer the good end); otherwise unclear.
  BisectStep classify(const ComparisonReport& r) const {
    const Verdict wanted = f.improvement ? Verdict::improvement : Verdict::regression;
    BisectStep step;
    const BenchmarkComparison* unclear = nullptr;
    std::vector<const BenchmarkComparison*> nearer_good;
    std::size_t judged = 0;
    for (const auto& b : r.benchmarks) {
      if (!watched.empty() && watched.count(b.name) == 0) continue;
      ++judged;
      const bool decided = b.verdict == Verdict::unchanged || b.verdict == Verdict::regression ||
                           b.verdict == Verdict::improvement || b.verdict == Verdict::skipped;
      const StepOutcome place = decided ? StepOutcome::skip : placed(b);
      if (b.verdict == wanted || place == StepOutcome::bad) {
        if (step.changed.empty())
          step.detail = fmt::format("{}: {}{}", b.name, change_text(b),
                                    place == StepOutcome::bad ? ", nearer the bad end's change" : "");
        const MetricComparison* m = b.driving_metric();
        step.changed[b.name] =
            m == nullptr ? EndChange{} : EndChange{m->name, change_toward(m->kind, m->change, f.improvement)};
        continue;
      }
      if (place == StepOutcome::good) nearer_good.push_back(&b);
      else if (!decided && unclear == nullptr) unclear = &b;
    }
    if (!step.changed.empty()) {
      step.outcome = StepOutcome::bad;
      if (step.changed.size() > 1) step.detail += fmt::format(" (and {} more)", step.changed.size() - 1);
    } else if (unclear != nullptr) {
      step.outcome = StepOutcome::skip;
      step.detail = fmt::format("unclear after its adaptive rounds: {}: {}", unclear->name, change_text(*unclear));
    } else {
      step.outcome = StepOutcome::good;
      step.detail = fmt::format("{} benchmark(s) without the {}", judged, to_string(wanted));
      if (!nearer_good.empty())
        step.detail += fmt::format(" ({}: {}, nearer the good end than the bad end's change)",
                                   nearer_good.front()->name, change_text(*nearer_good.front()));
    }
    return step;
  }

  // The steps after the bad end are judged on the benchmarks it changed: another benchmark's noise does not make a
  // commit unclear, nor its own change a commit bad. Returns the line that says so.
  std::string watch_changed_by(const BisectStep& endpoint) {
    watched = endpoint.changed;
    std::vector<std::string> names;
    for (const auto& [name, change] : watched) names.push_back(name);
    return fmt::format("the steps are judged on the {} benchmark(s) that the bad end changed: {}", names.size(),
                       fmt::join(names, ", "));
  }
};

std::string markdown_log(const BisectFlags& f, const fs::path& source, const std::string& good, const std::string& bad,
                         const BisectStep& endpoint, const BisectResult& r, const std::string& watching) {
  const auto row = [&](const BisectStep& s) {
    return fmt::format("| `{}` | {} | **{}** | {} | {:.0f} s |\n", s.commit.substr(0, 12),
                       commit_subject(source, s.commit), to_string(s.outcome), s.detail, s.seconds);
  };
  std::string md = fmt::format("# perfgate bisect: {}\n\n", f.bench);
  md += fmt::format("Looking for the first commit with the {} between good `{}` and bad `{}`.\n\n",
                    f.improvement ? "improvement" : "regression", good.substr(0, 12), bad.substr(0, 12));
  if (!watching.empty()) md += fmt::format("The bad end is checked first; {}.\n\n", watching);
  md += "| commit | subject | outcome | verdict | time |\n| --- | --- | --- | --- | ---: |\n";
  md += row(endpoint);
  for (const auto& s : r.steps) md += row(s);
  if (!r.first_bad.empty()) {
    md += fmt::format("\n**First bad commit: `{}`** ({})\n", r.first_bad, commit_subject(source, r.first_bad));
  } else {
    md += "\n**Skipped steps leave more than one candidate:**\n\n";
    for (const auto& c : r.candidates) md += fmt::format("- `{}` {}\n", c, commit_subject(source, c));
  }
  return md;
}

MeasureOptions bisect_measure_options(const BisectFlags& f) {
  MeasureOptions mo = cli::to_measure_options(f.measure, fs::path(f.work_dir) / "raw");
  mo.phase_label = "bisect";
  return mo;
}

GateOptions bisect_gate_options(const BisectFlags& f) {
  GateOptions gate;
  gate.rule = cli::to_rule_sources(f.compare);
  cli::apply_adaptive_flags(f.adaptive, gate);
  return gate;
}

int bisect_command(const BisectFlags& f) {
  const fs::path source = fs::absolute(f.source_dir);
  const std::string good = resolve_revision(source, f.good), bad = resolve_revision(source, f.bad);
  const std::vector<std::string> commits = commits_between(source, good, bad);
  if (commits.empty())
    throw CLI::ValidationError("--good/--bad", fmt::format("{} is not an ancestor of {}", f.good, f.bad));
  Bisector b{f, source, bisect_measure_options(f), bisect_gate_options(f), Side{}, {}};
  b.good_side = b.bench_side(b.build(good, "good"), "good " + good.substr(0, 12));
  std::fprintf(stderr, "perfgate bisect: %zu commit(s) after %s up to %s; checking the bad end first\n", commits.size(),
               good.substr(0, 12).c_str(), bad.substr(0, 12).c_str());
  const BisectStep endpoint = b.judge(bad);
  BisectResult r;
  std::string watching;
  if (endpoint.outcome == StepOutcome::bad) {
    watching = b.watch_changed_by(endpoint);
    std::fprintf(stderr, "perfgate bisect: %s\n", watching.c_str());
    r = bisect_commits(commits, [&](const std::string& c) { return b.judge(c); });
  }
  const fs::path log = f.log.empty() ? fs::path(f.work_dir) / "bisect.md" : fs::path(f.log);
  write_file_atomically(log, markdown_log(f, source, good, bad, endpoint, r, watching));
  if (endpoint.outcome != StepOutcome::bad) {
    std::fprintf(stderr, "perfgate bisect: nothing to bisect: %s against %s is %s (%s); log %s\n",
                 bad.substr(0, 12).c_str(), good.substr(0, 12).c_str(), to_string(endpoint.outcome),
                 endpoint.detail.c_str(), log.c_str());
    return 77;
  }
  if (!r.first_bad.empty())
    std::printf("first bad commit: %s %s\n", r.first_bad.c_str(), commit_subject(source, r.first_bad).c_str());
  else std::printf("first bad commit: one of %zu (steps were skipped): see %s\n", r.candidates.size(), log.c_str());
  std::fprintf(stderr, "perfgate bisect: log %s\n", log.c_str());
  return 0;
}

}  // namespace

void add_bisect_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<BisectFlags>();
  auto* cmd =
      app.add_subcommand("bisect", "find the commit that made a suite slower: build and A/B the commits between");
  cmd->add_option("--good", flags->good, "a revision without the change")->required();
  cmd->add_option("--bad", flags->bad, "a revision with it (a descendant of --good)")->required();
  cmd->add_option("--bench", flags->bench,
                  "the bench: a perfgate suite (binary bench_NAME) or any Google Benchmark binary's name")
      ->required();
  cmd->add_option("--build-command", flags->build_command,
                  "shell command that builds a checkout (run in it) and leaves the bench in $PERFGATE_BUILD_DIR, "
                  "its bin/ or a folder below (default: CMake, Release)");
  cmd->add_option("--reference-cmake-arg", flags->cmake_args, "configure argument of each build (repeatable)");
  cmd->add_option("--source-dir", flags->source_dir, "the git checkout")->capture_default_str();
  cmd->add_option("--work-dir", flags->work_dir, "builds (good/, candidate/) and raw results")->capture_default_str();
  cmd->add_option("--log", flags->log, "Markdown log of every step (default: <work-dir>/bisect.md)");
  cmd->add_flag("--improvement", flags->improvement, "find the commit that made it faster instead");
  cmd->add_option("--jobs", flags->jobs, "parallel build jobs (default: the CPUs this process may use)")
      ->check(CLI::Range(1, 4096));
  cli::add_measure_flags(cmd, flags->measure);
  cli::add_compare_flags(cmd, flags->compare);
  cli::add_adaptive_flags(cmd, flags->adaptive, "of each step");
  cmd->callback([flags, &exit_code] { exit_code = bisect_command(*flags); });
}

}  // namespace perfgate
