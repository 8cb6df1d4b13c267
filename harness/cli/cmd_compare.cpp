// perfgate compare BASELINE CURRENT: the verdict engine on two stored runs (docs/statistics.md).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.hpp"
#include "environment.hpp"
#include "learned_noise_cli.hpp"
#include "perfgate/baseline_store.hpp"
#include "perfgate/compare.hpp"
#include "perfgate/history.hpp"
#include "perfgate/host_dependent.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/machine_class.hpp"
#include "perfgate/options.hpp"
#include "perfgate/report.hpp"
#include "perfgate/text.hpp"
#include "run_common.hpp"

namespace perfgate {
namespace {

struct CompareArgs {
  std::vector<std::string> positional, baseline, current;
  cli::CompareFlags rule;
  std::string markdown, json, title;
  bool allow_machine_mismatch = false, no_config = false, quiet = false, timing = false, across_hosts = false;
  cli::LearnedNoiseFlags noise;
  cli::SummaryFlags summary;
};

// Writes an ERROR report where reports were asked for, so that a stale report from an earlier run can
// never be mistaken for this run's result.
void write_error_reports(const CompareArgs& a, const std::string& message) {
  const std::string line = "ERROR: " + message + " (exit 2)";
  try {
    if (!a.markdown.empty())
      write_file_atomically(a.markdown,
                            "## perfgate compare: " + escape_markdown(line) + "\n\nNo comparison was made.\n");
    if (!a.json.empty()) write_file_atomically(a.json, render_json_error(line));
    if (!a.summary.file.empty())
      write_file_atomically(a.summary.file,
                            "## perfgate compare: " + escape_markdown(line) + "\n\nNo comparison was made.\n");
  } catch (const std::exception&) {
    // The error itself is what matters; main prints it.
  }
}

// The learned noise of this comparison: --noise FILE, else the history (--history / PERFGATE_HISTORY), else a
// noise.json next to the first baseline file. A table of another class than the baseline's is not used (note).
std::shared_ptr<const LearnedNoiseTable> learned_noise_for(const CompareArgs& a, const ResultSet& baseline,
                                                           const std::string& first_baseline_file,
                                                           std::vector<std::string>& notes) {
  if (a.noise.off) return nullptr;
  const std::string url = cli::history_url(a.noise);
  std::string snapshot = a.noise.snapshot;
  if (snapshot.empty() && url.empty()) {
    const auto beside = std::filesystem::path(first_baseline_file).parent_path() / kNoiseSnapshotFile;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(beside, ec)) return nullptr;
    snapshot = beside.string();
  }
  const std::string key = history::history_class(baseline);
  if (snapshot.empty()) {
    auto table = cli::learn_from_history(url, key, a.noise.window, a.noise.min_sessions);
    if (!table) notes.push_back(empty_history_note(url, key, "the class prior"));
    return table;
  }
  auto table = std::make_shared<const LearnedNoiseTable>(load_noise_snapshot(snapshot));
  if (table->machine_class == key) return table;
  notes.push_back(fmt::format("learned noise {} is of class {}, the baseline is {}: not used, the class prior judges",
                              snapshot, table->machine_class, key));
  return nullptr;
}

// The class default of `perfgate compare`: the thresholds.json beside the (first) baseline file, unless
// --no-config.
std::filesystem::path class_thresholds(const CompareArgs& a, const std::string& first_baseline_file) {
  if (a.no_config) return {};
  return std::filesystem::path(first_baseline_file).parent_path() / "thresholds.json";
}

// BASELINE CURRENT, --baseline, --current (each a comma list) as two lists of files.
std::pair<std::vector<std::string>, std::vector<std::string>> input_files(const CompareArgs& a) {
  if (a.positional.size() > 2)
    throw InputError("", "", "BASELINE CURRENT",
                     fmt::format("compare takes BASELINE and CURRENT, not {} arguments (a pattern the shell expanded? "
                                 "quote it: 'before*.json' 'after*.json'); several files a side go in comma lists or "
                                 "--baseline/--current",
                                 a.positional.size()));
  std::vector<std::string> baseline = a.baseline, current = a.current;
  if (a.positional.size() >= 1) baseline.insert(baseline.begin(), a.positional[0]);
  if (a.positional.size() == 2) current.insert(current.begin(), a.positional[1]);
  const auto bfiles = split_comma_lists(baseline), cfiles = split_comma_lists(current);
  if (bfiles.empty() || cfiles.empty())
    throw InputError("", "", "BASELINE CURRENT",
                     "need a baseline and a current side, each a file, a comma list or a quoted pattern "
                     "(perfgate compare before.json after.json)");
  return {bfiles, cfiles};
}

// --timing: wall and CPU time of each step.
class StepTimer {
 public:
  StepTimer() { mark(); }
  void mark() {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    cpu_.push_back(static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                   1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec));
    wall_.push_back(std::chrono::steady_clock::now());
  }
  double wall(std::size_t step) const { return std::chrono::duration<double>(wall_[step + 1] - wall_[step]).count(); }
  double cpu(std::size_t step) const { return cpu_[step + 1] - cpu_[step]; }

