// E-Divisive means with a permutation test, common mode, and learned noise (perfgate/change_points.hpp).
//
// The E-Divisive statistic of a split of y[0..n) at tau (alpha = 1, Matteson & James 2014, with the end
// of the segment fixed as Hunter/Otava do) is
//   Q(tau) = tau (n - tau) / n * ( 2 C / (tau (n - tau)) - W_L / C(tau, 2) - W_R / C(n - tau, 2) )
// where C sums |y_i - y_j| across the split and W_L, W_R within each side. A naive evaluation is O(n^2)
// per split; here every tau is evaluated in O(n log n) together: with d_k = sum_{i<k} |y_k - y_i|
// (a Fenwick tree over the ranks of the values) and A_k = sum_all_i |y_k - y_i| (prefix sums of the sorted
// values), W_L(tau) = sum_{k<tau} d_k, W_R(tau) = sum_{k>=tau} (A_k - d_k) and C = total - W_L - W_R.
// A permutation only reorders the (value, rank, A) triples, so each permutation costs one Fenwick pass.
#include "perfgate/change_points.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "perfgate/baseline_store.hpp"
#include "perfgate/stats.hpp"

namespace perfgate::history {

double log_slowness(double value, MetricKind kind) {
  const double l = std::log(value);
  return higher_is_better(kind) ? -l : l;
}

namespace {

constexpr double kMadToSd = 1.4826;

double median_of(std::span<const double> v) {
  std::vector<double> copy(v.begin(), v.end());
  return stats::median_inplace(copy);
}

// A value, its rank in the segment, and its summed distance to every value of the segment: what a
// permutation moves around together.
struct Point {
  double value;
  int rank;
  double distance_to_all;
};

// Reusable buffers of one E-Divisive scan.
struct Scan {
  std::vector<int> count_tree;
  std::vector<double> sum_tree;
  std::vector<double> d;            // distance of point k to the points before it
  std::vector<double> within_left;  // W_L(tau), tau = 0..n

  // Best split position and statistic over tau in [m, n - m].
  std::pair<std::size_t, double> best(const std::vector<Point>& p, std::size_t m) {
    const std::size_t n = p.size();
    count_tree.assign(n + 1, 0);
    sum_tree.assign(n + 1, 0.0);
    d.resize(n);
    double sum_before = 0;
    for (std::size_t k = 0; k < n; ++k) {
      int less_count = 0;
      double less_sum = 0;
      for (int i = p[k].rank; i > 0; i -= i & -i) {
        less_count += count_tree[static_cast<std::size_t>(i)];
        less_sum += sum_tree[static_cast<std::size_t>(i)];
      }
      const double y = p[k].value;
      d[k] = y * less_count - less_sum + (sum_before - less_sum) - y * (static_cast<double>(k) - less_count);
      for (std::size_t i = static_cast<std::size_t>(p[k].rank) + 1; i <= n; i += i & (~i + 1)) {
        count_tree[i] += 1;
        sum_tree[i] += y;
      }
      sum_before += y;
    }
    within_left.assign(n + 1, 0.0);
    for (std::size_t k = 0; k < n; ++k) within_left[k + 1] = within_left[k] + d[k];
    const double total = within_left[n];
    // W_R(tau) accumulated from the right.
    std::pair<std::size_t, double> best{0, -1.0};
    double within_right = 0;
    for (std::size_t tau = n; tau-- > m;) {
      within_right += p[tau].distance_to_all - d[tau];
      if (tau > n - m) continue;
      const double left = static_cast<double>(tau), right = static_cast<double>(n - tau);
      const double wl = within_left[tau];
      const double across = total - wl - within_right;
      const double q =
          left * right / static_cast<double>(n) *
          (2 * across / (left * right) - wl / (left * (left - 1) / 2) - within_right / (right * (right - 1) / 2));
      if (q > best.second) best = {tau, q};
    }
    return best;
  }
};

std::vector<Point> points_of(std::span<const double> y) {
  const std::size_t n = y.size();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return y[a] < y[b]; });
  std::vector<double> prefix(n + 1, 0.0);
  for (std::size_t r = 0; r < n; ++r) prefix[r + 1] = prefix[r] + y[order[r]];
  std::vector<Point> p(n);
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t i = order[r];
    const double v = y[i];
    const double below = v * static_cast<double>(r) - prefix[r];
    const double above = (prefix[n] - prefix[r + 1]) - v * static_cast<double>(n - r - 1);
    p[i] = {v, static_cast<int>(r), below + above};
  }
  return p;
}

struct SplitTest {
  std::size_t tau = 0;
  double statistic = 0;
  double p_value = 1;
};

