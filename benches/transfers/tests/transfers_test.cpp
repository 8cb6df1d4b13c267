// Unit tests of the transfer suite's pieces: link ceilings, sizes, ceilings table and pattern checks
// everywhere; real host/device/peer copies (and NCCL when built) checked word by word where GPUs exist.
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "perfgate/bench/cuda.hpp"
#include "perfgate/bench/links.hpp"
#include "perfgate/transfers/case_plan.hpp"
#include "perfgate/transfers/kernels.cuh"
#include "perfgate/transfers/pattern.hpp"
#include "perfgate/transfers/transfer_lib.hpp"

#if defined(PERFGATE_HAVE_NCCL)
#include "perfgate/transfers/nccl_world.hpp"
#endif

namespace pt = perfgate::transfers;
namespace pb = perfgate::bench;

// ---- model: no GPU needed ------------------------------------------------------------------------------
TEST(TransfersModel, PcieCeilingFollowsGenerationWidthAndEncoding) {
  EXPECT_NEAR(pb::pcie_bytes_per_second(5, 16), 32e9 * 16 / 8 * 128.0 / 130.0, 1e3);  // 63.0 GB/s
  EXPECT_NEAR(pb::pcie_bytes_per_second(4, 16), 31.5e9, 0.1e9);
  EXPECT_NEAR(pb::pcie_bytes_per_second(3, 8), 7.88e9, 0.01e9);
  EXPECT_NEAR(pb::pcie_bytes_per_second(1, 16), 4e9, 1e3);  // 8b/10b
  EXPECT_NEAR(pb::pcie_bytes_per_second(5, 8), pb::pcie_bytes_per_second(5, 16) / 2, 1e3);
  EXPECT_EQ(pb::pcie_bytes_per_second(0, 16), 0.0);
  EXPECT_EQ(pb::pcie_bytes_per_second(9, 16), 0.0);
}

TEST(TransfersModel, NvlinkRateByArchitecture) {
  EXPECT_EQ(pb::nvlink_link_bytes_per_second(9, 0), 25e9);  // H100/H200: 18 links -> 450 GB/s
  EXPECT_EQ(18 * pb::nvlink_link_bytes_per_second(9, 0), 450e9);
  EXPECT_EQ(pb::nvlink_link_bytes_per_second(8, 0), 25e9);
  EXPECT_EQ(pb::nvlink_link_bytes_per_second(10, 0), 50e9);
  EXPECT_EQ(pb::nvlink_link_bytes_per_second(8, 9), 0.0);  // no NVLink: unknown, never invented
}

TEST(TransfersModel, DeepSeekDispatchSizes) {
  EXPECT_EQ(pt::dispatch_bytes_per_gpu(4096), 4096u * 8 * 7168 * 2);
  EXPECT_EQ(pt::dispatch_bytes_per_gpu(128), 14680064u);
  for (int gpus : {1, 2, 4, 8}) {
    for (std::size_t tokens : {128u, 512u, 4096u}) {
      EXPECT_EQ(pt::alltoall_chunk_bytes(tokens, gpus) * static_cast<std::size_t>(gpus),
                pt::dispatch_bytes_per_gpu(tokens));
      EXPECT_EQ(pt::alltoall_chunk_bytes(tokens, gpus) % (7168 * 2), 0u);
    }
  }
  // 3 GPUs: whole tokens per peer, never more than the dispatch.
  EXPECT_LE(pt::alltoall_chunk_bytes(128, 3) * 3, pt::dispatch_bytes_per_gpu(128));
  EXPECT_EQ(pt::alltoall_chunk_bytes(128, 3) % (7168 * 2), 0u);
}

TEST(TransfersModel, CopiesPerRound) {
  EXPECT_EQ(pt::copies_per_round(4), 64);
  EXPECT_EQ(pt::copies_per_round(64 * pt::KiB), 64);
  EXPECT_EQ(pt::copies_per_round(16 * pt::MiB), 4);
  EXPECT_EQ(pt::copies_per_round(64 * pt::MiB), 1);
  EXPECT_EQ(pt::copies_per_round(pt::GiB), 1);
}

