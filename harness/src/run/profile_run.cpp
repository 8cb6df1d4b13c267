#include "perfgate/profile_run.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "perfgate/process.hpp"
#include "perfgate/profile_tables.hpp"
#include "perfgate/runner.hpp"  // exact_filter
#include "perfgate/timeline.hpp"

namespace perfgate {

// ---- re-running a regression under the profilers ------------------------------------------------------

std::string find_tool(const std::string& tool, const std::string& search_path) {
  return find_executable(tool, search_path, {"/usr/local/cuda/bin"});
}

namespace {

struct ToolRun {
  ProcessResult result;
  std::string out;
};

// A few iterations are enough for a profile, and a profiler replays every kernel several times.
constexpr double kProfileMinTime = 0.01;
// The timeline pass runs the benchmark as the suite measures it (its default repetition length), so that
// it holds dozens of repetitions to take means over; its cost is one bench process per side.
constexpr double kTimelineMinTime = 0.1;

ToolRun run_tool(std::vector<std::string> prefix, const ExplainSide& side, const std::string& raw_name,
                 const ExplainOptions& o, std::vector<std::pair<std::string, std::string>> extra_env,
                 double min_time = kProfileMinTime) {
  ProcessSpec spec;
  spec.argv = std::move(prefix);
  spec.argv.push_back(side.bench.path.string());
  spec.argv.push_back("--benchmark_filter=" + exact_filter({raw_name}));
  spec.argv.push_back("--benchmark_repetitions=1");
  spec.argv.push_back(fmt::format("--benchmark_min_time={}", min_time));
  spec.env = side.env;
  spec.env.insert(spec.env.end(), extra_env.begin(), extra_env.end());
  spec.cpus = o.cpus;
  spec.timeout_seconds = o.timeout_seconds;
  ToolRun t;
  spec.on_stdout_line = [&](const std::string& line) { t.out += line + "\n"; };
  t.result = run_process(spec);
  return t;
}

std::string file_stem(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' ? c : '_';
  return out.substr(0, 150);
}

std::string save(const ExplainOptions& o, const std::string& file, const std::string& text) {
  std::filesystem::create_directories(o.out_dir);
  const auto path = o.out_dir / file;
  std::ofstream(path) << text;
  return path.string();
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void add_section(Explanation& e, const std::string& title, const ProfileDiff& d) {
  e.markdown += fmt::format("**{}**\n\n{}\n", title, render_profile_diff(d));
  e.findings.insert(e.findings.end(), d.findings.begin(), d.findings.end());
}

// Wall seconds of what `run` does, added to the explanation's cost of `tool`.
template <typename Run>
auto timed(Explanation& e, const std::string& tool, Run run) {
  const auto t0 = std::chrono::steady_clock::now();
  auto result = run();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto it = std::find_if(e.seconds.begin(), e.seconds.end(), [&](const auto& x) { return x.first == tool; });
  if (it == e.seconds.end()) e.seconds.emplace_back(tool, s);
  else it->second += s;
  return result;
}

// The kernel profile of both sides (ncu); empty diff with a note when ncu is missing or failed.
ProfileDiff ncu_diff(Explanation& e, const std::string& raw_name, const ExplainSide* sides[2],
                     const ExplainOptions& o) {
  if (o.ncu.empty()) {
    e.notes.push_back("ncu not found (PATH, /usr/local/cuda/bin): no kernel profile");
    return {};
  }
  std::vector<std::string> prefix{o.ncu,       "--csv",       "--page",         "raw",
                                  "--metrics", ncu_metrics(), "--launch-count", std::to_string(o.ncu_launches)};
  if (!o.nvtx_ranges.empty()) {
    prefix.push_back("--nvtx");
    for (const auto& r : o.nvtx_ranges) {
      prefix.push_back("--nvtx-include");
      prefix.push_back(r + "/");
    }
  }
  std::vector<KernelLaunch> k[2];
  for (int s = 0; s < 2; ++s) {
    const ToolRun t = timed(e, "ncu", [&] { return run_tool(prefix, *sides[s], raw_name, o, {}); });
    e.files.push_back(save(o, file_stem(e.benchmark) + "." + sides[s]->label + ".ncu.csv", t.out));
    try {
      k[s] = parse_ncu_csv(t.out, e.files.back());
    } catch (const std::invalid_argument& err) {
      e.notes.push_back(fmt::format("ncu on the {} side: {} ({})", sides[s]->label, t.result.describe(), err.what()));
      return {};
    }
  }
  return diff_kernels(k[0], k[1]);
}

// One side's timeline: recorded by the bench process itself (PERFGATE_TIMELINE), read back; `why` says what
// went wrong when nothing came back.
std::optional<timeline::Recording> record_timeline(Explanation& e, const std::string& raw_name, const ExplainSide& side,
                                                   const ExplainOptions& o, std::string& why) {
  std::filesystem::create_directories(o.out_dir);
  const auto file = o.out_dir / (file_stem(e.benchmark) + "." + side.label + ".timeline.json");
  std::filesystem::remove(file);
  const ToolRun t = timed(e, "timeline", [&] {
    return run_tool({}, side, raw_name, o, {{"PERFGATE_TIMELINE", file.string()}}, kTimelineMinTime);
  });
  if (!std::filesystem::exists(file)) {
    why = fmt::format("the {} side's bench process wrote no timeline ({}; a binary built before the recorder?)",
                      side.label, t.result.describe());
    return std::nullopt;
  }
  e.files.push_back(file.string());
  try {
    timeline::Recording r = timeline::parse_recording(read_text(file), file.string());
    if (!r.unavailable.empty()) {
      why = fmt::format("{} side: {}", side.label, r.unavailable);
      return std::nullopt;
    }
    return r;
  } catch (const std::invalid_argument& err) {
    why = err.what();
    return std::nullopt;
  }
}

// Both sides' timelines diffed, with a picture of each side's median repetition; nothing recorded: a note.
TimelineEvidence timeline_evidence(Explanation& e, const std::string& raw_name, const ExplainSide* sides[2],
                                   const ExplainOptions& o, std::string& why) {
  std::optional<timeline::Recording> r[2];
  for (int s = 0; s < 2 && why.empty(); ++s) r[s] = record_timeline(e, raw_name, *sides[s], o, why);
  if (!why.empty()) return {};
  std::vector<timeline::Step> steps[2];
  timeline::Summary sum[2];
  for (int s = 0; s < 2; ++s) {
    steps[s] = timeline::split_steps(*r[s], o.nvtx_ranges);
    if (steps[s].empty()) {
      why = fmt::format("the {} side's timeline holds no GPU work inside the fixture's NVTX ranges", sides[s]->label);
      return {};
    }
    sum[s] = timeline::summarise(steps[s]);
    const std::string svg = timeline::render_svg(steps[s][sum[s].median_step],
                                                 fmt::format("{}: {}, one repetition", sides[s]->label, e.benchmark));
    e.images.emplace_back(sides[s]->label,
                          save(o, file_stem(e.benchmark) + "." + sides[s]->label + ".timeline.svg", svg));
  }
  const timeline::TimelineDiff d = timeline::diff_timelines(sum[0], sum[1]);
  e.markdown += fmt::format("**GPU timeline (CUPTI), per repetition of the fixture's NVTX ranges**\n\n{}\n",
                            render_timeline_table(d));
  if (d.terms.span <= 0 && o.wall_change > 0)
    e.notes.push_back(
        fmt::format("the timeline pass did not reproduce the slowdown (GPU span {:.3f} -> {:.3f} ms per "
                    "repetition): its account is left out of the lead",
                    sum[0].span_ns / 1e6, sum[1].span_ns / 1e6));
  return evidence_of_timeline(d);
}

void explain_gpu(Explanation& e, const std::string& raw_name, const ExplainSide* sides[2], const ExplainOptions& o) {
  const ProfileDiff kernels = ncu_diff(e, raw_name, sides, o);
  if (kernels.has_table())
    e.markdown += fmt::format("**Nsight Compute, per kernel (before / after)**\n\n{}\n", render_profile_diff(kernels));
  std::string why = o.timeline ? "" : "--no-explain-timeline";
  const TimelineEvidence t = o.timeline ? timeline_evidence(e, raw_name, sides, o, why) : TimelineEvidence{};
  if (!t.recorded) e.notes.push_back("no GPU timeline: " + why);
  e.findings = gpu_findings(kernels, t, why, o.wall_change);
}

// The oneDNN verbose diff, and whether its primitives' time accounts for the benchmark's change.
std::optional<ProfileDiff> onednn_diff(Explanation& e, const std::string& raw_name, const ExplainSide* sides[2],
                                       const ExplainOptions& o) {
  std::vector<OnednnCall> calls[2];
  for (int s = 0; s < 2; ++s) {
    const ToolRun t = timed(e, "oneDNN verbose", [&] {
      return run_tool({}, *sides[s], raw_name, o, {{"ONEDNN_VERBOSE", "1"}});
    });
    e.files.push_back(save(o, file_stem(e.benchmark) + "." + sides[s]->label + ".onednn.log", t.out));
    calls[s] = parse_onednn_verbose(t.out);
  }
  if (calls[0].empty() && calls[1].empty()) {
    e.notes.push_back("no oneDNN primitive ran in this benchmark: no oneDNN verbose diff");
    return std::nullopt;
  }
  return diff_onednn(calls[0], calls[1]);
}

// perf stat's counters of each side, and each process's own account (PERFGATE_RUSAGE) from the same run; where
// perf is missing the run is a plain one.
std::pair<ProfileDiff, ProfileDiff> counters_and_usage(Explanation& e, const std::string& raw_name,
                                                       const ExplainSide* sides[2], const ExplainOptions& o) {
  std::vector<CounterReading> c[2];
  ProcessUsage u[2];
  std::filesystem::create_directories(o.out_dir);
  for (int s = 0; s < 2; ++s) {
    const std::string stem = (o.out_dir / (file_stem(e.benchmark) + "." + sides[s]->label)).string();
    const std::vector<std::string> prefix =
        o.perf.empty() ? std::vector<std::string>{}
                       : std::vector<std::string>{o.perf,
                                                  "stat",
                                                  "-x,",
                                                  "-o",
                                                  stem + ".perf-stat.csv",
                                                  "-e",
                                                  "cycles,instructions,cache-misses,task-clock",
                                                  "--"};
    std::filesystem::remove(stem + ".rusage.json");
    timed(e, o.perf.empty() ? "getrusage" : "perf stat", [&] {
      return run_tool(prefix, *sides[s], raw_name, o, {{"PERFGATE_RUSAGE", stem + ".rusage.json"}});
    });
    if (!o.perf.empty()) {
      e.files.push_back(stem + ".perf-stat.csv");
      c[s] = parse_perf_stat(read_text(stem + ".perf-stat.csv"));
    }
    try {
      if (std::filesystem::exists(stem + ".rusage.json")) {
        e.files.push_back(stem + ".rusage.json");
        u[s] = parse_process_usage(read_text(stem + ".rusage.json"), stem + ".rusage.json");
      }
    } catch (const std::invalid_argument& err) { e.notes.push_back(err.what()); }
  }
  return {diff_counters(c[0], c[1]), diff_process_usage(u[0], u[1])};
}

void explain_cpu(Explanation& e, const std::string& raw_name, const ExplainSide* sides[2], const ExplainOptions& o) {
  const std::optional<ProfileDiff> onednn = onednn_diff(e, raw_name, sides, o);
  if (onednn) add_section(e, "oneDNN primitives (ONEDNN_VERBOSE=1)", *onednn);
  if (o.perf.empty()) e.notes.push_back("perf not found: no hardware counters; the process's own account instead");
  const auto [counters, usage] = counters_and_usage(e, raw_name, sides, o);
  const bool counted = counters.has_table();
  if (!o.perf.empty() && !counted)
    e.notes.push_back(
        "hardware counters not permitted here (perf stat: cycles <not supported>), common in VMs and containers; "
        "the process's own account (getrusage) instead");
  if (counted) add_section(e, "Hardware counters (perf stat)", counters);
  if (usage.has_table())
    e.markdown += fmt::format("**The process's own account (getrusage)**\n\n{}\n", render_profile_diff(usage));
  e.findings = cpu_findings(onednn, counters, usage, o.wall_change);
  e.process_account_only = (!onednn || onednn->findings.empty()) && counters.findings.empty();
  if (!onednn && !counted && !usage.has_table())
    e.nothing_profiled = fmt::format("{}, no oneDNN primitive ran, and the bench wrote no process account",
                                     o.perf.empty() ? "perf not found" : "hardware counters not permitted here");
}

}  // namespace

Explanation explain_benchmark(const std::string& raw_name, const std::string& name, const ExplainSide& before,
                              const ExplainSide& after, const ExplainOptions& o) {
  Explanation e;
  e.benchmark = name;
  const ExplainSide* sides[2] = {&before, &after};
  if (o.gpu) explain_gpu(e, raw_name, sides, o);
  else explain_cpu(e, raw_name, sides, o);
  return e;
}

}  // namespace perfgate
