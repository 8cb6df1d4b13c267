#include "perfgate/session.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perfgate/baseline_store.hpp"
#include "perfgate/benchmark_filter.hpp"
#include "perfgate/history.hpp"
#include "perfgate/host_dependent.hpp"
#include "perfgate/learned_noise.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/machine_class.hpp"
#include "perfgate/report.hpp"
#include "perfgate/stats.hpp"
#include "report_internal.hpp"

namespace perfgate {
namespace {

std::string pct(double v) { return fmt::format("{:+.1f}%", 100 * v); }

double worse_change(const MetricComparison& m) { return higher_is_better(m.kind) ? -m.change : m.change; }

BenchmarkComparison manual_entry(const BenchmarkResult& b, const std::string& suite, Verdict v, std::string reason) {
  BenchmarkComparison c;
  c.name = b.name;
  c.raw_name = b.raw_name.empty() ? b.name : b.raw_name;
  c.suite = suite;
  c.verdict = b.error ? Verdict::failed : (b.skip_reason ? Verdict::skipped : v);
  if (b.error) {
    c.message = *b.error;
    c.reason = "failed: " + *b.error;
  } else if (b.skip_reason) {
    c.message = *b.skip_reason;
    c.reason = "skipped: " + *b.skip_reason;
  } else {
    c.reason = std::move(reason);
  }
  return c;
}

// Suites of a measurement side in a stable order.
std::vector<std::string> suites_of(const SideResult& side) {
  std::vector<std::string> out;
  for (const auto& [suite, rs] : side.suites) out.push_back(suite);
  return out;
}

// The report of a suite whose current side has no usable run (everything failed) or no baseline.
SuiteReport report_without_comparison(const std::string& suite, const ResultSet& current, Verdict v,
                                      const std::string& reason, const std::string& baseline_file) {
  SuiteReport sr;
  sr.suite = suite;
  sr.baseline_file = baseline_file;
  sr.baseline_found = false;
  for (const auto& b : current.benchmarks) sr.report.benchmarks.push_back(manual_entry(b, suite, v, reason));
  sr.report.counts = count_verdicts(sr.report.benchmarks);
  if (!current.contexts.empty()) sr.report.current = describe_side(current);
  sr.report.exit_code = sr.report.counts.failed > 0 ? 3 : 77;
  return sr;
}

CompareOptions options_for_class(const GateOptions& gate, const std::string& machine) {
  CompareOptions o = gate.compare;
  const auto file = gate.baseline_dir / machine / "thresholds.json";
  std::error_code ec;
  if (o.config.source.empty() && std::filesystem::exists(file, ec)) {
    o.config = load_threshold_config(file.string());
    o.apply_config_defaults();
  }
  if (gate.alpha) o.alpha = *gate.alpha;
  if (gate.run_noise) o.run_noise = *gate.run_noise;
  if (gate.run_noise_df) o.run_noise_df = *gate.run_noise_df;
  if (gate.session_noise) o.session_noise = *gate.session_noise;
  if (gate.max_dispersion) o.max_dispersion = *gate.max_dispersion;
  return o;
}

// The learned noise for a stored-baseline comparison of `current` against `baseline_file`
// (GateOptions::learned_noise, then the snapshot beside the baseline). A table learned on another class is not
// used; the note says why.
std::shared_ptr<const LearnedNoiseTable> learned_noise_for(const GateOptions& gate, const ResultSet& current,
                                                           const std::filesystem::path& baseline_file,
                                                           std::vector<std::string>& notes) {
  const std::string key = history::history_class(current);
  if (gate.learned_noise)
    if (auto table = gate.learned_noise(key)) return table;
  if (!gate.use_noise_snapshot) return nullptr;
  const auto snapshot = baseline_file.parent_path() / kNoiseSnapshotFile;
  std::error_code ec;
  if (!std::filesystem::exists(snapshot, ec)) return nullptr;
  auto table = std::make_shared<const LearnedNoiseTable>(load_noise_snapshot(snapshot.string()));
  if (table->machine_class != key) {
    notes.push_back(fmt::format("learned noise {} is of class {}, this run is {}: not used, the class prior judges",
                                snapshot.string(), table->machine_class, key));
    return nullptr;
  }
  return table;
}

void replace_entry(ComparisonReport& report, const BenchmarkComparison& entry) {
  for (auto& b : report.benchmarks) {
    if (b.name == entry.name) {
      b = entry;
      return;
    }
  }
  report.benchmarks.push_back(entry);
}

const BenchmarkComparison* find_entry(const ComparisonReport& report, const std::string& name) {
  for (const auto& b : report.benchmarks)
    if (b.name == name) return &b;
  return nullptr;
}

std::vector<BenchBinary> binaries_for(const std::vector<BenchBinary>& all, const std::set<std::string>& suites) {
  std::vector<BenchBinary> out;
  for (const auto& b : all)
    if (suites.count(b.suite) != 0) out.push_back(b);
  return out;
}

// Adaptive extra rounds for the undecided benchmarks of `reports` (only those named in `eligible`, when
// given). data[0] / data[1] hold each suite's runs of the two sides measured so far (merged in place);
// `sides` are the binaries to re-run; each look re-judges whole suites (the family of the BH correction
// stays the suite) with suite_options (whose alpha is already alpha per look) and replaces the entries
// of the benchmarks that were re-measured.
void extend_undecided(std::vector<SuiteReport*> reports, SideResult& data0, SideResult& data1, const std::vector<Side>& sides,
                      const std::map<std::string, CompareOptions>& suite_options, const MeasureOptions& base,
                      const GateOptions& gate, const std::set<std::string>* eligible, const std::string& label,
                      double initial_seconds, AdaptiveSummary& summary, std::vector<std::string>& notes) {
  summary.enabled = gate.max_extra_rounds > 0;
  if (!summary.enabled) return;
  const auto t0 = std::chrono::steady_clock::now();
  summary.budget_seconds = gate.max_extra_time_factor > 0 ? gate.max_extra_time_factor * initial_seconds : 0;
  double seconds_per_round = initial_seconds / std::max(1, base.rounds);  // of every benchmark: an overestimate
  std::set<std::string> extended;
  int done = 0;
  while (done < gate.max_extra_rounds) {
    std::map<std::string, std::vector<std::string>> pending;  // suite -> normalised names
    std::vector<std::string> raw_names;
    for (SuiteReport* sr : reports) {
      if (suite_options.count(sr->suite) == 0) continue;
      if (!data0.suites.count(sr->suite) || !data1.suites.count(sr->suite)) continue;
      for (const auto& b : sr->report.benchmarks) {
        if (eligible != nullptr && eligible->count(b.name) == 0) continue;
        if (!undecided(b)) continue;
        pending[sr->suite].push_back(b.name);
        raw_names.push_back(b.raw_name.empty() ? b.name : b.raw_name);
      }
    }
    if (pending.empty()) break;
    if (summary.looks_used - 1 >= static_cast<int>(summary.schedule.size())) break;
    const int n = summary.schedule[static_cast<std::size_t>(summary.looks_used - 1)];
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (summary.budget_seconds > 0 && spent + n * seconds_per_round > summary.budget_seconds) {
      summary.stopped_by_budget = true;
      if (base.progress)
        std::fprintf(stderr, "perfgate %s: %zu benchmark(s) still undecided; the next look (%d round(s), ~%.0f s) "
                     "would pass the extra-time budget (%.0f s of %.0f s spent): stopping\n", label.c_str(),
                     raw_names.size(), n, n * seconds_per_round, spent, summary.budget_seconds);
      break;
    }
    ++summary.looks_used;
    if (base.progress)
      std::fprintf(stderr, "perfgate %s: %zu benchmark(s) undecided after look %d/%d: %d extra round(s) of them "
                   "(alpha per look %.3g)\n", label.c_str(), raw_names.size(), summary.looks_used - 1,
                   summary.looks_planned, n, summary.alpha_per_look);
    std::set<std::string> suites;
    for (const auto& [suite, names] : pending) {
      suites.insert(suite);
      for (const auto& name : names) extended.insert(name);
    }
    MeasureOptions mo = base;
    mo.rounds = n;
    mo.filter = exact_filter(raw_names);
    mo.phase_label = label + " extra";
    mo.work_dir = base.work_dir / fmt::format("extra-{}", summary.looks_used);
    mo.seed = base.seed + 7919u * static_cast<std::uint64_t>(summary.looks_used);
    std::vector<Side> ms;
    for (const auto& side : sides) ms.push_back(Side{side.label, binaries_for(side.benches, suites), side.env});
    const auto look_start = std::chrono::steady_clock::now();
    MeasureResult m = measure(ms, mo);
    seconds_per_round = std::chrono::duration<double>(std::chrono::steady_clock::now() - look_start).count() / n;
    for (const auto& sres : m.sides) {
      summary.processes += sres.processes;
      summary.repetitions += sres.repetitions;
    }
    summary.extra_rounds += n;
    done += n;
    for (SuiteReport* sr : reports) {
      const auto pit = pending.find(sr->suite);
      if (pit == pending.end()) continue;
      bool merged = true;
      for (int i = 0; i < 2; ++i) {
        SideResult& into = i == 0 ? data0 : data1;
        auto it = m.sides.at(static_cast<std::size_t>(i)).suites.find(sr->suite);
        if (it == m.sides.at(static_cast<std::size_t>(i)).suites.end() || it->second.contexts.empty()) {
          merged = false;
          continue;
        }
        try {
          merge_results(into.suites.at(sr->suite), std::move(it->second));
        } catch (const std::exception&) {
          merged = false;
        }
      }
      if (!merged) {
        sr->report.notes.push_back(fmt::format("extra rounds (look {}): a side produced no usable results; the "
                                               "earlier verdicts stand", summary.looks_used));
        continue;
      }
      const ComparisonReport again = compare(data0.suites.at(sr->suite), data1.suites.at(sr->suite),
                                             suite_options.at(sr->suite));
      for (const auto& name : pit->second) {
        const BenchmarkComparison* re = find_entry(again, name);
        if (re == nullptr) continue;
        BenchmarkComparison entry = *re;
        entry.reason = fmt::format("look {}/{} ({} extra round(s)): {}", summary.looks_used, summary.looks_planned,
                                   done, re->reason);
        replace_entry(sr->report, entry);
      }
      sr->report.counts = count_verdicts(sr->report.benchmarks);
      sr->report.exit_code = exit_code_for(sr->report.counts);
    }
    for (const auto& sres : m.sides)
      for (const auto& f : sres.failures)
        notes.push_back(fmt::format("extra rounds: {} [{}] round {}: {}: {}", f.suite, f.side, f.round,
                                                    f.what, f.message));
  }
  summary.extended.assign(extended.begin(), extended.end());
  for (SuiteReport* sr : reports)
    for (const auto& b : sr->report.benchmarks)
      if (extended.count(b.name) != 0 && (b.verdict == Verdict::regression || b.verdict == Verdict::improvement ||
                                          (b.verdict == Verdict::unchanged && !undecided(b))))
        ++summary.decided;
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The plan of an adaptive session that starts with `initial_rounds` (the extra rounds of each later look);
// returns the planned looks, which every look's alpha is divided by (the first included).
int plan_adaptive(AdaptiveSummary& summary, int initial_rounds, const GateOptions& gate) {
  summary.schedule = look_schedule(initial_rounds, gate.max_extra_rounds, gate.extra_rounds_step);
  summary.looks_planned = 1 + static_cast<int>(summary.schedule.size());
  return summary.looks_planned;
}

std::string adaptive_note(const AdaptiveSummary& a, const std::string& what) {
  if (!a.enabled) return fmt::format("{}: adaptive extra rounds off (--max-extra-rounds 0)", what);
  if (a.extended.empty())
    return fmt::format("{}: every benchmark decided at the first look (alpha per look {:.3g}, {} planned looks): no "
                       "extra rounds", what, a.alpha_per_look, a.looks_planned);
  return fmt::format("{}: {} undecided benchmark(s) re-measured in {} extra round(s) ({} look(s) of {} planned, alpha "
                     "per look {:.3g}, Bonferroni); {} decided; cost {} extra process run(s), {} extra repetitions, "
                     "{:.1f} s",
                     what, a.extended.size(), a.extra_rounds, a.looks_used, a.looks_planned, a.alpha_per_look,
                     a.decided, a.processes, a.repetitions, a.seconds) +
         (a.stopped_by_budget ? fmt::format("; stopped by the extra-time budget ({:.0f} s = --max-extra-time-factor x "
                                            "the initial measurement)", a.budget_seconds)
                              : std::string());
}

}  // namespace

bool undecided(const BenchmarkComparison& b) {
  if (b.verdict == Verdict::noisy) return true;
  if (b.verdict != Verdict::unchanged) return false;
  for (const auto& m : b.metrics) {
    if (!m.gated || m.verdict != Verdict::unchanged || !m.interval_bounded) continue;
    const double worse_bound = higher_is_better(m.kind) ? -m.change_lower : m.change_upper;
    if (std::isfinite(worse_bound) && worse_bound > m.threshold) return true;
  }
  return false;
}

std::vector<int> look_schedule(int initial_rounds, int max_extra_rounds, int step) {
  std::vector<int> out;
  int total = std::max(0, initial_rounds), left = max_extra_rounds;
  while (left > 0) {
    const int n = std::min(left, step > 0 ? step : std::max(1, total));
    out.push_back(n);
    total += n;
    left -= n;
  }
  return out;
}

int planned_looks(int initial_rounds, int max_extra_rounds, int step) {
  return 1 + static_cast<int>(look_schedule(initial_rounds, max_extra_rounds, step).size());
}

double alpha_per_look(double alpha, int looks) { return alpha / std::max(1, looks); }

bool looks_regressed(const BenchmarkComparison& b) {
  if (b.verdict == Verdict::regression) return true;
  if (b.verdict != Verdict::noisy) return false;
  for (const auto& m : b.metrics) {
    if (!m.gated) continue;
    if (m.verdict == Verdict::regression) return true;
    if (m.verdict == Verdict::noisy && std::isfinite(m.change) && worse_change(m) > m.threshold) return true;
  }
  return false;
}

VerdictCounts count_verdicts(const std::vector<BenchmarkComparison>& benchmarks) {
  VerdictCounts c;
  for (const auto& b : benchmarks) c.add(b.verdict);
  return c;
}

int session_exit_code(const std::vector<SuiteReport>& suites) {
  VerdictCounts compared;
  int failed = 0;
  bool any_baseline = false;
  for (const auto& s : suites) {
    const VerdictCounts c = count_verdicts(s.report.benchmarks);
    failed += c.failed;
    if (!s.baseline_found) continue;
    any_baseline = true;
    compared.regression += c.regression;
    compared.improvement += c.improvement;
    compared.unchanged += c.unchanged;
    compared.noisy += c.noisy;
    compared.missing += c.missing;
    compared.new_benchmark += c.new_benchmark;
    compared.skipped += c.skipped;
  }
  if (failed > 0) return 3;
  if (!any_baseline) return 77;
  return exit_code_for(compared);
}

ComparisonReport combine_reports(const std::vector<SuiteReport>& suites) {
  ComparisonReport out;
  bool have_sides = false;
  for (const auto& s : suites) {
    const ComparisonReport& r = s.report;
    if (!have_sides && s.baseline_found) {
      out.baseline = r.baseline;
      out.current = r.current;
      out.options = r.options;
      out.machine_mismatch_allowed = r.machine_mismatch_allowed;
      have_sides = true;
    }
    if (out.current.machine_class.empty()) out.current = r.current;
    out.benchmarks.insert(out.benchmarks.end(), r.benchmarks.begin(), r.benchmarks.end());
    for (const auto& n : r.notes) out.notes.push_back(suites.size() > 1 ? s.suite + ": " + n : n);
    for (const auto& [k, v] : r.nvtx_ranges) out.nvtx_ranges[k] = v;
    out.repetitions = std::max(out.repetitions, r.repetitions);
    if (have_sides) {
      out.baseline.process_runs = std::max(out.baseline.process_runs, r.baseline.process_runs);
      out.current.process_runs = std::max(out.current.process_runs, r.current.process_runs);
      for (const auto& f : r.baseline.files)
        if (std::find(out.baseline.files.begin(), out.baseline.files.end(), f) == out.baseline.files.end())
          out.baseline.files.push_back(f);
    }
  }
  out.counts = count_verdicts(out.benchmarks);
  out.exit_code = session_exit_code(suites);
  return out;
}

RecordResult record_run(const Side& current, const MeasureOptions& options) {
  RecordResult r;
  r.measurement = measure({current}, options);
  const SideResult& side = r.measurement.sides.at(0);
  bool any_ran = false;
  bool any_failed = !side.failures.empty();
  for (const auto& [suite, rs] : side.suites) {
    for (const auto& b : rs.benchmarks) {
      if (b.error) any_failed = true;
      if (!b.error && !b.skip_reason && !b.time.samples.empty()) any_ran = true;
    }
  }
  r.exit_code = any_failed ? 3 : (any_ran ? 0 : 77);
  return r;
}

SessionResult gate_run(const Side& current, const MeasureOptions& options, const GateOptions& gate) {
  SessionResult out;
  out.measurement = measure({current}, options);
  SideResult& side = out.measurement.sides.at(0);

  std::map<std::string, ResultSet> baselines;
  std::map<std::string, CompareOptions> suite_options;
  const BenchmarkFilter selected(options.filter);
  for (const auto& suite : suites_of(side)) {
    ResultSet& cur = side.suites[suite];
    if (cur.contexts.empty()) {
      out.suites.push_back(report_without_comparison(suite, cur, Verdict::failed, "no process run produced results", ""));
      continue;
    }
    const std::string machine = machine_class(cur);
    const auto file = find_baseline(gate.baseline_dir, machine, cur.contexts.front().get("perfgate.cpu_signature"), suite);
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
      SuiteReport sr = report_without_comparison(suite, cur, Verdict::new_benchmark,
                                                 "no baseline: " + file.string(), file.string());
      // Once, in the suite's report (combine_reports prefixes it with the suite for the whole-run report).
      if (cur.every_benchmark_skipped())
        sr.report.notes.push_back(fmt::format("every benchmark of suite {} skipped on machine class {}: nothing to "
                                              "compare (no baseline {} is needed here)",
                                              suite, machine, file.string()));
      else
        sr.report.notes.push_back(fmt::format("no baseline for suite {} on machine class {}: {} (record one with "
                                              "`perfgate run --update-baseline` or `perfgate baseline update`)",
                                              suite, machine, file.string()));
      out.suites.push_back(std::move(sr));
      continue;
    }
    ResultSet base = load_result_file(file.string());
    // Baseline benchmarks the filter did not select are not compared (they are not missing).
    const int unselected = drop_unselected(base, selected);
    const MachineClassCheck check = check_machine_class(base, cur);
    if (check.cpu_changed && check.baseline_class == check.current_class && !gate.allow_machine_mismatch) {
      // Measured and reported, not compared: the verdicts would be about the hardware.
      SuiteReport sr = report_without_comparison(suite, cur, Verdict::new_benchmark,
                                                 "baseline from another CPU generation: " + file.string(),
                                                 file.string());
      sr.report.notes.push_back(check.message + " (not compared; --allow-machine-mismatch compares anyway)");
      out.suites.push_back(std::move(sr));
      continue;
    }
    if (!check.same && !gate.allow_machine_mismatch)
      throw InputError(file.string(), "", "context", check.message + " (use --allow-machine-mismatch to compare anyway)");
    CompareOptions o = options_for_class(gate, machine);
    std::vector<std::string> noise_notes;
    o.learned_noise = learned_noise_for(gate, cur, file, noise_notes);
    SuiteReport sr;
    sr.suite = suite;
    sr.baseline_file = file.string();
    sr.report = compare(base, cur, o);
    sr.report.notes.insert(sr.report.notes.end(), noise_notes.begin(), noise_notes.end());
    if (unselected > 0) sr.report.notes.push_back(unselected_note(unselected, options.filter));
    // The stored baseline comes from another machine of the class: what follows the host is not gated
    // there without a band of its own (a threshold of its own, or noise learned for it on this class).
    make_host_dependent_informational(sr.report, base, cur, [&o](const std::string& name) {
      return has_own_threshold(o, name) || (o.learned_noise && o.learned_noise->usable(name, "time") != nullptr);
    });
    sr.report.machine_mismatch_allowed = !check.same;
    if (!check.same) sr.report.notes.push_back(check.message + " (allowed)");
    if (!check.unknown_cpu_note.empty()) sr.report.notes.push_back(check.unknown_cpu_note);
    baselines.emplace(suite, std::move(base));
    suite_options.emplace(suite, o);
    out.suites.push_back(std::move(sr));
  }

