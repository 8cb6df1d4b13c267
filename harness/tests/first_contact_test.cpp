// What a user meets first: their own Google Benchmark JSON (Google Benchmark's compare-tool fixtures), verdicts
// that never claim more than the comparison could see, advice that works when followed, and any suite name.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "perfgate/baseline_store.hpp"
#include "perfgate/compare.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/report.hpp"
#include "perfgate/session.hpp"
#include "perfgate/suites.hpp"
#include "test_support.hpp"

using namespace perfgate;
using namespace perfgate::test_support;

namespace {

ResultSet fixture(const std::string& file) { return load_results({data("gbench_compare/" + file)}); }

const BenchmarkComparison& by_name(const ComparisonReport& r, const std::string& name) {
  for (const auto& b : r.benchmarks)
    if (b.name == name) return b;
  throw std::runtime_error("no benchmark " + name);
}

bool has_note_containing(const std::vector<std::string>& notes, const std::string& text) {
  return std::any_of(notes.begin(), notes.end(), [&](const std::string& n) { return n.find(text) != n.npos; });
}
bool has_note_containing(const std::vector<LoadNote>& notes, const std::string& text) {
  return std::any_of(notes.begin(), notes.end(),
                     [&](const LoadNote& n) { return n.line().find(text) != std::string::npos; });
}

// `k` process runs of one benchmark per side: each run's repetitions spread by `within`, the runs' levels by
// `between` around `center` (reproducible from `seed`).
BenchmarkResult runs_of(const std::string& name, double center, double within, double between, int k, int reps,
                        std::uint64_t seed) {
  BenchmarkResult b = bench(name, {});
  stats::SplitMix64 rng(seed);
  for (int run = 0; run < k; ++run) {
    const double level = center * std::exp(between * rng.normal());
    for (double v : noisy(level, within, reps, seed * 131 + static_cast<std::uint64_t>(run))) {
      b.time.samples.push_back(v);
      b.time.process_run.push_back(run);
    }
  }
  return b;
}

// A side of `count` benchmarks s/k0.. as runs_of() measures them, `runs` process runs of 5 repetitions each; the
// i-th benchmark's numbers come from seed + i.
ResultSet side_of(int count, double within, double between, int runs, std::uint64_t seed) {
  std::vector<BenchmarkResult> b;
  for (int i = 0; i < count; ++i)
    b.push_back(
        runs_of("s/k" + std::to_string(i), 100, within, between, runs, 5, seed + static_cast<std::uint64_t>(i)));
  return set_of(std::move(b), runs);
}

}  // namespace

// ---- loading what Google Benchmark writes ----------------------------------------------------------------------
TEST(FirstContact, EveryCompareFixtureOfGoogleBenchmarkLoads) {
  for (const char* f : {"test1_run1.json", "test1_run2.json", "test2_run.json", "test3_run0.json", "test3_run1.json",
                        "test4_run.json", "test4_run0.json", "test4_run1.json"}) {
    SCOPED_TRACE(f);
    EXPECT_NO_THROW((void)fixture(f));
  }
}

TEST(FirstContact, ComplexityFitsAreNotedNotRefused) {
  const ResultSet r = fixture("test1_run1.json");
  EXPECT_EQ(r.find("MyComplexityTest_BigO"), nullptr);
  EXPECT_EQ(r.find("MyComplexityTest_RMS"), nullptr);
  EXPECT_TRUE(has_note_containing(r.load_notes, "'MyComplexityTest' holds a complexity fit"));
  EXPECT_NE(r.find("BM_100xSlower"), nullptr);
}

TEST(FirstContact, AggregateOnlyBenchmarksGetOneLevelPerRunAndANote) {
  // test3_run0.json: BM_One has an unnamed aggregate and no repetition; BM_Two has repetitions.
  const ResultSet r = fixture("test3_run0.json");
  const BenchmarkResult* one = r.find("BM_One");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->aggregate_level, "aggregate");
  ASSERT_EQ(one->time.samples.size(), 1u);
  EXPECT_DOUBLE_EQ(one->time.samples[0], 10.0);
  EXPECT_TRUE(has_note_containing(r.load_notes, "aggregates only"));
  // test4_run0.json: a lone percentage aggregate says nothing about time: noted, nothing to compare.
  const ResultSet z = fixture("test4_run0.json");
  EXPECT_TRUE(z.benchmarks.empty());
  EXPECT_TRUE(has_note_containing(z.load_notes, "'whocares' has only zz aggregate(s)"));
}

TEST(FirstContact, AggregateOnlyNoteIsOneLineForEveryProcessRunAndNamesTheBenchmark) {
  // Three process runs of one binary, each file holding BM_One and "short" as aggregates only: one note, not three.
  TempDir dir;
  std::vector<std::string> files;
  for (int k = 0; k < 3; ++k) {
    const auto copy = dir.path / ("run" + std::to_string(k) + ".json");
    std::filesystem::copy_file(data("gbench_compare/test3_run0.json"), copy);
    files.push_back(copy.string());
  }
  const ResultSet r = load_results(files);
  ASSERT_EQ(r.load_notes.size(), 1u);
  EXPECT_EQ(r.load_notes[0].files, files);
  const std::string line = r.load_notes[0].line();
  EXPECT_EQ(line.rfind(files[0] + " and 2 more files: 'BM_One', 'short' hold aggregates only", 0), 0u) << line;
  EXPECT_NE(line.find("ReportAggregatesOnly()"), std::string::npos) << line;
  EXPECT_EQ(r.find("BM_One")->time.samples.size(), 3u);
  // One file: the note names it alone.
  EXPECT_EQ(fixture("test3_run0.json").load_notes.at(0).line().rfind(data("gbench_compare/test3_run0.json") + ": ", 0),
            0u);
}

