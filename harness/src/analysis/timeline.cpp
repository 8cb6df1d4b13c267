#include "perfgate/timeline.hpp"

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perfgate/text.hpp"

namespace perfgate::timeline {

// ---- the recording -----------------------------------------------------------------------------------

namespace {

using nlohmann::json;

const json& field(const json& object, const char* name, const std::string& where) {
  if (!object.is_object() || !object.contains(name)) throw std::invalid_argument(where + "." + name + ": missing");
  return object.at(name);
}

std::uint64_t unsigned_field(const json& object, const char* name, const std::string& where) {
  const json& v = field(object, name, where);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
    throw std::invalid_argument(where + "." + name + ": not a non-negative integer");
  return v.get<std::uint64_t>();
}

std::string string_field(const json& object, const char* name, const std::string& where) {
  const json& v = field(object, name, where);
  if (!v.is_string()) throw std::invalid_argument(where + "." + name + ": not a string");
  return v.get<std::string>();
}

const json& array_field(const json& object, const char* name, const std::string& where) {
  const json& v = field(object, name, where);
  if (!v.is_array()) throw std::invalid_argument(where + "." + name + ": not an array");
  return v;
}

Kind kind_of(const std::string& text, const std::string& where) {
  if (text == "kernel") return Kind::kernel;
  if (text == "memcpy") return Kind::memcpy;
  if (text == "memset") return Kind::memset;
  throw std::invalid_argument(where + ".kind: '" + text + "' is not kernel, memcpy or memset");
}

void check_interval(std::uint64_t start, std::uint64_t end, const std::string& where) {
  if (end < start) throw std::invalid_argument(fmt::format("{}: end {} before start {}", where, end, start));
}

Activity activity_of(const json& a, const std::string& where) {
  Activity x;
  x.kind = kind_of(string_field(a, "kind", where), where);
  x.name = string_field(a, "name", where);
  x.stream = static_cast<std::uint32_t>(unsigned_field(a, "stream", where));
  x.start_ns = unsigned_field(a, "start", where);
  x.end_ns = unsigned_field(a, "end", where);
  x.correlation = static_cast<std::uint32_t>(unsigned_field(a, "correlation", where));
  if (a.contains("bytes")) x.bytes = unsigned_field(a, "bytes", where);
  check_interval(x.start_ns, x.end_ns, where);
  return x;
}

ApiCall api_call_of(const json& a, const std::string& where) {
  ApiCall x;
  x.name = string_field(a, "name", where);
  x.start_ns = unsigned_field(a, "start", where);
  x.end_ns = unsigned_field(a, "end", where);
  x.correlation = static_cast<std::uint32_t>(unsigned_field(a, "correlation", where));
  check_interval(x.start_ns, x.end_ns, where);
  return x;
}

Range range_of(const json& a, const std::string& where) {
  Range x;
  x.name = string_field(a, "name", where);
  x.start_ns = unsigned_field(a, "start", where);
  x.end_ns = unsigned_field(a, "end", where);
  x.depth = static_cast<int>(unsigned_field(a, "depth", where));
  check_interval(x.start_ns, x.end_ns, where);
  return x;
}

template <typename T, typename Read>
std::vector<T> read_array(const json& doc, const char* name, const std::string& source, Read read) {
  std::vector<T> out;
  const json& items = array_field(doc, name, source);
  out.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i)
    out.push_back(read(items[i], fmt::format("{}: {}[{}]", source, name, i)));
  return out;
}

}  // namespace

Recording parse_recording(std::string_view text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw std::invalid_argument(fmt::format("{}: not a timeline recording (JSON: {})", source, e.what()));
  }
  const std::string where = source + ": ";
  if (unsigned_field(doc, "perfgate_timeline", where) != 1)
    throw std::invalid_argument(where + "perfgate_timeline: version is not 1");
  Recording r;
  if (string_field(doc, "status", where) != "recorded") {
    r.unavailable = string_field(doc, "reason", where);
    return r;
  }
  if (doc.contains("dropped")) r.dropped = unsigned_field(doc, "dropped", where);
  r.activities = read_array<Activity>(doc, "activities", source, activity_of);
  r.api_calls = read_array<ApiCall>(doc, "api", source, api_call_of);
  r.ranges = read_array<Range>(doc, "ranges", source, range_of);
  return r;
}