 private:
  std::vector<double> cpu_;
  std::vector<std::chrono::steady_clock::time_point> wall_;
};

void print_timing(const StepTimer& t, const ComparisonReport& report) {
  std::size_t metrics = 0;
  for (const auto& b : report.benchmarks)
    for (const auto& m : b.metrics) metrics += m.gated;
  std::fprintf(
      stderr,
      "perfgate: timing (wall / cpu): load %.3f / %.3f s, compare %.3f / %.3f s (%zu gated metrics, %.2f us cpu "
      "each), reports %.3f / %.3f s\n",
      t.wall(0), t.cpu(0), t.wall(1), t.cpu(1), metrics, metrics ? 1e6 * t.cpu(1) / static_cast<double>(metrics) : 0.0,
      t.wall(2), t.cpu(2));
}

// The machine-class facts of the comparison in its report.
void add_class_facts(ComparisonReport& report, const MachineClassCheck& check, bool allow_mismatch) {
  report.baseline.machine_class = check.baseline_class;
  report.current.machine_class = check.current_class;
  report.machine_mismatch_allowed = allow_mismatch && !check.same;
  if (report.machine_mismatch_allowed) report.notes.push_back(allowed_mismatch(check));
  if (!check.unknown_cpu_note.empty()) report.notes.push_back(check.unknown_cpu_note);
}

void write_reports(const CompareArgs& a, const ComparisonReport& report, const std::string& command_line) {
  ReportOptions ro;
  ro.title = a.title.empty() ? "compare" : a.title;
  ro.command = command_line;
  ro.color = color_allowed_by_environment();
  cli::apply_summary_flags(a.summary, a.markdown, ro);
  if (!a.quiet) print_terminal(report, stdout, ro);
  // Quiet still says why it did not pass: an exit code alone tells a user nothing.
  if (a.quiet && report.exit_code != 0) {
    std::fprintf(stderr, "perfgate compare: %s\n", summary_line(report).c_str());
    if (!report.next_step.empty()) std::fprintf(stderr, "next step: %s\n", report.next_step.c_str());
  }
  if (!a.markdown.empty()) {
    ReportOptions md = ro;
    md.glossary_link = cli::glossary_link_for(a.markdown, a.summary.docs_link);
    write_file_atomically(a.markdown, render_markdown(report, md));
  }
  cli::write_summary(a.summary, report, ro);
  if (!a.json.empty()) write_file_atomically(a.json, render_json(report, ro));
}