TEST(FirstContact, APlainBinarysBenchmarksAreOneSuiteNamedAfterTheBinary) {
  // Google Benchmark's fixtures as its binary wrote them: their benchmarks (BM_One, BM_Two, ...) are families of one
  // binary, not suites of their own, so the report's per-suite table and sections have one row: the binary.
  ResultSet base = fixture("test1_run1.json");
  ResultSet cur = fixture("test1_run2.json");
  base.contexts.at(0).fields["executable"] = "/src/build/my_bench";
  cur.contexts.at(0).fields["executable"] = "./my_bench";
  const ComparisonReport r = compare(base, cur, CompareOptions{});
  ASSERT_GT(r.benchmarks.size(), 2u);
  for (const auto& b : r.benchmarks) EXPECT_EQ(b.suite, "my_bench") << b.name;
  EXPECT_EQ(r.executables.size(), 1u);
  // One binary a side under two names is one suite, the current side's, and the report says so; a benchmark of
  // the baseline only is filed there too.
  ResultSet renamed = base;
  renamed.contexts.at(0).fields["executable"] = "/src/build-old/my_bench_old";
  renamed.index.erase(renamed.benchmarks.front().name);
  renamed.benchmarks.front().name = "BM_Gone";
  renamed.index.emplace("BM_Gone", 0);
  const ComparisonReport paired = compare(renamed, cur, CompareOptions{});
  for (const auto& b : paired.benchmarks) EXPECT_EQ(b.suite, "my_bench") << b.name;
  EXPECT_NE(
      std::find(paired.notes.begin(), paired.notes.end(),
                "one binary on each side: my_bench_old (baseline) paired with my_bench (current) as suite my_bench"),
      paired.notes.end());
  // A file that names its suite (perfgate.suite) keeps it; one that names no executable files a benchmark under its
  // name's first part, as a perfgate suite's names carry it.
  ResultSet named = cur;
  named.contexts[0].fields[context_keys::kSuite] = "mine";
  EXPECT_EQ(compare(base, named, CompareOptions{}).benchmarks.front().suite, "mine");
  const ComparisonReport anonymous = compare(fixture("test1_run1.json"), fixture("test1_run2.json"), CompareOptions{});
  for (const auto& b : anonymous.benchmarks) EXPECT_EQ(b.suite, suite_of_benchmark(b.name)) << b.name;
}

TEST(FirstContact, AFileOnBothSidesIsNamedAsARunComparedWithItself) {
  const std::string one = data("gbench_compare/test1_run1.json"), two = data("gbench_compare/test1_run2.json");
  const ComparisonReport same = compare(load_results({one, two}), load_results({two}), CompareOptions{});
  EXPECT_EQ(same.files_on_both_sides, std::vector<std::string>{two});
  const std::string terminal = render_terminal(same, false);
  EXPECT_NE(terminal.find("note: " + two + ": on both sides: each such process run is compared with itself"),
            std::string::npos)
      << terminal;
  // A long path is named whole, since its cut would drop the file's own name.
  std::string long_path = data("gbench_compare");
  while (long_path.size() < 120) long_path += "/../gbench_compare";
  long_path += "/test1_run2.json";
  const ComparisonReport twice = compare(load_results({long_path}), load_results({long_path}), CompareOptions{});
  EXPECT_NE(render_terminal(twice, false).find("note: " + long_path + ": on both sides"), std::string::npos)
      << render_terminal(twice, false);
  // Two paths to one file are one file; runs of their own are not noted.
  const std::string dotted = data("gbench_compare/../gbench_compare/test1_run2.json");
  EXPECT_EQ(compare(load_results({two}), load_results({dotted}), CompareOptions{}).files_on_both_sides.size(), 1u);
  const ComparisonReport apart = compare(load_results({one}), load_results({two}), CompareOptions{});
  EXPECT_TRUE(apart.files_on_both_sides.empty());
  EXPECT_EQ(render_terminal(apart, false).find("on both sides:"), std::string::npos);
}

TEST(FirstContact, MedianAggregateIsPreferredAndOldStyleAggregatesAreRecognised) {
  const std::string json = R"({"context": {}, "benchmarks": [
    {"name": "BM_A_mean", "run_name": "BM_A", "run_type": "aggregate", "aggregate_name": "mean", "iterations": 5,
     "real_time": 12, "cpu_time": 12, "time_unit": "us"},
    {"name": "BM_A_median", "run_name": "BM_A", "run_type": "aggregate", "aggregate_name": "median", "iterations": 5,
     "real_time": 11, "cpu_time": 11, "time_unit": "us"},
    {"name": "BM_A_cv", "run_name": "BM_A", "run_type": "aggregate", "aggregate_name": "cv",
     "aggregate_unit": "percentage", "iterations": 5, "real_time": 0.1, "cpu_time": 0.1, "time_unit": "us"},
    {"name": "BM_Old", "iterations": 10, "real_time": 3, "cpu_time": 3, "time_unit": "ns"},
    {"name": "BM_Old", "iterations": 10, "real_time": 4, "cpu_time": 4, "time_unit": "ns"},
    {"name": "BM_Old_mean", "iterations": 10, "real_time": 3.5, "cpu_time": 3.5, "time_unit": "ns"},
    {"name": "BM_Old_stddev", "iterations": 10, "real_time": 0.7, "cpu_time": 0.7, "time_unit": "ns"}]})";
  const ResultSet r = parse_results(json, "agg.json");
  const BenchmarkResult* a = r.find("BM_A");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->aggregate_level, "median");
  ASSERT_EQ(a->time.samples.size(), 1u);
  EXPECT_DOUBLE_EQ(a->time.samples[0], 11000.0);
  const BenchmarkResult* old = r.find("BM_Old");
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(old->time.samples.size(), 2u);
  EXPECT_EQ(r.find("BM_Old_mean"), nullptr);
  EXPECT_EQ(r.find("BM_Old_stddev"), nullptr);
  EXPECT_EQ(r.benchmarks.size(), 2u);
}