// ---- splitting into repetitions --------------------------------------------------------------------------

bool range_matches(const std::string& pattern, const std::string& name) {
  std::string re;
  for (char c : pattern) {
    if (c == 'X' || c == 'Y') re += "[0-9]+";
    else if (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_') re += c;
    else re += std::string("\\") + c;
  }
  return std::regex_match(name, std::regex(re));
}

namespace {

bool is_fixture_range(const Range& r, const std::vector<std::string>& patterns) {
  if (r.depth != 0) return false;
  if (patterns.empty()) return true;
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) { return range_matches(p, r.name); });
}

struct Window {
  std::uint64_t start, end;
  std::size_t step;
};

// The top-level fixture ranges, each tagged with the repetition it belongs to; sorted by start.
std::vector<Window> step_windows(const std::vector<Range>& ranges, const std::vector<std::string>& patterns,
                                 std::size_t& steps) {
  std::vector<const Range*> top;
  for (const auto& r : ranges)
    if (is_fixture_range(r, patterns)) top.push_back(&r);
  std::sort(top.begin(), top.end(), [](const Range* a, const Range* b) { return a->start_ns < b->start_ns; });
  std::vector<Window> out;
  steps = 0;
  if (top.empty()) return out;
  const std::string anchor = top.front()->name;
  for (const Range* r : top) {
    if (r->name == anchor) ++steps;
    out.push_back({r->start_ns, r->end_ns, steps - 1});
  }
  return out;
}

// When each activity's work was asked for: the start of the API call with its correlation id, or its own
// start where no call was recorded.
std::uint64_t launch_time(const Activity& a, const std::map<std::uint32_t, const ApiCall*>& calls) {
  const auto it = calls.find(a.correlation);
  return it == calls.end() ? a.start_ns : it->second->start_ns;
}

const Window* window_at(const std::vector<Window>& windows, std::uint64_t t) {
  auto it =
      std::upper_bound(windows.begin(), windows.end(), t, [](std::uint64_t x, const Window& w) { return x < w.start; });
  if (it == windows.begin()) return nullptr;
  --it;
  return t <= it->end ? &*it : nullptr;
}

// The innermost range open at `t` (ranges sorted by start; they nest, so walking back finds it first).
std::string range_at(const std::vector<const Range*>& ranges, std::uint64_t t) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), t,
                             [](std::uint64_t x, const Range* r) { return x < r->start_ns; });
  for (int walked = 0; it != ranges.begin() && walked < 256; ++walked) {
    --it;
    if ((*it)->end_ns >= t) return (*it)->name;
  }
  return "";
}

bool is_sync_call(const ApiCall& c) { return c.name.find("ynchronize") != std::string::npos; }

struct Lookup {
  std::map<std::uint32_t, const ApiCall*> calls;
  std::vector<const ApiCall*> syncs;  // by end
  std::vector<const Range*> ranges;   // by start
};

Lookup make_lookup(const Recording& r) {
  Lookup l;
  for (const auto& c : r.api_calls) {
    l.calls.emplace(c.correlation, &c);
    if (is_sync_call(c)) l.syncs.push_back(&c);
  }
  std::sort(l.syncs.begin(), l.syncs.end(), [](const ApiCall* a, const ApiCall* b) { return a->end_ns < b->end_ns; });
  for (const auto& x : r.ranges) l.ranges.push_back(&x);
  std::sort(l.ranges.begin(), l.ranges.end(), [](const Range* a, const Range* b) { return a->start_ns < b->start_ns; });
  return l;
}

