// The history dashboard's data (perfgate/dashboard.hpp), read back from the files the page loads: the
// points and their spreads against known values, the change point at the planted step, the stored
// baseline's level, the learned band, commit links, and the errors. The page itself is rendered in headless
// Chromium by dashboard_chromium_test.sh.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "history_support.hpp"
#include "perfgate/dashboard.hpp"
#include "perfgate/history.hpp"
#include "test_support.hpp"

namespace {

using namespace perfgate;
using namespace perfgate::test_support;
namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kSessions = 24;
constexpr int kStepAt = 12;

// Session median of s/step: 1000 ns, 1300 ns from session kStepAt, with a small wobble; s/flat: 500 ns.
double session_median(const std::string& benchmark, int session) {
  const double level = benchmark == "s/step" ? (session < kStepAt ? 1000 : 1300) : 500;
  return level * (1 + 0.002 * std::sin(1.7 * session));
}

// Three process runs of three repetitions whose medians are 0.999, 1 and 1.001 times the session median:
// the spread is known exactly.
history::SeriesSamples series_of(const std::string& benchmark, int session) {
  history::SeriesSamples s;
  s.benchmark = benchmark;
  s.metric = "time";
  s.kind = MetricKind::latency;
  const double m = session_median(benchmark, session);
  for (int run = 0; run < 3; ++run)
    for (const double rep : {0.997, 1.0, 1.004}) {
      s.process_run.push_back(run);
      s.values.push_back(m * (1 + 0.001 * (run - 1)) * rep);
    }
  s.median = m;  // the middle run's median
  return s;
}

void record_history(const std::string& url) {
  auto store = history::open_store(url, history::OpenMode::create);
  for (int k = 0; k < kSessions; ++k) {
    history::SessionRecord r;
    r.info.machine_class = "cpu-test-2c";
    r.info.commit = fmt::format("c{:02d}", k);
    r.info.branch = "main";
    r.info.host = "runner";
    r.info.time = history::normalise_iso8601(fmt::format("2026-11-{:02d}T08:00:00Z", 1 + k));
    r.process_runs = {{"r0.json", {}}, {"r1.json", {}}, {"r2.json", {}}};
    r.series = {series_of("s/flat", k), series_of("s/step", k)};
    if (k % 2 == 0) r.series.insert(r.series.begin(), series_of("s/even", k));  // measured in every other session
    store->record(r);
  }
}

// A stored baseline of suite "s": s/step at `level` ns (median of 0.99, 1 and 1.01 times it), in `folder`. Another
// suite and benchmark name a plain binary's baseline; `cpu_signature` is the CPU it was recorded on.
void write_baseline(const fs::path& folder, double level = 1000, const std::string& suite = "s",
                    const std::string& benchmark = "s/step", const std::string& cpu_signature = "") {
  fs::create_directories(folder);
  nlohmann::json j;
  j["context"] = {{"date", "2026-11-01T00:00:00+00:00"},
                  {"host_name", "runner"},
                  {"executable", "bin/bench_" + suite},
                  {"num_cpus", 2},
                  {"mhz_per_cpu", 2000},
                  {"cpu_scaling_enabled", false},
                  {"caches", json::array()},
                  {"library_build_type", "release"},
                  {"perfgate.suite", suite}};
  if (!cpu_signature.empty()) j["context"]["perfgate.cpu_signature"] = cpu_signature;
  json benchmarks = json::array();
  int i = 0;
  for (const double t : {0.99 * level, level, 1.01 * level})
    benchmarks.push_back({{"name", benchmark},
                          {"family_index", 0},
                          {"per_family_instance_index", 0},
                          {"run_name", benchmark},
                          {"run_type", "iteration"},
                          {"repetitions", 3},
                          {"repetition_index", i++},
                          {"threads", 1},
                          {"iterations", 100},
                          {"real_time", t},
                          {"cpu_time", t},
                          {"time_unit", "ns"}});
  j["benchmarks"] = benchmarks;
  std::ofstream(folder / (suite + ".json")) << j.dump(1);
}

// Six sessions of `history_class` in the history at `url`, each measuring `benchmarks` (series_of, session k).
void record_six_sessions(const std::string& url, const std::string& history_class,
                         const std::vector<std::string>& benchmarks) {
  auto store = history::open_store(url);
  for (int k = 0; k < 6; ++k) {
    history::SessionRecord r;
    r.info.machine_class = history_class;
    r.info.commit = fmt::format("{}-{}", history_class, k);
    r.info.time = history::normalise_iso8601(fmt::format("2026-12-{:02d}T08:00:00Z", 1 + k));
    r.process_runs = {{"r0.json", {}}, {"r1.json", {}}, {"r2.json", {}}};
    for (const auto& b : benchmarks) r.series.push_back(series_of(b, k));
    store->record(r);
  }
}

// The JSON inside `perfgate.<call>(...);`.
json read_script(const fs::path& file, const std::string& call) {
  const std::string s = test_support::read_text(file);
  const std::string prefix = "perfgate." + call + "(";
  EXPECT_EQ(s.rfind(prefix, 0), 0u) << file;
  const auto end = s.rfind(");");
  return json::parse(s.substr(prefix.size(), end - prefix.size()));
}

class Dashboard : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!history::backend_available(history::Backend::sqlite)) GTEST_SKIP() << "built without SQLite";
    url_ = (dir_.path / "h.db").string();
    record_history(url_);
    write_baseline(dir_.path / "baselines" / "cpu-test-2c");
    // The page's data do not depend on Chart.js: a stand-in file is vendored (the Chromium test uses the real one).
    std::ofstream(dir_.path / "chart.min.js") << "/* Chart.js stand-in */\n";
    options_.out_dir = dir_.path / "site";
    options_.baseline_dir = dir_.path / "baselines";
    options_.chartjs = dir_.path / "chart.min.js";
    options_.commit_url = "https://git.example/repo/commit/{commit}";
  }
  TempDir dir_;
  std::string url_;
  history::DashboardOptions options_;
};

