#include "run_common.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "environment.hpp"
#include "perfgate/baseline_store.hpp"
#include "perfgate/compare.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/machine_class.hpp"
#include "perfgate/profile_run.hpp"
#include "perfgate/report.hpp"
#include "terminal_observer.hpp"

namespace perfgate::cli {

void name_option_group(CLI::App* cmd, std::size_t first, const std::string& group) {
  const std::vector<CLI::Option*> options = cmd->get_options();
  for (std::size_t i = first; i < options.size(); ++i) options[i]->group(group);
}

void add_measure_flags(CLI::App* cmd, MeasureFlags& f) {
  const std::size_t first = cmd->get_options().size();
  cmd->add_option("--rounds", f.rounds, "process rounds per binary (the between-run noise is sampled across them)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--repetitions", f.repetitions, "--benchmark_repetitions per process")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cmd->add_option("--min-time", f.min_time, "--benchmark_min_time per repetition, seconds (default: the bench's)")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--warmup", f.warmup, "--benchmark_min_warmup_time, seconds")->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--filter,--benchmark_filter", f.filter, "only benchmarks matching this regex (Google Benchmark's)");
  cmd->add_flag("--no-interleave", f.no_interleave,
                "fixed process order and no --benchmark_enable_random_interleaving");
  cmd->add_option("--timeout", f.timeout, "seconds per bench process before it is killed (failed)")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--seed", f.seed, "seed of the random process order (default: from the clock, printed)");
  cmd->add_option("--bench-arg", f.bench_args, "extra argument for every bench process (repeatable)");
  cmd->add_flag("--quiet,-q", f.quiet, "no progress lines on stderr");
  cmd->add_flag("--realtime", f.realtime,
                "run bench processes SCHED_FIFO (needs CAP_SYS_NICE): shields CPU benches from neighbours; "
                "not for GPU benches whose driver threads need the CPU");
  cmd->add_option(
         "--pin-cpus", f.pin_cpus,
         "run every bench process on these CPUs only (e.g. 0, 0-1, 0,2): on a VM whose vCPUs differ in "
         "speed, both sides of a comparison then meet the same one (give as many CPUs as the benches use threads)")
      ->check([](const std::string& v) {
        try {
          const auto cpus = parse_cpu_list(v);
          const auto allowed = allowed_cpus();
          for (int c : cpus)
            if (std::find(allowed.begin(), allowed.end(), c) == allowed.end())
              return fmt::format("CPU {} is not available to this process (available: {})", c,
                                 format_cpu_list(allowed));
          return std::string();
        } catch (const std::exception& e) { return std::string(e.what()); }
      });
  name_option_group(cmd, first, kMeasuringGroup);
  const std::size_t reports = cmd->get_options().size();
  cmd->add_option("--report-dir", f.report_dir, "where reports, run files and raw JSON go")->capture_default_str();
  cmd->add_option("--report-name", f.report_name, "file name of the combined report (without .md/.json)")
      ->capture_default_str();
  name_option_group(cmd, reports, kReportsGroup);
}

std::string check_lanes(const std::string& text) {
  try {
    const auto lanes = parse_cpu_lanes(text);
    const auto allowed = allowed_cpus();
    for (std::size_t l = 0; l < lanes.size(); ++l)
      for (int c : lanes[l])
        if (std::find(allowed.begin(), allowed.end(), c) == allowed.end())
          return fmt::format("lane {}: CPU {} is not available to this process (available: {})", l + 1, c,
                             format_cpu_list(allowed));
    return std::string();
  } catch (const std::exception& e) { return std::string(e.what()); }
}

std::vector<std::vector<int>> lanes_flag(const std::string& text, const std::string& flag) {
  if (text.empty()) return {};
  if (std::string why = check_lanes(text); !why.empty()) throw CLI::ValidationError(flag, why);
  return parse_cpu_lanes(text);
}