TEST(FirstContact, ErrorsNameTheFieldForHugeIntegersAndABomIsAccepted) {
  const std::string entry = R"({"name": "BM_X", "iterations": 1000000000000000000000000000000, "real_time": 1,
                                "cpu_time": 1, "time_unit": "ns"})";
  try {
    (void)parse_results(R"({"context": {}, "benchmarks": [)" + entry + "]}", "big.json");
    FAIL() << "accepted an iterations count beyond 64 bits";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("BM_X"), std::string::npos) << what;
    EXPECT_NE(what.find("iterations"), std::string::npos) << what;
    EXPECT_NE(what.find("out of range"), std::string::npos) << what;
  }
  const std::string bom = "\xEF\xBB\xBF";
  const ResultSet r = parse_results(bom + R"({"context": {}, "benchmarks": [
    {"name": "BM_Y", "iterations": 10, "real_time": 1, "cpu_time": 1, "time_unit": "ns"}]})",
                                    "bom.json");
  EXPECT_NE(r.find("BM_Y"), nullptr);
}

// ---- verdicts that never claim more than the comparison saw ------------------------------------------------------
TEST(FirstContact, OneRepetitionPairIsNotJudgedAndItsLargestChangesComeFirst) {
  const ComparisonReport r = compare(fixture("test1_run1.json"), fixture("test1_run2.json"), CompareOptions{});
  EXPECT_EQ(r.counts.judged, 0);
  EXPECT_EQ(r.exit_code, 77);
  EXPECT_FALSE(r.next_step.empty());
  const auto rows = r.sorted();
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows[0]->name, "BM_100xSlower");
  EXPECT_EQ(rows[1]->name, "BM_2xSlower");
  EXPECT_NEAR(by_name(r, "BM_100xSlower").metrics[0].change, 99.0, 1e-9);
}

// Files of aggregates only (--benchmark_report_aggregates_only): one sample a process run, whatever the repetitions
// were. The note says samples, one a run, not "repetitions"; the next step advises process runs (at least the rule's
// minimum) or dropping the flag, not more --benchmark_repetitions; followed, it judges.
TEST(FirstContact, AggregatesOnlyFilesAreAdvisedProcessRunsNotRepetitions) {
  auto aggregates_side = [](int runs, std::uint64_t seed, const char* level = "median") {
    std::vector<BenchmarkResult> b;
    for (int i = 0; i < 4; ++i) {
      BenchmarkResult one = runs_of("BM_Agg/" + std::to_string(i), 100, 0.0, 0.01, runs, 1, seed + i);
      one.aggregate_level = level;
      b.push_back(std::move(one));
    }
    return set_of(std::move(b), runs);
  };
  const CompareOptions o;
  const ComparisonReport once = compare(aggregates_side(1, 10), aggregates_side(1, 20), o);
  ASSERT_EQ(once.exit_code, 77);
  EXPECT_TRUE(once.samples_are_aggregates);
  EXPECT_TRUE(has_note_containing(once.notes,
                                  "only 1 sample per benchmark, one a process run (the files hold "
                                  "aggregates only)"));
  EXPECT_FALSE(has_note_containing(once.notes, "repetition per benchmark"));
  EXPECT_NE(once.next_step.find("or without --benchmark_report_aggregates_only"), std::string::npos) << once.next_step;
  EXPECT_EQ(once.next_step.find("--benchmark_repetitions="), std::string::npos) << once.next_step;
  EXPECT_EQ(once.next_step.find("repetitions per side"), std::string::npos) << once.next_step;
  ASSERT_GE(once.next_step_runs, o.rule.min_samples);
  const std::string terminal = render_terminal(once, false);
  EXPECT_NE(terminal.find("each repetition is a sample"), std::string::npos) << terminal;

  const int k = once.next_step_runs;
  const ComparisonReport followed = compare(aggregates_side(k, 30), aggregates_side(k, 40), o);
  EXPECT_GE(followed.counts.judged, 3) << followed.next_step;

  // Neither side's files held aggregates (one repetition a run): the usual wording stays.
  const ComparisonReport plain = compare(aggregates_side(1, 10, ""), aggregates_side(1, 20, ""), o);
  EXPECT_FALSE(plain.samples_are_aggregates);
  EXPECT_TRUE(has_note_containing(plain.notes, "only 1 repetition per benchmark"));
  EXPECT_NE(plain.next_step.find("--benchmark_repetitions="), std::string::npos) << plain.next_step;
}

// A run whose benchmarks have different repetition counts (one repetition of a complexity point beside five of
// the rest) is described by its median and range, not as if every benchmark had the median.
TEST(FirstContact, MixedRepetitionCountsAreNotedAsAMedianWithItsRange) {
  const ResultSet side = set_of({bench("s/five", {100, 101, 99, 100, 100}), bench("s/one", {10})});
  const ComparisonReport r = compare(side, side, CompareOptions{});
  EXPECT_EQ(r.repetitions, 3);
  EXPECT_EQ(r.fewest_repetitions, 1);
  EXPECT_EQ(r.most_repetitions, 5);
  EXPECT_EQ(few_repetitions_phrase(r), "a median of 3 repetitions per benchmark (1 to 5)");
  EXPECT_TRUE(has_note_containing(r.notes, "a median of 3 repetitions per benchmark (1 to 5)"));
  EXPECT_FALSE(has_note_containing(r.notes, "only 3 repetitions"));

  const ResultSet even = set_of({bench("s/a", {100, 101, 99}), bench("s/b", {10, 11, 10})});
  const ComparisonReport e = compare(even, even, CompareOptions{});
  EXPECT_EQ(few_repetitions_phrase(e), "only 3 repetitions per benchmark");
  EXPECT_TRUE(has_note_containing(e.notes, "only 3 repetitions per benchmark"));

  // Two process runs of three repetitions: six, and the note says over how many runs.
  const ResultSet two_runs = set_of({bench("s/a", {100, 101, 99, 100, 102, 98})}, 2);
  const ComparisonReport t = compare(two_runs, two_runs, CompareOptions{});
  EXPECT_EQ(few_repetitions_phrase(t), "only 6 repetitions per benchmark over 2 process runs");
}