// A host synchronisation that returned between the GPU going idle and the next launch: the host waited for
// the GPU, then did something else before it queued more.
const ApiCall* sync_between(const Lookup& l, std::uint64_t from, std::uint64_t to) {
  auto it = std::lower_bound(l.syncs.begin(), l.syncs.end(), from,
                             [](const ApiCall* c, std::uint64_t x) { return c->end_ns < x; });
  return it != l.syncs.end() && (*it)->end_ns <= to ? *it : nullptr;
}

// Busy time, concurrency and copy/compute overlap from one sweep over the activities' starts and ends.
void sweep_overlap(Step& s) {
  struct Edge {
    std::uint64_t t;
    int delta;
    bool copy;
  };
  std::vector<Edge> edges;
  for (const Activity* a : s.activities) {
    edges.push_back({a->start_ns, +1, a->is_copy()});
    edges.push_back({a->end_ns, -1, a->is_copy()});
  }
  // Ends before starts at one instant: back-to-back work does not overlap.
  std::sort(edges.begin(), edges.end(),
            [](const Edge& a, const Edge& b) { return a.t != b.t ? a.t < b.t : a.delta < b.delta; });
  int kernels = 0, copies = 0;
  for (std::size_t i = 0; i < edges.size(); ++i) {
    (edges[i].copy ? copies : kernels) += edges[i].delta;
    if (i + 1 == edges.size()) break;
    const auto len = static_cast<double>(edges[i + 1].t - edges[i].t);
    const int active = kernels + copies;
    if (active >= 1) s.busy_ns += len;
    if (active >= 2) {
      s.overlap_ns += (active - 1) * len;
      s.kernel_overlapped_ns += kernels * len;
    }
    if (kernels >= 1 && copies >= 1) s.copy_compute_overlap_ns += len;
  }
}

void find_gaps(Step& s, const Lookup& l) {
  std::uint64_t busy_until = 0;
  std::size_t last = 0;  // the activity that ends at busy_until
  for (std::size_t i = 0; i < s.activities.size(); ++i) {
    const Activity& a = *s.activities[i];
    if (i > 0 && a.start_ns > busy_until) {
      Gap g;
      g.start_ns = static_cast<double>(busy_until - s.start_ns);
      g.length_ns = static_cast<double>(a.start_ns - busy_until);
      g.after = s.activities[last]->name;
      g.after_range = s.activity_ranges[last];
      g.stream = s.activities[last]->stream;
      const std::uint64_t launched = launch_time(a, l.calls);
      // The host's and the GPU's timestamps agree to a few microseconds: a sync that returned just before the
      // GPU's last end still ended the work.
      constexpr std::uint64_t kClockSlack = 20'000;
      const std::uint64_t from = busy_until > kClockSlack ? busy_until - kClockSlack : 0;
      const ApiCall* sync = launched > busy_until ? sync_between(l, from, launched) : nullptr;
      g.cause = sync != nullptr ? GapCause::sync : GapCause::launch;
      if (sync != nullptr) g.sync_call = sync->name;
      (g.cause == GapCause::sync ? s.sync_gap_ns : s.launch_gap_ns) += g.length_ns;
      s.gaps.push_back(std::move(g));
    }
    if (i == 0 || a.end_ns > busy_until) {
      busy_until = a.end_ns;
      last = i;
    }
  }
}

// Walking back from the end of the repetition: at each instant the path is the running activity that started
// first (the one the others ran beside), up to its start; where nothing ran, it is idle back to the last end.
// The path's pieces add up to the span.
void critical_path(Step& s) {
  std::uint64_t t = s.end_ns;
  while (t > s.start_ns) {
    const Activity* owner = nullptr;
    std::uint64_t last_end = s.start_ns;
    for (const Activity* a : s.activities) {
      if (a->start_ns < t && a->end_ns >= t && (owner == nullptr || a->start_ns < owner->start_ns)) owner = a;
      if (a->end_ns < t) last_end = std::max(last_end, a->end_ns);
    }
    if (owner != nullptr) {
      s.critical_ns[owner->name] += static_cast<double>(t - owner->start_ns);
      t = owner->start_ns;
    } else {
      s.critical_ns["(idle)"] += static_cast<double>(t - last_end);
      t = last_end;
    }
  }
}