// A relative value given as a fraction (0.05) or a percentage (5%, made 0.05 here); anything else is refused with
// parse_relative's reason.
CLI::Validator relative_value() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::string why;
        const std::optional<double> v = parse_relative(text, why);
        if (v) text = fmt::format("{}", *v);
        return why;
      },
      "FRACTION|PERCENT%");
}

void add_rule_flags(CLI::App* cmd, CompareFlags& f, const RuleFlagsHelp& help) {
  const std::size_t first = cmd->get_options().size();
  cmd->add_option("--threshold", f.threshold,
                  "practical threshold, relative: 0.05 or 5%; beats --config and thresholds.json")
      ->transform(relative_value())
      ->check(CLI::Range(0.0, 10.0));
  cmd->add_option("--alpha", f.alpha, "significance level after multiple-comparison control (default 0.05)")
      ->check(CLI::Range(1e-12, 0.5));
  cmd->add_option("--run-noise", f.run_noise,
                  "prior between-run noise of this machine, relative SD: 0.05 or 5% (the default)")
      ->transform(relative_value())
      ->check(CLI::Range(0.0, 10.0));
  cmd->add_option("--run-noise-df", f.run_noise_df, "weight of that prior in degrees of freedom (0: off; default 8)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--session-noise", f.session_noise,
                  "prior drift between measuring sessions, relative SD (0.02 or 2%): widens " + help.session_noise_use)
      ->transform(relative_value())
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--max-dispersion", f.max_dispersion, "robust CV within a run above which a metric is noisy (0.10)")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--phase-impact", f.phase_impact,
                  "a phase's threshold is at least this share of its benchmark's time over the phase's share "
                  "(default 0: off)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--config", f.config, "thresholds.json to use (default: " + help.config_default + ")");
  cmd->add_flag("--paired-dispersion-gate", f.paired_dispersion_gate,
                "apply --max-dispersion to paired (interleaved) analyses too (perfgate's earlier rule)");
  name_option_group(cmd, first, kRuleGroup);
}

void add_compare_flags(CLI::App* cmd, CompareFlags& f) {
  add_rule_flags(cmd, f,
                 {"baselines/<class>/thresholds.json",
                  "comparisons with a stored baseline (default 0; never used between sides of one session)"});
  const std::size_t first = cmd->get_options().size();
  cmd->add_flag("--no-gate-rates", f.no_gate_rates, "report rate counters (…/s) without gating them");
  cmd->add_flag("--no-gate-phases", f.no_gate_phases, "report phase counters (phase.*) without gating them");
  cmd->add_option("--min-phase-share", f.min_phase_share,
                  "a phase gates only at this share of the benchmark's baseline time or more (default 0.01; 0: all)")
      ->check(CLI::Range(0.0, 1.0));
  name_option_group(cmd, first, kRuleGroup);
}

void apply_adaptive_flags(const AdaptiveFlags& f, GateOptions& gate) {
  gate.max_extra_rounds = f.max_extra_rounds;
  gate.extra_rounds_step = f.extra_rounds_step;
  gate.max_extra_time_factor = f.max_extra_time_factor;
}

void add_adaptive_flags(CLI::App* cmd, AdaptiveFlags& f, const std::string& where) {
  const std::size_t first = cmd->get_options().size();
  cmd->add_option("--max-extra-rounds", f.max_extra_rounds,
                  "extra interleaved rounds (per side) for benchmarks still undecided " + where +
                      "; every look then uses alpha / looks (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--extra-rounds-step", f.extra_rounds_step,
                  "extra rounds per look (default 0: each look doubles the rounds so far)")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--max-extra-time-factor", f.max_extra_time_factor,
                  "no further look once the extra rounds would take more than this x the initial measurement's "
                  "wall time (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1000.0));
  name_option_group(cmd, first, kExtraRoundsGroup);
}

