// The GPU timeline analysis (timeline.hpp) on synthetic recordings whose answers are known by hand.
#include "perfgate/timeline.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tl = perfgate::timeline;

namespace {

// A recording built step by step: each activity gets its own launch call, inside the range opened last (the
// host queues work inside a range, the GPU runs it later) unless given.
struct Builder {
  tl::Recording r;
  std::uint32_t next = 1;
  std::uint64_t cursor = 0;  // the next launch time
  void range(const std::string& name, std::uint64_t start, std::uint64_t end, int depth = 0) {
    r.ranges.push_back({name, start, end, depth});
    cursor = start + 1;
  }
  void add(tl::Kind kind, const std::string& name, std::uint32_t stream, std::uint64_t start, std::uint64_t end,
           std::uint64_t launched) {
    r.activities.push_back({kind, name, stream, start, end, next, 0});
    r.api_calls.push_back({"cudaLaunchKernel", launched, launched + 2, next});
    ++next;
  }
  void kernel(const std::string& name, std::uint32_t stream, std::uint64_t start, std::uint64_t end) {
    add(tl::Kind::kernel, name, stream, start, end, cursor++);
  }
  void sync(std::uint64_t start, std::uint64_t end) {
    r.api_calls.push_back({"cudaStreamSynchronize", start, end, next++});
  }
};

tl::Step only_step(const tl::Recording& r) {
  const auto steps = tl::split_steps(r, {"Expert_Forward"});
  EXPECT_EQ(steps.size(), 1u);
  return steps.empty() ? tl::Step{} : steps.front();
}

}  // namespace

TEST(TimelineParse, ReadsARecording) {
  const std::string json = R"({"perfgate_timeline": 1, "status": "recorded", "dropped": 0,
    "activities": [{"kind": "kernel", "name": "k", "stream": 7, "start": 100, "end": 250, "correlation": 3},
                   {"kind": "memcpy", "name": "memcpy HtoD", "stream": 8, "start": 90, "end": 400,
                    "correlation": 4, "bytes": 4096}],
    "api": [{"name": "cudaLaunchKernel", "start": 80, "end": 85, "correlation": 3}],
    "ranges": [{"name": "Expert_Forward", "start": 70, "end": 95, "depth": 0}]})";
  const tl::Recording r = tl::parse_recording(json, "t.json");
  ASSERT_EQ(r.activities.size(), 2u);
  EXPECT_EQ(r.activities[0].stream, 7u);
  EXPECT_DOUBLE_EQ(r.activities[0].duration(), 150);
  EXPECT_TRUE(r.activities[1].is_copy());
  EXPECT_EQ(r.activities[1].bytes, 4096u);
  EXPECT_EQ(r.api_calls.at(0).correlation, 3u);
  EXPECT_EQ(r.ranges.at(0).name, "Expert_Forward");
  EXPECT_TRUE(r.unavailable.empty());
}

TEST(TimelineParse, UnavailableCarriesTheReason) {
  const tl::Recording r = tl::parse_recording(
      R"({"perfgate_timeline": 1, "status": "unavailable", "reason": "libcupti.so not found"})", "t.json");
  EXPECT_EQ(r.unavailable, "libcupti.so not found");
  EXPECT_TRUE(r.activities.empty());
}

TEST(TimelineParse, MalformedFilesNameTheFileAndTheField) {
  const auto message = [](const std::string& json) {
    try {
      tl::parse_recording(json, "side.timeline.json");
    } catch (const std::invalid_argument& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  EXPECT_NE(message("{").find("side.timeline.json: not a timeline recording"), std::string::npos);
  EXPECT_NE(message(R"({"status": "recorded"})").find("perfgate_timeline: missing"), std::string::npos);
  const std::string base = R"({"perfgate_timeline": 1, "status": "recorded", "api": [], "ranges": [], )";
  EXPECT_NE(message(base + R"("activities": [{"kind": "kernel", "name": "k", "stream": 1, "start": 5,
                                "correlation": 1}]})")
                .find("side.timeline.json: activities[0].end: missing"),
            std::string::npos);
  EXPECT_NE(message(base + R"("activities": [{"kind": "kernel", "name": "k", "stream": 1, "start": 9, "end": 5,
                                "correlation": 1}]})")
                .find("activities[0]: end 5 before start 9"),
            std::string::npos);
  EXPECT_NE(message(base + R"("activities": [{"kind": "graph", "name": "k", "stream": 1, "start": 1, "end": 5,
                                "correlation": 1}]})")
                .find("activities[0].kind: 'graph' is not kernel, memcpy or memset"),
            std::string::npos);
  EXPECT_NE(message(base + R"("activities": [{"kind": "kernel", "name": "k", "stream": -1, "start": 1, "end": 5,
                                "correlation": 1}]})")
                .find("activities[0].stream: not a non-negative integer"),
            std::string::npos);
}