  // ---- confirm step ----
  out.confirm.enabled = gate.confirm_rounds > 0;
  out.confirm.against_baseline_build = !gate.baseline_build.empty();
  std::map<std::string, std::vector<const BenchmarkComparison*>> candidates;  // suite -> entries
  for (const auto& sr : out.suites) {
    if (!sr.baseline_found) continue;
    for (const auto& b : sr.report.benchmarks) {
      if (looks_regressed(b)) {
        candidates[sr.suite].push_back(&b);
        out.confirm.candidates.push_back(b.name);
      }
    }
  }
  if (out.confirm.enabled && !out.confirm.candidates.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    std::set<std::string> suites;
    std::vector<std::string> raw_names;
    for (const auto& [suite, list] : candidates) {
      suites.insert(suite);
      for (const auto* b : list) raw_names.push_back(b->raw_name.empty() ? b->name : b->raw_name);
    }
    MeasureOptions mo = options;
    mo.rounds = gate.confirm_rounds;
    mo.filter = exact_filter(raw_names);
    mo.phase_label = "confirm";
    mo.work_dir = options.work_dir / "confirm";
    mo.seed = out.measurement.seed + 1;
    std::vector<Side> sides;
    const bool with_build = out.confirm.against_baseline_build;
    if (with_build) sides.push_back(Side{"baseline build", binaries_for(gate.baseline_build, suites), gate.baseline_env});
    sides.push_back(Side{"current", binaries_for(current.benches, suites), current.env});
    // With a baseline build, the confirm step is an interleaved A/B session of the candidates: adaptive
    // extra rounds apply to it (its looks carry alpha / looks; the initial look against the stored
    // baseline only chose what to re-measure, it decides nothing).
    MeasureResult confirm = measure(sides, mo);
    const SideResult& cur_side = confirm.sides.back();
    for (const auto& s : confirm.sides) {
      out.confirm.processes += s.processes;
      out.confirm.repetitions += s.repetitions;
    }
    std::map<std::string, SuiteReport> build_reports;  // suite -> fresh interleaved comparison (with_build)
    std::vector<std::string> extra_notes;
    if (with_build) {
      std::map<std::string, CompareOptions> confirm_options;
      std::set<std::string> eligible;
      const int looks = plan_adaptive(out.adaptive, gate.confirm_rounds, gate);
      for (const auto& [suite, list] : candidates) {
        const auto cur_it = cur_side.suites.find(suite);
        const auto base_it = confirm.sides.front().suites.find(suite);
        if (cur_it == cur_side.suites.end() || cur_it->second.contexts.empty() ||
            base_it == confirm.sides.front().suites.end() || base_it->second.contexts.empty())
          continue;
        CompareOptions o = suite_options.at(suite);
        o.paired_runs = gate.paired;
        o.session_noise = 0;  // both sides measured in this session
        o.learned_noise.reset();
        o.alpha = alpha_per_look(o.alpha, looks);
        if (confirm_options.empty()) out.adaptive.alpha_per_look = o.alpha;
        SuiteReport r;
        r.suite = suite;
        r.report = compare(base_it->second, cur_it->second, o);
        build_reports.emplace(suite, std::move(r));
        confirm_options.emplace(suite, o);
        for (const auto* b : list) eligible.insert(b->name);
      }
      if (gate.max_extra_rounds > 0) {
        std::vector<SuiteReport*> reports;
        for (auto& [suite, r] : build_reports) reports.push_back(&r);
        extend_undecided(reports, confirm.sides.front(), confirm.sides.back(), sides, confirm_options, mo, gate,
                         &eligible, "confirm", confirm.wall_seconds, out.adaptive, extra_notes);
        out.confirm.processes += out.adaptive.processes;
        out.confirm.repetitions += out.adaptive.repetitions;
      }
    }

    for (auto& sr : out.suites) {
      auto cand_it = candidates.find(sr.suite);
      if (cand_it == candidates.end()) continue;
      std::vector<BenchmarkComparison> initial;
      for (const auto* b : cand_it->second) initial.push_back(*b);
      const auto cur_it = cur_side.suites.find(sr.suite);
      std::optional<ComparisonReport> again;
      std::string against;
      if (cur_it != cur_side.suites.end() && !cur_it->second.contexts.empty()) {
        if (with_build) {
          const auto rit = build_reports.find(sr.suite);
          if (rit != build_reports.end()) {
            again = rit->second.report;
            against = "fresh baseline build, interleaved";
          }
        } else {
          // Against the stored baseline the re-measurement adds evidence: the initial and the re-measured
          // process runs are judged together (more runs narrow the between-run interval), so a change
          // must hold over both before it can fail the build.
          ResultSet pooled = side.suites.at(sr.suite);
          try {
            ResultSet extra = cur_it->second;
            merge_results(pooled, std::move(extra));
            against = "stored baseline, initial + re-measured runs";
          } catch (const std::exception&) {
            pooled = cur_it->second;
            against = "stored baseline, re-measured runs";
          }
          again = compare(baselines.at(sr.suite), pooled, suite_options.at(sr.suite));
        }
      }
      for (const auto& init : initial) {
        BenchmarkComparison final_entry = init;
        const BenchmarkComparison* re = again ? find_entry(*again, init.name) : nullptr;
        if (re == nullptr) {
          // Nothing re-measured (the confirm process failed): a failure of the bench if it failed,
          // else the initial evidence stands as noisy: it was never confirmed.
          const BenchmarkResult* cb = cur_it != cur_side.suites.end() ? cur_it->second.find(init.name) : nullptr;
          final_entry.verdict = cb != nullptr && cb->error ? Verdict::failed : Verdict::noisy;
          if (cb != nullptr && cb->error) final_entry.message = *cb->error;
          final_entry.reason = fmt::format("confirm step could not re-measure it; initial: {}", change_text(init));
        } else if (with_build) {
          final_entry = *re;
          final_entry.reason = fmt::format("confirm vs {}: {} (initial vs stored baseline: {})", against, re->reason,
                                           change_text(init));
        } else if (re->verdict == Verdict::regression) {
          final_entry = *re;
          final_entry.reason = fmt::format("confirmed ({}): {} (initial: {})", against, re->reason, change_text(init));
        } else if (re->verdict == Verdict::failed) {
          final_entry = *re;
        } else {
          final_entry = *re;
          final_entry.reason = fmt::format("not confirmed: initial {}; {}: {}", change_text(init), against,
                                           change_text(*re));
        }
        if (final_entry.verdict == Verdict::regression) ++out.confirm.confirmed;
        replace_entry(sr.report, final_entry);
      }
      sr.report.counts = count_verdicts(sr.report.benchmarks);
      sr.report.exit_code = exit_code_for(sr.report.counts);
    }
    out.confirm.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (auto& n : extra_notes) out.notes.push_back(std::move(n));
    // Failures during confirmation are failures of the run.
    for (const auto& s : confirm.sides) {
      for (const auto& f : s.failures)
        out.notes.push_back(fmt::format("confirm step: {} [{}] round {}: {}: {}", f.suite, f.side, f.round, f.what, f.message));
    }
  }