// The current side as the user gave it (files, comma lists, quoted patterns), which `perfgate baseline update --from`
// takes as well: the advice for a benchmark with no baseline names it where the comparison holds one suite.
void name_current_runs(ComparisonReport& report, const CompareArgs& a) {
  std::set<std::string> suites;
  for (const auto& b : report.benchmarks) suites.insert(b.suite);
  if (suites.size() != 1) return;
  std::vector<std::string> given = a.current;
  if (a.positional.size() == 2) given.insert(given.begin(), a.positional[1]);
  report.current_runs[*suites.begin()] = fmt::format("{}", fmt::join(given, ","));
}

// A side that holds no benchmark (an empty file, entries without a measurement) stops here, named with what its
// loading found, before the machine-class check would blame the classes of the sides.
void require_benchmarks(const ResultSet& side, const std::vector<std::string>& files, const char* which) {
  if (!side.benchmarks.empty()) return;
  std::string why;
  for (const LoadNote& note : side.load_notes) why += "; " + note.text;
  throw InputError(fmt::format("{}", fmt::join(files, ", ")), "", "benchmarks",
                   fmt::format("no benchmark results on the {} side{}", which, why));
}

// `perfgate baseline update` files a plain binary's JSON written on this host with this host's CPU facts; the same
// binary's JSON written here later records none, and would read as another machine class (cpu-unknown-2c against
// cpu-xeon-avx512-2c). So where the sides' classes differ, each plain process run written on this host takes this
// host's facts, as baseline update gave them; runs written elsewhere stay as they are. Returns the run note that
// names the files that took them and the CPU, or nothing when none did.
std::optional<std::string> plain_runs_take_this_hosts_facts(ResultSet& baseline, ResultSet& current) {
  const HostIdentity here = this_host();
  const RunEnvironment env = cli::run_environment();
  std::vector<std::string> files;
  std::string cpu;
  for (ResultSet* side : {&baseline, &current})
    for (RunContext& run : side->contexts) {
      const auto given = cli::give_this_hosts_cpu_facts(run, here, env, "perfgate compare");
      if (given.outcome != cli::PlainRunFacts::added) continue;
      files.push_back(run.source_file);
      cpu = fmt::format("{} ({})", run.get(context_keys::kCpuModel), run.get(context_keys::kCpuSignature));
    }
  if (files.empty()) return std::nullopt;
  return fmt::format(
      "{} {} no CPU facts (a plain Google Benchmark binary's own JSON) and {} written on this host: compared with "
      "this host's CPU, {}, as perfgate baseline update files such runs",
      first_and_more(files, 1), files.size() == 1 ? "records" : "record", files.size() == 1 ? "was" : "were", cpu);
}

int run_compare(CompareArgs& a, const std::string& command_line) {
  const auto [bfiles, cfiles] = input_files(a);
  RuleSources sources = cli::to_rule_sources(a.rule);  // a malformed --config stops it before any loading
  if (sources.config) sources.config->for_this_comparison = true;
  StepTimer timer;
  ResultSet baseline = load_results(bfiles);
  ResultSet current = load_results(cfiles);
  require_benchmarks(baseline, bfiles, "baseline");
  require_benchmarks(current, cfiles, "current");
  timer.mark();
  MachineClassCheck check = check_machine_class(baseline, current);
  std::vector<std::string> facts_notes;
  if (!check.same) {
    if (auto note = plain_runs_take_this_hosts_facts(baseline, current)) {
      check = check_machine_class(baseline, current);
      facts_notes.push_back(std::move(*note));
    }
  }
  if (!check.same && !a.allow_machine_mismatch)
    throw InputError(fmt::format("{} (baseline) and {} (current)", check.baseline_file, check.current_file), "",
                     "context", refused_mismatch(check));

  std::vector<std::string> noise_notes;
  const CompareOptions o =
      resolve_rule_options(sources, ComparedSides{class_thresholds(a, bfiles.front()),
                                                  learned_noise_for(a, baseline, bfiles.front(), noise_notes),
                                                  {}});
  ComparisonReport report = compare(baseline, current, o);
  name_current_runs(report, a);
  if (a.across_hosts) make_host_dependent_informational(report, baseline, current, o);
  report.notes.insert(report.notes.end(), noise_notes.begin(), noise_notes.end());
  report.notes.insert(report.notes.end(), facts_notes.begin(), facts_notes.end());
  timer.mark();
  add_class_facts(report, check, a.allow_machine_mismatch);
  write_reports(a, report, command_line);
  timer.mark();
  if (a.timing) print_timing(timer, report);
  return report.exit_code;
}

}  // namespace