TEST(TimelineRanges, NumberedNamesMatchTheirPattern) {
  EXPECT_TRUE(tl::range_matches("layer_X_ffn", "layer_12_ffn"));
  EXPECT_FALSE(tl::range_matches("layer_X_ffn", "layer_x_ffn"));
  EXPECT_TRUE(tl::range_matches("prefetch_layers_[X,Y]", "prefetch_layers_[1,3]"));
  EXPECT_FALSE(tl::range_matches("Expert_Forward", "Expert_Forward_2"));
}

TEST(TimelineSteps, RepetitionsBeginAtTheFirstRangeAndKeepOnlyWorkLaunchedInside) {
  Builder b;
  b.range("Expert_Forward", 0, 50);
  b.range("Routing", 1, 20, 1);
  b.kernel("topk", 1, 100, 200);
  b.range("Expert_Forward", 1000, 1050);
  b.kernel("topk", 1, 1100, 1180);
  b.add(tl::Kind::kernel, "l2_flush", 1, 900, 990, 800);  // launched between the ranges: not the fixture's
  const auto steps = tl::split_steps(b.r, {"Expert_Forward", "Routing"});
  ASSERT_EQ(steps.size(), 2u);
  ASSERT_EQ(steps[0].activities.size(), 1u);
  EXPECT_EQ(steps[0].activity_ranges[0], "Routing");
  EXPECT_DOUBLE_EQ(steps[0].span_ns, 100);
  EXPECT_DOUBLE_EQ(steps[1].span_ns, 80);
  EXPECT_EQ(steps[1].activities[0]->name, "topk");
}

TEST(TimelineSteps, StreamingLayersGroupUntilTheFirstLayerComesBack) {
  Builder b;
  for (std::uint64_t rep = 0; rep < 2; ++rep) {
    const std::uint64_t t = rep * 10000;
    b.range("ensure_layer_0", t, t + 10);
    b.range("layer_0_ffn", t + 10, t + 20);
    b.kernel("gemm", 1, t + 100, t + 300);
    b.range("ensure_layer_1", t + 30, t + 40);
    b.range("layer_1_ffn", t + 40, t + 50);
    b.kernel("gemm", 1, t + 400, t + 600);
  }
  const auto steps = tl::split_steps(b.r, {"ensure_layer_X", "layer_X_ffn"});
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].activities.size(), 2u);
  EXPECT_DOUBLE_EQ(steps[0].span_ns, 500);
  EXPECT_DOUBLE_EQ(steps[0].launch_gap_ns, 100);
}

TEST(TimelineStep, ConcurrencyIsKernelTimeBesideOtherWork) {
  Builder b;
  b.range("Expert_Forward", 0, 40);
  b.kernel("a", 1, 100, 200);
  b.kernel("b", 2, 150, 250);
  const tl::Step s = only_step(b.r);
  EXPECT_DOUBLE_EQ(s.span_ns, 150);
  EXPECT_DOUBLE_EQ(s.busy_ns, 150);
  EXPECT_DOUBLE_EQ(s.kernel_ns, 200);
  EXPECT_DOUBLE_EQ(s.overlap_ns, 50);
  EXPECT_DOUBLE_EQ(s.kernel_overlapped_ns, 100);  // 50 of a and 50 of b
  EXPECT_DOUBLE_EQ(s.copy_compute_overlap_ns, 0);
  EXPECT_TRUE(s.gaps.empty());
  EXPECT_EQ(s.launches, 2);
}

TEST(TimelineStep, CopyComputeOverlapAndBackToBackWork) {
  Builder b;
  b.range("Expert_Forward", 0, 40);
  b.add(tl::Kind::memcpy, "memcpy HtoD", 2, 100, 200, 10);
  b.kernel("a", 1, 150, 300);
  b.kernel("c", 1, 300, 350);  // starts as a ends: no overlap, no gap
  const tl::Step s = only_step(b.r);
  EXPECT_DOUBLE_EQ(s.copy_compute_overlap_ns, 50);
  EXPECT_DOUBLE_EQ(s.copy_ns, 100);
  EXPECT_DOUBLE_EQ(s.kernel_ns, 200);
  EXPECT_DOUBLE_EQ(s.overlap_ns, 50);
  EXPECT_TRUE(s.gaps.empty());
}