TEST_F(Dashboard, DataHoldTheMediansSpreadsChangePointBaselineAndBand) {
  auto store = history::open_store(url_);
  const auto summary = history::write_dashboard(*store, options_);
  EXPECT_EQ(summary.classes, 1u);
  EXPECT_EQ(summary.sessions, static_cast<std::size_t>(kSessions));
  EXPECT_EQ(summary.series, 3u);
  EXPECT_EQ(summary.points, 2u * kSessions + kSessions / 2);
  EXPECT_EQ(summary.baselines, 1u);
  for (const char* f : {"index.html", "dashboard.js", "style.css", "vendor/chart.min.js"})
    EXPECT_TRUE(fs::exists(options_.out_dir / f)) << f;

  const json index = read_script(options_.out_dir / "data" / "index.js", "index");
  EXPECT_EQ(index["commit_url"], options_.commit_url);
  ASSERT_EQ(index["classes"].size(), 1u);
  EXPECT_EQ(index["classes"][0]["name"], "cpu-test-2c");
  EXPECT_EQ(index["suites"], json::array({"s"}));
  ASSERT_EQ(index["series"].size(), 3u);
  const json& even = index["series"][0];
  const json& flat = index["series"][1];
  const json& step = index["series"][2];
  EXPECT_EQ(even["benchmark"], "s/even");
  EXPECT_EQ(even["points"], kSessions / 2);
  EXPECT_EQ(flat["benchmark"], "s/flat");
  EXPECT_EQ(flat["changes"], 0);
  EXPECT_FALSE(flat.contains("baseline"));
  EXPECT_EQ(step["benchmark"], "s/step");
  EXPECT_EQ(step["changes"], 1);
  EXPECT_NEAR(step["last_step"].get<double>(), 0.30, 0.01);
  EXPECT_DOUBLE_EQ(step["baseline"].get<double>(), 1000);

  const json sessions = read_script(options_.out_dir / "data" / "sessions-0.js", "sessions");
  ASSERT_EQ(sessions["sessions"]["commit"].size(), static_cast<std::size_t>(kSessions));
  EXPECT_EQ(sessions["sessions"]["commit"][0], "c00");
  EXPECT_EQ(sessions["sessions"]["commit"][static_cast<std::size_t>(kSessions - 1)],
            fmt::format("c{:02d}", kSessions - 1));

  const json chunk =
      read_script(options_.out_dir / "data" / fmt::format("chunk-{}.js", step["chunk"].get<int>()), "chunk");
  const json& d = chunk["series"][std::to_string(step["id"].get<int>())];
  ASSERT_EQ(d["m"].size(), static_cast<std::size_t>(kSessions));
  EXPECT_EQ(d["first"], 0);  // in every session: the positions are 0, 1, 2, ...
  EXPECT_FALSE(d.contains("s"));
  ASSERT_EQ(d["segments"].size(), 2u);
  EXPECT_EQ(d["segments"][0]["from"], 0);
  EXPECT_NEAR(d["segments"][0]["level"].get<double>(), 1000, 3);
  EXPECT_EQ(d["segments"][1]["from"], kStepAt);
  EXPECT_NEAR(d["segments"][1]["level"].get<double>(), 1300, 3);
  for (int k = 0; k < kSessions; ++k) {
    const double m = session_median("s/step", k);
    const auto i = static_cast<std::size_t>(k);
    EXPECT_NEAR(d["m"][i].get<double>(), m, 1e-5 * m) << k;
    EXPECT_NEAR(d["lo"][i].get<double>(), 0.999 * m, 1e-5 * m) << k;
    EXPECT_NEAR(d["hi"][i].get<double>(), 1.001 * m, 1e-5 * m) << k;
  }
  ASSERT_EQ(d["changes"].size(), 1u);
  EXPECT_EQ(d["changes"][0]["i"], kStepAt);
  EXPECT_EQ(d["changes"][0]["commit"], fmt::format("c{:02d}", kStepAt));
  EXPECT_EQ(d["changes"][0]["previous"], fmt::format("c{:02d}", kStepAt - 1));
  EXPECT_DOUBLE_EQ(d["baseline"].get<double>(), 1000);
  // A series with gaps lists its session positions.
  const json even_chunk =
      read_script(options_.out_dir / "data" / fmt::format("chunk-{}.js", even["chunk"].get<int>()), "chunk");
  const json& e = even_chunk["series"][std::to_string(even["id"].get<int>())];
  ASSERT_TRUE(e.contains("s"));
  ASSERT_EQ(e["s"].size(), static_cast<std::size_t>(kSessions / 2));
  for (std::size_t i = 0; i < e["s"].size(); ++i) EXPECT_EQ(e["s"][i], 2 * i);
  // The band is learned after the change point only: 12 sessions of a 0.2% wobble.
  ASSERT_TRUE(d.contains("band"));
  EXPECT_EQ(d["band"]["from"], kStepAt);
  EXPECT_EQ(d["band"]["sessions"], kSessions - kStepAt);
  const double sd = d["band"]["relative_sd"].get<double>();
  EXPECT_GT(sd, 0.0005);
  EXPECT_LT(sd, 0.004);
  const double centre = d["band"]["centre"].get<double>();
  EXPECT_NEAR(centre, 1300, 3);
  EXPECT_NEAR(d["band"]["high"].get<double>(), centre * std::exp(2 * sd), 0.01);
  EXPECT_NEAR(d["band"]["low"].get<double>(), centre * std::exp(-2 * sd), 0.01);
}

