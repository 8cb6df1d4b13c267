// The history dashboard: the data files of the static site (perfgate/dashboard.hpp). The page itself is
// fixed text (dashboard_assets.cpp); what changes with the history is written here with nlohmann::json.
#include "perfgate/dashboard.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perfgate/baseline_store.hpp"
#include "perfgate/change_points.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/learned_noise.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/stats.hpp"

namespace perfgate::history {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Six significant digits: no measurement is more precise, and the shortest round-trip form nlohmann
// writes for the rounded value is then at most that long (the data files are a third of the size).
double round6(double v) {
  if (!std::isfinite(v) || v == 0) return v;
  static const double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                  1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  const int shift = 5 - static_cast<int>(std::floor(std::log10(std::fabs(v))));
  if (shift >= 0 && shift <= 22) return std::round(v * kPow10[shift]) / kPow10[shift];
  if (shift < 0 && -shift <= 22) return std::round(v / kPow10[-shift]) * kPow10[-shift];
  return v;
}

// Writes `content` as `perfgate.<callback>(<json>);`, the form a page opened from file:// can load.
std::uintmax_t write_script(const fs::path& file, const std::string& call, const json& data) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) throw std::system_error(errno, std::generic_category(), "cannot write " + file.string());
  const std::string text = "perfgate." + call + "(" + data.dump() + ");\n";
  out << text;
  if (!out.flush()) throw std::system_error(errno, std::generic_category(), "cannot write " + file.string());
  return text.size();
}

std::uintmax_t write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) throw std::system_error(errno, std::generic_category(), "cannot write " + file.string());
  return text.size();
}

std::string series_name(const std::string& benchmark, const std::string& metric) { return benchmark + '\n' + metric; }

// A stored baseline's level of one series, and the suite of the file that holds it.
struct StoredLevel {
  std::string suite;
  double level = 0;
};

// The result files of a baseline folder (not its thresholds or noise snapshot), in name order.
std::vector<fs::path> baseline_files_in(const fs::path& folder) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return files;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const fs::path& f = entry.path();
    const bool not_results = f.filename() == "thresholds.json" || f.filename() == kNoiseSnapshotFile;
    if (entry.is_regular_file(ec) && f.extension() == ".json" && !not_results) files.push_back(f);
  }
  std::sort(files.begin(), files.end());
  return files;
}

// benchmark '\n' metric -> its level in the stored baselines of a history class, "<class>.<generation>" or
// "<class>": the generation's folder, then the class level's files recorded on that generation (a class-level file
// may hold another one, up to 1.6x apart). A series' suite is the file that holds it: a plain binary's baseline is
// filed under the binary's name while its benchmarks' names carry families of their own (BM_Sort/1024).
std::map<std::string, StoredLevel> stored_levels(const fs::path& dir, const std::string& history_class) {
  const auto dot = history_class.find('.');
  const std::string machine_class = history_class.substr(0, dot);
  const std::string generation = dot == std::string::npos ? "" : history_class.substr(dot + 1);
  const fs::path class_level = baseline_path(dir, machine_class, "suite").parent_path();
  std::vector<fs::path> files =
      generation.empty() ? baseline_files_in(class_level) : baseline_files_in(class_level / generation);
  if (!generation.empty())
    for (const auto& f : baseline_files_in(class_level)) files.push_back(f);
  SessionInfo info;
  info.machine_class = machine_class;
  info.commit = "baseline";
  info.time = "2000-01-01T00:00:00Z";
  std::map<std::string, StoredLevel> levels;
  std::set<std::string> suites_seen;
  for (const auto& file : files) {
    const ResultSet stored = load_results({file.string()});
    const RunContext first = stored.contexts.empty() ? RunContext{} : stored.contexts.front();
    const bool class_level_file = file.parent_path() == class_level;
    if (!generation.empty() && class_level_file &&
        cpu_generation_key(first.get(context_keys::kCpuSignature)) != generation)
      continue;
    std::string suite = first.get(context_keys::kSuite);
    if (suite.empty()) suite = file.stem().string();
    if (!suites_seen.insert(suite).second) continue;  // the generation's own file first
    for (const auto& s : make_session_record(stored, info).series)
      levels.emplace(series_name(s.benchmark, s.metric), StoredLevel{suite, s.median});
  }
  return levels;
}

// The points of a series that have a log slowness (median > 0): what the change points and the learned
// noise index into.
std::vector<std::size_t> usable_positions(const Series& series) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < series.points.size(); ++i)
    if (series.points[i].median > 0) out.push_back(i);
  return out;
}

