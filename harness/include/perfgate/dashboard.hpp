#pragma once
// The history dashboard (docs/history.md, "Dashboard"): a static site written from a results history
// that opens from disk, with no server and no network. Per (class, benchmark, metric) a trend plot of the
// session medians with their spread (lowest and highest process-run median), the change points, the
// stored baseline's level and the learned band; an overview with a filter by class and suite; each point
// links to its commit.
//
// Layout of the output folder:
//   index.html, dashboard.js, style.css    the page (one page, views chosen by the URL's #fragment)
//   vendor/chart.min.js, vendor/chart.js.copyright   Chart.js, copied from Debian's libjs-chart.js
//   data/index.js                          every series' summary, the classes and suites (small)
//   data/sessions-<k>.js                   the sessions of class k (commit, time, branch, host)
//   data/chunk-<k>.js                      the points of up to `series_per_chunk` series of one (class, suite),
//                                          loaded by the page only when one of them is shown
// The data files are JavaScript (`perfgate.chunk(k, {...})`): a page opened from file:// may load scripts
// but not fetch() files.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "perfgate/history.hpp"

namespace perfgate::history {

struct DashboardOptions {
  std::filesystem::path out_dir;
  std::string machine_class;      // empty: every class
  std::size_t last_sessions = 0;  // 0: every session; else the most recent N per class
  // "https://host/repo/commit/{commit}": each point links there; empty: the point shows its commit only.
  std::string commit_url;
  std::filesystem::path baseline_dir = "baselines";  // baselines/<class>/<suite>.json: the stored level
  std::filesystem::path chartjs = "/usr/share/javascript/chart.js/chart.min.js";
  std::size_t series_per_chunk = 16;  // a page loads at most 12 series: about 12 chunks of 0.5 MB at 1,000 sessions
  std::size_t noise_window = 30;      // the learned band: NoiseOptions::window
};

struct DashboardSummary {
  std::size_t classes = 0;
  std::size_t sessions = 0;
  std::size_t series = 0;
  std::size_t points = 0;
  std::size_t change_points = 0;
  std::size_t chunks = 0;
  std::size_t baselines = 0;  // series with a stored baseline level
  std::uintmax_t bytes = 0;   // written, all files
};

// Writes the dashboard. Throws InputError for a missing Chart.js (naming the package), an empty history
// or an unknown class, and HistoryError for the history itself. An existing output folder is reused:
// its data/ is replaced.
DashboardSummary write_dashboard(Store& store, const DashboardOptions& options);

// The fixed files of the page: src/report/dashboard/{index.html,dashboard.js,style.css}, embedded at build time.
const char* dashboard_index_html();
const char* dashboard_script();
const char* dashboard_style();

}  // namespace perfgate::history