void add_explain_flags(CLI::App* cmd, ExplainFlags& f, const std::string& against) {
  const std::size_t first = cmd->get_options().size();
  cmd->add_flag("--explain", f.explain,
                "re-run each regression alone per side under the profilers (ncu for GPU suites; oneDNN verbose and "
                "perf stat for CPU suites), " +
                    against +
                    ", and add the differential profile to the report "
                    "(docs/profiling.md)");
  cmd->add_option("--explain-max", f.max, "regressions explained at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->add_option("--explain-ncu-launches", f.ncu_launches,
                  "kernel launches ncu profiles per side (its --launch-count); fewer make --explain quicker on "
                  "benchmarks of many launches")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  cmd->add_flag("!--no-explain-timeline", f.timeline,
                "GPU suites: skip the GPU timeline pass (CUPTI: overlap, idle gaps, launches, critical path)");
  name_option_group(cmd, first, kExplainGroup);
}

MeasureOptions to_measure_options(const MeasureFlags& f, const std::filesystem::path& work_dir) {
  MeasureOptions o;
  o.rounds = f.rounds;
  o.repetitions = f.repetitions;
  if (f.min_time > 0) o.min_time = f.min_time;
  if (f.warmup > 0) o.warmup = f.warmup;
  o.filter = f.filter;
  o.interleave = !f.no_interleave;
  o.timeout_seconds = f.timeout;
  o.seed = f.seed;
  o.work_dir = work_dir;
  o.extra_args = f.bench_args;
  o.observer = terminal_observer(f.quiet);
  o.realtime_priority = f.realtime ? 10 : 0;
  if (!f.pin_cpus.empty()) o.pin_cpus = parse_cpu_list(f.pin_cpus);
  o.environment = run_environment();
  return o;
}

namespace {

// The knobs a thresholds.json can also set, as the flags gave them (a negative or zero value: not given).
RuleFlags rule_flags(const CompareFlags& f) {
  const auto given = [](double v, double unset_below) {
    return v >= unset_below ? std::optional<double>(v) : std::nullopt;
  };
  RuleFlags r;
  r.threshold = given(f.threshold, 0);
  r.alpha = f.alpha > 0 ? std::optional<double>(f.alpha) : std::nullopt;
  r.run_noise = given(f.run_noise, 0);
  r.run_noise_df = given(f.run_noise_df, 0);
  r.session_noise = given(f.session_noise, 0);
  r.max_dispersion = given(f.max_dispersion, 0);
  r.phase_impact = given(f.phase_impact, 0);
  if (f.min_samples > 0) r.min_samples = f.min_samples;
  if (f.common_mode) r.common_mode = true;
  if (f.no_contention_check) r.contention_check = false;
  return r;
}

// The settings no thresholds.json carries, over the built-in values.
CompareOptions settings_without_config(const CompareFlags& f) {
  CompareOptions o;
  o.rule.correction = f.correction == "holm"   ? Correction::holm
                      : f.correction == "none" ? Correction::none
                                               : Correction::benjamini_hochberg;
  o.rule.interval = f.interval == "bootstrap" ? IntervalMethod::bootstrap : IntervalMethod::hodges_lehmann;
  o.rule.paired_runs = f.paired;
  o.sides.builds = f.paired;  // compare --paired re-judges two builds of one session (perfgate ab's run files)
  o.rule.paired_dispersion_gate = f.paired_dispersion_gate;
  o.selection.gate_rates = !f.no_gate_rates;
  o.selection.gate_phases = !f.no_gate_phases;
  if (f.min_phase_share >= 0) o.selection.min_phase_share = f.min_phase_share;
  o.threads = f.threads;
  return o;
}

}  // namespace

RuleSources to_rule_sources(const CompareFlags& f) {
  RuleSources r;
  if (!f.config.empty()) r.config = load_threshold_config(f.config);
  r.flags = rule_flags(f);
  r.base = settings_without_config(f);
  return r;
}

std::vector<std::pair<std::string, std::string>> parse_env(const std::vector<std::string>& entries,
                                                           const std::string& flag) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& e : entries) {
    const auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) throw CLI::ValidationError(flag, "expected KEY=VALUE, got '" + e + "'");
    out.emplace_back(e.substr(0, eq), e.substr(eq + 1));
  }
  return out;
}