void measure_step(Step& s, const Lookup& l) {
  if (s.activities.empty()) return;
  s.start_ns = s.activities.front()->start_ns;
  std::set<std::uint32_t> launches;
  for (const Activity* a : s.activities) {
    s.end_ns = std::max(s.end_ns, a->end_ns);
    (a->is_copy() ? s.copy_ns : s.kernel_ns) += a->duration();
    launches.insert(a->correlation);
    if (!a->is_copy()) {
      s.kernel_time_ns[a->name] += a->duration();
      ++s.kernel_count[a->name];
    }
  }
  s.launches = static_cast<int>(launches.size());
  s.span_ns = static_cast<double>(s.end_ns - s.start_ns);
  sweep_overlap(s);
  find_gaps(s, l);
  critical_path(s);
}

}  // namespace

std::vector<Step> split_steps(const Recording& r, const std::vector<std::string>& fixture_ranges) {
  std::size_t count = 0;
  const std::vector<Window> windows = step_windows(r.ranges, fixture_ranges, count);
  std::vector<Step> steps(count);
  const Lookup l = make_lookup(r);
  std::vector<const Activity*> by_start;
  for (const auto& a : r.activities) by_start.push_back(&a);
  std::sort(by_start.begin(), by_start.end(),
            [](const Activity* a, const Activity* b) { return a->start_ns < b->start_ns; });
  for (const Activity* a : by_start) {
    const std::uint64_t t = launch_time(*a, l.calls);
    if (const Window* w = window_at(windows, t)) {
      steps[w->step].activities.push_back(a);
      steps[w->step].activity_ranges.push_back(range_at(l.ranges, t));
    }
  }
  for (auto& s : steps) measure_step(s, l);
  steps.erase(std::remove_if(steps.begin(), steps.end(), [](const Step& s) { return s.activities.empty(); }),
              steps.end());
  return steps;
}

// ---- a side's summary --------------------------------------------------------------------------------

double Summary::copy_critical_ns() const {
  double total = 0;
  for (const auto& [name, ns] : critical_ns)
    if (name.rfind("memcpy", 0) == 0 || name.rfind("memset", 0) == 0) total += ns;
  return total;
}

namespace {

double median_span(const std::vector<Step>& steps) {
  std::vector<double> spans;
  spans.reserve(steps.size());
  for (const auto& s : steps) spans.push_back(s.span_ns);
  std::nth_element(spans.begin(), spans.begin() + static_cast<std::ptrdiff_t>(spans.size() / 2), spans.end());
  return spans[spans.size() / 2];
}

void add_step(Summary& m, const Step& s) {
  ++m.steps;
  m.span_ns += s.span_ns;
  m.busy_ns += s.busy_ns;
  m.kernel_ns += s.kernel_ns;
  m.copy_ns += s.copy_ns;
  m.overlap_ns += s.overlap_ns;
  m.kernel_overlapped_ns += s.kernel_overlapped_ns;
  m.copy_compute_overlap_ns += s.copy_compute_overlap_ns;
  m.sync_gap_ns += s.sync_gap_ns;
  m.launch_gap_ns += s.launch_gap_ns;
  m.gaps += static_cast<double>(s.gaps.size());
  for (const auto& g : s.gaps) m.largest_gap_ns = std::max(m.largest_gap_ns, g.length_ns);
  m.launches += s.launches;
  for (const auto& [n, c] : s.kernel_count) m.kernels += c;
  for (const auto& [n, ns] : s.critical_ns) m.critical_ns[n] += ns;
  for (const auto& [n, ns] : s.kernel_time_ns) m.kernel_time_ns[n] += ns;
  for (const auto& [n, c] : s.kernel_count) m.kernel_count[n] += c;
}

void divide(Summary& m) {
  const double n = m.steps;
  for (double* x : {&m.span_ns, &m.busy_ns, &m.kernel_ns, &m.copy_ns, &m.overlap_ns, &m.kernel_overlapped_ns,
                    &m.copy_compute_overlap_ns, &m.sync_gap_ns, &m.launch_gap_ns, &m.gaps, &m.launches, &m.kernels})
    *x /= n;
  for (auto* map : {&m.critical_ns, &m.kernel_time_ns, &m.kernel_count})
    for (auto& [k, v] : *map) v /= n;
}

}  // namespace

