#include "perfgate/explain.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perfgate/text.hpp"
#include "perfgate/timeline.hpp"

namespace perfgate {

namespace {

// Quoted CSV fields of one line ("a","b,c","d" -> a | b,c | d).
std::vector<std::string> csv_fields(std::string_view line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

// "176,864" -> 176864; "" or "n/a" -> fallback.
double number(std::string s, double fallback = -1) {
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  if (s.empty()) return fallback;
  try {
    std::size_t used = 0;
    const double v = std::stod(s, &used);
    return used == s.size() ? v : fallback;
  } catch (const std::exception&) { return fallback; }
}

std::string pct_change(double before, double after) {
  if (before <= 0) return after > 0 ? "new" : "-";
  return fmt::format("{:+.1f}%", 100 * (after / before - 1));
}

double to_ns(double value, const std::string& unit) {
  if (unit == "us" || unit == "usecond") return value * 1e3;
  if (unit == "ms" || unit == "msecond") return value * 1e6;
  if (unit == "s" || unit == "second") return value * 1e9;
  return value;
}

}  // namespace

// ---- oneDNN verbose -------------------------------------------------------------------------------

std::vector<OnednnCall> parse_onednn_verbose(std::string_view text) {
  std::vector<OnednnCall> out;
  for (std::string_view line : lines_of(text)) {
    if (line.rfind("onednn_verbose,", 0) != 0 && line.rfind("dnnl_verbose,", 0) != 0) continue;
    const auto f = csv_fields(line);
    // 2.x: verbose,exec,engine,primitive,impl,...; 3.x: verbose,[timestamp,]primitive,exec,engine,primitive,impl,...
    const auto limit = f.begin() + std::min<std::ptrdiff_t>(4, static_cast<std::ptrdiff_t>(f.size()));
    const auto exec = std::find(f.begin(), limit, std::string("exec"));
    const auto at = static_cast<std::size_t>(exec - f.begin());
    if (exec == limit || f.size() < at + 8) continue;
    OnednnCall c;
    c.primitive = f[at + 2];
    c.implementation = f[at + 3];
    c.problem = f[f.size() - 2];
    c.ms = number(f.back(), 0);
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

struct CallGroup {
  std::map<std::string, int> calls_by_impl;
  double ms = 0;
  int calls = 0;
  std::string main_impl() const {
    return std::max_element(calls_by_impl.begin(), calls_by_impl.end(),
                            [](const auto& a, const auto& b) { return a.second < b.second; })
        ->first;
  }
};

std::map<std::pair<std::string, std::string>, CallGroup> group_calls(const std::vector<OnednnCall>& calls) {
  std::map<std::pair<std::string, std::string>, CallGroup> out;
  for (const auto& c : calls) {
    auto& g = out[{c.primitive, c.problem}];
    ++g.calls_by_impl[c.implementation];
    g.ms += c.ms;
    ++g.calls;
  }
  return out;
}

}  // namespace

ProfileDiff diff_onednn(const std::vector<OnednnCall>& before, const std::vector<OnednnCall>& after) {
  ProfileDiff d;
  const auto b = group_calls(before), a = group_calls(after);
  struct Switch {
    int calls = 0, problems = 0;
    double before_ms = 0, after_ms = 0;
    std::string example;
  };
  std::map<std::pair<std::string, std::string>, Switch> switches;  // (primitive, "old -> new") -> totals
  std::vector<std::pair<double, OnednnRow>> rows;                  // (|delta ms|, row)
  for (const auto& [key, ga] : a) {
    const auto it = b.find(key);
    const std::string old_impl = it == b.end() ? "-" : it->second.main_impl();
    const double old_ms = it == b.end() ? 0 : it->second.ms;
    const std::string new_impl = ga.main_impl();
    if (it != b.end() && old_impl != new_impl) {
      auto& s = switches[{key.first, std::string(old_impl).append("\n").append(new_impl)}];
      s.calls += ga.calls;
      ++s.problems;
      s.before_ms += old_ms;
      s.after_ms += ga.ms;
      if (s.example.empty()) s.example = key.second;
    }
    rows.emplace_back(std::abs(ga.ms - old_ms),
                      OnednnRow{key.first, key.second, old_impl, new_impl, ga.calls, old_ms, ga.ms});
  }
  std::vector<std::pair<double, std::string>> findings;
  for (const auto& [key, s] : switches) {
    const auto nl = key.second.find('\n');
    findings.emplace_back(std::abs(s.after_ms - s.before_ms) + 1e6,  // an implementation switch comes first
                          fmt::format("oneDNN ran `{}` instead of `{}` for {} {} call(s) of {} problem(s) (e.g. {}): "
                                      "{:.1f} -> {:.1f} ms",
                                      key.second.substr(nl + 1), key.second.substr(0, nl), s.calls, key.first,
                                      s.problems, s.example, s.before_ms, s.after_ms));
  }
  double total_b = 0, total_a = 0;
  for (const auto& c : before) total_b += c.ms;
  for (const auto& c : after) total_a += c.ms;
  if (findings.empty() && total_b > 0 && std::abs(total_a / total_b - 1) > 0.05)
    findings.emplace_back(0, fmt::format("same oneDNN implementations; their time {:.1f} -> {:.1f} ms ({})", total_b,
                                         total_a, pct_change(total_b, total_a)));
  std::sort(findings.begin(), findings.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  for (auto& f : findings) d.findings.push_back(std::move(f.second));
  std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  d.before_total = total_b;
  d.after_total = total_a;
  d.table = ProfileDiff::Table::onednn;
  d.calls_before = before.size();
  d.calls_after = after.size();
  for (auto& r : rows) d.onednn_rows.push_back(std::move(r.second));
  return d;
}

// ---- Nsight Compute -------------------------------------------------------------------------------

std::string ncu_metrics() {
  return "gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,"
         "dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,"
         "launch__registers_per_thread,launch__shared_mem_per_block_static,launch__shared_mem_per_block_dynamic,"
         "launch__grid_size,launch__block_size,lts__t_sector_hit_rate.pct";
}

std::vector<KernelLaunch> parse_ncu_csv(std::string_view text, const std::string& source) {
  const auto lines = lines_of(text);
  std::size_t h = 0;
  while (h < lines.size() && lines[h].rfind("\"ID\",\"Process ID\"", 0) != 0) ++h;
  if (h + 1 >= lines.size())
    throw std::invalid_argument(source + ": no Nsight Compute CSV header (\"ID\",\"Process ID\",...) found");
  const auto header = csv_fields(lines[h]), units = csv_fields(lines[h + 1]);
  const auto col = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? std::string::npos : static_cast<std::size_t>(it - header.begin());
  };
  const std::size_t name = col("Kernel Name"), block = col("Block Size"), grid = col("Grid Size"),
                    time = col("gpu__time_duration.sum");
  if (name == std::string::npos || time == std::string::npos)
    throw std::invalid_argument(source + ": the ncu CSV has no 'Kernel Name' or 'gpu__time_duration.sum' column");
  const auto value = [&](const std::vector<std::string>& row, const std::string& metric) {
    const std::size_t i = col(metric);
    return i == std::string::npos || i >= row.size() ? -1.0 : number(row[i]);
  };
  std::vector<KernelLaunch> out;
  for (std::size_t i = h + 2; i < lines.size(); ++i) {
    if (lines[i].size() < 2 || lines[i][0] != '"' || std::isdigit(static_cast<unsigned char>(lines[i][1])) == 0)
      continue;
    const auto row = csv_fields(lines[i]);
    if (row.size() != header.size()) continue;
    KernelLaunch k;
    k.name = row[name];
    k.block = block == std::string::npos ? "" : row[block];
    k.grid = grid == std::string::npos ? "" : row[grid];
    k.duration_ns = to_ns(number(row[time], 0), time < units.size() ? units[time] : "ns");
    k.sm_pct = value(row, "sm__throughput.avg.pct_of_peak_sustained_elapsed");
    k.dram_pct = value(row, "dram__throughput.avg.pct_of_peak_sustained_elapsed");
    k.occupancy_pct = value(row, "sm__warps_active.avg.pct_of_peak_sustained_active");
    k.l2_hit_pct = value(row, "lts__t_sector_hit_rate.pct");
    k.registers = value(row, "launch__registers_per_thread");
    const double s = value(row, "launch__shared_mem_per_block_static"),
                 dyn = value(row, "launch__shared_mem_per_block_dynamic");
    k.shared_bytes = s < 0 && dyn < 0 ? -1 : std::max(0.0, s) + std::max(0.0, dyn);
    out.push_back(std::move(k));
  }
  return out;
}

namespace {

struct KernelGroup {
  int launches = 0;
  double ns = 0;
  double sm = 0, dram = 0, occupancy = 0, l2 = 0;  // duration-weighted means
  double registers = -1, shared_bytes = -1;
  std::string grid, block;
  void add(const KernelLaunch& k) {
    ++launches;
    ns += k.duration_ns;
    sm += std::max(0.0, k.sm_pct) * k.duration_ns;
    dram += std::max(0.0, k.dram_pct) * k.duration_ns;
    occupancy += std::max(0.0, k.occupancy_pct) * k.duration_ns;
    l2 += std::max(0.0, k.l2_hit_pct) * k.duration_ns;
    registers = k.registers;
    shared_bytes = k.shared_bytes;
    grid = k.grid;
    block = k.block;
  }
  double mean(double sum) const { return ns > 0 ? sum / ns : 0; }
};

std::map<std::string, KernelGroup> group_kernels(const std::vector<KernelLaunch>& launches) {
  std::map<std::string, KernelGroup> out;
  for (const auto& k : launches) out[k.name].add(k);
  return out;
}

// "DRAM throughput 41% -> 52% of peak, registers 128 -> 168" for the metrics that moved.
std::string moved_metrics(const KernelGroup& b, const KernelGroup& a) {
  std::vector<std::string> parts;
  const auto pct = [&](const char* what, double x, double y) {
    if (std::abs(y - x) >= 5) parts.push_back(fmt::format("{} {:.0f}% -> {:.0f}%", what, x, y));
  };
  pct("SM throughput", b.mean(b.sm), a.mean(a.sm));
  pct("DRAM throughput", b.mean(b.dram), a.mean(a.dram));
  pct("achieved occupancy", b.mean(b.occupancy), a.mean(a.occupancy));
  pct("L2 hit rate", b.mean(b.l2), a.mean(a.l2));
  if (b.registers != a.registers) parts.push_back(fmt::format("registers {} -> {}", b.registers, a.registers));
  if (b.shared_bytes != a.shared_bytes)
    parts.push_back(fmt::format("shared memory {} -> {} B", b.shared_bytes, a.shared_bytes));
  if (b.grid != a.grid) parts.push_back(fmt::format("grid {} -> {}", b.grid, a.grid));
  if (b.block != a.block) parts.push_back(fmt::format("block {} -> {}", b.block, a.block));
  if (b.launches != a.launches) parts.push_back(fmt::format("launches {} -> {}", b.launches, a.launches));
  std::string out;
  for (const auto& p : parts) out += ", " + p;
  return out;
}

std::optional<KernelSide> kernel_side(const KernelGroup* g) {
  if (g == nullptr) return std::nullopt;
  KernelSide k;
  k.launches = g->launches;
  k.ns = g->ns;
  k.sm_pct = g->mean(g->sm);
  k.dram_pct = g->mean(g->dram);
  k.occupancy_pct = g->mean(g->occupancy);
  k.l2_hit_pct = g->mean(g->l2);
  k.registers = g->registers;
  k.grid = g->grid;
  k.block = g->block;
  return k;
}

KernelRow kernel_row(const std::string& name, const KernelGroup* b, const KernelGroup* a) {
  return KernelRow{name, kernel_side(b), kernel_side(a)};
}

// What changed between two profiles' kernels: the rows of the table and the findings, each with the time that
// ranks it.
using KernelGroups = std::map<std::string, KernelGroup>;

struct KernelChanges {
  std::vector<std::string> appeared, vanished;
  double appeared_ns = 0, vanished_ns = 0;
  std::vector<std::pair<double, std::string>> findings;
  std::vector<std::pair<double, KernelRow>> rows;
};

double total_ns(const KernelGroups& groups) {
  double total = 0;
  for (const auto& [n, g] : groups) total += g.ns;
  return total;
}

std::string kernel_summary(const std::string& name, const KernelGroup& g) {
  return fmt::format("`{}` ({} launches, {:.3f} ms)", shorten(name), g.launches, g.ns / 1e6);
}

// Kernels in the after profile: new ones, and those that slowed by more than 5% and 1% of the total.
void compare_after_kernels(const KernelGroups& b, const KernelGroups& a, double total_b, KernelChanges& c) {
  for (const auto& [name, ga] : a) {
    const auto it = b.find(name);
    if (it == b.end()) {
      c.appeared.push_back(kernel_summary(name, ga));
      c.appeared_ns += ga.ns;
      c.rows.emplace_back(ga.ns, kernel_row(name, nullptr, &ga));
      continue;
    }
    const KernelGroup& gb = it->second;
    c.rows.emplace_back(std::abs(ga.ns - gb.ns), kernel_row(name, &gb, &ga));
    if (ga.ns > gb.ns * 1.05 && ga.ns - gb.ns > 0.01 * total_b)
      c.findings.emplace_back(ga.ns - gb.ns, fmt::format("kernel `{}`: duration {}{}", shorten(name),
                                                         pct_change(gb.ns, ga.ns), moved_metrics(gb, ga)));
  }
}

void note_vanished_kernels(const KernelGroups& b, const KernelGroups& a, KernelChanges& c) {
  for (const auto& [name, gb] : b) {
    if (a.count(name) != 0) continue;
    c.vanished.push_back(kernel_summary(name, gb));
    c.vanished_ns += gb.ns;
    c.rows.emplace_back(gb.ns, kernel_row(name, &gb, nullptr));
  }
}

// Kernels that appeared or vanished: a library (cuBLAS, NCCL) or the code chose another algorithm.
void note_algorithm_change(KernelChanges& c) {
  if (c.appeared.empty() && c.vanished.empty()) return;
  std::string text = "kernels changed, so a library (cuBLAS, NCCL) or the code chose another algorithm:";
  if (!c.appeared.empty())
    text += " appeared " + c.appeared.front() +
            (c.appeared.size() > 1 ? fmt::format(" and {} more", c.appeared.size() - 1) : "");
  if (!c.vanished.empty())
    text += (c.appeared.empty() ? " vanished " : "; vanished ") + c.vanished.front() +
            (c.vanished.size() > 1 ? fmt::format(" and {} more", c.vanished.size() - 1) : "");
  // Ranked with the per-kernel findings by the time it cost: the new kernels' time minus the old ones'.
  text += fmt::format(" ({:.3f} -> {:.3f} ms)", c.vanished_ns / 1e6, c.appeared_ns / 1e6);
  c.findings.emplace_back(std::max(c.appeared_ns - c.vanished_ns, 0.0) + 1, text);
}

// Largest time first.
template <typename T>
void sort_by_time(std::vector<std::pair<double, T>>& items) {
  std::sort(items.begin(), items.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
}

}  // namespace

ProfileDiff diff_kernels(const std::vector<KernelLaunch>& before, const std::vector<KernelLaunch>& after) {
  ProfileDiff d;
  const auto b = group_kernels(before), a = group_kernels(after);
  const double total_b = total_ns(b), total_a = total_ns(a);
  KernelChanges c;
  compare_after_kernels(b, a, total_b, c);
  note_vanished_kernels(b, a, c);
  note_algorithm_change(c);
  sort_by_time(c.findings);
  for (auto& f : c.findings) d.findings.push_back(std::move(f.second));
  sort_by_time(c.rows);
  d.before_total = total_b;
  d.after_total = total_a;
  d.table = ProfileDiff::Table::kernels;
  d.calls_before = before.size();
  d.calls_after = after.size();
  for (auto& r : c.rows) d.kernel_rows.push_back(std::move(r.second));
  return d;
}

}  // namespace perfgate

// ---- hardware counters (perf stat) -----------------------------------------------------------------

namespace perfgate {

std::vector<CounterReading> parse_perf_stat(std::string_view text) {
  std::vector<CounterReading> out;
  for (std::string_view line : lines_of(text)) {
    if (line.empty() || line[0] == '#') continue;
    const auto f = csv_fields(line);
    if (f.size() < 3 || f[2].empty()) continue;
    CounterReading r;
    r.event = f[2];
    const double v = number(f[0], -1);
    if (v >= 0) r.value = v;
    out.push_back(std::move(r));
  }
  return out;
}

namespace {

std::optional<double> counter(const std::vector<CounterReading>& readings, const std::string& event) {
  for (const auto& r : readings)
    if (r.event == event || r.event.rfind(event + ":", 0) == 0) return r.value;
  return std::nullopt;
}

}  // namespace

ProfileDiff diff_counters(const std::vector<CounterReading>& before, const std::vector<CounterReading>& after) {
  ProfileDiff d;
  const auto row = [&](const std::string& what, std::optional<double> b, std::optional<double> a) {
    if (b && a) d.quantity_rows.push_back({what, *b, *a});
  };
  const auto cb = counter(before, "cycles"), ca = counter(after, "cycles");
  const auto ib = counter(before, "instructions"), ia = counter(after, "instructions");
  if (!cb || !ca) return d;
  d.table = ProfileDiff::Table::counters;
  row("cycles", cb, ca);
  row("instructions", ib, ia);
  if (ib && ia && *cb > 0 && *ca > 0) row("IPC", *ib / *cb, *ia / *ca);
  row("cache misses", counter(before, "cache-misses"), counter(after, "cache-misses"));
  if (*cb > 0 && *ca / *cb > 1.05) {
    std::string text = fmt::format("cycles {}", pct_change(*cb, *ca));
    if (ib && ia && *ib > 0) text += fmt::format(", instructions {}", pct_change(*ib, *ia));
    if (ib && ia && *ib > 0 && *ia > 0) text += fmt::format(", IPC {:.2f} -> {:.2f}", *ib / *cb, *ia / *ca);
    d.findings.push_back(text);
  }
  return d;
}

// ---- the lead line -------------------------------------------------------------------------------------

TimelineEvidence evidence_of_timeline(const timeline::TimelineDiff& d) {
  TimelineEvidence ev;
  ev.recorded = true;
  ev.kernels_explain = d.kernels_explain;
  ev.span_before_ns = d.before.span_ns;
  ev.span_after_ns = d.after.span_ns;
  ev.kernels_before_ns = d.before.kernel_ns;
  ev.kernels_after_ns = d.after.kernel_ns;
  for (const auto& c : d.causes) ev.causes.push_back(c.second);
  return ev;
}

bool profile_accounts_for(const ProfileDiff& profile, double wall_change) {
  if (std::isnan(wall_change) || profile.before_total <= 0) return true;
  return timeline::kernels_account_for(profile.after_total / profile.before_total - 1, wall_change);
}

namespace {

std::string signed_pct(double relative) { return fmt::format("{:+.1f}%", 100 * relative); }

std::string wall_text(double wall_change) {
  return std::isnan(wall_change) ? "" : fmt::format(" (the gate measured {})", signed_pct(wall_change));
}

}  // namespace

namespace {

// ncu replays a capped number of launches per side, so when a change adds or removes launches its two captures
// can cover different numbers of repetitions; the timeline counts per repetition. Where the two disagree on
// which way the kernels' time went (or ncu shows less than half of the timeline's growth), ncu's totals are not
// comparable and the timeline's account leads.
bool profile_matches_timeline(const ProfileDiff& kernels, const TimelineEvidence& t) {
  if (!t.recorded || kernels.before_total <= 0 || t.kernels_before_ns <= 0) return true;
  const double timeline_change = t.kernels_after_ns / t.kernels_before_ns - 1;
  return timeline::kernels_account_for(kernels.after_total / kernels.before_total - 1, timeline_change);
}

std::string unmatched_profile_lead(const ProfileDiff& kernels, const TimelineEvidence& t) {
  std::string lead = fmt::format(
      "the per-kernel profile does not compare like with like: ncu's {} + {} launches put the kernels' summed time "
      "at {} while the timeline has {} per repetition; ",
      kernels.calls_before, kernels.calls_after, pct_change(kernels.before_total, kernels.after_total),
      pct_change(t.kernels_before_ns, t.kernels_after_ns));
  return lead + (t.causes.empty() ? "the timeline shows no single cause" : t.causes.front());
}

}  // namespace

std::vector<std::string> gpu_findings(const ProfileDiff& kernels, const TimelineEvidence& t,
                                      const std::string& timeline_missing, double wall_change) {
  std::vector<std::string> out;
  const bool agree = t.recorded ? t.kernels_explain : profile_accounts_for(kernels, wall_change);
  if (agree && !profile_matches_timeline(kernels, t)) {
    out.push_back(unmatched_profile_lead(kernels, t));
    out.insert(out.end(), kernels.findings.begin(), kernels.findings.end());
    for (std::size_t i = 1; i < t.causes.size(); ++i) out.push_back(t.causes[i]);
    return out;
  }
  if (!agree) {
    std::string lead = "the per-kernel diff does not explain the wall-time change: ";
    if (t.recorded) {
      lead += fmt::format(
          "kernels' summed time {:.3f} -> {:.3f} ms ({}) per repetition while the repetition took "
          "{:.3f} -> {:.3f} ms ({}){}; ",
          t.kernels_before_ns / 1e6, t.kernels_after_ns / 1e6, pct_change(t.kernels_before_ns, t.kernels_after_ns),
          t.span_before_ns / 1e6, t.span_after_ns / 1e6, pct_change(t.span_before_ns, t.span_after_ns),
          wall_text(wall_change));
      lead += t.causes.empty() ? "the timeline shows no single cause" : t.causes.front();
    } else {
      lead +=
          fmt::format("kernels' summed time {} while the benchmark took {}; no GPU timeline ({})",
                      pct_change(kernels.before_total, kernels.after_total), signed_pct(wall_change), timeline_missing);
    }
    out.push_back(std::move(lead));
  }
  out.insert(out.end(), kernels.findings.begin(), kernels.findings.end());
  // Where the kernels agree, the timeline's own account follows the kernel profile's (its kernel cause
  // leads only when ncu gave none).
  for (std::size_t i = agree ? 0 : 1; i < t.causes.size(); ++i) out.push_back(t.causes[i]);
  return out;
}

// ---- the process's own account (getrusage) -------------------------------------------------------------

ProcessUsage parse_process_usage(std::string_view text, const std::string& source) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(fmt::format("{}: not a process usage file (JSON: {})", source, e.what()));
  }
  const auto get = [&](const char* field) {
    if (!doc.is_object() || !doc.contains(field) || !doc.at(field).is_number())
      throw std::invalid_argument(fmt::format("{}: {}: missing or not a number", source, field));
    return doc.at(field).get<double>();
  };
  ProcessUsage u;
  u.wall_s = get("wall_s");
  u.user_s = get("user_s");
  u.system_s = get("system_s");
  u.voluntary_switches = get("voluntary_switches");
  u.involuntary_switches = get("involuntary_switches");
  u.minor_faults = get("minor_faults");
  u.major_faults = get("major_faults");
  u.migrations = get("migrations");
  return u;
}

namespace {

void usage_row(ProfileDiff& d, const std::string& what, double b, double a) { d.quantity_rows.push_back({what, b, a}); }

// A count that grew by half and by at least `floor`: worth a line of its own.
bool grew(double b, double a, double floor) { return a - b >= floor && a > 1.5 * b; }

}  // namespace

ProfileDiff diff_process_usage(const ProcessUsage& b, const ProcessUsage& a) {
  ProfileDiff d;
  if (b.wall_s <= 0 || a.wall_s <= 0) return d;
  const double cpu_b = b.user_s + b.system_s, cpu_a = a.user_s + a.system_s;
  d.before_total = cpu_b;
  d.after_total = cpu_a;
  d.table = ProfileDiff::Table::process_usage;
  usage_row(d, "wall s", b.wall_s, a.wall_s);
  usage_row(d, "CPU s (user + system)", cpu_b, cpu_a);
  usage_row(d, "CPU / wall", cpu_b / b.wall_s, cpu_a / a.wall_s);
  usage_row(d, "involuntary context switches", b.involuntary_switches, a.involuntary_switches);
  usage_row(d, "voluntary context switches", b.voluntary_switches, a.voluntary_switches);
  usage_row(d, "page faults (minor + major)", b.minor_faults + b.major_faults, a.minor_faults + a.major_faults);
  if (b.migrations >= 0 && a.migrations >= 0) usage_row(d, "CPU migrations", b.migrations, a.migrations);
  if (grew(b.involuntary_switches, a.involuntary_switches, 100))
    d.findings.push_back(fmt::format("the process was preempted more: involuntary context switches {:.0f} -> {:.0f}",
                                     b.involuntary_switches, a.involuntary_switches));
  if (grew(b.voluntary_switches, a.voluntary_switches, 100))
    d.findings.push_back(
        fmt::format("the process waited more (locks, I/O, sleeps): voluntary context switches {:.0f} "
                    "-> {:.0f}",
                    b.voluntary_switches, a.voluntary_switches));
  if (grew(b.minor_faults + b.major_faults, a.minor_faults + a.major_faults, 1000))
    d.findings.push_back(fmt::format("page faults {:.0f} -> {:.0f} (memory touched anew, or pages moved)",
                                     b.minor_faults + b.major_faults, a.minor_faults + a.major_faults));
  if (b.migrations >= 0 && grew(b.migrations, a.migrations, 50))
    d.findings.push_back(fmt::format("CPU migrations {:.0f} -> {:.0f}", b.migrations, a.migrations));
  if (cpu_b > 0 && cpu_a / cpu_b > 1.05)
    d.findings.push_back(fmt::format("CPU time {:.2f} -> {:.2f} s ({})", cpu_b, cpu_a, pct_change(cpu_b, cpu_a)));
  return d;
}

std::vector<std::string> cpu_findings(const std::optional<ProfileDiff>& onednn, const ProfileDiff& counters,
                                      const ProfileDiff& usage, double wall_change) {
  std::vector<std::string> out;
  if (onednn) out = onednn->findings;
  const bool counted = counters.has_table();
  if (counted) out.insert(out.end(), counters.findings.begin(), counters.findings.end());
  if (!onednn || profile_accounts_for(*onednn, wall_change)) {
    if (!counted) out.insert(out.end(), usage.findings.begin(), usage.findings.end());
    return out;
  }
  // oneDNN's primitives do not account for the change: say so, and lead with what does.
  const auto& other = counted ? counters.findings : usage.findings;
  std::string lead = fmt::format(
      "the oneDNN verbose diff does not account for the change: its primitives' summed time {:.1f} -> {:.1f} ms ({}) "
      "while the benchmark took {}",
      onednn->before_total, onednn->after_total, pct_change(onednn->before_total, onednn->after_total),
      signed_pct(wall_change));
  lead += other.empty() ? fmt::format("; {} shows no cause either", counted ? "perf stat" : "getrusage")
                        : fmt::format("; {}: {}", counted ? "perf stat" : "getrusage", other.front());
  out.insert(out.begin(), lead);
  if (!counted) out.insert(out.end(), usage.findings.begin() + (other.empty() ? 0 : 1), usage.findings.end());
  return out;
}

}  // namespace perfgate