// A counter on one side only (a knob's counter that the bench reports only where the knob is on) is named in a run
// note, so that a time change is not read as the code's when the two sides ran different settings.
TEST(FirstContact, CountersOnOneSideOnlyAreNotedAsAPossibleSettingChange) {
  BenchmarkResult tailed = bench("s/ffn", {100, 101, 99, 100, 100});
  tailed.counters.push_back(metric("light.tail_buckets", MetricKind::info, {2, 2, 2, 2, 2}));
  BenchmarkResult dropped = bench("s/gone", {50, 51, 49, 50, 50});
  dropped.counters.push_back(metric("old.counter", MetricKind::info, {1, 1, 1, 1, 1}));
  const ResultSet base = set_of({bench("s/ffn", {100, 101, 99, 100, 100}), dropped, bench("s/same", {10, 11, 10})});
  const ResultSet cur = set_of({tailed, bench("s/gone", {50, 51, 49, 50, 50}), bench("s/same", {10, 11, 10})});
  const ComparisonReport r = compare(base, cur, CompareOptions{});
  EXPECT_TRUE(has_note_containing(
      r.notes,
      "2 benchmarks report counters on one side only (s/ffn: 'light.tail_buckets' only in the current run; "
      "s/gone: 'old.counter' only in the baseline)"));
  EXPECT_TRUE(has_note_containing(r.notes, "may not have run the same configuration"));
  // The terminal's summary (what `perfgate compare` prints without -v) names them too, and only them.
  const std::string terminal = render_terminal(r, false);
  EXPECT_NE(terminal.find("\nnote: s/ffn, s/gone: counters on one side only"), std::string::npos) << terminal;
  EXPECT_NE(terminal.find("if the change is meant, record the baseline again\n"), std::string::npos) << terminal;
  // Between perfgate ab's two builds the change made the difference, and there is no baseline to record.
  CompareOptions builds;
  builds.sides = SideNames{"before", "after", true};
  const ComparisonReport ab = compare(base, cur, builds);
  EXPECT_TRUE(has_note_containing(ab.notes,
                                  "(s/ffn: 'light.tail_buckets' only in the after build; s/gone: "
                                  "'old.counter' only in the before build)"));
  const std::string ab_terminal = render_terminal(ab, false);
  EXPECT_NE(ab_terminal.find("or a counter the change added or removed): the two sides may not have run the same "
                             "configuration\n"),
            std::string::npos)
      << ab_terminal;
  EXPECT_EQ(ab_terminal.find("record the baseline"), std::string::npos) << ab_terminal;

  const ResultSet same = set_of({tailed});
  EXPECT_EQ(render_terminal(compare(same, same, CompareOptions{}), false).find("one side only"), std::string::npos);
  EXPECT_FALSE(has_note_containing(compare(same, same, CompareOptions{}).notes, "counters on one side only"));
}

// A counter the current run wrote as NaN (left out by the loader, with its own note) is not a counter on one side
// only: no setting-change note, and the benchmark's time and other counters are still compared.
TEST(FirstContact, ACounterLeftOutAsNonFiniteIsNotNotedAsOneSided) {
  BenchmarkResult base_b = bench("s/cache", {100, 101, 99, 100, 100});
  base_b.counters.push_back(metric("hit_rate", MetricKind::info, {0.5, 0.5, 0.5, 0.5, 0.5}));
  base_b.counters.push_back(metric("misses", MetricKind::info, {3, 3, 3, 3, 3}));
  BenchmarkResult cur_b = bench("s/cache", {100, 101, 99, 100, 100});
  cur_b.counters.push_back(metric("misses", MetricKind::info, {3, 3, 3, 3, 3}));
  cur_b.non_finite_counters.insert("hit_rate");
  const ComparisonReport r = compare(set_of({base_b}), set_of({cur_b}), CompareOptions{});
  EXPECT_FALSE(has_note_containing(r.notes, "counters on one side only"));
  const BenchmarkComparison& c = by_name(r, "s/cache");
  EXPECT_EQ(c.metric("hit_rate"), nullptr);
  EXPECT_NE(c.metric("misses"), nullptr);
  EXPECT_NE(c.metric("time"), nullptr);
}

