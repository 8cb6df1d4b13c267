// perfgate/host_dependent.hpp: benchmarks a suite marks as following the host are informational against a
// stored baseline, unless they have a band of their own.
#include "perfgate/host_dependent.hpp"

#include <gtest/gtest.h>

#include "perfgate/loader.hpp"
#include "perfgate/options.hpp"
#include "test_support.hpp"

using namespace perfgate;
using namespace perfgate::test_support;

namespace {

ResultSet side(std::vector<BenchmarkResult> benches, const std::string& host_dependent) {
  return marked_run(std::move(benches), kHostDependentKey, host_dependent);
}

const char* kPattern = "transfers/(h2d|d2h)/(pageable|mapped)/.*";

// d2h/pageable 25% slower (as on a fresh machine of the class), pinned 25% slower too, d2d unchanged.
struct Pair {
  ResultSet base, cur;
};
Pair slower_host(const std::string& pattern_in_current) {
  return {side({bench("transfers/d2h/pageable/bytes:1", noisy(100, 0.01, 20, 1)),
                bench("transfers/h2d/pinned/bytes:1", noisy(100, 0.01, 20, 2)),
                bench("transfers/d2d/gpu:0/bytes:1", noisy(50, 0.01, 20, 3))},
               ""),
          side({bench("transfers/d2h/pageable/bytes:1", noisy(125, 0.01, 20, 4)),
                bench("transfers/h2d/pinned/bytes:1", noisy(125, 0.01, 20, 5)),
                bench("transfers/d2d/gpu:0/bytes:1", noisy(50, 0.01, 20, 6))},
               pattern_in_current)};
}

}  // namespace

TEST(HostDependent, MarkedBenchmarkIsInformationalOthersStillGate) {
  auto [base, cur] = slower_host(kPattern);
  auto r = compare(base, cur, within_run_options());
  ASSERT_EQ(r.benchmarks[0].verdict, Verdict::regression);
  ASSERT_EQ(r.counts.regression, 2);
  EXPECT_EQ(make_host_dependent_informational(r, base, cur, nullptr), 1);
  const auto& pageable = r.benchmarks[0];
  EXPECT_EQ(pageable.verdict, Verdict::noisy);
  EXPECT_NE(pageable.reason.find("host-dependent"), std::string::npos) << pageable.reason;
  for (const auto& m : pageable.metrics) EXPECT_FALSE(m.gated) << m.name;
  EXPECT_NEAR(pageable.metrics[0].change, 0.25, 0.03);  // still reported
  // The pinned copy is not host-dependent: its regression stands, and so does the exit code.
  EXPECT_EQ(r.benchmarks[1].verdict, Verdict::regression);
  EXPECT_EQ(r.benchmarks[2].verdict, Verdict::unchanged);
  EXPECT_EQ(r.counts.regression, 1);
  EXPECT_EQ(r.counts.noisy, 1);
  EXPECT_EQ(r.exit_code, 1);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes.back().find("1 host-dependent benchmark reported, not gated"), std::string::npos) << r.notes.back();
}

TEST(HostDependent, OnlyHostDependentChangesNeverFailTheRun) {
  auto [base, cur] = slower_host("transfers/(d2h/pageable|h2d/pinned)/.*");
  auto r = compare(base, cur, within_run_options());
  ASSERT_EQ(r.exit_code, 1);
  EXPECT_EQ(make_host_dependent_informational(r, base, cur, nullptr), 2);
  EXPECT_EQ(r.counts.regression, 0);
  EXPECT_EQ(r.exit_code, 0);
}

TEST(HostDependent, ABandOfItsOwnKeepsItGated) {
  auto [base, cur] = slower_host(kPattern);
  CompareOptions o = within_run_options();
  o = resolve_rule_options(
      RuleSources{
          o, parse_threshold_config(R"({"benchmarks": {"transfers/d2h/pageable/.*": 0.15}})", "thresholds.json"), {}},
      "");  // config over the built-in values
  auto r = compare(base, cur, o);
  EXPECT_TRUE(has_own_threshold(o, "transfers/d2h/pageable/bytes:1"));
  EXPECT_FALSE(has_own_threshold(o, "transfers/h2d/pinned/bytes:1"));
  const auto band = [&](const std::string& name) { return has_own_threshold(o, name); };
  EXPECT_EQ(make_host_dependent_informational(r, base, cur, band), 0);
  EXPECT_EQ(r.benchmarks[0].verdict, Verdict::regression);  // +25% beyond its own 15%
}

