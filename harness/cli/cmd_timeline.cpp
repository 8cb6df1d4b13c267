// perfgate timeline BEFORE.json AFTER.json: the GPU timeline diff of two recordings (PERFGATE_TIMELINE files,
// e.g. the ones `--explain` keeps in <report-dir>/explain/), without a GPU: what --explain would lead with.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "perfgate/explain.hpp"
#include "perfgate/profile_tables.hpp"
#include "perfgate/timeline.hpp"

namespace perfgate {
namespace {

struct TimelineFlags {
  std::string before, after;
  std::vector<std::string> ranges;
  std::string svg_dir;
  std::vector<std::string> ncu;  // before and after ncu CSVs: then the lead line --explain would give
};

timeline::Recording load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  timeline::Recording r = timeline::parse_recording(text.str(), path);
  if (!r.unavailable.empty()) throw std::invalid_argument(path + ": no timeline was recorded: " + r.unavailable);
  return r;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The lead line `perfgate ab --explain` gives from these recordings and the two sides' ncu CSVs.
void print_lead(const TimelineFlags& f, const timeline::TimelineDiff& d, const timeline::Summary sum[2]) {
  const ProfileDiff kernels =
      diff_kernels(parse_ncu_csv(read_text(f.ncu[0]), f.ncu[0]), parse_ncu_csv(read_text(f.ncu[1]), f.ncu[1]));
  const double wall = sum[0].span_ns > 0 ? sum[1].span_ns / sum[0].span_ns - 1 : 0;
  const auto findings = gpu_findings(kernels, evidence_of_timeline(d), "", wall);
  fmt::print("Likeliest cause (with ncu): {}\n\n", findings.empty() ? "(none)" : findings.front());
}

int run_timeline(const TimelineFlags& f) {
  try {
    const timeline::Recording r[2] = {load(f.before), load(f.after)};
    const char* labels[2] = {"before", "after"};
    timeline::Summary sum[2];
    for (int s = 0; s < 2; ++s) {
      const auto steps = timeline::split_steps(r[s], f.ranges);
      if (steps.empty())
        throw std::invalid_argument(fmt::format("{}: no GPU work inside the ranges", s == 0 ? f.before : f.after));
      sum[s] = timeline::summarise(steps);
      if (f.svg_dir.empty()) continue;
      std::filesystem::create_directories(f.svg_dir);
      const auto file = std::filesystem::path(f.svg_dir) / fmt::format("{}.timeline.svg", labels[s]);
      std::ofstream(file) << timeline::render_svg(steps[sum[s].median_step],
                                                  fmt::format("{}, one repetition", labels[s]));
    }
    const timeline::TimelineDiff d = timeline::diff_timelines(sum[0], sum[1]);
    fmt::print("The kernels' summed change {} the wall-time change.\n\n",
               d.kernels_explain ? "accounts for" : "does not account for");
    for (const auto& [ns, cause] : d.causes) fmt::print("- {}\n", cause);
    fmt::print("\n");
    if (f.ncu.size() == 2) print_lead(f, d, sum);
    fmt::print("{}", render_timeline_table(d));
    return 0;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "perfgate timeline: %s\n", e.what());
    return 2;
  }
}

}  // namespace

void add_timeline_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<TimelineFlags>();
  auto* cmd = app.add_subcommand(
      "timeline",
      "diff two GPU timeline recordings (PERFGATE_TIMELINE files): overlap, idle gaps, launches, critical "
      "path; the causes of the wall-time change, largest first (docs/profiling.md)");
  cmd->add_option("before", flags->before, "the before side's recording")->required()->check(CLI::ExistingFile);
  cmd->add_option("after", flags->after, "the after side's recording")->required()->check(CLI::ExistingFile);
  cmd->add_option("--ranges", flags->ranges,
                  "the fixture's NVTX ranges (perfgate.nvtx_ranges; default: every top-level range)")
      ->delimiter(',');
  cmd->add_option("--svg-dir", flags->svg_dir,
                  "write before.timeline.svg and after.timeline.svg of a median repetition here");
  cmd->add_option("--ncu", flags->ncu,
                  "the before and after sides' ncu CSVs (<report-dir>/explain/*.ncu.csv): also print the lead line "
                  "--explain gives, the GPU span's change standing in for the gate's")
      ->expected(2)
      ->check(CLI::ExistingFile);
  on_run(cmd, exit_code, [flags] { return run_timeline(*flags); });
}

}  // namespace perfgate