TEST(TransfersModel, PlantedCopySizes) {
  namespace t = perfgate::transfers;
  // 256 MiB at +3%: 8053063.68 bytes -> 2013266 words (8053064 bytes), share 3.0000001%.
  const t::PlantedCopies p3 = t::plan_planted_copies(256 * t::MiB, 1, false, 0.03);
  EXPECT_EQ(p3.extra_bytes, 8053064u);
  EXPECT_EQ(p3.extra_copies, 0);
  EXPECT_NEAR(p3.share, 0.03, 1e-7);
  for (double f : {0.02, 0.05, 0.10}) {
    const t::PlantedCopies p = t::plan_planted_copies(256 * t::MiB, 1, false, f);
    EXPECT_EQ(p.extra_bytes % 4, 0u);
    EXPECT_NEAR(static_cast<double>(p.extra_bytes), f * 256 * t::MiB, 2.0);
    EXPECT_NEAR(p.share, f, 1e-8);
  }
  // +10% of a 4 KiB copy: 409.6 bytes -> 102 words.
  EXPECT_EQ(t::plan_planted_copies(4 * t::KiB, 64, false, 0.10).extra_bytes, 408u);
  // Latency cases add whole copies: 64 copies a round, +3% -> 2 more (3.125%), +10% -> 6 (9.375%).
  const t::PlantedCopies l3 = t::plan_planted_copies(4, t::kLatencyCopies, true, 0.03);
  EXPECT_EQ(l3.extra_copies, 2);
  EXPECT_EQ(l3.extra_bytes, 0u);
  EXPECT_DOUBLE_EQ(l3.share, 2.0 / 64);
  EXPECT_EQ(t::plan_planted_copies(65536, t::kLatencyCopies, true, 0.10).extra_copies, 6);
  // Nothing planted: fraction 0, or a fraction too small for one word / one copy.
  EXPECT_EQ(t::plan_planted_copies(256 * t::MiB, 1, false, 0.0).extra_bytes, 0u);
  EXPECT_EQ(t::plan_planted_copies(256 * t::MiB, 1, false, 0.0).share, 0.0);
  EXPECT_EQ(t::plan_planted_copies(4, t::kLatencyCopies, true, 0.005).extra_copies, 0);
  // Never more than the copy itself.
  EXPECT_EQ(t::plan_planted_copies(6, 1, false, 1.0).extra_bytes, 4u);
}

TEST(TransfersModel, MeasuredCeilingsTable) {
  const char* h200 = "NVIDIA H200";
  EXPECT_EQ(pt::measured_ceiling_GBps("h2d/pinned", 256 * pt::MiB, h200).value_or(0), 55.2);
  EXPECT_EQ(pt::measured_ceiling_GBps("h2d/pinned", 64 * pt::KiB, h200).value_or(0), 10.0);
  EXPECT_EQ(pt::measured_ceiling_GBps("h2d/pinned", pt::GiB, h200).value_or(0), 55.2);  // above: largest entry
  EXPECT_FALSE(pt::measured_ceiling_GBps("h2d/pinned", 4 * pt::MiB, h200));             // between: none
  EXPECT_EQ(pt::measured_ceiling_GBps("peer/on", 256 * pt::MiB, h200).value_or(0), 393.6);
  EXPECT_EQ(pt::measured_ceiling_GBps("peer/on/bidir", 256 * pt::MiB, h200).value_or(0), 775.0);
  EXPECT_EQ(pt::measured_ceiling_GBps("peer/off", 256 * pt::MiB, h200).value_or(0), 38.3);
  EXPECT_FALSE(pt::measured_ceiling_GBps("peer/on", 256 * pt::MiB, "NVIDIA H100 80GB HBM3"));
  EXPECT_FALSE(pt::measured_ceiling_GBps("h2d/pageable", 256 * pt::MiB, h200));
}

TEST(TransfersModel, PatternDependsOnSeedAndIndex) {
  std::set<std::uint32_t> seen;
  for (std::uint64_t i = 0; i < 4096; ++i) seen.insert(pt::pattern_word(pt::device_seed(0), i));
  EXPECT_GT(seen.size(), 4090u);
  int same = 0;
  for (std::uint64_t i = 0; i < 4096; ++i)
    same += pt::pattern_word(pt::device_seed(0), i) == pt::pattern_word(pt::device_seed(1), i);
  EXPECT_LT(same, 4);
}

