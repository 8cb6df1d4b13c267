// GPU: the streamed engine reproduces the resident result bit for bit on a tiny model, and its cache
// bookkeeping adds up. Skipped (with the reason) where no GPU is present.
#include "perfgate/streaming_prefetch/engine.hpp"

#include <cstdint>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "perfgate/bench/cuda.hpp"

namespace ps = perfgate::streaming_prefetch;

namespace {

#define REQUIRE_GPU()                                                                                     \
  do {                                                                                                    \
    if (perfgate::bench::gpu_count() < 1) GTEST_SKIP() << "no GPU: " << perfgate::bench::no_gpu_reason(); \
  } while (0)

std::vector<std::uint16_t> resident_output(ps::StreamingEngine& e) {
  e.configure(ps::Mode::resident);
  e.step();
  return e.output();
}

}  // namespace

TEST(StreamingEngine, StreamedEqualsResidentBitForBit) {
  REQUIRE_GPU();
  const ps::ModelShape m = ps::model_preset("tiny");
  ps::StreamingEngine e(m);
  const auto ref = resident_output(e);
  std::size_t nonzero = 0;
  for (auto bits : ref) nonzero += (bits & 0x7fff) != 0;
  ASSERT_GT(nonzero, ref.size() / 2) << "reference is mostly zeros: the comparison would be vacuous";

  for (int slots : {1, 2, 4, 6}) {
    for (int d = 0; d < slots; ++d) {
      e.configure(ps::Mode::streamed, {d, slots, 0});
      for (int s = 0; s < 3; ++s) {
        const ps::StepStats st = e.step();
        ASSERT_EQ(e.output(), ref) << "distance " << d << " slots " << slots << " step " << s;
        EXPECT_EQ(st.ensures, m.layers);
        // tiny has 5 layers; with 6 slots every layer stays cached after the first step.
        if (slots < m.layers) {
          EXPECT_EQ(st.h2d_bytes, static_cast<std::size_t>(m.layers) * m.bytes_per_layer());
          if (d == 0) { EXPECT_EQ(st.hits, 0); }
          if (d > 0 && s > 0) {
            EXPECT_EQ(st.hits, m.layers);  // steady state: everything was prefetched
          }
        } else if (s > 0) {
          EXPECT_EQ(st.h2d_bytes, 0u);
          EXPECT_EQ(st.hits, m.layers);
          EXPECT_EQ(st.ready, m.layers);
        }
        EXPECT_GT(st.step_ms, 0.0);
        EXPECT_GE(st.compute_ms, 0.0);
        EXPECT_GE(st.wait_ms, 0.0);
        EXPECT_LE(st.ready, st.ensures);
      }
    }
  }
  e.configure(ps::Mode::serial);
  for (int s = 0; s < 2; ++s) {
    const ps::StepStats st = e.step();
    ASSERT_EQ(e.output(), ref) << "serial step " << s;
    EXPECT_EQ(st.h2d_bytes, static_cast<std::size_t>(m.layers) * m.bytes_per_layer());
  }
  e.configure(ps::Mode::transfer_only, {0, 2, 0});
  const ps::StepStats io = e.step();
  EXPECT_EQ(io.h2d_bytes, static_cast<std::size_t>(m.layers) * m.bytes_per_layer());
  EXPECT_GT(io.transfer_ms, 0.0);
}

TEST(StreamingEngine, PlantedGemmsLeaveTheOutputAlone) {
  REQUIRE_GPU();
  const ps::ModelShape m = ps::model_preset("tiny");
  ps::StreamingEngine e(m);
  const auto ref = resident_output(e);
  ASSERT_TRUE(e.set_planted(0.10).any());
  for (ps::Mode mode : {ps::Mode::resident, ps::Mode::serial}) {
    e.configure(mode, {});
    e.step();
    EXPECT_EQ(e.output(), ref) << ps::mode_name(mode);
  }
  e.configure(ps::Mode::streamed, {1, 2, 0});
  e.step();
  EXPECT_EQ(e.output(), ref) << "streamed";
  EXPECT_FALSE(e.set_planted(0.0).any());
}

TEST(StreamingEngine, DifferentWeightsGiveDifferentBits) {
  // Guards the equality test: the output depends on the weights that were actually streamed.
  REQUIRE_GPU();
  const ps::ModelShape m = ps::model_preset("tiny");
  ps::StreamingEngine a(m, 1), b(m, 2);  // same input, different weights
  const auto ra = resident_output(a);
  const auto rb = resident_output(b);
  ASSERT_EQ(ra.size(), rb.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < ra.size(); ++i) differ += ra[i] != rb[i];
  EXPECT_GT(differ, ra.size() * 9 / 10) << "the output barely depends on the weights";
}

TEST(StreamingEngine, RejectsBadArguments) {
  REQUIRE_GPU();
  const ps::ModelShape m = ps::model_preset("tiny");
  ps::StreamingEngine e(m);
  EXPECT_THROW(e.configure(ps::Mode::streamed, {2, 2, 0}), std::invalid_argument);
  EXPECT_THROW(e.configure(ps::Mode::streamed, {0, 0, 0}), std::invalid_argument);
  ps::ModelShape none = m;
  none.layers = 0;
  EXPECT_THROW(ps::StreamingEngine bad(none), std::invalid_argument);
}
