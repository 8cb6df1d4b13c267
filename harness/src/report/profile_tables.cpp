// The differential profiles' tables (explain.hpp) as Markdown: the diff gives the rows as data, this renders them.
#include "perfgate/profile_tables.hpp"

#include <string>

#include <fmt/format.h>

#include "perfgate/text.hpp"  // code_span

namespace perfgate {
namespace {

constexpr std::size_t kMaxRows = 15;  // the largest changes; the findings name the rest that matter

std::string change_text(double before, double after) {
  if (before <= 0) return after > 0 ? "new" : "-";
  return fmt::format("{:+.1f}%", 100 * (after / before - 1));
}

std::string shortened(const std::string& name, std::size_t max = 70) {
  return name.size() <= max ? name : name.substr(0, max - 3) + "...";
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
  return fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", code_span(shortened(r.name)),
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

}  // namespace

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