TEST(TransfersModel, HostCheckCatchesCorruptShiftedAndForeignData) {
  const std::size_t bytes = 1 << 20;
  std::vector<std::uint32_t> buf(bytes / 4);
  pt::fill_host_pattern(buf.data(), bytes, pt::kPinnedSeed);
  EXPECT_FALSE(pt::check_host(buf.data(), bytes, pt::kPinnedSeed, 0, "clean"));
  EXPECT_TRUE(pt::check_host(buf.data(), bytes, pt::kPageableSeed, 0, "other seed"));
  EXPECT_TRUE(pt::check_host(buf.data(), bytes, pt::kPinnedSeed, 1, "shifted"));
  buf[12345] ^= 1u;
  const auto err = pt::check_host(buf.data(), bytes, pt::kPinnedSeed, 0, "one bit");
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("1 of 262144 words"), std::string::npos) << *err;
}

// ---- how the suite sizes itself by GPU count (issue: 4/8-GPU runs) ------------------------------------------
TEST(TransfersModel, PlanSizesItselfByGpuCount) {
  EXPECT_EQ(pt::gpus_to_register(0), 2);
  EXPECT_EQ(pt::gpus_to_register(1), 2);  // 2-GPU cases listed, skipped with the reason
  EXPECT_EQ(pt::gpus_to_register(2), 2);
  EXPECT_EQ(pt::gpus_to_register(8), 8);
  std::map<int, std::size_t> total;
  for (int n : {2, 4, 8}) {
    const auto plan = pt::plan_cases(n, true);
    total[n] = plan.size();
    std::set<std::string> names;
    int matrix = 0, bidir_pairs = 0, all_n = 0;
    for (const auto& c : plan) {
      EXPECT_TRUE(names.insert(c.name).second) << "duplicate " << c.name;
      EXPECT_LE(c.gpus, n) << c.name;
      EXPECT_GE(c.gpus, 1) << c.name;
      EXPECT_LT(c.a, n) << c.name;
      EXPECT_LT(c.b, n) << c.name;
      if (c.kind == pt::CaseKind::peer && c.peer_on && !c.latency && c.bytes == 256 * pt::MiB) ++matrix;
      if (c.kind == pt::CaseKind::peer_bidir && c.peer_on && c.bytes == 256 * pt::MiB) ++bidir_pairs;
      if (c.name.find(fmt::format("gpus:{}/", n)) != std::string::npos) {
        ++all_n;
        EXPECT_EQ(c.gpus, n) << c.name;
      }
    }
    EXPECT_EQ(matrix, n * (n - 1)) << "every ordered pair at 256 MiB";
    EXPECT_EQ(bidir_pairs, n * (n - 1) / 2) << "every unordered pair at 256 MiB";
    EXPECT_EQ(all_n, 4 + 4 + 3) << "all_to_one, one_to_all at 4 sizes, all-to-all at 3 token counts";
    EXPECT_TRUE(names.count(fmt::format("transfers/nccl/alltoall/gpus:{}/tokens:4096", n)));
    EXPECT_TRUE(names.count(fmt::format("transfers/peer/on/src:{}/dst:0/bytes:268435456", n - 1)));
  }
  // n(n-1) + n(n-1)/2 grows the 256 MiB matrix; everything else is fixed.
  EXPECT_EQ(total[4] - total[2], static_cast<std::size_t>((12 - 2) + (6 - 1)));
  EXPECT_EQ(total[8] - total[2], static_cast<std::size_t>((56 - 2) + (28 - 1)));
  const auto no_nccl = pt::plan_cases(2, false);
  EXPECT_EQ(no_nccl.size() + 9, total[2]);  // send/recv plain and registered at 3 sizes, all-to-all at 3
  for (const auto& c : no_nccl) EXPECT_EQ(c.name.find("/nccl/"), std::string::npos);
}

// The names of a 2-GPU sweep (tests/data/two_gpu_sweep.json, a full run on two H200s) are exactly what the
// plan registers: a rename would orphan the stored results and baselines.
TEST(TransfersModel, PlanMatchesTheCommittedTwoGpuRun) {
  std::ifstream in(std::string(PERFGATE_TRANSFERS_TEST_DATA) + "/two_gpu_sweep.json");
  ASSERT_TRUE(in) << "committed sweep results missing";
  const auto json = nlohmann::json::parse(in);
  std::set<std::string> ran;
  for (const auto& b : json.at("benchmarks")) {
    std::string name = b.at("run_name").get<std::string>();
    const auto pos = name.rfind("/manual_time");
    if (pos != std::string::npos) name.erase(pos);
    ran.insert(name);
  }
  // Cases added after that run (commit them with the next committed sweep and empty this list).
  const std::set<std::string> added_since = {"transfers/nccl/sendrecv_registered/src:0/dst:1/bytes:1048576",
                                             "transfers/nccl/sendrecv_registered/src:0/dst:1/bytes:16777216",
                                             "transfers/nccl/sendrecv_registered/src:0/dst:1/bytes:268435456"};
  std::set<std::string> planned;
  for (const auto& c : pt::plan_cases(2, true))
    if (added_since.count(c.name) == 0) planned.insert(c.name);
  EXPECT_EQ(ran, planned);
}