// A history class with a CPU generation ("<class>.<generation>") takes the baseline of its generation's
// folder, not a class-level file that does not say it was recorded on that generation.
TEST_F(Dashboard, AClassWithAGenerationUsesThatGenerationsBaselineOnly) {
  record_six_sessions(url_, "cpu-test-2c.gen1", {"s/step"});
  options_.machine_class = "cpu-test-2c.gen1";
  auto store = history::open_store(url_);
  EXPECT_EQ(history::write_dashboard(*store, options_).baselines, 0u);  // only the class-level file (1000 ns)
  write_baseline(dir_.path / "baselines" / "cpu-test-2c" / "gen1", 1200);
  EXPECT_EQ(history::write_dashboard(*store, options_).baselines, 1u);
  const json index = read_script(options_.out_dir / "data" / "index.js", "index");
  ASSERT_EQ(index["series"].size(), 1u);
  EXPECT_DOUBLE_EQ(index["series"][0]["baseline"].get<double>(), 1200);
}

// A plain binary's series (BM_Sort/1024, its baseline filed under the binary's name) are that suite's, with its
// level, found in the class-level file that was recorded on the history class's CPU generation.
TEST_F(Dashboard, APlainBinarysSeriesAreTheSuiteOfTheBaselineThatHoldsThem) {
  record_six_sessions(url_, "cpu-test-2c.amd-family26-model2", {"BM_Sort/1024", "BM_Copy"});
  options_.machine_class = "cpu-test-2c.amd-family26-model2";
  auto store = history::open_store(url_);
  write_baseline(dir_.path / "baselines" / "cpu-test-2c", 700, "my_bench", "BM_Sort/1024",
                 "AuthenticAMD family 25 model 17");  // another generation: not this class's level
  EXPECT_EQ(history::write_dashboard(*store, options_).baselines, 0u);
  write_baseline(dir_.path / "baselines" / "cpu-test-2c", 600, "my_bench", "BM_Sort/1024",
                 "AuthenticAMD family 26 model 2");
  EXPECT_EQ(history::write_dashboard(*store, options_).baselines, 1u);
  const json index = read_script(options_.out_dir / "data" / "index.js", "index");
  ASSERT_EQ(index["series"].size(), 2u);
  for (const auto& row : index["series"]) {
    const std::string suite = index["suites"][row["suite"].get<std::size_t>()];
    if (row["benchmark"] == "BM_Sort/1024") {
      EXPECT_EQ(suite, "my_bench");
      EXPECT_DOUBLE_EQ(row["baseline"].get<double>(), 600);
    } else {
      EXPECT_EQ(suite, "BM_Copy");  // in no stored baseline: its name's first part
    }
  }
}