struct SeriesView {
  const Series* series = nullptr;
  std::string suite;
  std::vector<const SeriesChange*> changes;
  LearnedNoise noise;
  std::optional<double> baseline;
};

// The change points of a series on the page, with the index of the point each starts at (appended to starts).
json change_points_json(const SeriesView& v, const std::map<std::int64_t, std::size_t>& point_of_session,
                        std::vector<std::size_t>& starts) {
  json changes = json::array();
  for (const SeriesChange* c : v.changes) {
    const auto it = point_of_session.find(c->session_id);
    if (it == point_of_session.end()) continue;
    starts.push_back(it->second);
    changes.push_back({{"i", it->second},
                       {"commit", c->commit},
                       {"previous", c->previous_commit},
                       {"time", c->time},
                       {"step", round6(c->step)},
                       {"cumulative", round6(c->cumulative)},
                       {"p", c->p_value}});
  }
  return changes;
}

// Level of each segment between change points: the median of its session medians (what the change point's step
// compares). starts: the first point of each segment, then the number of points.
json segments_json(const Series& s, const std::vector<std::size_t>& starts) {
  json segments = json::array();
  for (std::size_t k = 0; k + 1 < starts.size(); ++k) {
    std::vector<double> segment;
    for (std::size_t i = starts[k]; i < starts[k + 1]; ++i) segment.push_back(s.points[i].median);
    if (!segment.empty()) segments.push_back({{"from", starts[k]}, {"level", round6(stats::median_inplace(segment))}});
  }
  return segments;
}

// A series measured in every session of the window (the usual case) needs only its first position.
void set_positions(json& out, json positions) {
  bool contiguous = true;
  for (std::size_t i = 0; i < positions.size() && contiguous; ++i)
    contiguous = positions[i].get<std::size_t>() == positions[0].get<std::size_t>() + i;
  if (contiguous && !positions.empty()) out["first"] = positions[0];
  else out["s"] = std::move(positions);
}

// The learned band: the level since the window's last change point, +-2 learned SDs (log scale), over the
// sessions it was learned from.
void set_learned_band(json& out, const SeriesView& v) {
  const Series& s = *v.series;
  const auto usable = usable_positions(s);
  if (v.noise.sessions_used == 0 || v.noise.since_index >= usable.size()) return;
  std::vector<double> used;
  for (std::size_t k = v.noise.since_index; k < usable.size(); ++k) used.push_back(s.points[usable[k]].median);
  const double centre = stats::median_inplace(used);
  out["band"] = {{"from", usable[v.noise.since_index]},
                 {"centre", round6(centre)},
                 {"low", round6(centre * std::exp(-2 * v.noise.relative_sd))},
                 {"high", round6(centre * std::exp(2 * v.noise.relative_sd))},
                 {"relative_sd", round6(v.noise.relative_sd)},
                 {"sessions", v.noise.sessions_used},
                 {"sufficient", v.noise.sufficient}};
}

// The points of one series for the page: session positions ("first" when they are consecutive, else "s"),
// medians, spreads, the level of each segment between change points, the change points and the learned band.
json series_points(const SeriesView& v, const std::map<std::int64_t, std::size_t>& session_position) {
  const Series& s = *v.series;
  json positions = json::array(), medians = json::array(), low = json::array(), high = json::array();
  std::map<std::int64_t, std::size_t> point_of_session;
  for (std::size_t i = 0; i < s.points.size(); ++i) {
    const SeriesPoint& p = s.points[i];
    positions.push_back(session_position.at(p.session_id));
    medians.push_back(round6(p.median));
    low.push_back(round6(p.low));
    high.push_back(round6(p.high));
    point_of_session[p.session_id] = i;
  }
  std::vector<std::size_t> starts = {0};
  json changes = change_points_json(v, point_of_session, starts);
  starts.push_back(s.points.size());
  json out = {{"m", medians}, {"lo", low}, {"hi", high}, {"segments", segments_json(s, starts)}, {"changes", changes}};
  set_positions(out, std::move(positions));
  set_learned_band(out, v);
  if (v.baseline) out["baseline"] = round6(*v.baseline);
  return out;
}