Summary summarise(const std::vector<Step>& steps) {
  Summary m;
  if (steps.empty()) return m;
  const double median = median_span(steps);
  // A process's first repetitions load modules and warm caches: those of 3x the median span are left out.
  double closest = -1;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].span_ns > 3 * median) continue;
    add_step(m, steps[i]);
    const double distance = std::abs(steps[i].span_ns - median);
    if (closest < 0 || distance < closest) {
      closest = distance;
      m.median_step = i;
    }
  }
  divide(m);
  const auto& gaps = steps[m.median_step].gaps;
  const auto largest = std::max_element(gaps.begin(), gaps.end(), [](const Gap& a, const Gap& b) {
    return (a.cause == GapCause::sync) != (b.cause == GapCause::sync) ? b.cause == GapCause::sync
                                                                      : a.length_ns < b.length_ns;
  });
  if (largest != gaps.end() && largest->cause == GapCause::sync) m.typical_sync_gap = *largest;
  return m;
}

// ---- two sides --------------------------------------------------------------------------------------------

Terms change_terms(const Summary& b, const Summary& a) {
  Terms t;
  t.span = a.span_ns - b.span_ns;
  t.kernels = a.kernel_ns - b.kernel_ns;
  t.copies = a.copy_ns - b.copy_ns;
  t.lost_overlap = b.overlap_ns - a.overlap_ns;
  t.sync_gaps = a.sync_gap_ns - b.sync_gap_ns;
  t.launch_gaps = a.launch_gap_ns - b.launch_gap_ns;
  t.copy_critical = a.copy_critical_ns() - b.copy_critical_ns();
  return t;
}

bool kernels_account_for(double kernels, double wall) {
  if (wall <= 0) return true;  // no wall-time growth for the timeline to explain
  return kernels >= 0.5 * wall;
}

