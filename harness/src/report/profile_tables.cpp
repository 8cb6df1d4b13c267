// The differential profiles' tables (explain.hpp) as Markdown: the diff gives the rows as data, this renders them.
#include "perfgate/profile_tables.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "perfgate/text.hpp"  // code_span

namespace perfgate {
namespace {

constexpr std::size_t kMaxRows = 15;  // the largest changes; the findings name the rest that matter

std::string change_text(double before, double after) {
  if (before <= 0) return after > 0 ? "new" : "-";
  return fmt::format("{:+.1f}%", 100 * (after / before - 1));
}

std::string onednn_table(const ProfileDiff& d) {
  std::string md = fmt::format("oneDNN primitives: {} call(s), {:.1f} ms before; {} call(s), {:.1f} ms after.\n\n",
                               d.calls_before, d.before_total, d.calls_after, d.after_total);
  md +=
      "| primitive | problem | before | after | calls | before ms | after ms | change |\n"
      "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |\n";
  for (std::size_t i = 0; i < d.onednn_rows.size() && i < kMaxRows; ++i) {
    const OnednnRow& r = d.onednn_rows[i];
    md +=
        fmt::format("| {} | `{}` | `{}` | `{}` | {} | {:.3f} | {:.3f} | {} |\n", r.primitive, r.problem, r.before_impl,
                    r.after_impl, r.calls, r.before_ms, r.after_ms, change_text(r.before_ms, r.after_ms));
  }
  return md;
}

// "before / after" of one kernel metric, "-" for a side the kernel did not run on.
template <typename Format>
std::string both_sides(const KernelRow& r, Format f) {
  const auto cell = [&](const std::optional<KernelSide>& k) { return k ? f(*k) : std::string("-"); };
  return cell(r.before) + " / " + cell(r.after);
}

std::string kernel_line(const KernelRow& r) {
  const auto whole = [](double v) { return fmt::format("{:.0f}", v); };
  return fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", code_span(shorten(r.name)),
                     both_sides(r, [](const KernelSide& k) { return std::to_string(k.launches); }),
                     both_sides(r, [](const KernelSide& k) { return fmt::format("{:.3f}", k.ns / 1e6); }),
                     change_text(r.before ? r.before->ns : 0, r.after ? r.after->ns : 0),
                     both_sides(r, [&](const KernelSide& k) { return whole(k.sm_pct); }),
                     both_sides(r, [&](const KernelSide& k) { return whole(k.dram_pct); }),
                     both_sides(r, [&](const KernelSide& k) { return whole(k.occupancy_pct); }),
                     both_sides(r, [&](const KernelSide& k) { return whole(k.registers); }),
                     both_sides(r, [](const KernelSide& k) { return k.grid + " x " + k.block; }),
                     both_sides(r, [&](const KernelSide& k) { return whole(k.l2_hit_pct); }));
}

std::string kernels_table(const ProfileDiff& d) {
  std::string md = fmt::format("GPU kernels: {} launch(es), {:.3f} ms before; {} launch(es), {:.3f} ms after ({}).\n\n",
                               d.calls_before, d.before_total / 1e6, d.calls_after, d.after_total / 1e6,
                               change_text(d.before_total, d.after_total));
  md +=
      "| kernel | launches | time ms | change | SM % | DRAM % | occupancy % | registers | grid x block | L2 hit % |\n"
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n";
  for (std::size_t i = 0; i < d.kernel_rows.size() && i < kMaxRows; ++i) md += kernel_line(d.kernel_rows[i]);
  return md;
}

std::string quantities_table(const ProfileDiff& d, const std::string& first_column) {
  std::string md = fmt::format("| {} | before | after | change |\n| --- | ---: | ---: | ---: |\n", first_column);
  for (const QuantityRow& r : d.quantity_rows)
    md += fmt::format("| {} | {:.4g} | {:.4g} | {} |\n", r.what, r.before, r.after, change_text(r.before, r.after));
  return md;
}

using timeline::ms_text;
using timeline::share_text;
using timeline::Summary;

std::string pct(double before, double after) {
  if (before <= 0) return after > 0 ? "new" : "0";
  return fmt::format("{:+.1f}%", 100 * (after / before - 1));
}

std::string row(const std::string& what, double b, double a) {
  return fmt::format("| {} | {} | {} | {} |\n", what, ms_text(b), ms_text(a), pct(b, a));
}

std::string critical_rows(const Summary& b, const Summary& a) {
  std::vector<std::pair<double, std::string>> names;
  for (const auto& [n, ns] : a.critical_ns) names.emplace_back(ns, n);
  for (const auto& [n, ns] : b.critical_ns)
    if (a.critical_ns.count(n) == 0) names.emplace_back(0, n);
  std::sort(names.begin(), names.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::string out;
  const auto at = [](const Summary& s, const std::string& n) {
    const auto it = s.critical_ns.find(n);
    return it == s.critical_ns.end() ? 0.0 : it->second;
  };
  for (std::size_t i = 0; i < names.size() && i < 5; ++i) {
    const std::string& n = names[i].second;
    out += fmt::format("| critical path: `{}` | {} ({}) | {} ({}) | |\n", shorten(n, 60), ms_text(at(b, n)),
                       share_text(at(b, n), b.span_ns), ms_text(at(a, n)), share_text(at(a, n), a.span_ns));
  }
  return out;
}

std::string timeline_table(const Summary& b, const Summary& a) {
  std::string md =
      fmt::format("GPU timeline: {} repetition(s) before, {} after; means per repetition.\n\n", b.steps, a.steps);
  md += "| per repetition | before | after | change |\n| --- | ---: | ---: | ---: |\n";
  md += row("GPU span (first start to last end)", b.span_ns, a.span_ns);
  md += row("busy (any work running)", b.busy_ns, a.busy_ns);
  md += row("kernels, summed", b.kernel_ns, a.kernel_ns);
  md += row("copies and sets, summed", b.copy_ns, a.copy_ns);
  md += row("concurrent (summed - busy)", b.overlap_ns, a.overlap_ns);
  md += fmt::format("| kernel time overlapped by other work | {} | {} | |\n",
                    share_text(b.kernel_overlapped_ns, b.kernel_ns), share_text(a.kernel_overlapped_ns, a.kernel_ns));
  md += row("copy/compute overlap", b.copy_compute_overlap_ns, a.copy_compute_overlap_ns);
  md += fmt::format("| idle gaps: count, total, largest | {:.1f}, {}, {} | {:.1f}, {}, {} | {} |\n", b.gaps,
                    ms_text(b.idle_ns()), ms_text(b.largest_gap_ns), a.gaps, ms_text(a.idle_ns()),
                    ms_text(a.largest_gap_ns), pct(b.idle_ns(), a.idle_ns()));
  md += row("idle after a host synchronisation", b.sync_gap_ns, a.sync_gap_ns);
  md += row("launch gaps (waiting for the host)", b.launch_gap_ns, a.launch_gap_ns);
  md += fmt::format("| host launches, kernels | {:.0f}, {:.0f} | {:.0f}, {:.0f} | |\n", b.launches, b.kernels,
                    a.launches, a.kernels);
  md += critical_rows(b, a);
  return md;
}

}  // namespace

std::string render_timeline_table(const timeline::TimelineDiff& d) { return timeline_table(d.before, d.after); }

std::string render_profile_diff(const ProfileDiff& d) {
  switch (d.table) {
    case ProfileDiff::Table::none: return "";
    case ProfileDiff::Table::onednn: return onednn_table(d);
    case ProfileDiff::Table::kernels: return kernels_table(d);
    case ProfileDiff::Table::counters: return quantities_table(d, "counter");
    case ProfileDiff::Table::process_usage: return quantities_table(d, "measured by the process (getrusage)");
  }
  return "";
}

}  // namespace perfgate