// The best split of y and its permutation p-value (sequential: Besag & Clifford 1991).
SplitTest test_best_split(std::span<const double> y, const ChangePointOptions& o, stats::SplitMix64& rng, Scan& scan) {
  SplitTest t;
  const std::size_t m = static_cast<std::size_t>(std::max(2, o.min_segment));
  if (y.size() < 2 * m) return t;
  std::vector<Point> p = points_of(y);
  const auto [tau, q] = scan.best(p, m);
  t.tau = tau;
  t.statistic = q;
  if (!(q > 0)) return t;
  int exceed = 0, done = 0;
  while (done < o.max_permutations) {
    for (std::size_t i = p.size() - 1; i > 0; --i) std::swap(p[i], p[rng.below(i + 1)]);
    ++done;
    // A relative tolerance: permutations that tie the observed split (equal values) count as exceeding.
    if (scan.best(p, m).second >= q * (1 - 1e-12)) ++exceed;
    if (exceed >= o.stop_after_exceedances) {
      t.p_value = static_cast<double>(exceed) / done;
      return t;
    }
  }
  t.p_value = static_cast<double>(exceed + 1) / (done + 1);
  return t;
}

}  // namespace

std::vector<double> hampel_filter(std::span<const double> x, double sigmas) {
  std::vector<double> out(x.begin(), x.end());
  const std::size_t n = x.size();
  if (sigmas <= 0 || n < 3) return out;
  std::vector<double> diffs;
  for (std::size_t i = 1; i < n; ++i) diffs.push_back(std::fabs(x[i] - x[i - 1]));
  // Session-to-session differences: a level shift adds one large difference, which the median ignores.
  const double sd = kMadToSd * stats::median_inplace(diffs) / std::sqrt(2.0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t lo = i >= 2 ? i - 2 : 0, hi = std::min(n, i + 3);
    const double local = median_of(x.subspan(lo, hi - lo));
    if (std::fabs(x[i] - local) > sigmas * sd) out[i] = local;
  }
  return out;
}

std::vector<ChangePoint> e_divisive(std::span<const double> x, const ChangePointOptions& o) {
  const std::vector<double> y = hampel_filter(x, o.outlier_sigmas);
  stats::SplitMix64 rng(o.seed);
  Scan scan;
  std::vector<ChangePoint> found;
  // Binary segmentation: segments still to search, as [begin, end).
  std::vector<std::pair<std::size_t, std::size_t>> pending{{0, y.size()}};
  while (!pending.empty()) {
    const auto [begin, end] = pending.back();
    pending.pop_back();
    const SplitTest t = test_best_split(std::span<const double>(y).subspan(begin, end - begin), o, rng, scan);
    if (t.tau == 0 || t.p_value > o.max_p) continue;
    ChangePoint cp;
    cp.index = begin + t.tau;
    cp.p_value = t.p_value;
    cp.statistic = t.statistic;
    found.push_back(cp);
    pending.push_back({begin, cp.index});
    pending.push_back({cp.index, end});
  }
  std::sort(found.begin(), found.end(), [](const ChangePoint& a, const ChangePoint& b) { return a.index < b.index; });
  // Levels of the final segments, for the size of each step.
  for (std::size_t i = 0; i < found.size(); ++i) {
    const std::size_t before_begin = i == 0 ? 0 : found[i - 1].index;
    const std::size_t after_end = i + 1 < found.size() ? found[i + 1].index : y.size();
    found[i].level_before = median_of(std::span<const double>(y).subspan(before_begin, found[i].index - before_begin));
    found[i].level_after = median_of(std::span<const double>(y).subspan(found[i].index, after_end - found[i].index));
  }
  return found;
}

std::size_t sessions_for_a_change_point(const ChangePointOptions& options, std::size_t longest) {
  for (std::size_t n = 2 * static_cast<std::size_t>(std::max(2, options.min_segment)); n <= longest; ++n) {
    std::vector<double> step(n, 0.0);
    // A clean step with a little alternating noise, so that neither level has zero spread.
    for (std::size_t i = 0; i < n; ++i) step[i] = (i < n / 2 ? 0.0 : 1.0) + (i % 2 == 0 ? 1e-3 : -1e-3);
    if (!e_divisive(step, options).empty()) return n;
  }
  return 0;
}

// ---- common mode ----------------------------------------------------------------------------------