namespace {

// The kernel whose summed time per repetition grew the most.
std::string slowest_kernel_text(const Summary& b, const Summary& a) {
  std::string best;
  double grew = 0;
  for (const auto& [name, ns] : a.kernel_time_ns) {
    const auto it = b.kernel_time_ns.find(name);
    const double before = it == b.kernel_time_ns.end() ? 0 : it->second;
    if (ns - before > grew) {
      grew = ns - before;
      best = name;
    }
  }
  if (best.empty()) return "";
  const auto count_of = [](const Summary& s, const std::string& n) {
    const auto it = s.kernel_count.find(n);
    return it == s.kernel_count.end() ? 0.0 : it->second;
  };
  const auto time_of = [](const Summary& s, const std::string& n) {
    const auto it = s.kernel_time_ns.find(n);
    return it == s.kernel_time_ns.end() ? 0.0 : it->second;
  };
  return fmt::format("; most of it kernel `{}`: {} -> {} per repetition ({:.0f} -> {:.0f} launches)", shorten(best),
                     ms_text(time_of(b, best)), ms_text(time_of(a, best)), count_of(b, best), count_of(a, best));
}

std::string gap_place(const Gap& g) {
  return fmt::format("after `{}`{} on stream {}", shorten(g.after, 60),
                     g.after_range.empty() ? "" : fmt::format(" (range {})", g.after_range), g.stream);
}

void add_causes(TimelineDiff& d, const Summary& b, const Summary& a) {
  const Terms& t = d.terms;
  const std::string of_wall = fmt::format("; the repetition {:+.3f} ms", t.span / 1e6);
  if (t.kernels > 0)
    d.causes.emplace_back(
        t.kernels, fmt::format("kernels' summed time {} -> {} per repetition ({:+.3f} ms{}){}", ms_text(b.kernel_ns),
                               ms_text(a.kernel_ns), t.kernels / 1e6, of_wall, slowest_kernel_text(b, a)));
  // Before lost overlap: where a copy stopped overlapping compute, both explain the same time, and the copy on
  // the critical path is the more precise account (the sort below keeps this order on ties).
  if (t.copy_critical > 0 && a.copy_critical_ns() / a.span_ns > b.copy_critical_ns() / b.span_ns + 0.05)
    d.causes.emplace_back(
        t.copy_critical,
        fmt::format("a copy moved onto the critical path: copies {} -> {} of it ({} -> {} per "
                    "repetition), copy/compute overlap {} -> {}",
                    share_text(b.copy_critical_ns(), b.span_ns), share_text(a.copy_critical_ns(), a.span_ns),
                    ms_text(b.copy_critical_ns()), ms_text(a.copy_critical_ns()), ms_text(b.copy_compute_overlap_ns),
                    ms_text(a.copy_compute_overlap_ns)));
  if (t.lost_overlap > 0)
    d.causes.emplace_back(
        t.lost_overlap,
        fmt::format("lost overlap: work that ran concurrently now runs one after another; concurrent time {} -> {} "
                    "per repetition ({:+.3f} ms{}), kernel time overlapped by other work {} -> {}",
                    ms_text(b.overlap_ns), ms_text(a.overlap_ns), t.lost_overlap / 1e6, of_wall,
                    share_text(b.kernel_overlapped_ns, b.kernel_ns), share_text(a.kernel_overlapped_ns, a.kernel_ns)));
  if (t.sync_gaps > 0) {
    std::string where;
    if (a.typical_sync_gap)
      where = fmt::format(", the largest {} {} (the host waited in {})", ms_text(a.typical_sync_gap->length_ns),
                          gap_place(*a.typical_sync_gap), a.typical_sync_gap->sync_call);
    d.causes.emplace_back(
        t.sync_gaps, fmt::format("new idle gaps after a host synchronisation: {} -> {} per repetition ({:+.3f} ms"
                                 "{}){}",
                                 ms_text(b.sync_gap_ns), ms_text(a.sync_gap_ns), t.sync_gaps / 1e6, of_wall, where));
  }
  if (t.launch_gaps > 0)
    d.causes.emplace_back(
        t.launch_gaps,
        fmt::format("{}: the GPU waits longer for the host to launch; host launches {:.0f} -> {:.0f} per repetition, "
                    "launch gaps {} -> {} ({:+.3f} ms{}){}",
                    a.launches > b.launches ? "more launches and launch gaps" : "longer launch gaps", b.launches,
                    a.launches, ms_text(b.launch_gap_ns), ms_text(a.launch_gap_ns), t.launch_gaps / 1e6, of_wall,
                    a.launches > 2 * b.launches ? " (a CUDA graph lost, or work split into more launches)" : ""));
  if (t.copies > 0)
    d.causes.emplace_back(t.copies, fmt::format("copies' summed time {} -> {} per repetition ({:+.3f} ms{})",
                                                ms_text(b.copy_ns), ms_text(a.copy_ns), t.copies / 1e6, of_wall));
  std::stable_sort(d.causes.begin(), d.causes.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
}

}  // namespace

std::string ms_text(double ns) { return fmt::format("{:.3f} ms", ns / 1e6); }

std::string share_text(double part, double whole) {
  return whole > 0 ? fmt::format("{:.0f}%", 100 * part / whole) : "-";
}

TimelineDiff diff_timelines(const Summary& before, const Summary& after) {
  TimelineDiff d;
  d.terms = change_terms(before, after);
  d.kernels_explain = kernels_account_for(d.terms.kernels, d.terms.span);
  add_causes(d, before, after);
  d.before = before;
  d.after = after;
  return d;
}

}  // namespace perfgate::timeline