std::filesystem::path raw_dir(const std::string& report_dir, const std::string& kind) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  return std::filesystem::path(report_dir) / "raw" / fmt::format("{}-{}-{}", kind, stamp, ::getpid());
}

std::filesystem::path own_build_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  auto bin = exe.parent_path();
  if (bin.filename() == "bin") return bin.parent_path();
  return bin;
}

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  std::string arg;
  for (char c : raw) {
    if (c == '\0') {
      const bool plain = !arg.empty() && arg.find_first_of(" \t\"'$`\\|&;<>()*?") == std::string::npos;
      out += (out.empty() ? "" : " ") + (plain ? arg : "'" + arg + "'");
      arg.clear();
    } else {
      arg += c;
    }
  }
  return out;
}

void add_summary_flags(CLI::App* cmd, SummaryFlags& f) {
  const std::size_t first = cmd->get_options().size();
  cmd->add_option("--summary", f.file,
                  "also write the summary here: the verdict, regressions, what was not judged, counts per suite and "
                  "links, at most 60,000 characters (for pull-request comments and job summaries)");
  cmd->add_option("--report-link", f.report_link,
                  "the full report's link in the summary (default: its path from the summary's folder)");
  cmd->add_option("--dashboard-link", f.dashboard_link, "the trend dashboard's link in the summary");
  cmd->add_option("--docs-link", f.docs_link,
                  "where docs/ is read, for the glossary link (e.g. https://github.com/OWNER/REPO/blob/main/docs)");
  cmd->add_flag("--verbose,-v", f.verbose, "the terminal shows every benchmark's row, not only the summary");
  name_option_group(cmd, first, kReportsGroup);
}

namespace {

// perfgate's docs: <prefix>/share/doc/perfgate where installed, else docs/ of the source tree it was built from.
std::optional<std::filesystem::path> perfgate_docs_dir() {
  std::error_code ec;
  const std::array<std::filesystem::path, 2> candidates{own_build_dir() / "share" / "doc" / "perfgate",
                                                        PERFGATE_SOURCE_DOCS_DIR};
  for (const auto& dir : candidates)
    if (std::filesystem::exists(dir / "statistics.md", ec)) return dir;
  return std::nullopt;
}

}  // namespace

std::string glossary_link_for(const std::string& report_file, const std::string& docs_link) {
  if (!docs_link.empty()) return docs_link + "/statistics.md#glossary";
  const auto docs = perfgate_docs_dir();
  if (!docs) return "";
  const auto from = std::filesystem::absolute(report_file).parent_path();
  const auto glossary = std::filesystem::absolute(*docs / "statistics.md").lexically_normal();
  return glossary.lexically_relative(from).generic_string() + "#glossary";
}

void apply_summary_flags(const SummaryFlags& f, const std::string& full_report, ReportOptions& o) {
  o.verbose = f.verbose;
  o.dashboard_link = f.dashboard_link;
  if (!f.file.empty()) o.glossary_link = glossary_link_for(f.file, f.docs_link);
  o.full_report_link = f.report_link;
  if (o.full_report_link.empty() && !f.file.empty() && !full_report.empty()) {
    const auto from = std::filesystem::absolute(f.file).parent_path();
    o.full_report_link = std::filesystem::absolute(full_report).lexically_relative(from).generic_string();
  }
}

void write_summary(const SummaryFlags& f, const ComparisonReport& report, const ReportOptions& o) {
  if (f.file.empty()) return;
  const auto parent = std::filesystem::path(f.file).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  write_file_atomically(f.file, render_summary(report, o));
}

std::map<std::string, std::string> likeliest_causes(const std::vector<Explanation>& list) {
  std::map<std::string, std::string> out;
  for (const auto& e : list) out[e.benchmark] = e.findings.empty() ? "no profile difference found" : e.findings.front();
  return out;
}