namespace {

std::unordered_map<std::int64_t, std::size_t> session_positions(const ClassHistory& h) {
  std::unordered_map<std::int64_t, std::size_t> pos;
  for (std::size_t i = 0; i < h.sessions.size(); ++i) pos.emplace(h.sessions[i].id, i);
  return pos;
}

// A median that has no logarithm (a phase that took 0 ms, a rate of 0) cannot be placed on the log
// slowness scale; such sessions are left out of the series rather than poisoning it with infinities.
bool has_log(double median) { return median > 0 && std::isfinite(median); }

std::vector<SeriesPoint> usable_points(const Series& series) {
  std::vector<SeriesPoint> out;
  out.reserve(series.points.size());
  for (const auto& p : series.points)
    if (has_log(p.median)) out.push_back(p);
  return out;
}

// FNV-1a: a seed per series that does not depend on the standard library's std::hash.
std::uint64_t series_seed(const SeriesKey& key, std::uint64_t base) {
  std::uint64_t h = 1469598103934665603ULL ^ base;
  for (const std::string* s : {&key.machine_class, &key.benchmark, &key.metric}) {
    for (unsigned char c : *s) h = (h ^ c) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;
  }
  return h;
}

}  // namespace

std::map<std::string, std::vector<double>> common_mode(const ClassHistory& h, std::size_t min_series) {
  const auto pos = session_positions(h);
  // suite -> per session, the deviations of its benchmarks' times from their own typical level.
  std::map<std::string, std::vector<std::vector<double>>> deviations;
  for (const auto& series : h.series) {
    if (series.key.metric != "time") continue;  // one vote per benchmark: phases move with their time
    const auto points = usable_points(series);
    if (points.empty()) continue;
    std::vector<double> ls;
    ls.reserve(points.size());
    for (const auto& p : points) ls.push_back(log_slowness(p.median, series.key.kind));
    const double typical = median_of(ls);
    auto& per_session = deviations[series.suite];
    per_session.resize(h.sessions.size());
    for (std::size_t i = 0; i < points.size(); ++i)
      per_session[pos.at(points[i].session_id)].push_back(ls[i] - typical);
  }
  std::map<std::string, std::vector<double>> out;
  for (auto& [suite, per_session] : deviations) {
    auto& shift = out[suite];
    shift.assign(h.sessions.size(), 0.0);
    for (std::size_t s = 0; s < per_session.size(); ++s)
      if (per_session[s].size() >= min_series) shift[s] = stats::median_inplace(per_session[s]);
  }
  return out;
}

namespace {

// h.series is sorted by key.
const std::string& suite_of(const ClassHistory& h, const SeriesKey& key) {
  const auto it = std::lower_bound(h.series.begin(), h.series.end(), key,
                                   [](const Series& s, const SeriesKey& k) { return s.key < k; });
  static const std::string none;
  return it != h.series.end() && it->key == key ? it->suite : none;
}

bool suite_has_common_mode(const std::vector<double>& shift) {
  return std::any_of(shift.begin(), shift.end(), [](double v) { return v != 0; });
}

// Change points of one sequence of log slowness -> SeriesChange entries.
void append_changes(const SeriesKey& key, const std::vector<double>& ls,
                    const std::vector<std::size_t>& session_of_point, const ClassHistory& h, const ChangeOptions& o,
                    bool removed, std::vector<SeriesChange>& out) {
  ChangePointOptions test = o.test;
  test.seed = series_seed(key, o.test.seed);
  const auto cps = e_divisive(ls, test);
  if (cps.empty()) return;
  const double first_level = cps.front().level_before;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    const auto& cp = cps[i];
    SeriesChange c;
    c.key = key;
    c.index = cp.index;
    const auto& now = h.sessions[session_of_point[cp.index]];
    const auto& before = h.sessions[session_of_point[cp.index - 1]];
    c.commit = now.info.commit;
    c.previous_commit = before.info.commit;
    c.time = now.info.time;
    c.session_id = now.id;
    c.step = std::expm1(cp.level_after - cp.level_before);
    c.cumulative = std::expm1(cp.level_after - first_level);
    c.p_value = cp.p_value;
    c.confidence = 1 - cp.p_value;
    c.sessions_before = cp.index - (i == 0 ? 0 : cps[i - 1].index);
    c.sessions_after = (i + 1 < cps.size() ? cps[i + 1].index : ls.size()) - cp.index;
    c.common_mode_removed = removed;
    if (std::fabs(c.step) >= o.min_change) out.push_back(std::move(c));
  }
}

}  // namespace

