#include "perfgate/profile_run.hpp"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

#include "perfgate/process.hpp"
#include "perfgate/runner.hpp"  // exact_filter

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

ToolRun run_tool(std::vector<std::string> prefix, const ExplainSide& side, const std::string& raw_name,
                 const ExplainOptions& o, std::vector<std::pair<std::string, std::string>> extra_env) {
  ProcessSpec spec;
  spec.argv = std::move(prefix);
  spec.argv.push_back(side.bench.path.string());
  spec.argv.push_back("--benchmark_filter=" + exact_filter({raw_name}));
  spec.argv.push_back("--benchmark_repetitions=1");
  // A few iterations are enough for a profile, and a profiler replays every kernel several times.
  spec.argv.push_back("--benchmark_min_time=0.01");
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

void add_section(Explanation& e, const std::string& title, const ProfileDiff& d) {
  e.markdown += fmt::format("**{}**\n\n{}\n", title, d.markdown);
  e.findings.insert(e.findings.end(), d.findings.begin(), d.findings.end());
}

void explain_gpu(Explanation& e, const std::string& raw_name, const ExplainSide* sides[2], const ExplainOptions& o) {
  if (o.ncu.empty()) {
    e.notes.push_back("ncu not found (PATH, /usr/local/cuda/bin): no kernel profile");
    return;
  }
  std::vector<std::string> prefix{o.ncu,       "--csv",       "--page",         "raw",
                                  "--metrics", ncu_metrics(), "--launch-count", "2000"};
  if (!o.nvtx_ranges.empty()) {
    prefix.push_back("--nvtx");
    for (const auto& r : o.nvtx_ranges) {
      prefix.push_back("--nvtx-include");
      prefix.push_back(r + "/");
    }
  }
  std::vector<KernelLaunch> k[2];
  for (int s = 0; s < 2; ++s) {
    const ToolRun t = run_tool(prefix, *sides[s], raw_name, o, {});
    e.files.push_back(save(o, file_stem(e.benchmark) + "." + sides[s]->label + ".ncu.csv", t.out));
    try {
      k[s] = parse_ncu_csv(t.out, e.files.back());
    } catch (const std::invalid_argument& err) {
      e.notes.push_back(fmt::format("ncu on the {} side: {} ({})", sides[s]->label, t.result.describe(), err.what()));
      return;
    }
  }
  add_section(e, "Nsight Compute, per kernel (before / after)", diff_kernels(k[0], k[1]));
}

void explain_cpu(Explanation& e, const std::string& raw_name, const ExplainSide* sides[2], const ExplainOptions& o) {
  std::vector<OnednnCall> calls[2];
  for (int s = 0; s < 2; ++s) {
    const ToolRun t = run_tool({}, *sides[s], raw_name, o, {{"ONEDNN_VERBOSE", "1"}});
    e.files.push_back(save(o, file_stem(e.benchmark) + "." + sides[s]->label + ".onednn.log", t.out));
    calls[s] = parse_onednn_verbose(t.out);
  }
  if (calls[0].empty() && calls[1].empty())
    e.notes.push_back("no oneDNN primitive ran in this benchmark: no oneDNN verbose diff");
  else add_section(e, "oneDNN primitives (ONEDNN_VERBOSE=1)", diff_onednn(calls[0], calls[1]));
  if (o.perf.empty()) {
    e.notes.push_back("perf not found: no hardware counters");
    return;
  }
  std::vector<CounterReading> c[2];
  for (int s = 0; s < 2; ++s) {
    const std::string file = (o.out_dir / (file_stem(e.benchmark) + "." + sides[s]->label + ".perf-stat.csv")).string();
    std::filesystem::create_directories(o.out_dir);
    run_tool({o.perf, "stat", "-x,", "-o", file, "-e", "cycles,instructions,cache-misses,task-clock", "--"}, *sides[s],
             raw_name, o, {});
    std::ifstream in(file);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    e.files.push_back(file);
    c[s] = parse_perf_stat(text);
  }
  const ProfileDiff d = diff_counters(c[0], c[1]);
  if (d.markdown.empty())
    e.notes.push_back(
        "hardware counters not permitted here (perf stat: cycles <not supported>), common in VMs and containers");
  else add_section(e, "Hardware counters (perf stat)", d);
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