json sessions_json(const ClassHistory& h) {
  json commit = json::array(), time = json::array(), branch = json::array(), host = json::array(), id = json::array();
  for (const auto& s : h.sessions) {
    id.push_back(s.id);
    commit.push_back(s.info.commit);
    time.push_back(s.info.time);
    branch.push_back(s.info.branch);
    host.push_back(s.info.host);
  }
  return {{"class", h.machine_class}, {"id", id},    {"commit", commit}, {"time", time},
          {"branch", branch},         {"host", host}};
}

// One row of the index: what the overview lists and filters without loading any points.
json index_row(std::size_t id, std::size_t class_index, std::size_t suite_index, std::size_t chunk,
               const SeriesView& v) {
  const Series& s = *v.series;
  json row = {{"id", id},
              {"class", class_index},
              {"suite", suite_index},
              {"chunk", chunk},
              {"benchmark", s.key.benchmark},
              {"metric", s.key.metric},
              {"kind", metric_kind_name(s.key.kind)},
              {"points", s.points.size()},
              {"last", s.points.empty() ? json(nullptr) : json(round6(s.points.back().median))},
              {"changes", v.changes.size()}};
  if (!v.changes.empty()) {
    row["last_step"] = round6(v.changes.back()->step);
    row["cumulative"] = round6(v.changes.back()->cumulative);
  }
  if (v.noise.sufficient) row["noise"] = round6(v.noise.relative_sd);
  if (v.baseline) row["baseline"] = round6(*v.baseline);
  return row;
}

void write_assets(const DashboardOptions& o, DashboardSummary& summary) {
  std::error_code ec;
  if (!fs::is_regular_file(o.chartjs, ec))
    throw InputError(o.chartjs.string(), "", "--chartjs",
                     "Chart.js not found: install Debian's libjs-chart.js (ci/setup.sh does) or pass --chartjs FILE");
  fs::create_directories(o.out_dir / "vendor");
  fs::copy_file(o.chartjs, o.out_dir / "vendor" / "chart.min.js", fs::copy_options::overwrite_existing);
  summary.bytes += fs::file_size(o.out_dir / "vendor" / "chart.min.js");
  // Chart.js is MIT licensed: its notice travels with the copy.
  const fs::path copyright = "/usr/share/doc/libjs-chart.js/copyright";
  if (fs::is_regular_file(copyright, ec))
    fs::copy_file(copyright, o.out_dir / "vendor" / "chart.js.copyright", fs::copy_options::overwrite_existing, ec);
  summary.bytes += write_text(o.out_dir / "index.html", dashboard_index_html());
  summary.bytes += write_text(o.out_dir / "dashboard.js", dashboard_script());
  summary.bytes += write_text(o.out_dir / "style.css", dashboard_style());
}

// The data files of the page, class by class: sessions, series in chunks, and the index that lists them.
class DashboardWriter {
 public:
  DashboardWriter(const DashboardOptions& o, DashboardSummary& summary)
      : o_(o), summary_(summary), data_(o.out_dir / "data") {}

  void start() {
    fs::remove_all(data_);
    fs::create_directories(data_);
  }

  void write_class(std::size_t ci, const ClassHistory& h) {
    std::map<std::int64_t, std::size_t> position;
    for (std::size_t i = 0; i < h.sessions.size(); ++i) position[h.sessions[i].id] = i;
    summary_.bytes += write_script(data_ / fmt::format("sessions-{}.js", ci), "sessions",
                                   json{{"k", ci}, {"sessions", sessions_json(h)}});
    summary_.sessions += h.sessions.size();
    class_rows_.push_back({{"name", h.machine_class},
                           {"sessions", h.sessions.size()},
                           {"first", h.sessions.empty() ? "" : h.sessions.front().info.time},
                           {"last", h.sessions.empty() ? "" : h.sessions.back().info.time}});
    const std::vector<SeriesChange> changes = find_changes(h);
    for (auto& [suite, views] : views_by_suite(h, changes_by_series(ci, changes))) {
      if (!suite_index_.count(suite)) {
        suite_index_[suite] = suites_.size();
        suites_.push_back(suite);
      }
      write_suite(ci, suite, views, position);
    }
  }

  void write_index(const std::string& history) {
    const json index = {{"generated", now_iso8601()},
                        {"history", history},
                        {"commit_url", o_.commit_url},
                        {"classes", class_rows_},
                        {"suites", suites_},
                        {"suite_changes", suite_changes_},
                        {"series", rows_}};
    summary_.bytes += write_script(data_ / "index.js", "index", index);
  }