// One repetition 100 times the others in the current run only: among 20 the median hardly moves, so the verdict
// alone reads unchanged over it. compare's note and the terminal's summary name that benchmark, and only it; a
// baseline with such a repetition of its own is no change.
TEST(FirstContact, AFarSlowRepetitionIsNotedThoughTheMedianHidesIt) {
  std::vector<double> spiked = noisy(100, 0.01, 20, 2);
  spiked[7] *= 100;
  const ResultSet base = set_of({bench("s/a", noisy(100, 0.01, 20, 1)), bench("s/b", noisy(50, 0.01, 20, 3))});
  const ResultSet cur = set_of({bench("s/a", spiked), bench("s/b", noisy(50, 0.01, 20, 4))});
  const ComparisonReport r = compare(base, cur, within_run_options());
  const auto a = std::find_if(r.benchmarks.begin(), r.benchmarks.end(), [](const auto& b) { return b.name == "s/a"; });
  ASSERT_NE(a, r.benchmarks.end());
  EXPECT_EQ(a->verdict, Verdict::unchanged) << a->reason;
  EXPECT_NEAR(a->slowest_over_median_current, 100, 5);
  EXPECT_TRUE(has_note_containing(
      r.notes, "1 benchmark has a repetition of 10 times the median or more in the current run only (s/a: 10"));
  const std::string terminal = render_terminal(r, false);
  EXPECT_NE(terminal.find("\nnote: s/a: a repetition of 10 times the median or more (100x at the most) in the current "
                          "run only"),
            std::string::npos)
      << terminal;
  EXPECT_EQ(terminal.find("s/b: a repetition"), std::string::npos) << terminal;
  // perfgate ab's two builds: the after build had it.
  CompareOptions builds = within_run_options();
  builds.sides = SideNames{"before", "after", true};
  const std::string ab = render_terminal(compare(base, cur, builds), false);
  EXPECT_NE(ab.find("\nnote: s/a: a repetition of 10 times the median or more (100x at the most) in the after build "
                    "only"),
            std::string::npos)
      << ab;

  const ComparisonReport both = compare(cur, cur, within_run_options());
  EXPECT_FALSE(has_note_containing(both.notes, "a repetition of 10 times"));
  EXPECT_EQ(render_terminal(both, false).find("a repetition of 10 times"), std::string::npos);
}

TEST(FirstContact, UnchangedMeansTheIntervalLiesWithinTheThreshold) {
  // One run per side: the between-run prior (5%, 8 df) makes the interval about +-16%: nothing is "unchanged".
  const ResultSet base = set_of({bench("s/a", noisy(100, 0.01, 5, 1))});
  const ResultSet cur = set_of({bench("s/a", noisy(100, 0.01, 5, 2))});
  const ComparisonReport wide = compare(base, cur, CompareOptions{});
  EXPECT_EQ(wide.benchmarks[0].verdict, Verdict::noisy) << wide.benchmarks[0].reason;
  EXPECT_EQ(wide.exit_code, 77);
  // The same samples without the prior: the interval is within 5%, and the benchmark is judged unchanged.
  const ComparisonReport tight = compare(base, cur, within_run_options());
  EXPECT_EQ(tight.benchmarks[0].verdict, Verdict::unchanged) << tight.benchmarks[0].reason;
  EXPECT_GE(tight.benchmarks[0].metrics[0].change_lower, -0.05);
  EXPECT_LE(tight.benchmarks[0].metrics[0].change_upper, 0.05);
  EXPECT_EQ(tight.exit_code, 0);
}

TEST(FirstContact, TheWithinRunTestAgreesWithItsInterval) {
  for (std::uint64_t seed = 1; seed < 40; ++seed) {
    const double shift = 1.0 + 0.004 * static_cast<double>(seed % 7);
    const ResultSet base = set_of({bench("s/a", noisy(100, 0.01, 6, seed))});
    const ResultSet cur = set_of({bench("s/a", noisy(100 * shift, 0.01, 6, seed + 1000))});
    CompareOptions o;
    o.noise.run_noise = 0.003;
    o.rule.correction = Correction::none;
    const ComparisonReport r = compare(base, cur, o);
    const MetricComparison& m = r.benchmarks[0].metrics[0];
    const bool excludes_zero = m.change_lower > 0 || m.change_upper < 0;
    EXPECT_EQ(m.p_value < o.rule.alpha, excludes_zero)
        << "seed " << seed << " p " << m.p_value << " [" << m.change_lower << ", " << m.change_upper << "]";
  }
}

TEST(FirstContact, PlantedRegressionsAreFoundAmongThousandsWithFiveRepetitions) {
  // A rank test cannot give p below 2/252 at 5 samples a side; after Benjamini-Hochberg over 4,000 benchmarks that
  // could never pass. The rule's own test can.
  std::vector<BenchmarkResult> base, cur;
  const int n = 4000, planted = 40;
  for (int i = 0; i < n; ++i) {
    const std::string name = "s/b" + std::to_string(i);
    const double factor = i < planted ? 1.30 : 1.0;
    base.push_back(bench(name, noisy(1000, 0.003, 5, static_cast<std::uint64_t>(2 * i + 1))));
    cur.push_back(bench(name, noisy(1000 * factor, 0.003, 5, static_cast<std::uint64_t>(2 * i + 2))));
  }
  CompareOptions o;
  o.noise.run_noise = 0.005;
  const ComparisonReport r = compare(set_of(std::move(base)), set_of(std::move(cur)), o);
  int found = 0, false_alarms = 0;
  for (int i = 0; i < n; ++i) {
    const Verdict v = r.benchmarks[static_cast<std::size_t>(i)].verdict;
    if (i < planted) found += v == Verdict::regression;
    else false_alarms += is_alarm(v);
  }
  EXPECT_EQ(found, planted);
  EXPECT_EQ(false_alarms, 0);
  EXPECT_EQ(r.exit_code, 1);
}