  std::vector<std::string> cost_notes;
  cost_notes.push_back(fmt::format("measured: {} process run(s), {} repetitions, {:.1f} s; seed {}",
                                   side.processes, side.repetitions, out.measurement.wall_seconds, out.measurement.seed));
  if (out.confirm.enabled) {
    if (out.confirm.candidates.empty()) {
      cost_notes.push_back("confirm step: nothing looked regressed, no extra repetitions");
    } else {
      cost_notes.push_back(fmt::format(
          "confirm step: {} benchmark(s) re-measured {}, {} confirmed; cost {} extra process run(s), {} extra "
          "repetitions, {:.1f} s",
          out.confirm.candidates.size(),
          out.confirm.against_baseline_build ? "alternating with a fresh baseline build" : "against the stored baseline",
          out.confirm.confirmed, out.confirm.processes, out.confirm.repetitions, out.confirm.seconds));
    }
    if (out.confirm.against_baseline_build && !out.confirm.candidates.empty())
      cost_notes.push_back(adaptive_note(out.adaptive, "confirm step, adaptive rounds"));
  } else {
    cost_notes.push_back("confirm step: off (--confirm-rounds 0)");
  }
  for (const auto& f : side.failures)
    cost_notes.push_back(fmt::format("FAILED {} round {}: {}: {}", f.suite, f.round, f.what, f.message));
  for (const auto& n : out.measurement.notes) cost_notes.push_back(n);
  out.notes.insert(out.notes.begin(), cost_notes.begin(), cost_notes.end());