std::vector<std::string> write_session_reports(const SessionResult& s, const std::string& dir, const std::string& name,
                                               const std::string& title, const SummaryFlags& summary,
                                               const std::map<std::string, std::string>& causes) {
  std::vector<std::string> files;
  std::filesystem::create_directories(dir);
  ReportOptions ro;
  ro.command = command_line();
  ro.color = color_allowed_by_environment();
  if (!s.measurement.sides.empty()) ro.binaries = binaries_by_suite(s.measurement.sides.back());
  auto write = [&](const ComparisonReport& r, const std::string& base, const std::string& t) {
    ReportOptions o = ro;
    o.title = t;
    const auto md = std::filesystem::path(dir) / (base + ".md");
    o.glossary_link = glossary_link_for(md.string(), summary.docs_link);
    const auto js = std::filesystem::path(dir) / (base + ".json");
    write_file_atomically(md, render_markdown(r, o));
    write_file_atomically(js, render_json(r, o));
    files.push_back(md.string());
    files.push_back(js.string());
  };
  write(s.combined, name, title);
  // Per suite too, always: ctest's perf.<suite> tests share one report folder.
  {
    for (const auto& sr : s.suites) {
      ComparisonReport r = sr.report;
      r.notes.insert(r.notes.begin(), s.notes.begin(), s.notes.end());
      write(r, sr.suite + "." + name, title + ": " + sr.suite);
    }
  }
  ro.title = title;
  ro.likeliest_causes = causes;
  apply_summary_flags(summary, (std::filesystem::path(dir) / (name + ".md")).string(), ro);
  write_summary(summary, s.combined, ro);
  print_terminal(s.combined, stdout, ro);
  return files;
}

std::vector<std::string> write_run_files(const SideResult& side, const std::string& dir, const std::string& label,
                                         const std::string& command) {
  std::vector<std::string> files;
  for (const auto& [suite, rs] : side.suites) {
    if (rs.contexts.empty()) continue;
    BaselineInfo info;
    try {
      info.machine_class = machine_class(rs);
    } catch (const std::exception&) { info.machine_class = "unknown"; }
    info.commit = rs.contexts.front().get(context_keys::kGitCommit, "unknown");
    info.command = command;
    const auto file = run_file(std::filesystem::path(dir) / "runs", suite, label);
    write_file_atomically(file, to_baseline_json(rs, info));
    files.push_back(file.string());
  }
  return files;
}

// The lead where no profile found the cause: the metric that moved, unless nothing could be profiled and that metric is
// the time the verdict already names.
std::string lead_without_profile(const Explanation& e, const BenchmarkComparison& bc) {
  const std::string moved = fmt::format("the change is in {}: {}", bc.driver, change_text(bc));
  if (e.nothing_profiled.empty()) return "no profile difference; " + moved;
  const std::string nothing = "nothing profiled (" + e.nothing_profiled + ")";
  return bc.driver == "time" ? nothing : nothing + "; " + moved;
}