TEST_F(Dashboard, SmallChunksSpreadTheSeriesOverFilesAndTheIndexSaysWhere) {
  options_.series_per_chunk = 1;
  auto store = history::open_store(url_);
  const auto summary = history::write_dashboard(*store, options_);
  EXPECT_EQ(summary.chunks, 3u);
  const json index = read_script(options_.out_dir / "data" / "index.js", "index");
  for (const auto& row : index["series"]) {
    const json chunk =
        read_script(options_.out_dir / "data" / fmt::format("chunk-{}.js", row["chunk"].get<int>()), "chunk");
    EXPECT_EQ(chunk["series"].size(), 1u);
    EXPECT_TRUE(chunk["series"].contains(std::to_string(row["id"].get<int>())));
  }
}

TEST_F(Dashboard, LastSessionsLimitsThePoints) {
  options_.last_sessions = 5;
  auto store = history::open_store(url_);
  const auto summary = history::write_dashboard(*store, options_);
  EXPECT_EQ(summary.sessions, 5u);
  EXPECT_EQ(summary.points, 5u + 5u + 2u);  // s/even: sessions 20 and 22 of the last 5 (19..23)
}

TEST_F(Dashboard, MissingChartJsAndUnknownClassAreInputErrors) {
  auto store = history::open_store(url_);
  auto o = options_;
  o.chartjs = dir_.path / "no-chart.js";
  try {
    history::write_dashboard(*store, o);
    ADD_FAILURE() << "no error without Chart.js";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("libjs-chart.js"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no-chart.js"), std::string::npos) << e.what();
  }
  o = options_;
  o.machine_class = "gpu-none";
  try {
    history::write_dashboard(*store, o);
    ADD_FAILURE() << "no error for an unknown class";
  } catch (const InputError& e) { EXPECT_NE(std::string(e.what()).find("gpu-none"), std::string::npos) << e.what(); }
}

TEST_F(Dashboard, CliWritesTheSiteAndRefusesAMissingHistory) {
  if (!fs::exists(PERFGATE_CLI_PATH)) GTEST_SKIP() << "perfgate CLI not built";
  const std::string site = (dir_.path / "cli-site").string();
  auto r = shell_output(fmt::format("{} history report --db {} --out {} --baseline-dir {} --chartjs {} --commit-url {}",
                                    quote(PERFGATE_CLI_PATH), quote(url_), quote(site),
                                    quote((dir_.path / "baselines").string()),
                                    quote((dir_.path / "chart.min.js").string()), quote("https://x/{commit}")));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("3 series (1 with a stored baseline)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 change point;"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(fs::path(site) / "data" / "index.js"));
  r = shell_output(fmt::format("{} history report --history {} --out {} --last 1 --chartjs {}",
                               quote(PERFGATE_CLI_PATH), quote(url_), quote(site + "-last"),
                               quote((dir_.path / "chart.min.js").string())));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find(": 1 class, 1 session, "), std::string::npos) << r.output;
  r = shell_output(fmt::format("{} history report --db {} --out {}", quote(PERFGATE_CLI_PATH),
                               quote((dir_.path / "none.db").string()), quote(site + "2")));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("none.db"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(site + "2"));
}

}  // namespace