TEST(TimelineStep, GapsAfterAHostSyncAreToldFromLaunchGaps) {
  Builder b;
  b.range("Expert_Forward", 0, 1000);
  b.range("Linear1_Computation", 10, 20, 1);
  b.kernel("gemm1", 3, 100, 200);
  b.sync(30, 210);                                      // returns once gemm1 is done
  b.add(tl::Kind::kernel, "swiglu", 3, 600, 700, 590);  // launched after the host's own work
  b.add(tl::Kind::kernel, "gemm2", 3, 760, 800, 650);   // queued early, 60 ns of launch latency
  const tl::Step s = only_step(b.r);
  ASSERT_EQ(s.gaps.size(), 2u);
  EXPECT_EQ(s.gaps[0].cause, tl::GapCause::sync);
  EXPECT_DOUBLE_EQ(s.gaps[0].length_ns, 400);
  EXPECT_DOUBLE_EQ(s.gaps[0].start_ns, 100);
  EXPECT_EQ(s.gaps[0].after, "gemm1");
  EXPECT_EQ(s.gaps[0].after_range, "Linear1_Computation");
  EXPECT_EQ(s.gaps[0].stream, 3u);
  EXPECT_EQ(s.gaps[0].sync_call, "cudaStreamSynchronize");
  EXPECT_EQ(s.gaps[1].cause, tl::GapCause::launch);
  EXPECT_DOUBLE_EQ(s.sync_gap_ns, 400);
  EXPECT_DOUBLE_EQ(s.launch_gap_ns, 60);
  EXPECT_DOUBLE_EQ(s.span_ns, s.kernel_ns - s.overlap_ns + s.idle_ns());
}

TEST(TimelineStep, CriticalPathFollowsWhatEachActivityWaitedFor) {
  Builder b;
  b.range("Expert_Forward", 0, 40);
  b.kernel("a", 1, 100, 200);
  b.kernel("side", 2, 100, 150);  // finishes first: off the path
  b.kernel("c", 1, 230, 330);
  const tl::Step s = only_step(b.r);
  EXPECT_DOUBLE_EQ(s.critical_ns.at("c"), 100);
  EXPECT_DOUBLE_EQ(s.critical_ns.at("a"), 100);
  EXPECT_DOUBLE_EQ(s.critical_ns.at("(idle)"), 30);
  EXPECT_EQ(s.critical_ns.count("side"), 0u);
}

namespace {

// `reps` repetitions of: kernel a on stream 1 and kernel b on stream `b_stream`, b starting at `b_start`
// (relative), a lasting `a_len`.
tl::Summary side(std::uint64_t a_len, std::uint32_t b_stream, std::uint64_t b_start, int reps = 5) {
  Builder b;
  for (int i = 0; i < reps; ++i) {
    const std::uint64_t t = static_cast<std::uint64_t>(i) * 100000;
    b.range("Expert_Forward", t, t + 40);
    b.kernel("a", 1, t + 100, t + 100 + a_len);
    b.kernel("b", b_stream, t + 100 + b_start, t + 100 + b_start + 1000);
  }
  return tl::summarise(tl::split_steps(b.r, {"Expert_Forward"}));
}

}  // namespace

TEST(TimelineDiff, LostOverlapLeadsWhenTheKernelsDidNotSlow) {
  const tl::Summary before = side(1000, 2, 0);    // a and b side by side: 1000 ns
  const tl::Summary after = side(1000, 1, 1000);  // one after the other: 2000 ns
  EXPECT_EQ(before.steps, 5);
  EXPECT_DOUBLE_EQ(before.span_ns, 1000);
  EXPECT_DOUBLE_EQ(after.span_ns, 2000);
  const tl::TimelineDiff d = tl::diff_timelines(before, after);
  EXPECT_DOUBLE_EQ(d.terms.span, 1000);
  EXPECT_DOUBLE_EQ(d.terms.kernels, 0);
  EXPECT_DOUBLE_EQ(d.terms.lost_overlap, 1000);
  EXPECT_FALSE(d.kernels_explain);
  ASSERT_FALSE(d.causes.empty());
  EXPECT_EQ(d.causes.front().second.rfind("lost overlap", 0), 0u) << d.causes.front().second;
  EXPECT_NE(d.causes.front().second.find("100% -> 0%"), std::string::npos) << d.causes.front().second;
}