// Each confirmed regression (up to --explain-max) re-run alone per side under the profilers; the likeliest
// cause leads the report's notes, the diffs are appended to the Markdown report.
std::vector<Explanation> explain_regressions(SessionResult& s, const Side& a, const Side& b, const MeasureOptions& mo,
                                             const std::string& report_dir, const ExplainFlags& flags) {
  std::vector<Explanation> out;
  const auto& measured = s.measurement.sides.back().suites;
  for (const auto& bc : s.combined.benchmarks) {
    if (bc.verdict != Verdict::regression || static_cast<int>(out.size()) >= flags.max) continue;
    const std::string& suite = bc.suite;
    const auto bin = [&](const Side& side) -> const BenchBinary* {
      for (const auto& x : side.benches)
        if (x.suite == suite) return &x;
      return nullptr;
    };
    if (bin(a) == nullptr || bin(b) == nullptr) {
      s.combined.notes.push_back(
          fmt::format("--explain: {} not profiled: no binary of suite {} on both sides", bc.name, suite));
      continue;
    }
    ExplainOptions o;
    o.out_dir = std::filesystem::path(report_dir) / "explain";
    const auto it = measured.find(suite);
    const RunContext* ctx =
        it == measured.end() || it->second.contexts.empty() ? nullptr : &it->second.contexts.front();
    o.gpu = ctx != nullptr && ctx->get(context_keys::kGpuCount, "0") != "0";
    o.ncu = find_tool("ncu", search_path());
    o.perf = find_tool("perf", search_path());
    o.cpus = mo.pin_cpus;
    o.ncu_launches = flags.ncu_launches;
    o.timeline = flags.timeline;
    if (const MetricComparison* time = bc.metric("time")) o.wall_change = time->raw_change;
    if (ctx != nullptr) {
      std::stringstream ranges(ctx->get(context_keys::kNvtxRanges));
      for (std::string r; std::getline(ranges, r, ',');)
        if (!r.empty()) o.nvtx_ranges.push_back(r);
    }
    std::fprintf(stderr, "perfgate: explaining %s (%s)\n", bc.name.c_str(),
                 o.gpu ? (o.timeline ? "ncu, GPU timeline" : "ncu") : "oneDNN verbose, perf stat, getrusage");
    out.push_back(explain_benchmark(bc.raw_name.empty() ? bc.name : bc.raw_name, bc.name, {"before", *bin(a), a.env},
                                    {"after", *bin(b), b.env}, o));
    // Without a profile difference, the measurement's own breakdown is the best lead: the metric that moved. The
    // process's own account (CPU time, faults, switches) follows it.
    Explanation& e = out.back();
    if ((e.findings.empty() || e.process_account_only) && !bc.driver.empty())
      e.findings.insert(e.findings.begin(), lead_without_profile(e, bc));
  }
  for (const auto& e : out) {
    std::string pictures;
    for (const auto& [side, file] : e.images)
      pictures += fmt::format("{} {}", pictures.empty() ? " (timelines:" : ",",
                              std::filesystem::relative(file, report_dir).string());
    if (!pictures.empty()) pictures += ")";
    s.combined.notes.insert(
        s.combined.notes.begin(),
        fmt::format("likeliest cause of {}: {}{}", e.benchmark,
                    e.findings.empty() ? "no profile difference found" : e.findings.front(), pictures));
  }
  return out;
}

std::string explanations_markdown(const std::vector<Explanation>& list, const std::string& report_dir) {
  std::string md = "\n## Why: differential profiles\n\n";
  for (const auto& e : list) {
    md += fmt::format("### `{}`\n\n", e.benchmark);
    md += e.findings.empty() ? "No profile difference found.\n\n"
                             : fmt::format("**Likeliest cause:** {}\n\n", e.findings.front());
    for (std::size_t i = 1; i < e.findings.size() && i < 5; ++i) md += "- " + e.findings[i] + "\n";
    if (e.findings.size() > 1) md += "\n";
    const auto link = [&](const std::string& file) { return std::filesystem::relative(file, report_dir).string(); };
    if (!e.images.empty()) {
      md += "Timelines, one repetition per side:";
      for (const auto& [side, file] : e.images) md += fmt::format(" [{}]({})", side, link(file));
      md += "\n\n";
      for (const auto& [side, file] : e.images) md += fmt::format("![{} timeline]({})\n", side, link(file));
      md += "\n";
    }
    md += e.markdown;
    for (const auto& n : e.notes) md += "> " + n + "\n";
    if (!e.seconds.empty()) {
      md += "\nCost of this explanation:";
      for (std::size_t i = 0; i < e.seconds.size(); ++i)
        md += fmt::format("{} {} {:.1f} s", i == 0 ? "" : ",", e.seconds[i].first, e.seconds[i].second);
      md += " (both sides).\n";
    }
    md += "\nProfiles:";
    for (const auto& file : e.files)
      md += fmt::format(" [{}]({})", std::filesystem::path(file).filename().string(),
                        std::filesystem::relative(file, report_dir).string());
    md += "\n\n";
  }
  return md;
}

}  // namespace perfgate::cli