// ---- advice that works when followed ---------------------------------------------------------------------------
TEST(FirstContact, TheNextStepJudgesWhenFollowed) {
  // One process run per side at 1% spread: not judged, and the advice names a number of process runs.
  const CompareOptions o;
  const ComparisonReport first = compare(side_of(6, 0.01, 0.0, 1, 10), side_of(6, 0.01, 0.0, 1, 20), o);
  ASSERT_EQ(first.exit_code, 77);
  const std::string& advice = first.next_step;
  const auto at = advice.find("measure each side as ");
  ASSERT_NE(at, std::string::npos) << advice;
  const int k = std::stoi(advice.substr(at + 21));
  ASSERT_GE(k, 2);
  ASSERT_LE(k, 60);
  // Followed: k process runs per side, whose levels spread by the same 1% as the repetitions did.
  const ComparisonReport followed = compare(side_of(6, 0.01, 0.01, k, 30), side_of(6, 0.01, 0.01, k, 40), o);
  EXPECT_GE(followed.counts.judged, 5) << followed.benchmarks[0].reason;
  EXPECT_EQ(followed.exit_code, 0) << followed.next_step;
}

TEST(FirstContact, TheNextStepNamesTheRunsItHad) {
  // Three process runs a side whose levels differ by about 4%: the advice says so, not that one run a side
  // cannot show the noise between runs.
  const ComparisonReport r = compare(side_of(6, 0.005, 0.04, 3, 50), side_of(6, 0.005, 0.04, 3, 60), CompareOptions{});
  ASSERT_EQ(r.exit_code, 77) << r.benchmarks[0].reason;
  EXPECT_NE(r.next_step.find("measure each side as "), std::string::npos) << r.next_step;
  EXPECT_NE(r.next_step.find("with 3 process runs a side"), std::string::npos) << r.next_step;
  EXPECT_NE(r.next_step.find("--benchmark_repetitions=5 "), std::string::npos) << r.next_step;  // per run, not 15
  EXPECT_EQ(r.next_step.find("one process run per side"), std::string::npos) << r.next_step;
}

TEST(FirstContact, TheNextStepOfFewSamplesOverSeveralRunsNamesThem) {
  // Three process runs a side of one repetition each (files globbed from runs of a plain binary): too few samples
  // for the rule, and the advice says that of these runs, not that one run a side cannot show the noise between runs.
  const auto one_repetition_runs = [](std::uint64_t seed) {
    std::vector<BenchmarkResult> b;
    for (int i = 0; i < 4; ++i)
      b.push_back(runs_of("s/k" + std::to_string(i), 100, 0.005, 0.01, 3, 1, seed + static_cast<std::uint64_t>(i)));
    return set_of(std::move(b), 3);
  };
  const ComparisonReport r = compare(one_repetition_runs(70), one_repetition_runs(80), CompareOptions{});
  ASSERT_EQ(r.exit_code, 77) << r.benchmarks[0].reason;
  EXPECT_NE(r.next_step.find("3 process runs a side gave 3 sample(s), fewer than the 4 the rule needs"),
            std::string::npos)
      << r.next_step;
  EXPECT_EQ(r.next_step.find("one process run per side"), std::string::npos) << r.next_step;
  // One run a side keeps its own reason.
  const ComparisonReport single = compare(side_of(4, 0.01, 0.0, 1, 10), side_of(4, 0.01, 0.0, 1, 20), CompareOptions{});
  EXPECT_NE(single.next_step.find("one process run per side cannot show"), std::string::npos) << single.next_step;
}