 private:
  // The change points of each series; the suites' common-mode changes also go to the index.
  std::map<SeriesKey, std::vector<const SeriesChange*>> changes_by_series(std::size_t ci,
                                                                          const std::vector<SeriesChange>& changes) {
    std::map<SeriesKey, std::vector<const SeriesChange*>> changes_of;
    for (const auto& c : changes) {
      changes_of[c.key].push_back(&c);
      if (c.key.metric == "common_mode")
        suite_changes_.push_back({{"class", ci},
                                  {"suite", c.key.benchmark},
                                  {"commit", c.commit},
                                  {"previous", c.previous_commit},
                                  {"time", c.time},
                                  {"step", round6(c.step)}});
    }
    return changes_of;
  }

  // Each series of the class with its change points, learned noise and baseline level, by suite.
  std::map<std::string, std::vector<SeriesView>> views_by_suite(
      const ClassHistory& h, const std::map<SeriesKey, std::vector<const SeriesChange*>>& changes_of) const {
    NoiseOptions noise_options;
    noise_options.window = o_.noise_window;
    const auto noise = learned_noise(h, noise_options);
    std::map<std::string, std::vector<SeriesView>> by_suite;
    const std::map<std::string, StoredLevel> stored = stored_levels(o_.baseline_dir, h.machine_class);
    for (const auto& s : h.series) {
      SeriesView v;
      v.series = &s;
      const auto level = stored.find(series_name(s.key.benchmark, s.key.metric));
      v.suite = level != stored.end() ? level->second.suite : s.suite;
      if (level != stored.end()) v.baseline = level->second.level;
      if (auto it = changes_of.find(s.key); it != changes_of.end()) {
        v.changes = it->second;
        std::sort(v.changes.begin(), v.changes.end(),
                  [](const SeriesChange* a, const SeriesChange* b) { return a->index < b->index; });
      }
      if (auto it = noise.find(s.key); it != noise.end()) v.noise = it->second;
      by_suite[v.suite].push_back(std::move(v));
    }
    return by_suite;
  }

  // A suite's series, cut into chunks of series_per_chunk, each chunk one file.
  void write_suite(std::size_t ci, const std::string& suite, const std::vector<SeriesView>& views,
                   const std::map<std::int64_t, std::size_t>& position) {
    for (std::size_t first = 0; first < views.size(); first += o_.series_per_chunk) {
      const std::size_t chunk = summary_.chunks++;
      json series = json::object();
      for (std::size_t k = first; k < std::min(views.size(), first + o_.series_per_chunk); ++k) {
        const SeriesView& v = views[k];
        const std::size_t id = next_id_++;
        series[std::to_string(id)] = series_points(v, position);
        rows_.push_back(index_row(id, ci, suite_index_[suite], chunk, v));
        summary_.points += v.series->points.size();
        summary_.change_points += v.changes.size();
        summary_.baselines += v.baseline ? 1 : 0;
        ++summary_.series;
      }
      summary_.bytes += write_script(data_ / fmt::format("chunk-{}.js", chunk), "chunk",
                                     json{{"k", chunk}, {"class", ci}, {"series", series}});
    }
  }

  const DashboardOptions& o_;
  DashboardSummary& summary_;
  const fs::path data_;
  json class_rows_ = json::array(), rows_ = json::array(), suite_changes_ = json::array();
  std::vector<std::string> suites_;
  std::map<std::string, std::size_t> suite_index_;
  std::size_t next_id_ = 0;
};

// The classes to show: every class in the history, or the one asked for.
std::vector<std::string> dashboard_classes(Store& store, const DashboardOptions& o) {
  std::vector<std::string> classes = store.machine_classes();
  if (classes.empty()) throw InputError(store.url().display, "", "", "the history holds no session");
  if (o.machine_class.empty()) return classes;
  if (std::find(classes.begin(), classes.end(), o.machine_class) == classes.end())
    throw InputError(store.url().display, "", "--machine-class",
                     fmt::format("no session of class '{}'", o.machine_class));
  return {o.machine_class};
}

}  // namespace

DashboardSummary write_dashboard(Store& store, const DashboardOptions& o) {
  DashboardSummary summary;
  const std::vector<std::string> classes = dashboard_classes(store, o);
  write_assets(o, summary);
  DashboardWriter writer(o, summary);
  writer.start();
  for (std::size_t ci = 0; ci < classes.size(); ++ci)
    writer.write_class(ci, store.class_history(classes[ci], o.last_sessions));
  summary.classes = classes.size();
  writer.write_index(store.url().display);
  return summary;
}

}  // namespace perfgate::history