std::vector<SeriesChange> find_changes(const ClassHistory& h, const ChangeOptions& o) {
  const auto pos = session_positions(h);
  std::map<std::string, std::vector<double>> shifts;
  if (o.remove_common_mode) shifts = common_mode(h, o.min_series_for_common_mode);
  std::vector<SeriesChange> out;
  for (const auto& series : h.series) {
    const auto it = shifts.find(series.suite);
    const bool removed = it != shifts.end() && suite_has_common_mode(it->second);
    std::vector<double> ls;
    std::vector<std::size_t> session_of_point;
    for (const auto& p : usable_points(series)) {
      const std::size_t s = pos.at(p.session_id);
      ls.push_back(log_slowness(p.median, series.key.kind) - (removed ? it->second[s] : 0.0));
      session_of_point.push_back(s);
    }
    append_changes(series.key, ls, session_of_point, h, o, removed, out);
  }
  // The common mode itself: a change of a whole suite (or of the machines) is reported, labelled as such.
  for (const auto& [suite, shift] : shifts) {
    if (!suite_has_common_mode(shift)) continue;
    std::vector<std::size_t> sessions(shift.size());
    std::iota(sessions.begin(), sessions.end(), 0);
    append_changes({h.machine_class, suite + "/*", "common_mode", MetricKind::latency}, shift, sessions, h, o, false,
                   out);
  }
  std::sort(out.begin(), out.end(), [](const SeriesChange& a, const SeriesChange& b) {
    return std::tie(a.time, a.key) < std::tie(b.time, b.key);
  });
  return out;
}

// ---- learned noise ------------------------------------------------------------------------------------

namespace {

// The ordinary sample SD (n - 1).
double sample_sd(std::span<const double> x) {
  if (x.size() < 2) return 0.0;
  double mean = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  double ss = 0;
  for (double v : x) ss += (v - mean) * (v - mean);
  return std::sqrt(ss / static_cast<double>(x.size() - 1));
}

LearnedNoise noise_of_log_slowness(std::span<const double> ls, const NoiseOptions& o, std::uint64_t seed) {
  const std::size_t start = ls.size() > o.window ? ls.size() - o.window : 0;
  const auto window = ls.subspan(start);
  ChangePointOptions test = o.test;
  test.seed = seed;
  const auto cps = e_divisive(window, test);
  LearnedNoise n;
  const std::size_t since = cps.empty() ? 0 : cps.back().index;
  const auto used = window.subspan(since);
  n.since_index = start + since;
  n.sessions_used = used.size();
  n.degrees_of_freedom = static_cast<int>(used.size());
  n.relative_sd = used.size() >= 2 ? kMadToSd * stats::mad(used) : 0.0;
  n.plain_sd = used.size() >= 2 ? sample_sd(used) : 0.0;
  n.sufficient = used.size() >= o.min_sessions;
  return n;
}

}  // namespace

LearnedNoise learned_noise(std::span<const double> session_medians, MetricKind kind, const NoiseOptions& o) {
  std::vector<double> ls;
  ls.reserve(session_medians.size());
  for (double v : session_medians)
    if (has_log(v)) ls.push_back(log_slowness(v, kind));
  return noise_of_log_slowness(ls, o, o.test.seed);
}

std::map<SeriesKey, LearnedNoise> learned_noise(const ClassHistory& h, const NoiseOptions& o) {
  const auto pos = session_positions(h);
  std::map<std::string, std::vector<double>> shifts;
  if (o.remove_common_mode) shifts = common_mode(h, o.min_series_for_common_mode);
  std::map<SeriesKey, LearnedNoise> out;
  for (const auto& series : h.series) {
    const auto it = shifts.find(series.suite);
    std::vector<double> ls;
    for (const auto& p : usable_points(series))
      ls.push_back(log_slowness(p.median, series.key.kind) -
                   (it != shifts.end() ? it->second[pos.at(p.session_id)] : 0.0));
    out.emplace(series.key, noise_of_log_slowness(ls, o, series_seed(series.key, o.test.seed)));
  }
  return out;
}

LearnedNoiseTable learned_noise_table(const ClassHistory& h, const NoiseOptions& o, const std::string& source) {
  LearnedNoiseTable table;
  table.machine_class = h.machine_class;
  table.source = source;
  table.learned_at = now_iso8601();
  table.window = static_cast<int>(o.window);
  table.min_sessions = static_cast<int>(o.min_sessions);
  table.history_sessions = static_cast<int>(h.sessions.size());
  NoiseOptions plain = o;
  plain.remove_common_mode = false;
  for (const auto& [key, noise] : learned_noise(h, plain))
    table.bands[{key.benchmark, key.metric}] = {std::max(noise.relative_sd, noise.plain_sd),
                                                static_cast<int>(noise.sessions_used), std::nullopt, 0};
  NoiseOptions removed = o;
  removed.remove_common_mode = true;
  const auto shifts = common_mode(h, o.min_series_for_common_mode);
  for (const auto& [key, noise] : learned_noise(h, removed)) {
    const auto it = shifts.find(suite_of(h, key));
    if (it == shifts.end() || !suite_has_common_mode(it->second)) continue;
    auto& band = table.bands[{key.benchmark, key.metric}];
    band.relative_sd_common_mode = std::max(noise.relative_sd, noise.plain_sd);
    band.sessions_common_mode = static_cast<int>(noise.sessions_used);
  }
  return table;
}

}  // namespace perfgate::history