// ---- real copies ---------------------------------------------------------------------------------------
namespace {

bool need_gpus(int n, std::string& why) {
  const int have = pb::gpu_count();
  if (have >= n) return true;
  why = have == 0 ? pb::no_gpu_reason() : "needs " + std::to_string(n) + " GPUs, " + std::to_string(have) + " present";
  return false;
}

#define REQUIRE_GPUS(n)                              \
  do {                                               \
    std::string why_;                                \
    if (!need_gpus((n), why_)) GTEST_SKIP() << why_; \
  } while (0)

constexpr std::size_t kBytes = 3 * pt::MiB + 12;  // not a power of two, not a multiple of 16

}  // namespace

TEST(TransfersGpu, HostToDeviceAndBackKeepThePattern) {
  REQUIRE_GPUS(1);
  auto& pool = pt::BufferPool::instance();
  const auto l = pt::lane(0);
  for (auto kind : {pt::HostKind::pinned, pt::HostKind::pageable}) {
    void* src = pool.host_source(kind, kBytes);
    void* dev = pool.device(0, 1, kBytes);
    pt::poison_device(dev, 0, kBytes);
    ASSERT_EQ(cudaMemcpyAsync(dev, src, kBytes, cudaMemcpyHostToDevice, l.stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(l.stream), cudaSuccess);
    EXPECT_FALSE(pt::check_device(dev, 0, kBytes, pt::host_seed(kind), 0, "h2d"));
    // The device check must fail on a short copy: the tail keeps its poison.
    pt::poison_device(dev, 0, kBytes);
    ASSERT_EQ(cudaMemcpy(dev, src, kBytes - 64, cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_TRUE(pt::check_device(dev, 0, kBytes, pt::host_seed(kind), 0, "short h2d"));
  }
  void* dsrc = pool.device_source(0, kBytes);
  void* hdst = pool.host(pt::HostKind::pinned, 1, kBytes);
  pt::poison_host(hdst, kBytes);
  ASSERT_EQ(cudaMemcpyAsync(hdst, dsrc, kBytes, cudaMemcpyDeviceToHost, l.stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(l.stream), cudaSuccess);
  EXPECT_FALSE(pt::check_host(hdst, kBytes, pt::device_seed(0), 0, "d2h"));
}

TEST(TransfersGpu, ZeroCopyKernelAndDeviceCopy) {
  REQUIRE_GPUS(1);
  auto& pool = pt::BufferPool::instance();
  const auto l = pt::lane(0);
  void* hsrc = pool.host_source(pt::HostKind::pinned, kBytes);
  void* ddst = pool.device(0, 1, kBytes);
  void* hsrc_dev = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&hsrc_dev, hsrc, 0), cudaSuccess);
  pt::poison_device(ddst, 0, kBytes);
  pt::launch_sm_copy(ddst, hsrc_dev, kBytes, pt::sm_copy_blocks(0), l.stream);
  ASSERT_EQ(cudaStreamSynchronize(l.stream), cudaSuccess);
  EXPECT_FALSE(pt::check_device(ddst, 0, kBytes, pt::kPinnedSeed, 0, "mapped h2d"));

  void* dsrc = pool.device_source(0, kBytes);
  pt::poison_device(ddst, 0, kBytes);
  pt::launch_sm_copy(ddst, dsrc, 16 * pt::KiB, pt::sm_copy_blocks(0), l.stream);  // 16-byte path
  pt::launch_sm_copy(static_cast<char*>(ddst) + 16 * pt::KiB, static_cast<char*>(dsrc) + 16 * pt::KiB,
                     kBytes - 16 * pt::KiB, pt::sm_copy_blocks(0), l.stream);  // 4-byte path
  ASSERT_EQ(cudaStreamSynchronize(l.stream), cudaSuccess);
  EXPECT_FALSE(pt::check_device(ddst, 0, kBytes, pt::device_seed(0), 0, "sm copy"));
}

TEST(TransfersGpu, BlockedRoundsAreTimedAndReleased) {
  REQUIRE_GPUS(1);
  auto& pool = pt::BufferPool::instance();
  const std::vector<pt::Lane> lanes = {pt::lane(0)};
  void* src = pool.device_source(0, 8 * pt::MiB);
  void* dst = pool.device(0, 1, 8 * pt::MiB);
  pt::poison_device(dst, 0, 8 * pt::MiB);
  const auto t = pt::time_rounds(
      lanes,
      [&] {
        ASSERT_EQ(cudaMemcpyAsync(dst, src, 8 * pt::MiB, cudaMemcpyDeviceToDevice, lanes[0].stream), cudaSuccess);
      },
      4, true);
  EXPECT_TRUE(t.blocked);
  EXPECT_FALSE(t.blocker_timed_out);
  EXPECT_GT(t.seconds, 0.0);
  EXPECT_LT(t.seconds, 0.5);  // released at once, not after the 1 s timeout
  EXPECT_FALSE(pt::check_device(dst, 0, 8 * pt::MiB, pt::device_seed(0), 0, "d2d"));
}

TEST(TransfersMultiGpu, PeerCopiesWithAndWithoutPeerAccess) {
  REQUIRE_GPUS(2);
  auto& pool = pt::BufferPool::instance();
  void* src = pool.device_source(0, kBytes);
  void* dst = pool.device(1, 1, kBytes);
  const auto l = pt::lane(0);
  for (bool on : {true, false}) {
    if (on && !pt::can_access_peer(0, 1)) continue;
    if (pt::can_access_peer(0, 1)) pt::set_peer_access(0, 1, on);
    pt::poison_device(dst, 1, kBytes);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaMemcpyPeerAsync(dst, 1, src, 0, kBytes, l.stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(l.stream), cudaSuccess);
    EXPECT_FALSE(pt::check_device(dst, 1, kBytes, pt::device_seed(0), 0, on ? "peer on" : "peer off"));
    EXPECT_TRUE(pt::check_device(dst, 1, kBytes, pt::device_seed(1), 0, "wrong source"));
  }
}

#if defined(PERFGATE_HAVE_NCCL)
TEST(TransfersMultiGpu, NcclSendRecvAndAllToAll) {
  REQUIRE_GPUS(2);
  auto& pool = pt::BufferPool::instance();
  const int n = pt::nccl::world_size();
  // send/recv 0 -> 1
  void* src = pool.device_source(0, kBytes);
  void* dst = pool.device(1, 1, kBytes);
  pt::poison_device(dst, 1, kBytes);
  const auto l0 = pt::lane(0);
  const auto l1 = pt::lane(1);
  pt::nccl::send_recv(0, 1, src, dst, kBytes, l0.stream, l1.stream);
  ASSERT_EQ(cudaStreamSynchronize(l0.stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(l1.stream), cudaSuccess);
  EXPECT_FALSE(pt::check_device(dst, 1, kBytes, pt::device_seed(0), 0, "nccl send/recv"));
  // all-to-all of 16 DeepSeek tokens per GPU
  const std::size_t chunk = pt::alltoall_chunk_bytes(16, n);
  const std::size_t total = chunk * static_cast<std::size_t>(n);
  std::vector<const void*> send;
  std::vector<void*> recv;
  std::vector<cudaStream_t> streams;
  for (int r = 0; r < n; ++r) {
    send.push_back(pool.device_source(r, total));
    recv.push_back(pool.device(r, 1, total));
    pt::poison_device(recv.back(), r, total);
    streams.push_back(pt::lane(r).stream);
  }
  pt::nccl::all_to_all(n, send.data(), recv.data(), chunk, streams.data());
  for (int r = 0; r < n; ++r) ASSERT_EQ(cudaStreamSynchronize(streams[static_cast<std::size_t>(r)]), cudaSuccess);
  for (int r = 0; r < n; ++r) {
    for (int p = 0; p < n; ++p) {
      EXPECT_FALSE(
          pt::check_device(static_cast<char*>(recv[static_cast<std::size_t>(r)]) + static_cast<std::size_t>(p) * chunk,
                           r, chunk, pt::device_seed(p), static_cast<std::uint64_t>(r) * chunk / 4, "all-to-all"))
          << "rank " << r << " from " << p;
    }
  }
}
#endif
