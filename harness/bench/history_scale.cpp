// perfgate_history_scale: how the results history scales (docs/history.md, "Scale").
//
//   perfgate_history_scale --db URL [--sessions 1000] [--benchmarks 1000] [--runs 3] [--checkpoints 250,500,1000]
//
// Fills a history with synthetic sessions of one machine class (each benchmark with a time, a rate and a
// phase, `runs` process runs of one repetition; 1% of the benchmarks get a +5% step somewhere), and at
// each checkpoint measures, on the history as it then is:
//   record   one more session (open + one transaction), seconds
//   noise    the learned noise of every series over the last 30 sessions: read + compute, seconds
//   changes  change points of every series over every session: read + compute, seconds
//   series   one series over every session (Store::series), seconds
// One line per checkpoint, tab-separated, with a header. Single-threaded throughout.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "perfgate/change_points.hpp"
#include "perfgate/history.hpp"
#include "perfgate/stats.hpp"
#include "synthetic_history.hpp"

namespace {

using namespace perfgate;
using perfgate::test_support::add_synthetic_series;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string db;
  int sessions = 1000;
  int benchmarks = 1000;
  int runs = 3;
  std::vector<int> checkpoints;
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Benchmarks b with b % 100 == 7 step up 5% at session (b * 37) % sessions; the rest are stable.
double level(int benchmark, int session, int sessions) {
  const double base = 1000.0 * (1 + benchmark % 13);
  const bool steps = benchmark % 100 == 7;
  return steps && session >= (benchmark * 37) % sessions ? base * 1.05 : base;
}

history::SessionRecord synthetic_session(const Args& a, int session) {
  history::SessionRecord r;
  r.info.machine_class = "cpu-scale-2c";
  r.info.commit = fmt::format("{:040x}", 0x5ca1eULL * 1000003ULL + static_cast<unsigned long long>(session));
  r.info.branch = "main";
  r.info.host = "scale";
  r.info.perfgate_version = "scale";
  // One session an hour from 2026-01-01.
  const std::time_t t = static_cast<std::time_t>(1767225600LL + 3600LL * session);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  r.info.time =
      fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:00:00Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour);
  for (int p = 0; p < a.runs; ++p) r.process_runs.push_back({fmt::format("run{}.json", p), {{"host_name", "scale"}}});
  stats::SplitMix64 rng(static_cast<std::uint64_t>(session) * 7919 + 1);
  const double session_drift = 1 + 0.002 * rng.normal();  // the machine's mood of the day: common mode
  r.series.reserve(static_cast<std::size_t>(a.benchmarks) * 3);
  for (int b = 0; b < a.benchmarks; ++b) {
    const std::string name = fmt::format("scale/bench{:04d}", b);
    const double center = level(b, session, a.sessions) * session_drift;
    add_synthetic_series(r, name, a.runs, 1, [&] { return center * std::exp(0.01 * rng.normal()); });
  }
  return r;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--db") a.db = v;
    else if (k == "--sessions") a.sessions = std::atoi(v.c_str());
    else if (k == "--benchmarks") a.benchmarks = std::atoi(v.c_str());
    else if (k == "--runs") a.runs = std::atoi(v.c_str());
    else if (k == "--checkpoints") {
      std::size_t pos = 0;
      while (pos < v.size()) {
        const auto comma = v.find(',', pos);
        a.checkpoints.push_back(std::atoi(v.substr(pos, comma - pos).c_str()));
        pos = comma == std::string::npos ? v.size() : comma + 1;
      }
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  if (a.db.empty()) {
    std::fprintf(
        stderr,
        "usage: perfgate_history_scale --db URL [--sessions N] [--benchmarks N] [--runs N] [--checkpoints a,b,c]\n");
    std::exit(2);
  }
  if (a.checkpoints.empty()) a.checkpoints.push_back(a.sessions);
  return a;
}

void measure(const Args& a, int session) {
  // record: what `perfgate history record` does after loading the files.
  const auto record = synthetic_session(a, session);
  auto t0 = Clock::now();
  history::open_store(a.db, history::OpenMode::create)->record(record);
  const double record_s = seconds_since(t0);

  t0 = Clock::now();
  auto store = history::open_store(a.db);
  const auto recent = store->class_history("cpu-scale-2c", 30);
  const double noise_read_s = seconds_since(t0);
  t0 = Clock::now();
  const auto noise = history::learned_noise(recent);
  const double noise_compute_s = seconds_since(t0);

  t0 = Clock::now();
  const auto all = store->class_history("cpu-scale-2c");
  const double changes_read_s = seconds_since(t0);
  t0 = Clock::now();
  const auto changes = history::find_changes(all);
  const double changes_compute_s = seconds_since(t0);

  // One series over every session: the dashboard's plot of one benchmark.
  t0 = Clock::now();
  const auto one = store->series({"cpu-scale-2c", "scale/bench0007", "time", MetricKind::latency});
  const double series_read_s = seconds_since(t0);
  if (one.points.size() != static_cast<std::size_t>(session) + 1) std::fprintf(stderr, "series(): wrong length\n");

  std::size_t sufficient = 0;
  for (const auto& [key, n] : noise) sufficient += n.sufficient;
  std::printf("%d\t%zu\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.4f\t%zu\t%zu\n", session + 1, all.series.size(), record_s,
              noise_read_s, noise_compute_s, changes_read_s, changes_compute_s, series_read_s, sufficient,
              changes.size());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  auto store = history::open_store(a.db, history::OpenMode::create);
  int have = static_cast<int>(store->list_sessions().size());
  std::printf(
      "sessions\tseries\trecord_s\tnoise_read_s\tnoise_compute_s\tchanges_read_s\tchanges_compute_s\tseries_read_"
      "s\tnoise_sufficient\tchanges\n");
  double fill_s = 0;
  int filled = 0;
  for (int checkpoint : a.checkpoints) {
    // Fill to one below the checkpoint; the measured record adds the checkpoint's session.
    const auto t0 = Clock::now();
    for (; have < checkpoint - 1; ++have, ++filled) store->record(synthetic_session(a, have));
    fill_s += seconds_since(t0);
    if (have == checkpoint - 1) {
      measure(a, have);
      ++have;
    }
  }
  std::fprintf(stderr, "filled %d sessions in %.1f s (%.3f s each)\n", filled, fill_s, filled ? fill_s / filled : 0.0);
  return 0;
}