void add_compare_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CompareArgs>();
  auto* cmd = app.add_subcommand("compare", "compare a current run against a baseline (exit 0/1/2/3/77)");
  cmd->add_option("files", args->positional, "BASELINE CURRENT (each may be a comma list of files)");
  cmd->add_option("--baseline,-b", args->baseline, "more baseline files (repeatable, comma lists)");
  cmd->add_option("--current,-c", args->current, "more current files (repeatable, comma lists)");
  cli::add_rule_flags(cmd, args->rule,
                      {"the one next to the first baseline file",
                       "between-run comparisons of a baseline and a current run (default 0; not with --paired)"});
  cmd->add_flag("--no-config", args->no_config, "ignore a thresholds.json next to the baseline");
  cmd->add_option("--markdown", args->markdown, "write the Markdown report here");
  cmd->add_option("--json", args->json, "write the JSON verdicts here");
  cli::add_summary_flags(cmd, args->summary);
  cmd->add_flag("--allow-machine-mismatch", args->allow_machine_mismatch, "compare across machine classes");
  cmd->add_flag("--across-hosts", args->across_hosts,
                "the baseline comes from another machine of the class: host-dependent benchmarks without a threshold "
                "of their own are reported, not gated, as perfgate run does against a stored baseline");
  cmd->add_option("--min-samples", args->rule.min_samples, "samples per side below which a metric is noisy (4)")
      ->check(CLI::Range(2, 100000));
  cmd->add_option("--correction", args->rule.correction, "multiple-comparison control: bh (default), holm, none")
      ->check(CLI::IsMember({"bh", "holm", "none"}));
  cmd->add_option("--interval", args->rule.interval, "interval of the change: hl (Hodges-Lehmann, default), bootstrap")
      ->check(CLI::IsMember({"hl", "bootstrap"}));
  cmd->add_flag("--common-mode", args->rule.common_mode,
                "remove a suite's common drift when both sides are single process runs (see docs/statistics.md)");
  cmd->add_flag("--paired", args->rule.paired,
                "process run i of the baseline files and of the current files form round i of an interleaved session");
  cmd->add_flag("--no-contention-check", args->rule.no_contention_check,
                "judge wall time even when the real/cpu time ratio shows different machine contention");
  cli::add_learned_noise_flags(cmd, args->noise, true);
  cmd->add_option("--title", args->title, "title of the reports");
  cmd->add_option("--threads", args->rule.threads, "threads for the statistics (default: up to 2)")
      ->check(CLI::Range(0, 256));
  cmd->add_flag("--quiet,-q", args->quiet, "no terminal table");
  cmd->add_flag("--timing", args->timing, "print load / compare / report wall times to stderr");
  cmd->callback([args, &exit_code, &app] {
    std::string command_line = "perfgate compare";
    for (const auto& f : args->positional) command_line += " " + f;
    for (const auto& f : args->baseline) command_line += " --baseline " + f;
    for (const auto& f : args->current) command_line += " --current " + f;
    (void)app;
    try {
      exit_code = run_compare(*args, command_line);
    } catch (const InputError& e) {
      write_error_reports(*args, e.what());
      exit_code = 2;
      throw;
    } catch (const std::exception& e) {
      write_error_reports(*args, e.what());
      exit_code = 2;
      throw;
    }
  });
}

}  // namespace perfgate