  out.combined = combine_reports(out.suites);
  out.combined.notes.insert(out.combined.notes.begin(), out.notes.begin(), out.notes.end());
  out.exit_code = out.combined.exit_code;
  return out;
}

SessionResult gate_ab(const Side& before, const Side& after, const MeasureOptions& options, const GateOptions& gate) {
  SessionResult out;
  out.measurement = measure({before, after}, options);
  SideResult& a = out.measurement.sides.at(0);
  SideResult& b = out.measurement.sides.at(1);
  const int looks = plan_adaptive(out.adaptive, options.rounds, gate);
  std::map<std::string, CompareOptions> suite_options;
  std::set<std::string> suites;
  for (const auto& [s, rs] : a.suites) suites.insert(s);
  for (const auto& [s, rs] : b.suites) suites.insert(s);
  for (const auto& suite : suites) {
    const auto ai = a.suites.find(suite);
    const auto bi = b.suites.find(suite);
    const bool a_ok = ai != a.suites.end() && !ai->second.contexts.empty();
    const bool b_ok = bi != b.suites.end() && !bi->second.contexts.empty();
    if (a_ok && b_ok) {
      SuiteReport sr;
      sr.suite = suite;
      std::string machine;
      try {
        machine = machine_class(bi->second);
      } catch (const InputError&) {
        machine.clear();
      }
      CompareOptions o = machine.empty() ? gate.compare : options_for_class(gate, machine);
      o.paired_runs = gate.paired;  // round i of before ran next to round i of after
      o.session_noise = 0;          // both sides measured in this session
      o.alpha = alpha_per_look(o.alpha, looks);  // every look of an adaptive session, the first included
      if (suite_options.empty()) out.adaptive.alpha_per_look = o.alpha;
      sr.report = compare(ai->second, bi->second, o);
      suite_options.emplace(suite, o);
      out.suites.push_back(std::move(sr));
    } else if (b_ok || bi != b.suites.end()) {
      out.suites.push_back(report_without_comparison(suite, bi->second, a_ok ? Verdict::new_benchmark : Verdict::failed,
                                                     a_ok ? "only in --after" : "the --before build produced no results", ""));
      if (!a_ok && ai != a.suites.end()) {
        for (const auto& bb : ai->second.benchmarks)
          if (bb.error) out.suites.back().report.benchmarks.push_back(manual_entry(bb, suite, Verdict::failed, ""));
      }
      out.suites.back().baseline_found = a_ok;
    } else {
      out.suites.push_back(report_without_comparison(suite, ai->second, Verdict::missing, "only in --before", ""));
      out.suites.back().baseline_found = true;
    }
  }
  std::vector<std::string> extra_notes;
  if (gate.max_extra_rounds > 0) {
    std::vector<SuiteReport*> reports;
    for (auto& sr : out.suites) reports.push_back(&sr);
    extend_undecided(reports, a, b, {before, after}, suite_options, options, gate, nullptr, "ab",
                     out.measurement.wall_seconds, out.adaptive, extra_notes);
  }
  out.notes.push_back(fmt::format("ab: {} round(s), before/after alternating in random order per pair; {} + {} process "
                                  "run(s), {} + {} repetitions, {:.1f} s; seed {}",
                                  options.rounds, a.processes, b.processes, a.repetitions, b.repetitions,
                                  out.measurement.wall_seconds, out.measurement.seed));
  out.notes.push_back(adaptive_note(out.adaptive, "adaptive rounds"));
  for (auto& n : extra_notes) out.notes.push_back(std::move(n));
  for (const auto* s : {&a, &b})
    for (const auto& f : s->failures)
      out.notes.push_back(fmt::format("FAILED {} [{}] round {}: {}: {}", f.suite, f.side, f.round, f.what, f.message));
  for (const auto& n : out.measurement.notes) out.notes.push_back(n);
  out.combined = combine_reports(out.suites);
  out.combined.notes.insert(out.combined.notes.begin(), out.notes.begin(), out.notes.end());
  out.exit_code = out.combined.exit_code;
  return out;
}

std::string change_text(const BenchmarkComparison& b) {
  const MetricComparison* m = b.driving_metric();
  if (m == nullptr) m = b.metric("time");
  if (m == nullptr) return to_string(b.verdict);
  return fmt::format("{} {} [{}, {}]", to_string(b.verdict), pct(m->change), pct(m->change_lower),
                     pct(m->change_upper));
}

SessionResult merge_sessions(std::vector<SessionResult> parts, const std::vector<std::string>& lead_notes) {
  SessionResult out;
  out.notes = lead_notes;
  SideResult current;
  current.label = "current";
  for (auto& part : parts) {
    for (auto& sr : part.suites) out.suites.push_back(std::move(sr));
    for (auto& n : part.notes) out.notes.push_back(std::move(n));
    if (part.confirm.enabled) out.confirm = part.confirm;
    if (part.adaptive.enabled) out.adaptive = part.adaptive;
    out.measurement.wall_seconds += part.measurement.wall_seconds;
    if (out.measurement.seed == 0) out.measurement.seed = part.measurement.seed;
    if (part.measurement.sides.empty()) continue;
    SideResult& side = part.measurement.sides.back();
    for (auto& [suite, rs] : side.suites) current.suites[suite] = std::move(rs);
    current.failures.insert(current.failures.end(), side.failures.begin(), side.failures.end());
    current.raw_files.insert(current.raw_files.end(), side.raw_files.begin(), side.raw_files.end());
    current.processes += side.processes;
    current.repetitions += side.repetitions;
    current.process_seconds += side.process_seconds;
  }
  out.measurement.sides.push_back(std::move(current));
  out.combined = combine_reports(out.suites);
  out.combined.notes.insert(out.combined.notes.begin(), out.notes.begin(), out.notes.end());
  out.exit_code = out.combined.exit_code;
  return out;
}

// ---- record-only summaries ------------------------------------------------------------------------

namespace {

struct BenchSummary {
  std::string name;
  std::size_t samples = 0;
  int runs = 0;
  double median = NAN;
  double within_cv = 0;        // max robust CV inside one process run
  double between_spread = 0;   // (max - min) / median of per-run medians
  std::string status;          // "ok", "failed: ...", "skipped: ..."
};

BenchSummary summarise_benchmark(const BenchmarkResult& b) {
  BenchSummary s;
  s.name = b.name;
  s.samples = b.time.samples.size();
  s.status = b.error ? "failed: " + *b.error : (b.skip_reason ? "skipped: " + *b.skip_reason : "ok");
  if (b.time.samples.empty()) return s;
  s.median = stats::median(b.time.samples);
  std::map<int, std::vector<double>> runs;
  for (std::size_t i = 0; i < b.time.samples.size(); ++i)
    runs[i < b.time.process_run.size() ? b.time.process_run[i] : 0].push_back(b.time.samples[i]);
  s.runs = static_cast<int>(runs.size());
  std::vector<double> medians;
  for (auto& [r, v] : runs) {
    s.within_cv = std::max(s.within_cv, stats::robust_cv(v));
    medians.push_back(stats::median_inplace(v));
  }
  const auto [lo, hi] = std::minmax_element(medians.begin(), medians.end());
  s.between_spread = s.median > 0 ? (*hi - *lo) / s.median : 0;
  return s;
}

}  // namespace

std::string measurement_markdown(const MeasureResult& m, const std::string& title) {
  std::string out = fmt::format("# {}\n\n", escape_markdown(title));
  int failed = 0, total = 0;
  for (const auto& side : m.sides) {
    failed += static_cast<int>(side.failures.size());
    for (const auto& [suite, rs] : side.suites) total += static_cast<int>(rs.benchmarks.size());
  }
  out += fmt::format("**Recorded {} benchmark(s), no comparison (record only){}.**\n\n", total,
                     failed > 0 ? fmt::format("; {} process failure(s)", failed) : "");
  out += fmt::format("{:.1f} s wall, seed {}.\n\n", m.wall_seconds, m.seed);
  for (const auto& side : m.sides) {
    for (const auto& [suite, rs] : side.suites) {
      out += fmt::format("## {}{}\n\n", escape_markdown(suite), m.sides.size() > 1 ? " [" + escape_markdown(side.label) + "]" : "");
      if (!rs.contexts.empty()) {
        out += fmt::format("Commit `{}`, build type {}, {} process run(s).\n\n",
                           escape_markdown(rs.contexts.front().get("perfgate.git_commit", "unknown")),
                           escape_markdown(rs.contexts.front().get("perfgate.build_type", "unknown")), rs.process_runs());
      }
      out += "| benchmark | samples | runs | median | within-run CV | spread of run medians | status |\n";
      out += "| --- | ---: | ---: | ---: | ---: | ---: | --- |\n";
      for (const auto& b : rs.benchmarks) {
        const BenchSummary s = summarise_benchmark(b);
        out += fmt::format("| {} | {} | {} | {} | {:.1f}% | {:.1f}% | {} |\n", escape_markdown(s.name), s.samples, s.runs,
                           report_detail::duration_ns(s.median), 100 * s.within_cv, 100 * s.between_spread, escape_markdown(s.status));
      }
      out += "\n";
    }
    for (const auto& f : side.failures) {
      out += fmt::format("- FAILED {} [{}] round {}: {}: {}\n", escape_markdown(f.suite), escape_markdown(f.side), f.round,
                         escape_markdown(f.what), escape_markdown(f.message));
    }
  }
  for (const auto& n : m.notes) out += "- " + escape_markdown(n) + "\n";
  return out;
}

std::string measurement_json(const MeasureResult& m) {
  nlohmann::json j;
  j["kind"] = "perfgate.measurement";
  j["wall_seconds"] = m.wall_seconds;
  j["seed"] = m.seed;
  j["notes"] = m.notes;
  j["sides"] = nlohmann::json::array();
  for (const auto& side : m.sides) {
    nlohmann::json js;
    js["label"] = side.label;
    js["processes"] = side.processes;
    js["repetitions"] = side.repetitions;
    js["process_seconds"] = side.process_seconds;
    js["raw_files"] = side.raw_files;
    js["failures"] = nlohmann::json::array();
    for (const auto& f : side.failures) {
      js["failures"].push_back({{"suite", f.suite}, {"binary", f.binary}, {"round", f.round}, {"what", f.what},
                                {"message", f.message}, {"benchmarks", f.benchmarks}});
    }
    js["suites"] = nlohmann::json::object();
    for (const auto& [suite, rs] : side.suites) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& b : rs.benchmarks) {
        const BenchSummary s = summarise_benchmark(b);
        nlohmann::json jb{{"name", s.name}, {"samples", s.samples}, {"runs", s.runs}, {"status", s.status},
                          {"within_run_cv", s.within_cv}, {"run_median_spread", s.between_spread}};
        jb["median_ns"] = std::isfinite(s.median) ? nlohmann::json(s.median) : nlohmann::json(nullptr);
        list.push_back(jb);
      }
      js["suites"][suite] = list;
    }
    j["sides"].push_back(js);
  }
  return j.dump(2);
}

}  // namespace perfgate