TEST(FirstContact, TheNextStepOfARunNamesTheRunFlags) {
  // perfgate run's reference gate (ci/perf.sh's relative gate): the advice's runs and repetitions come with the
  // flags of that command and the main job's variables; a plain ab gets no such tail, and a gate against a stored
  // baseline names run's own flags.
  const ComparisonReport r = compare(side_of(6, 0.005, 0.04, 3, 50), side_of(6, 0.005, 0.04, 3, 60), CompareOptions{});
  ASSERT_EQ(r.exit_code, 77) << r.benchmarks[0].reason;
  ASSERT_GE(r.next_step_runs, 2) << r.next_step;
  EXPECT_NE(r.next_step.find("measure each side as " + std::to_string(r.next_step_runs) + " separate"),
            std::string::npos)
      << r.next_step;
  EXPECT_EQ(r.next_step_repetitions, 5);

  SuiteReport relative{"lora_backward", "reference 0aaa6ee", true, true, r};
  const std::string line = combine_reports({relative}).next_step;
  const std::string runs = std::to_string(r.next_step_runs);
  EXPECT_NE(line.find("perfgate run --against-rounds " + runs + " --against-repetitions lora_backward=5"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("PERFGATE_AB_ROUNDS=" + runs + " PERFGATE_AB_REPETITIONS=lora_backward=5"), std::string::npos)
      << line;

  SuiteReport ab{"lora_backward", "", true, false, r};
  EXPECT_EQ(combine_reports({ab}).next_step, r.next_step);

  // Against a stored baseline, this command's flags take the place of compare's files and ab's two builds.
  SuiteReport stored{"lora_backward", "baselines/cpu-x/lora_backward.json", true, false, r};
  const std::string stored_line = combine_reports({stored}).next_step;
  EXPECT_NE(stored_line.find("(perfgate run --rounds " + runs +
                             " --repetitions 5 --update-baseline records the "
                             "stored baseline with that many, then perfgate run --rounds " +
                             runs + " --repetitions 5 gates with as many):"),
            std::string::npos)
      << stored_line;
  EXPECT_EQ(stored_line.find("perfgate compare takes"), std::string::npos) << stored_line;
}

// The whole run's report names its sides as its suites do (the reference gate's "reference" build), and plainly
// ("baseline") when a suite gated against a stored baseline is in it too.
TEST(FirstContact, TheRunsReportNamesItsSidesAsItsSuitesDo) {
  CompareOptions reference_gate;
  reference_gate.sides = SideNames{"reference", "current", true};
  const ComparisonReport by_reference =
      compare(side_of(6, 0.005, 0.01, 3, 50), side_of(6, 0.005, 0.01, 3, 60), reference_gate);
  const ComparisonReport by_baseline =
      compare(side_of(6, 0.005, 0.01, 3, 50), side_of(6, 0.005, 0.01, 3, 60), CompareOptions{});
  const SuiteReport relative{"lora_backward", "reference 0aaa6ee", true, true, by_reference};
  const SuiteReport stored{"synthetic", "baselines/x/synthetic.json", true, false, by_baseline};
  EXPECT_EQ(combine_reports({relative}).options.sides.baseline, "reference");
  EXPECT_TRUE(combine_reports({relative}).options.sides.builds);
  const ComparisonReport both = combine_reports({relative, stored});
  EXPECT_EQ(both.options.sides.baseline, "baseline");
  EXPECT_FALSE(both.options.sides.builds);
}

// The one-line verdict of bisect steps and confirm-step reasons reads as the reports do: a rate that fell is slower,
// with no sign to decode.
TEST(FirstContact, AVerdictInOneLineSaysSlowerForARateThatFell) {
  MetricComparison rate;
  rate.name = "bytes_per_second";
  rate.kind = MetricKind::rate;
  rate.gated = true;
  rate.verdict = Verdict::regression;
  rate.change = -0.5;
  rate.change_lower = -0.55;
  rate.change_upper = -0.45;
  rate.interval_bounded = true;
  BenchmarkComparison b;
  b.verdict = Verdict::regression;
  b.driver = "bytes_per_second";
  b.metrics.push_back(rate);
  EXPECT_EQ(change_text(b), "regression, bytes_per_second 50.0% slower (interval 45.0% to 55.0% slower)");
  b.metrics.front().kind = MetricKind::latency;
  b.metrics.front().name = b.driver = "time";
  b.metrics.front().change = 0.123;
  b.metrics.front().change_lower = 0.098;
  b.metrics.front().change_upper = 0.141;
  EXPECT_EQ(change_text(b), "regression, time 12.3% slower (interval 9.8% to 14.1% slower)");
}

TEST(FirstContact, ANoisyBenchmarkOfTheReferenceGateIsAdvisedTheReferenceRounds) {
  // The main job gates a suite against a reference build in interleaved rounds (--against-rounds, ci/perf.sh's
  // PERFGATE_AB_ROUNDS); its too-noisy benchmarks were advised "--rounds", which sets the run's own process runs
  // and leaves the gate's rounds as they were. A stored suite's noisy benchmarks take the run's process runs.
  const ComparisonReport r = compare(side_of(6, 0.005, 0.04, 3, 50), side_of(6, 0.005, 0.04, 3, 60), CompareOptions{});
  ASSERT_GT(r.counts.noisy, 0) << r.benchmarks[0].reason;
  auto not_judged = [](const ComparisonReport& combined) {
    const std::string t = render_terminal(combined, false, ReportOptions{});
    const auto at = t.find("too noisy to judge");
    return at == std::string::npos ? t : t.substr(at, t.find('\n', at) - at);
  };

  const SuiteReport relative{"lora_backward", "reference 0aaa6ee", true, true, r};
  const std::string alone = not_judged(combine_reports({relative}));
  EXPECT_NE(alone.find("more interleaved rounds against the reference build decide (--against-rounds; ci/perf.sh: "
                       "PERFGATE_AB_ROUNDS)"),
            std::string::npos)
      << alone;
  EXPECT_EQ(alone.find("(--rounds)"), std::string::npos) << alone;

  ComparisonReport stored_report = r;
  for (auto& b : stored_report.benchmarks) b.suite = "synthetic";
  const SuiteReport stored{"synthetic", "baselines/x/synthetic.json", true, false, stored_report};
  const std::string both = not_judged(combine_reports({relative, stored}));
  EXPECT_NE(both.find("lora_backward: more interleaved rounds against the reference build decide"), std::string::npos)
      << both;
  EXPECT_NE(both.find("; synthetic: more process runs of this build decide (--rounds; ci/perf.sh: PERFGATE_ROUNDS)"),
            std::string::npos)
      << both;

  // perfgate run against a stored baseline: the run's own process runs, not "per side" or "more files to compare".
  const std::string alone_stored = not_judged(combine_reports({stored}));
  EXPECT_NE(alone_stored.find("more process runs of this build decide (--rounds; ci/perf.sh: PERFGATE_ROUNDS)"),
            std::string::npos)
      << alone_stored;
  EXPECT_EQ(alone_stored.find("files to compare"), std::string::npos) << alone_stored;

  // perfgate ab's two interleaved builds keep the summary's own advice.
  ComparisonReport ab_report = r;
  ab_report.options.paired_runs = true;
  EXPECT_TRUE(combine_reports({SuiteReport{"lora_backward", "", true, false, ab_report}}).noisy_advice.empty());
}

TEST(FirstContact, TheNextStepDoesNotAdvisePinningWhatRanPinned) {
  // Repetitions that spread by 20% inside each run: unpinned, the advice is to pin; where every process run says
  // it ran pinned (perfgate.run.cpus, as the runner writes it), the advice names those CPUs instead.
  const auto side = [](std::uint64_t seed, const std::string& cpus) {
    ResultSet rs = side_of(4, 0.2, 0.0, 3, seed);
    if (!cpus.empty())
      for (auto& c : rs.contexts) c.fields[context_keys::kRunCpus] = cpus;
    return rs;
  };
  const ComparisonReport loose = compare(side(70, ""), side(80, ""), CompareOptions{});
  ASSERT_EQ(loose.exit_code, 77) << loose.benchmarks[0].reason;
  EXPECT_NE(loose.next_step.find("--pin-cpus"), std::string::npos) << loose.next_step;
  const ComparisonReport pinned = compare(side(70, "0"), side(80, "0,1"), CompareOptions{});
  ASSERT_EQ(pinned.exit_code, 77) << pinned.benchmarks[0].reason;
  EXPECT_EQ(pinned.next_step.find("--pin-cpus"), std::string::npos) << pinned.next_step;
  EXPECT_NE(pinned.next_step.find("already ran pinned (CPUs 0,1)"), std::string::npos) << pinned.next_step;
  EXPECT_EQ(pinned.current.pinned_cpus, "0,1");
  // One process run of the side unpinned: not a pinned side.
  ResultSet mixed = side(80, "0,1");
  mixed.contexts[1].fields[context_keys::kRunCpus] = "any";
  EXPECT_EQ(compare(side(70, ""), mixed, CompareOptions{}).current.pinned_cpus, "");
}

// ---- any suite name ---------------------------------------------------------------------------------------------
TEST(FirstContact, AnySuiteNameMapsToItsOwnBaselineFile) {
  EXPECT_EQ(suite_file_stem("expert_gemm"), "expert_gemm");
  const std::string sort = suite_file_stem("BM_Sort");
  EXPECT_EQ(sort.rfind("bm_sort-", 0), 0u) << sort;
  EXPECT_NE(suite_file_stem("BM_Sort"), suite_file_stem("bm_sort"));
  EXPECT_NE(suite_file_stem("BM_Fill<int>"), suite_file_stem("BM_Fill<int >"));
  for (const std::string& name :
       std::vector<std::string>{"BM_Fill<int>", "..", "a/b", std::string(300, 'x'), "\xE2\x80\xAE"}) {
    const std::string stem = suite_file_stem(name);
    EXPECT_LE(stem.size(), 100u);
    EXPECT_TRUE(std::all_of(stem.begin(), stem.end(), [](unsigned char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    })) << stem;
    EXPECT_NE(stem, "..");
  }
  EXPECT_EQ(baseline_path("/b", "cpu-x", "BM_Sort").filename().string(), sort + ".json");
}

// ---- one process run per side ----------------------------------------------------------------------------------
TEST(FirstContact, TwoHundredSingleRunAaPairsRaiseNoFalseRegression) {
  // Each pair: 10 benchmarks, one process run a side, 5 repetitions at 1% spread, and a between-process drift of
  // 3% (relative SD, log-normal) that the repetitions cannot show: what two runs of unchanged code look like.
  int regressions = 0, improvements = 0, judged = 0;
  for (std::uint64_t pair = 0; pair < 200; ++pair) {
    std::vector<BenchmarkResult> base, cur;
    for (int i = 0; i < 10; ++i) {
      const std::string name = "s/b" + std::to_string(i);
      const std::uint64_t seed = 1000 * pair + 10 * static_cast<std::uint64_t>(i);
      base.push_back(runs_of(name, 100, 0.01, 0.03, 1, 5, seed + 1));
      cur.push_back(runs_of(name, 100, 0.01, 0.03, 1, 5, seed + 2));
    }
    const ComparisonReport r = compare(set_of(std::move(base)), set_of(std::move(cur)), CompareOptions{});
    regressions += r.counts.regression;
    improvements += r.counts.improvement;
    judged += r.counts.judged;
  }
  EXPECT_EQ(regressions, 0);
  EXPECT_EQ(improvements, 0);
  EXPECT_EQ(judged, 0);  // and none claims "unchanged" either: the prior's interval is wider than the threshold
}

TEST(FirstContact, FifteenPercentAtOnePercentSpreadIsNotJudgedFromOneRunPerSide) {
  const ResultSet base = set_of({runs_of("s/sort", 100, 0.01, 0.0, 1, 5, 7)});
  const ResultSet cur = set_of({runs_of("s/sort", 115, 0.01, 0.0, 1, 5, 8)});
  const ComparisonReport r = compare(base, cur, CompareOptions{});
  const MetricComparison& m = r.benchmarks[0].metrics[0];
  EXPECT_EQ(r.benchmarks[0].verdict, Verdict::noisy) << m.reason;
  EXPECT_LT(m.change_lower, 0.05);  // the prior's between-run noise: the interval reaches below the threshold
  EXPECT_GT(m.change_upper, 0.25);
  EXPECT_EQ(r.exit_code, 77);
  const std::string line = summary_line(r);
  EXPECT_NE(line.find("largest unconfirmed change: s/sort time "), std::string::npos) << line;
  EXPECT_NE(line.find("% slower -- "), std::string::npos) << line;  // in words, as every other line says it
  EXPECT_EQ(line.find("time +"), std::string::npos) << line;
}

// Between two builds a failure says in which: the after build (the before build ran it), or both.
TEST(FirstContact, AFailureBetweenTwoBuildsSaysWhichBuildFailed) {
  CompareOptions two_builds;
  two_builds.sides = SideNames{"before", "after", true};
  BenchmarkResult failed = bench("s/k0", {});
  failed.error = "no device";
  const ResultSet ran = side_of(1, 0.01, 0.0, 3, 90), broke = set_of({failed});
  const std::string after_only = render_terminal(compare(ran, broke, two_builds), false);
  EXPECT_NE(after_only.find("s/k0 failed in the after build: no device"), std::string::npos) << after_only;
  BenchmarkResult failed_too = bench("s/k0", {});
  failed_too.error = "no device";
  const std::string both = render_terminal(compare(set_of({failed_too}), set_of({failed}), two_builds), false);
  EXPECT_NE(both.find("s/k0 failed in both builds: no device"), std::string::npos) << both;
  // Against a stored baseline the run is the only side that runs: "failed", as before.
  const std::string stored = render_terminal(compare(ran, set_of({failed}), CompareOptions{}), false);
  EXPECT_NE(stored.find("s/k0 failed: no device"), std::string::npos) << stored;
}