TEST(TimelineDiff, ASlowerKernelLeadsAndAgreesWithTheWallTime) {
  const tl::Summary before = side(1000, 1, 1000);
  const tl::Summary after = side(3000, 1, 3000);
  const tl::TimelineDiff d = tl::diff_timelines(before, after);
  EXPECT_DOUBLE_EQ(d.terms.span, 2000);
  EXPECT_DOUBLE_EQ(d.terms.kernels, 2000);
  EXPECT_TRUE(d.kernels_explain);
  ASSERT_FALSE(d.causes.empty());
  EXPECT_NE(d.causes.front().second.find("kernel `a`: 0.001 ms -> 0.003 ms"), std::string::npos)
      << d.causes.front().second;
}

TEST(TimelineDiff, OutlierRepetitionsAreLeftOutOfTheMeans) {
  Builder b;
  for (int i = 0; i < 5; ++i) {
    const std::uint64_t t = static_cast<std::uint64_t>(i) * 100000;
    b.range("Expert_Forward", t, t + 40);
    b.kernel("a", 1, t + 100, t + (i == 0 ? 50100 : 1100));  // the first: a cold start of 50 us
  }
  const tl::Summary s = tl::summarise(tl::split_steps(b.r, {"Expert_Forward"}));
  EXPECT_EQ(s.steps, 4);
  EXPECT_DOUBLE_EQ(s.span_ns, 1000);
  EXPECT_EQ(s.median_step, 1u);
}

TEST(TimelineDiff, KernelsAccountForTheWallTimeOnlyWhenTheyCoverHalfOfIt) {
  EXPECT_TRUE(tl::kernels_account_for(600, 1000));
  EXPECT_FALSE(tl::kernels_account_for(400, 1000));
  EXPECT_FALSE(tl::kernels_account_for(-300, 1000));  // kernels faster, benchmark slower (issue 41)
  EXPECT_TRUE(tl::kernels_account_for(-300, -100));
}

TEST(TimelineSvg, LanesPerStreamRangesColouredGapsShaded) {
  Builder b;
  b.range("Expert_Forward", 0, 1000);
  b.range("Linear1_Computation", 10, 20, 1);
  b.kernel("gemm<float>", 3, 100, 200);
  b.range("Combine", 30, 40, 1);
  b.sync(30, 210);
  b.add(tl::Kind::memcpy, "memcpy HtoD", 9, 600, 700, 590);
  const std::string svg = tl::render_svg(only_step(b.r), "after");
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find(">stream 3<"), std::string::npos);
  EXPECT_NE(svg.find(">stream 9<"), std::string::npos);
  EXPECT_NE(svg.find("gemm&lt;float&gt; (Linear1_Computation)"), std::string::npos);
  EXPECT_NE(svg.find("idle 0.4 us after gemm&lt;float&gt; (host sync)"), std::string::npos);
  EXPECT_NE(svg.find(">Linear1_Computation<"), std::string::npos);
  EXPECT_NE(svg.find(">Expert_Forward<"), std::string::npos);                 // the copy's range: Combine had closed
  EXPECT_EQ(svg.find(">Combine<"), std::string::npos);                        // no work of its own, no legend entry
  EXPECT_EQ(svg.find("http://", svg.find("xmlns") + 40), std::string::npos);  // nothing fetched
  EXPECT_EQ(svg.find("<float>"), std::string::npos);
}

// ---- a real recording: issue 41's planted regression on a lent H200 ----------------------------------------

namespace {

tl::Recording real(const std::string& side) {
  const std::string path = std::string(PERFGATE_TEST_DATA_DIR) + "/timeline/overlap_serial." + side + ".json";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return tl::parse_recording(text.str(), path);
}

const std::vector<std::string> kExpertRanges = {
    "Expert_Forward", "Routing", "Permute", "Linear1_Computation", "Activation", "Linear2_Computation", "Combine"};

}  // namespace