// A band learned from a handful of hosts does not keep a host-dependent benchmark gated: on 11 fresh H100s, h2d
// pageable's session levels spread -11% to +5% and one host read +22.6%, a false regression against the band of the
// other ten. Only a threshold of its own (a reviewer's decision) does.
TEST(HostDependent, LearnedNoiseAloneLeavesItInformational) {
  auto [base, cur] = slower_host(kPattern);
  CompareOptions o = within_run_options();
  LearnedNoiseTable learned;
  learned.machine_class = "gpu-h100-x1";
  learned.bands[{"transfers/d2h/pageable/bytes:1", "time"}] = {0.02, 10, std::nullopt, 0};
  o.noise.learned_noise = std::make_shared<const LearnedNoiseTable>(learned);
  EXPECT_FALSE(gated_against_another_host(o, "transfers/d2h/pageable/bytes:1"));
  auto r = compare(base, cur, o);
  EXPECT_EQ(make_host_dependent_informational(r, base, cur, o), 1);  // the pass perfgate run applies
  EXPECT_EQ(r.benchmarks[0].verdict, Verdict::noisy);
  EXPECT_NE(r.benchmarks[0].reason.find("threshold of its own"), std::string::npos) << r.benchmarks[0].reason;

  o.rule.config = parse_threshold_config(R"({"benchmarks": {"transfers/d2h/pageable/.*": 0.15}})", "thresholds.json");
  EXPECT_TRUE(gated_against_another_host(o, "transfers/d2h/pageable/bytes:1"));
}

TEST(HostDependent, WithoutTheContextKeyNothingChanges) {
  auto [base, cur] = slower_host("");
  auto r = compare(base, cur, within_run_options());
  EXPECT_EQ(make_host_dependent_informational(r, base, cur, nullptr), 0);
  EXPECT_EQ(r.counts.regression, 2);
  EXPECT_FALSE(host_dependence(base, cur).has_value());
}

TEST(HostDependent, TheBaselineSideCanNameItToo) {
  auto [base, cur] = slower_host("");
  base.contexts.front().fields[kHostDependentKey] = kPattern;
  const auto d = host_dependence(base, cur);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->pattern, kPattern);
}

TEST(HostDependent, InvalidRegexIsBadInputNamingTheFile) {
  auto [base, cur] = slower_host("transfers/(h2d");
  try {
    host_dependence(base, cur);
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file, "run.json");
    EXPECT_NE(std::string(e.what()).find("perfgate.host_dependent"), std::string::npos) << e.what();
  }
}

// A class's thresholds.json can name benchmarks that follow the host on that class only (one-thread timings on
// a large shared VM), beside what the suite marks: both are informational, and the note names each source.
TEST(HostDependent, TheClassConfigCanNameMoreThanTheSuite) {
  auto [base, cur] = slower_host(kPattern);
  CompareOptions o = within_run_options();
  o.rule.config = parse_threshold_config(R"({"host_dependent": "transfers/h2d/pinned/.*"})", "thresholds.json");
  auto r = compare(base, cur, o);
  ASSERT_EQ(r.counts.regression, 2);
  EXPECT_EQ(make_host_dependent_informational(r, base, cur, nullptr, o.rule.config.host_dependent), 2);
  EXPECT_EQ(r.counts.regression, 0);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.benchmarks[1].reason.find("thresholds.json host_dependent 'transfers/h2d/pinned/.*'"), std::string::npos)
      << r.benchmarks[1].reason;
  EXPECT_NE(r.benchmarks[0].reason.find("perfgate.host_dependent"), std::string::npos) << r.benchmarks[0].reason;
  EXPECT_NE(r.notes.back().find("2 host-dependent benchmarks"), std::string::npos) << r.notes.back();
  EXPECT_NE(r.notes.back().find("thresholds.json host_dependent"), std::string::npos) << r.notes.back();
  EXPECT_EQ(r.benchmarks[2].verdict, Verdict::unchanged);
}

TEST(HostDependent, TheClassConfigAloneIsEnough) {
  auto [base, cur] = slower_host("");
  auto r = compare(base, cur, within_run_options());
  const ThresholdConfig config = parse_threshold_config(R"({"host_dependent": "transfers/d2h/.*"})", "thresholds.json");
  EXPECT_EQ(make_host_dependent_informational(r, base, cur, nullptr, config.host_dependent), 1);
  EXPECT_EQ(r.benchmarks[0].verdict, Verdict::noisy);
  EXPECT_EQ(r.benchmarks[1].verdict, Verdict::regression);
}

TEST(HostDependent, ClassPatternMustBeAValidNonEmptyRegex) {
  for (const char* text :
       {R"({"host_dependent": "lora_backward/(ci"})", R"({"host_dependent": ""})", R"({"host_dependent": 3})"}) {
    try {
      parse_threshold_config(text, "baselines/x/thresholds.json");
      FAIL() << "no InputError for " << text;
    } catch (const InputError& e) {
      EXPECT_EQ(e.file, "baselines/x/thresholds.json");
      EXPECT_EQ(e.field, "host_dependent") << e.what();
    }
  }
}
