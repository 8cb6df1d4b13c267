// The synthetic suite's injected work must scale exactly as specified. Work is counted, not timed:
// the LCG state after n steps and the walk's slot after n links identify n.
#include "perfgate/synthetic/synthetic.hpp"

#include <cstdlib>
#include <stdexcept>

#include <gtest/gtest.h>

namespace ps = perfgate::synthetic;

namespace {

// How many chain steps did run_chain really execute? Found by matching its state with the
// reference over a window around the expected count (the LCG has period 2^64, so states are unique).
std::uint64_t steps_executed(std::uint64_t state, std::uint64_t lo, std::uint64_t hi) {
  std::uint64_t x = ps::chain_reference(lo);
  for (std::uint64_t n = lo; n <= hi; ++n) {
    if (x == state) return n;
    x = x * ps::kChainMul + ps::kChainAdd;
  }
  return 0;
}

}  // namespace

TEST(SyntheticChain, ReferenceMatchesLoop) {
  for (std::uint64_t n : {0ULL, 1ULL, 2ULL, 3ULL, 1000ULL, 12345ULL, 100000ULL}) {
    EXPECT_EQ(ps::run_chain(n), ps::chain_reference(n)) << n;
  }
  EXPECT_NE(ps::run_chain(1000), ps::chain_reference(1001));
}

TEST(SyntheticWalk, ReferenceMatchesLoopAndIsOneCycle) {
  const ps::Walk walk(4096);
  for (std::uint64_t n : {0ULL, 1ULL, 4095ULL, 4096ULL, 20000ULL}) EXPECT_EQ(walk.run(n), walk.reference(n)) << n;
  EXPECT_EQ(walk.run(4096), walk.run(0));  // a single cycle through all slots
  EXPECT_NE(walk.run(4095), walk.run(0));
}

TEST(SyntheticSlowdown, TenPercentIsExactlyTenPercentMoreUnits) {
  ps::Config c;
  c.slowdown = 0.10;
  for (std::uint64_t base : {1000ULL, 10000ULL, 100000ULL}) {
    const std::uint64_t units = ps::planned_units(c, "synthetic/chain/lcg/units:x", base);
    EXPECT_EQ(units, base + base / 10);
    // The loop really executes that many steps.
    EXPECT_EQ(steps_executed(ps::run_chain(units), base, base * 2), base + base / 10);
  }
  c.slowdown = 0.05;
  EXPECT_EQ(ps::planned_units(c, "b", 20000), 21000U);
  c.slowdown = -0.5;
  EXPECT_EQ(ps::planned_units(c, "b", 20000), 10000U);
  c.slowdown = 0.0;
  EXPECT_EQ(steps_executed(ps::run_chain(ps::planned_units(c, "b", 5000)), 4000, 6000), 5000U);
}

TEST(SyntheticSlowdown, FilterRestrictsToMatchingNames) {
  ps::Config c;
  c.slowdown = 0.10;
  c.slowdown_filter = "chain/lcg/units:10000$";
  EXPECT_EQ(ps::planned_units(c, "synthetic/chain/lcg/units:10000", 10000), 11000U);
  EXPECT_EQ(ps::planned_units(c, "synthetic/chain/lcg/units:100000", 100000), 100000U);
  EXPECT_EQ(ps::planned_units(c, "synthetic/walk/l1/units:20000", 20000), 20000U);
}

TEST(SyntheticSlowdown, PhaseRestrictsToOnePhase) {
  ps::Config c;
  c.slowdown = 0.20;
  c.slowdown_phase = "B";
  EXPECT_EQ(ps::planned_units(c, "synthetic/phased/chain_walk/units:100000", 60000, "A"), 60000U);
  EXPECT_EQ(ps::planned_units(c, "synthetic/phased/chain_walk/units:100000", 40000, "B"), 48000U);
  EXPECT_EQ(ps::planned_units(c, "synthetic/chain/lcg/units:1000", 1000), 1000U);
}

TEST(SyntheticConfig, FlagsOverrideEnvAndAreRemoved) {
  ::setenv("PERFGATE_SYNTHETIC_SLOWDOWN", "0.25", 1);
  ::setenv("PERFGATE_SYNTHETIC_SLOWDOWN_FILTER", "walk", 1);
  ps::Config c = ps::Config::from_env();
  EXPECT_DOUBLE_EQ(c.slowdown, 0.25);
  EXPECT_EQ(c.slowdown_filter, "walk");
  std::vector<std::string> args{"bench", "--slowdown=0.1", "--benchmark_filter=x", "--slowdown_filter=chain"};
  c.apply_flags(args);
  EXPECT_DOUBLE_EQ(c.slowdown, 0.1);
  EXPECT_EQ(c.slowdown_filter, "chain");
  EXPECT_EQ(args, (std::vector<std::string>{"bench", "--benchmark_filter=x"}));
  ::unsetenv("PERFGATE_SYNTHETIC_SLOWDOWN");
  ::unsetenv("PERFGATE_SYNTHETIC_SLOWDOWN_FILTER");
}

TEST(SyntheticConfig, BadValuesAreRejected) {
  for (const char* bad :
       {"--slowdown=ten", "--slowdown=-1", "--slowdown_filter=(", "--slowdown=0.1x", "--slowdown=nan"}) {
    ps::Config c;
    std::vector<std::string> args{bad};
    EXPECT_THROW(c.apply_flags(args), std::invalid_argument) << bad;
  }
  ps::Config ok;
  std::vector<std::string> args{"--slowdown=-0.5", "--slowdown_filter=a|b"};
  EXPECT_NO_THROW(ok.apply_flags(args));
}