TEST(TimelineReal, OverlapMadeSerialIsLostOverlapNotAKernel) {
  const tl::Recording before = real("before"), after = real("after");
  const auto sb = tl::split_steps(before, kExpertRanges), sa = tl::split_steps(after, kExpertRanges);
  ASSERT_EQ(sb.size(), 8u);
  ASSERT_EQ(sa.size(), 8u);
  // The light kernel ran on a side stream beside cuBLAS; serial, everything is on one stream.
  std::set<std::uint32_t> streams_b, streams_a;
  for (const auto* a : sb[3].activities) streams_b.insert(a->stream);
  for (const auto* a : sa[3].activities) streams_a.insert(a->stream);
  EXPECT_EQ(streams_b.size(), 2u);
  EXPECT_EQ(streams_a.size(), 1u);
  const tl::Summary b = tl::summarise(sb), a = tl::summarise(sa);
  EXPECT_EQ(b.steps, 8);
  EXPECT_NEAR(b.span_ns / 1e6, 7.75, 0.01);
  EXPECT_NEAR(a.span_ns / 1e6, 9.30, 0.01);
  EXPECT_DOUBLE_EQ(a.overlap_ns, 0);  // one stream: nothing concurrent
  for (const auto& s : sa) EXPECT_NEAR(s.span_ns, s.kernel_ns + s.copy_ns - s.overlap_ns + s.idle_ns(), 1);
  const tl::TimelineDiff d = tl::diff_timelines(b, a);
  EXPECT_LT(d.terms.kernels, 0);  // the kernels' summed time fell ...
  EXPECT_GT(d.terms.span, 0);     // ... while the repetition took longer
  EXPECT_FALSE(d.kernels_explain);
  ASSERT_FALSE(d.causes.empty());
  EXPECT_EQ(d.causes.front().second.rfind("lost overlap", 0), 0u) << d.causes.front().second;
  // The picture of the after side: one lane, every range of the fixture coloured.
  const std::string svg = tl::render_svg(sa[a.median_step], "after");
  EXPECT_NE(svg.find(">Linear1_Computation<"), std::string::npos);
  EXPECT_EQ(svg.find(">stream ", svg.find(">stream ") + 1), std::string::npos);
}

TEST(TimelineReal, AHostSyncPlantedIntoTheRealRecordingIsNamedWithItsPlace) {
  // The real before side, changed here as PERFGATE_EXPERT_GEMM_HOST_SYNC_US would change it: in each
  // repetition, the host waits for the stream after the last gate|up GEMM and queues the rest 2 ms later.
  const tl::Recording before = real("before");
  tl::Recording after = before;
  const auto steps = tl::split_steps(before, kExpertRanges);
  ASSERT_EQ(steps.size(), 8u);
  constexpr std::uint64_t kDelay = 2'000'000;
  for (const auto& s : steps) {
    // The end of the repetition's Linear1_Computation work on the GPU, and the last launch inside that range.
    std::uint64_t gemm_end = 0, last_launch = 0;
    std::map<std::uint32_t, std::uint64_t> launch_of;
    for (const auto& c : before.api_calls) launch_of[c.correlation] = c.start_ns;
    for (std::size_t i = 0; i < s.activities.size(); ++i)
      if (s.activity_ranges[i] == "Linear1_Computation") {
        gemm_end = std::max(gemm_end, s.activities[i]->end_ns);
        last_launch = std::max(last_launch, launch_of[s.activities[i]->correlation]);
      }
    ASSERT_GT(gemm_end, 0u);
    // The host returns from the sync when the GEMMs are done and queues the rest kDelay later: its calls and
    // ranges from then on move to that time, the GPU work they launched kDelay later than it ran.
    std::uint64_t first_after = UINT64_MAX;
    for (const auto& c : before.api_calls)
      if (c.start_ns > last_launch && c.start_ns < s.end_ns) first_after = std::min(first_after, c.start_ns);
    ASSERT_LT(first_after, gemm_end);  // the host ran ahead of the GPU
    const std::uint64_t host_shift = gemm_end + kDelay - first_after;
    for (auto& a : after.activities)
      if (launch_of[a.correlation] > last_launch && a.start_ns >= gemm_end && a.start_ns < s.end_ns) {
        a.start_ns += kDelay;
        a.end_ns += kDelay;
      }
    for (auto& c : after.api_calls)
      if (c.start_ns > last_launch && c.start_ns < s.end_ns) {
        c.start_ns += host_shift;
        c.end_ns += host_shift;
      }
    for (auto& r : after.ranges) {
      if (r.start_ns > last_launch && r.start_ns < s.end_ns) r.start_ns += host_shift;
      if (r.end_ns > last_launch && r.end_ns < s.end_ns) r.end_ns += host_shift;
    }
    after.api_calls.push_back({"cudaStreamSynchronize", last_launch + 1, gemm_end + 1000, 0});
  }
  const tl::Summary b = tl::summarise(tl::split_steps(before, kExpertRanges));
  const tl::Summary a = tl::summarise(tl::split_steps(after, kExpertRanges));
  const tl::TimelineDiff d = tl::diff_timelines(b, a);
  EXPECT_NEAR(d.terms.span, kDelay, 0.05 * kDelay);
  EXPECT_NEAR(d.terms.sync_gaps, kDelay, 0.05 * kDelay);
  EXPECT_FALSE(d.kernels_explain);
  ASSERT_FALSE(d.causes.empty());
  const std::string& lead = d.causes.front().second;
  EXPECT_EQ(lead.rfind("new idle gaps after a host synchronisation", 0), 0u) << lead;
  EXPECT_NE(lead.find("(range Linear1_Computation) on stream"), std::string::npos) << lead;
  EXPECT_NE(lead.find("(the host waited in cudaStreamSynchronize)"), std::string::npos) << lead;
}

TEST(TimelineDiff, ACopyThatStoppedOverlappingComputeIsOnTheCriticalPath) {
  const auto side_of = [](bool overlapped) {
    Builder b;
    for (int i = 0; i < 5; ++i) {
      const std::uint64_t t = static_cast<std::uint64_t>(i) * 100000;
      b.range("layer_0_ffn", t, t + 40);
      b.add(tl::Kind::memcpy, "memcpy HtoD", 2, t + 100, t + 600, t + 1);
      // Overlapped, the kernel runs beside the copy; after, it waits for it.
      const std::uint64_t k = overlapped ? t + 100 : t + 600;
      b.kernel("gemm", 1, k, k + 1000);
    }
    return tl::summarise(tl::split_steps(b.r, {"layer_X_ffn"}));
  };
  const tl::Summary before = side_of(true), after = side_of(false);
  EXPECT_DOUBLE_EQ(before.copy_compute_overlap_ns, 500);
  EXPECT_DOUBLE_EQ(before.copy_critical_ns(), 0);
  EXPECT_DOUBLE_EQ(after.copy_critical_ns(), 500);
  const tl::TimelineDiff d = tl::diff_timelines(before, after);
  EXPECT_FALSE(d.kernels_explain);
  ASSERT_GE(d.causes.size(), 2u);
  EXPECT_EQ(d.causes[0].second,
            "a copy moved onto the critical path: copies 0% -> 33% of it (0.000 ms -> 0.001 ms per repetition), "
            "copy/compute overlap 0.001 ms -> 0.000 ms");
  EXPECT_EQ(d.causes[1].second.rfind("lost overlap", 0), 0u);
}

TEST(TimelineDiff, AGraphLostBringsLaunchesAndLaunchGapsBack) {
  const auto side_of = [](bool graph) {
    Builder b;
    for (int i = 0; i < 5; ++i) {
      const std::uint64_t t = static_cast<std::uint64_t>(i) * 100000;
      b.range("Expert_Forward", t, t + 60000);
      if (graph) b.r.api_calls.push_back({"cudaGraphLaunch", t + 1, t + 3, b.next});
      for (std::uint64_t k = 0; k < 10; ++k) {
        // In the graph the nodes run back to back; launched one by one, each waits 4 us for the host.
        const std::uint64_t start = t + 100 + k * (graph ? 2000 : 6000);
        if (graph) b.r.activities.push_back({tl::Kind::kernel, "expert_gemm", 1, start, start + 2000, b.next, 0});
        else b.add(tl::Kind::kernel, "expert_gemm", 1, start, start + 2000, t + 10 + k * 6000);
      }
      if (graph) ++b.next;
    }
    return tl::summarise(tl::split_steps(b.r, {"Expert_Forward"}));
  };
  const tl::Summary before = side_of(true), after = side_of(false);
  EXPECT_DOUBLE_EQ(before.launches, 1);
  EXPECT_DOUBLE_EQ(after.launches, 10);
  EXPECT_DOUBLE_EQ(after.launch_gap_ns, 9 * 4000);
  const tl::TimelineDiff d = tl::diff_timelines(before, after);
  EXPECT_DOUBLE_EQ(d.terms.kernels, 0);
  ASSERT_FALSE(d.causes.empty());
  EXPECT_EQ(d.causes.front().second,
            "more launches and launch gaps: the GPU waits longer for the host to launch; host launches 1 -> 10 per "
            "repetition, launch gaps 0.000 ms -> 0.036 ms (+0.036 ms; the repetition +0.036 ms) (a CUDA graph lost, "
            "or work split into more launches)");
}
