// transfers: host<->GPU and GPU<->GPU bandwidth and latency, near each link's ceiling.
//
// Method (after NVIDIA nvbandwidth and cuda-samples' p2pBandwidthLatencyTest): per timed iteration
// the host parks lane 0's stream behind a spin-on-flag kernel, records the start event, queues all
// the copies of the round (several back to back for small sizes), records the stop event (after
// the other lanes' stops), then releases the flag, so launch gaps stay out of the measured time.
// Pageable copies are not parked: the driver stages them through the host synchronously, and a
// host call waiting on a parked stream would only time out the blocker. Any case whose host calls
// turn out to wait on the stream (the spin kernel times out during the checked round) is timed
// unparked instead, and says so in its "blocked" counter.
// Each case copies patterned data and checks it once before timing; the time is CUDA-event time
// (UseManualTime). Counters: GB/s (gated), pct.link_theoretical (PCIe gen/width and NVLink count
// from NVML, DRAM from the memory clock), pct.measured_ceiling (docs/transfers.md table, H200 only).
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "perfgate/bench/counters.hpp"
#include "perfgate/bench/cuda.hpp"
#include "perfgate/bench/gpu_slowdown.hpp"
#include "perfgate/bench/links.hpp"
#include "perfgate/bench/main.hpp"
#include "perfgate/bench/nvtx.hpp"
#include "perfgate/bench/skip.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/transfers/case_plan.hpp"
#include "perfgate/transfers/kernels.cuh"
#include "perfgate/transfers/pattern.hpp"
#include "perfgate/transfers/transfer_lib.hpp"

#if defined(PERFGATE_HAVE_NCCL)
#include "perfgate/transfers/nccl_world.hpp"
#endif

namespace perfgate::transfers {
namespace {

using bench::fail;
using bench::skip;

constexpr const char* kH2DRange = "Host_to_GPU_Transfer";
constexpr const char* kD2HRange = "GPU_to_Host_Transfer";
constexpr const char* kG2GRange = "GPU_to_GPU_Transfer";
constexpr const char* kD2DRange = "Device_to_Device_Transfer";

// What one case queues, checks and counts.
struct Spec {
  std::vector<Lane> lanes;
  std::function<void()> round;                        // one copy per lane (or one NCCL group)
  std::function<void()> poison;                       // before the checked round
  std::function<std::optional<std::string>()> check;  // after it
  double bytes_per_round = 0;                         // counted for GB/s
  double link_bytes_per_round = 0;                    // counted against link_Bps
  double link_Bps = 0;
  std::optional<double> ceiling_GBps;
  const char* nvtx = kG2GRange;
  bool blocker = true;
  int rounds = 1;
  int device = 0;        // clock counters
  bool latency = false;  // report microseconds per copy
  std::function<void(benchmark::State&, double seconds_per_round)> extra;
  // Planted slowdown (PERFGATE_GPU_SLOWDOWN): planted_copy queues the second copy of plant.extra_bytes
  // after each copy; plant.extra_copies more rounds are queued per timed iteration (latency cases).
  double planted_fraction = 0;
  PlantedCopies plant;
  std::function<void()> planted_copy;
};

// A case of one copy stream on `device`: `bytes` a copy, timed per copy when `latency`, else in rounds of
// copies long enough to time.
Spec one_lane_spec(int device, std::size_t bytes, bool latency) {
  Spec s;
  s.lanes = {lane(device)};
  s.device = device;
  s.latency = latency;
  s.rounds = latency ? kLatencyCopies : copies_per_round(bytes);
  return s;
}

// Plans the planted work of the case `name` (s.rounds copies of `bytes` a round) into s; returns the plan
// (nothing planted when the knob does not select the case).
PlantedCopies set_planted_copies(Spec& s, const std::string& name, std::size_t bytes, bool latency) {
  s.planted_fraction = bench::gpu_slowdown().fraction_for(name);
  s.plant = plan_planted_copies(bytes, s.rounds, latency, s.planted_fraction);
  return s.plant;
}

// Whether a case may be parked behind the blocker, learnt during its checked round.
std::map<std::string, bool>& blocker_ok() {
  static std::map<std::string, bool> m;
  return m;
}

// Whether the case `name` is timed parked behind the blocker: learnt from its checked round, the first time
// (nullopt, with state failed, when that round's data is wrong).
std::optional<bool> blocker_for(benchmark::State& state, const std::string& name, Spec& s) {
  if (auto it = blocker_ok().find(name); it != blocker_ok().end()) return it->second;
  // One unparked round first: first-use work (NCCL connection setup, lazy module loads) blocks
  // the host, and must not be mistaken for a host call that always waits on the stream.
  time_rounds(s.lanes, s.round, 1, false);
  s.poison();
  const RoundTiming t = time_rounds(s.lanes, s.round, 1, s.blocker);
  if (auto err = s.check()) {
    fail(state, *err);
    return std::nullopt;
  }
  const bool use_blocker = s.blocker && !t.blocker_timed_out;
  blocker_ok()[name] = use_blocker;
  return use_blocker;
}

// The timed round: the case's copies, plus the planted ones when a slowdown is planted.
std::function<void()> timed_round(Spec& s) {
  if (!s.planted_copy) return s.round;
  return [&s] {
    s.round();
    s.planted_copy();
  };
}

// What the timed iterations add up to.
struct Measured {
  double total = 0;  // seconds
  int timeouts = 0;  // iterations whose blocker timed out
  bench::nvml::MonitorSummary clocks;
};

Measured measure_rounds(benchmark::State& state, const Spec& s, const std::function<void()>& round, int rounds,
                        bool use_blocker) {
  Measured m;
  bench::NvtxRange range(s.nvtx);
  bench::nvml::Monitor monitor(bench::pci_bus_id(s.device));
  for (auto _ : state) {
    const RoundTiming t = time_rounds(s.lanes, round, rounds, use_blocker);
    state.SetIterationTime(t.seconds);
    m.total += t.seconds;
    m.timeouts += t.blocker_timed_out ? 1 : 0;
  }
  m.clocks = monitor.stop();
  return m;
}

// GB/s, the link and ceiling percentages, the copies, blocker and latency counters, the case's extra ones and
// the planted slowdown's, from rounds of per_round seconds.
void report_spec_counters(benchmark::State& state, const Spec& s, double per_round, bool use_blocker, int timeouts) {
  const double bytes = s.bytes_per_round * s.rounds;
  bench::set_rate(state, "GB/s", bytes / 1e9, per_round);
  const double rate = per_round > 0 ? bytes / per_round : 0.0;
  if (s.link_Bps > 0 && per_round > 0) {
    bench::set_percent_of(state, "link_theoretical", s.link_bytes_per_round * s.rounds / per_round, s.link_Bps);
  }
  if (s.ceiling_GBps) bench::set_percent_of(state, "measured_ceiling", rate / 1e9, *s.ceiling_GBps);
  bench::set_info(state, "copies_per_iteration", s.rounds);
  bench::set_info(state, "blocked", use_blocker ? 1.0 : 0.0);
  if (timeouts > 0) bench::set_info(state, "blocker_timeouts", timeouts);
  if (s.latency && s.rounds > 0) bench::set_info(state, "latency_us", per_round / s.rounds * 1e6);
  if (s.extra) s.extra(state, per_round / std::max(1, s.rounds));
  if (s.planted_fraction > 0) {
    bench::set_info(state, "planted.fraction", s.planted_fraction);
    bench::set_info(state, "planted.share", s.plant.share);
  }
}

void run_spec(benchmark::State& state, const std::string& name, Spec& s) {
  const std::optional<bool> use_blocker = blocker_for(state, name, s);
  if (!use_blocker) return;
  const std::function<void()> round = timed_round(s);
  const int rounds = s.rounds + s.plant.extra_copies;
  time_rounds(s.lanes, round, rounds, *use_blocker);  // warm-up
  const Measured m = measure_rounds(state, s, round, rounds, *use_blocker);
  const double iters = static_cast<double>(state.iterations());
  const double per_round = iters > 0 ? m.total / iters : 0.0;
  report_spec_counters(state, s, per_round, *use_blocker, m.timeouts);
  bench::add_clock_counters(state, s.device, m.clocks);
}

// Wraps a case body: CUDA/NCCL errors fail the benchmark with their message.
template <typename Body>
void guarded(benchmark::State& state, Body&& body) {
  try {
    body();
  } catch (const std::exception& e) { fail(state, e.what()); }
}

double pcie_Bps(int dev) { return bench::link_facts(dev).pcie_Bps; }

// One direction between two GPUs: NVLink when both have active links, else PCIe.
double gpu_pair_Bps(int a, int b) {
  const auto& fa = bench::link_facts(a);
  const auto& fb = bench::link_facts(b);
  if (fa.nvlinks > 0 && fb.nvlinks > 0 && fa.nvlink_Bps > 0 && fb.nvlink_Bps > 0)
    return std::min(fa.nvlink_Bps, fb.nvlink_Bps);
  return std::min(fa.pcie_Bps, fb.pcie_Bps);
}

// A GPU's own egress/ingress towards its peers.
double gpu_port_Bps(int dev) {
  const auto& f = bench::link_facts(dev);
  return f.nvlinks > 0 && f.nvlink_Bps > 0 ? f.nvlink_Bps : f.pcie_Bps;
}

std::optional<double> ceiling(std::string_view pattern, std::size_t bytes, int dev) {
  return measured_ceiling_GBps(pattern, bytes, gpu_name(dev));
}

// ---- host <-> device ---------------------------------------------------------------------------------
// The pointer through which the GPU reaches a host buffer: the device's alias of mapped memory (the SM copy
// kernel dereferences it), else the buffer itself (the copy engine takes host pointers).
void* host_view(void* host, HostMem mem) {
  if (mem != HostMem::mapped) return host;
  void* alias = host;
  PERFGATE_CUDA_CHECK(cudaHostGetDevicePointer(&alias, host, 0));
  return alias;
}

// One copy of n bytes on the stream: by the SM copy kernel for mapped host memory (zero copy), else by
// the copy engine. dst and src are as host_view gives them.
std::function<void()> copy_round(void* dst, const void* src, std::size_t n, HostMem mem, cudaMemcpyKind kind,
                                 int blocks, cudaStream_t stream) {
  if (mem == HostMem::mapped) return [=] { launch_sm_copy(dst, src, n, blocks, stream); };
  return [=] { PERFGATE_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, kind, stream)); };
}

void host_device_case(benchmark::State& state, const std::string& name, Dir dir, HostMem mem, std::size_t bytes,
                      bool latency) {
  if (!bench::require_gpus(state, 1)) return;
  guarded(state, [&] {
    const int dev = 0;
    auto& pool = BufferPool::instance();
    const HostKind kind = mem == HostMem::pageable ? HostKind::pageable : HostKind::pinned;
    Spec s = one_lane_spec(dev, bytes, latency);
    s.bytes_per_round = s.link_bytes_per_round = static_cast<double>(bytes);
    s.link_Bps = pcie_Bps(dev);
    s.blocker = mem != HostMem::pageable;
    s.nvtx = dir == Dir::h2d ? kH2DRange : kD2HRange;
    if (mem == HostMem::pinned) s.ceiling_GBps = ceiling(fmt::format("{}/pinned", dir_name(dir)), bytes, dev);
    const cudaStream_t stream = s.lanes[0].stream;
    const int blocks = sm_copy_blocks(dev);
    if (dir == Dir::h2d) {
      void* src = pool.host_source(kind, bytes);
      void* dst = pool.device(dev, 1, bytes);
      const void* src_view = host_view(src, mem);
      s.round = copy_round(dst, src_view, bytes, mem, cudaMemcpyHostToDevice, blocks, stream);
      if (const std::size_t n = set_planted_copies(s, name, bytes, latency).extra_bytes; n > 0) {
        s.planted_copy = copy_round(pool.device(dev, 2, n), src_view, n, mem, cudaMemcpyHostToDevice, blocks, stream);
      }
      s.poison = [=] { poison_device(dst, dev, bytes); };
      s.check = [=] { return check_device(dst, dev, bytes, host_seed(kind), 0, name); };
    } else {
      void* src = pool.device_source(dev, bytes);
      void* dst = pool.host(kind, 1, bytes);
      s.round = copy_round(host_view(dst, mem), src, bytes, mem, cudaMemcpyDeviceToHost, blocks, stream);
      if (const std::size_t n = set_planted_copies(s, name, bytes, latency).extra_bytes; n > 0) {
        s.planted_copy =
            copy_round(host_view(pool.host(kind, 2, n), mem), src, n, mem, cudaMemcpyDeviceToHost, blocks, stream);
      }
      s.poison = [=] { poison_host(dst, bytes); };
      s.check = [=] { return check_host(dst, bytes, device_seed(dev), 0, name); };
    }
    run_spec(state, name, s);
  });
}

// ---- device to device on one GPU -----------------------------------------------------------------------
void d2d_case(benchmark::State& state, const std::string& name, std::size_t bytes, bool latency) {
  if (!bench::require_gpus(state, 1)) return;
  guarded(state, [&] {
    const int dev = 0;
    auto& pool = BufferPool::instance();
    void* src = pool.device_source(dev, bytes);
    void* dst = pool.device(dev, 1, bytes);
    Spec s = one_lane_spec(dev, bytes, latency);
    s.bytes_per_round = static_cast<double>(bytes);
    s.link_bytes_per_round = 2.0 * static_cast<double>(bytes);  // DRAM read + write
    s.link_Bps = bench::link_facts(dev).memory_Bps;
    s.ceiling_GBps = ceiling("d2d", bytes, dev);
    s.nvtx = kD2DRange;
    const cudaStream_t stream = s.lanes[0].stream;
    s.round = [=] { PERFGATE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream)); };
    if (const std::size_t n = set_planted_copies(s, name, bytes, latency).extra_bytes; n > 0) {
      void* scratch = pool.device(dev, 2, n);
      s.planted_copy = [=] { PERFGATE_CUDA_CHECK(cudaMemcpyAsync(scratch, src, n, cudaMemcpyDeviceToDevice, stream)); };
    }
    s.poison = [=] { poison_device(dst, dev, bytes); };
    s.check = [=] { return check_device(dst, dev, bytes, device_seed(dev), 0, name); };
    run_spec(state, name, s);
  });
}

// ---- peer copies -------------------------------------------------------------------------------------
bool prepare_peer(benchmark::State& state, int a, int b, bool on) {
  if (on && !can_access_peer(a, b)) {
    skip(state, fmt::format("GPU {} cannot access GPU {} as a peer", a, b));
    return false;
  }
#if defined(PERFGATE_HAVE_NCCL)
  if (!on) nccl::destroy_world();  // NCCL's connections may rely on peer mappings
#endif
  if (on || can_access_peer(a, b)) set_peer_access(a, b, on);
  return true;
}

void peer_case(benchmark::State& state, const std::string& name, int src, int dst, bool on, std::size_t bytes,
               bool latency) {
  if (!bench::require_gpus(state, std::max(src, dst) + 1)) return;
  guarded(state, [&] {
    if (!prepare_peer(state, src, dst, on)) return;
    auto& pool = BufferPool::instance();
    void* from = pool.device_source(src, bytes);
    void* to = pool.device(dst, 1, bytes);
    Spec s = one_lane_spec(src, bytes, latency);
    s.bytes_per_round = s.link_bytes_per_round = static_cast<double>(bytes);
    s.link_Bps = on ? gpu_pair_Bps(src, dst) : std::min(pcie_Bps(src), pcie_Bps(dst));
    s.ceiling_GBps = ceiling(on ? "peer/on" : "peer/off", bytes, src);
    const cudaStream_t stream = s.lanes[0].stream;
    s.round = [=] { PERFGATE_CUDA_CHECK(cudaMemcpyPeerAsync(to, dst, from, src, bytes, stream)); };
    if (const std::size_t n = set_planted_copies(s, name, bytes, latency).extra_bytes; n > 0) {
      void* scratch = pool.device(dst, 2, n);
      s.planted_copy = [=] { PERFGATE_CUDA_CHECK(cudaMemcpyPeerAsync(scratch, dst, from, src, n, stream)); };
    }
    s.poison = [=] { poison_device(to, dst, bytes); };
    s.check = [=] { return check_device(to, dst, bytes, device_seed(src), 0, name); };
    run_spec(state, name, s);
  });
}

void peer_bidir_case(benchmark::State& state, const std::string& name, int a, int b, bool on, std::size_t bytes) {
  if (!bench::require_gpus(state, std::max(a, b) + 1)) return;
  guarded(state, [&] {
    if (!prepare_peer(state, a, b, on)) return;
    auto& pool = BufferPool::instance();
    void* a_src = pool.device_source(a, bytes);
    void* b_src = pool.device_source(b, bytes);
    void* a_dst = pool.device(a, 1, bytes);
    void* b_dst = pool.device(b, 1, bytes);
    Spec s;
    s.lanes = {lane(a), lane(b)};
    s.device = a;
    s.rounds = copies_per_round(bytes);
    s.bytes_per_round = s.link_bytes_per_round = 2.0 * static_cast<double>(bytes);
    s.link_Bps = 2.0 * (on ? gpu_pair_Bps(a, b) : std::min(pcie_Bps(a), pcie_Bps(b)));
    if (on) s.ceiling_GBps = ceiling("peer/on/bidir", bytes, a);
    const cudaStream_t sa = s.lanes[0].stream;
    const cudaStream_t sb = s.lanes[1].stream;
    s.round = [=] {
      PERFGATE_CUDA_CHECK(cudaSetDevice(a));
      PERFGATE_CUDA_CHECK(cudaMemcpyPeerAsync(b_dst, b, a_src, a, bytes, sa));
      PERFGATE_CUDA_CHECK(cudaSetDevice(b));
      PERFGATE_CUDA_CHECK(cudaMemcpyPeerAsync(a_dst, a, b_src, b, bytes, sb));
    };
    s.poison = [=] {
      poison_device(a_dst, a, bytes);
      poison_device(b_dst, b, bytes);
    };
    s.check = [=]() -> std::optional<std::string> {
      if (auto e = check_device(b_dst, b, bytes, device_seed(a), 0, name + " (a->b)")) return e;
      return check_device(a_dst, a, bytes, device_seed(b), 0, name + " (b->a)");
    };
    run_spec(state, name, s);
  });
}

// ---- N GPUs: all-to-one, one-to-all ---------------------------------------------------------------------
// False, with the case skipped, when a pair of the GPUs cannot reach each other as peers.
bool enable_all_peers(benchmark::State& state, int gpus) {
  for (int i = 0; i < gpus; ++i) {
    for (int j = i + 1; j < gpus; ++j) {
      if (!can_access_peer(i, j)) {
        skip(state, fmt::format("GPU {} cannot access GPU {} as a peer", i, j));
        return false;
      }
      set_peer_access(i, j, true);
    }
  }
  return true;
}

// Every GPU but root copies `bytes` into its own part of one buffer on root.
Spec all_to_one_spec(const std::string& name, int gpus, int root, std::size_t bytes) {
  auto& pool = BufferPool::instance();
  const std::size_t senders = static_cast<std::size_t>(gpus - 1);
  auto* dst = static_cast<char*>(pool.device(root, 1, senders * bytes));
  std::vector<int> srcs;
  std::vector<void*> src_bufs;
  Spec s;
  for (int g = 0; g < gpus; ++g) {
    if (g == root) continue;
    srcs.push_back(g);
    src_bufs.push_back(pool.device_source(g, bytes));
  }
  s.lanes.push_back(lane(root, 1));  // lane 0 only starts/stops the clock on the receiving GPU
  for (int g : srcs) s.lanes.push_back(lane(g));
  s.device = root;
  s.rounds = copies_per_round(bytes * senders);
  s.bytes_per_round = s.link_bytes_per_round = static_cast<double>(senders * bytes);
  s.link_Bps = gpu_port_Bps(root);
  const auto lanes = s.lanes;
  s.round = [=] {
    for (std::size_t k = 0; k < srcs.size(); ++k) {
      PERFGATE_CUDA_CHECK(cudaSetDevice(srcs[k]));
      PERFGATE_CUDA_CHECK(cudaMemcpyPeerAsync(dst + k * bytes, root, src_bufs[k], srcs[k], bytes, lanes[k + 1].stream));
    }
  };
  s.poison = [=] { poison_device(dst, root, senders * bytes); };
  s.check = [=]() -> std::optional<std::string> {
    for (std::size_t k = 0; k < srcs.size(); ++k) {
      if (auto e = check_device(dst + k * bytes, root, bytes, device_seed(srcs[k]), 0,
                                fmt::format("{} (from GPU {})", name, srcs[k])))
        return e;
    }
    return std::nullopt;
  };
  return s;
}

void all_to_one_case(benchmark::State& state, const std::string& name, int gpus, int root, std::size_t bytes) {
  if (!bench::require_gpus(state, gpus)) return;
  guarded(state, [&] {
    if (!enable_all_peers(state, gpus)) return;
    Spec s = all_to_one_spec(name, gpus, root, bytes);
    run_spec(state, name, s);
  });
}

// Root copies one buffer of `bytes` to every other GPU, one stream per destination.
Spec one_to_all_spec(const std::string& name, int gpus, int root, std::size_t bytes) {
  auto& pool = BufferPool::instance();
  void* src = pool.device_source(root, bytes);
  std::vector<int> dsts;
  std::vector<void*> dst_bufs;
  Spec s;
  s.lanes.push_back(lane(root, 1));  // clock lane
  int index = 2;
  for (int g = 0; g < gpus; ++g) {
    if (g == root) continue;
    dsts.push_back(g);
    dst_bufs.push_back(pool.device(g, 1, bytes));
    s.lanes.push_back(lane(root, index++));  // one stream per destination, all on the sender
  }
  s.device = root;
  const std::size_t receivers = dsts.size();
  s.rounds = copies_per_round(bytes * receivers);
  s.bytes_per_round = s.link_bytes_per_round = static_cast<double>(receivers * bytes);
  s.link_Bps = gpu_port_Bps(root);
  const auto lanes = s.lanes;
  s.round = [=] {
    PERFGATE_CUDA_CHECK(cudaSetDevice(root));
    for (std::size_t k = 0; k < dsts.size(); ++k) {
      PERFGATE_CUDA_CHECK(cudaMemcpyPeerAsync(dst_bufs[k], dsts[k], src, root, bytes, lanes[k + 1].stream));
    }
  };
  s.poison = [=] {
    for (std::size_t k = 0; k < dsts.size(); ++k) poison_device(dst_bufs[k], dsts[k], bytes);
  };
  s.check = [=]() -> std::optional<std::string> {
    for (std::size_t k = 0; k < dsts.size(); ++k) {
      if (auto e = check_device(dst_bufs[k], dsts[k], bytes, device_seed(root), 0,
                                fmt::format("{} (to GPU {})", name, dsts[k])))
        return e;
    }
    return std::nullopt;
  };
  return s;
}

void one_to_all_case(benchmark::State& state, const std::string& name, int gpus, int root, std::size_t bytes) {
  if (!bench::require_gpus(state, gpus)) return;
  guarded(state, [&] {
    if (!enable_all_peers(state, gpus)) return;
    Spec s = one_to_all_spec(name, gpus, root, bytes);
    run_spec(state, name, s);
  });
}

// ---- NCCL --------------------------------------------------------------------------------------------
#if defined(PERFGATE_HAVE_NCCL)
// Peer-copy rate of the same buffers in the same process, for the "NCCL >= 90% of a peer copy" check.
double peer_copy_GBps(int src, int dst, void* to, const void* from, std::size_t bytes) {
  static std::map<std::tuple<int, int, std::size_t>, double> cache;
  const auto key = std::tuple{src, dst, bytes};
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  set_peer_access(src, dst, true);
  const std::vector<Lane> lanes = {lane(src)};
  const int rounds = copies_per_round(bytes);
  const cudaStream_t stream = lanes[0].stream;
  auto round = [=] { PERFGATE_CUDA_CHECK(cudaMemcpyPeerAsync(to, dst, from, src, bytes, stream)); };
  time_rounds(lanes, round, rounds, true);
  std::vector<double> rates;
  for (int i = 0; i < 5; ++i) {
    const RoundTiming t = time_rounds(lanes, round, rounds, true);
    rates.push_back(static_cast<double>(bytes) * rounds / t.seconds / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return cache[key] = rates[rates.size() / 2];
}

// registered: both buffers from ncclMemAlloc and registered with their rank's communicator, so NCCL
// can copy user buffer to user buffer; otherwise plain cudaMalloc buffers (NCCL's FIFO path).
void nccl_sendrecv_case(benchmark::State& state, const std::string& name, int src, int dst, std::size_t bytes,
                        bool registered) {
  if (!bench::require_gpus(state, std::max(src, dst) + 1)) return;
  guarded(state, [&] {
    nccl::world_size();
    auto& pool = BufferPool::instance();
    void* from = registered ? nccl::registered_buffer(src, 0, bytes, device_seed(src)) : pool.device_source(src, bytes);
    void* to = registered ? nccl::registered_buffer(dst, 1, bytes, 0) : pool.device(dst, 1, bytes);
    Spec s;
    s.lanes = {lane(src), lane(dst)};
    s.device = src;
    s.rounds = copies_per_round(bytes);
    s.bytes_per_round = s.link_bytes_per_round = static_cast<double>(bytes);
    s.link_Bps = gpu_pair_Bps(src, dst);
    const cudaStream_t ss = s.lanes[0].stream;
    const cudaStream_t ds = s.lanes[1].stream;
    s.round = [=] { nccl::send_recv(src, dst, from, to, bytes, ss, ds); };
    s.poison = [=] { poison_device(to, dst, bytes); };
    s.check = [=] { return check_device(to, dst, bytes, device_seed(src), 0, name); };
    const double peer = can_access_peer(src, dst) ? peer_copy_GBps(src, dst, to, from, bytes) : 0.0;
    s.extra = [peer, bytes](benchmark::State& st, double seconds_per_op) {
      if (peer > 0 && seconds_per_op > 0) {
        bench::set_percent_of(st, "peer_copy", static_cast<double>(bytes) / seconds_per_op / 1e9, peer);
        bench::set_info(st, "peer_copy_GBps", peer);
      }
    };
    run_spec(state, name, s);
  });
}

// Checks every rank's receive buffer of an all-to-all: chunk p from rank p.
std::function<std::optional<std::string>()> alltoall_check(const std::string& name, int gpus,
                                                           const std::vector<void*>& recv, std::size_t chunk) {
  return [=]() -> std::optional<std::string> {
    for (int r = 0; r < gpus; ++r) {
      for (int p = 0; p < gpus; ++p) {
        const auto* got =
            static_cast<const char*>(recv[static_cast<std::size_t>(r)]) + static_cast<std::size_t>(p) * chunk;
        if (auto e = check_device(got, r, chunk, device_seed(p), static_cast<std::uint64_t>(r) * chunk / 4,
                                  fmt::format("{} (rank {} from rank {})", name, r, p)))
          return e;
      }
    }
    return std::nullopt;
  };
}

// An NCCL all-to-all over `gpus` ranks of the bytes that `tokens` dispatch.
Spec nccl_alltoall_spec(const std::string& name, int gpus, std::size_t tokens) {
  auto& pool = BufferPool::instance();
  const std::size_t chunk = alltoall_chunk_bytes(tokens, gpus);
  const std::size_t total = chunk * static_cast<std::size_t>(gpus);
  std::vector<const void*> send(static_cast<std::size_t>(gpus));
  std::vector<void*> recv(static_cast<std::size_t>(gpus));
  std::vector<cudaStream_t> streams;
  Spec s;
  double port = 0;
  for (int r = 0; r < gpus; ++r) {
    send[static_cast<std::size_t>(r)] = pool.device_source(r, total);
    recv[static_cast<std::size_t>(r)] = pool.device(r, 1, total);
    s.lanes.push_back(lane(r));
    streams.push_back(s.lanes.back().stream);
    const double p = gpu_port_Bps(r);
    port = r == 0 ? p : std::min(port, p);
  }
  s.device = 0;
  s.rounds = copies_per_round(total);
  const double bus_factor = static_cast<double>(gpus - 1) / static_cast<double>(gpus);
  s.bytes_per_round = static_cast<double>(total);                    // algbw: bytes per rank (nccl-tests)
  s.link_bytes_per_round = static_cast<double>(total) * bus_factor;  // busbw against one GPU's port
  s.link_Bps = port;
  s.round = [=] { nccl::all_to_all(gpus, send.data(), recv.data(), chunk, streams.data()); };
  s.poison = [=] {
    for (int r = 0; r < gpus; ++r) poison_device(recv[static_cast<std::size_t>(r)], r, total);
  };
  s.check = alltoall_check(name, gpus, recv, chunk);
  s.extra = [=](benchmark::State& st, double seconds_per_op) {
    if (seconds_per_op <= 0) return;
    bench::set_rate(st, "bus_GB/s", static_cast<double>(total) * bus_factor / 1e9, seconds_per_op);
    bench::set_info(st, "bytes_per_gpu", static_cast<double>(total));
  };
  return s;
}

void nccl_alltoall_case(benchmark::State& state, const std::string& name, int gpus, std::size_t tokens) {
  if (!bench::require_gpus(state, gpus)) return;
  guarded(state, [&] {
    if (nccl::world_size() < gpus) {
      skip(state, fmt::format("NCCL world has fewer than {} GPUs", gpus));
      return;
    }
    Spec s = nccl_alltoall_spec(name, gpus, tokens);
    run_spec(state, name, s);
  });
}
#endif

// ---- registration --------------------------------------------------------------------------------------
template <typename Fn>
void add(const std::string& name, Fn&& fn) {
  benchmark::RegisterBenchmark(name.c_str(), [name, fn](benchmark::State& st) { fn(st, name); })
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}

// Measures one planned case (case_plan.hpp) as the benchmark `nm`.
void run_case(benchmark::State& st, const std::string& nm, const CaseDesc& c) {
  switch (c.kind) {
    case CaseKind::host_device: host_device_case(st, nm, c.dir, c.mem, c.bytes, c.latency); break;
    case CaseKind::d2d: d2d_case(st, nm, c.bytes, c.latency); break;
    case CaseKind::peer: peer_case(st, nm, c.a, c.b, c.peer_on, c.bytes, c.latency); break;
    case CaseKind::peer_bidir: peer_bidir_case(st, nm, c.a, c.b, c.peer_on, c.bytes); break;
    case CaseKind::all_to_one: all_to_one_case(st, nm, c.gpus, c.a, c.bytes); break;
    case CaseKind::one_to_all: one_to_all_case(st, nm, c.gpus, c.a, c.bytes); break;
#if defined(PERFGATE_HAVE_NCCL)
    case CaseKind::nccl_sendrecv: nccl_sendrecv_case(st, nm, c.a, c.b, c.bytes, c.registered); break;
    case CaseKind::nccl_alltoall: nccl_alltoall_case(st, nm, c.gpus, c.tokens); break;
#else
    case CaseKind::nccl_sendrecv:
    case CaseKind::nccl_alltoall: break;  // not planned without NCCL (plan_cases)
#endif
  }
}

}  // namespace

int registered_gpus() { return gpus_to_register(bench::gpu_count()); }

void register_all() {
#if defined(PERFGATE_HAVE_NCCL)
  constexpr bool with_nccl = true;
#else
  constexpr bool with_nccl = false;
#endif
  for (const CaseDesc& c : plan_cases(registered_gpus(), with_nccl))
    add(c.name, [c](benchmark::State& st, const std::string& nm) { run_case(st, nm, c); });
}

namespace {

void add_transfers_context() {
  benchmark::AddCustomContext(perfgate::context_keys::kSuite, "transfers");
  benchmark::AddCustomContext(perfgate::context_keys::kNvtxRanges,
                              fmt::format("{},{},{},{}", kH2DRange, kD2HRange, kG2GRange, kD2DRange));
  benchmark::AddCustomContext(perfgate::context_keys::kTransfersRegisteredGpus, std::to_string(registered_gpus()));
  benchmark::AddCustomContext(perfgate::context_keys::kTransfersMethod,
                              "CUDA events around rounds of copies queued behind a spin-on-flag kernel (nvbandwidth, "
                              "p2pBandwidthLatencyTest); pageable copies unblocked; data checked once per case");
  benchmark::AddCustomContext(perfgate::context_keys::kTransfersMeasuredCeilings, kCeilingSource);
  // Copies through pageable or mapped host memory run at the speed of the host's memory and CPU, and a
  // small copy's latency at that of its driver path: they differ between machines of one class (unchanged
  // code by tens of percent, docs/transfers.md "Host-dependent cases"). The harness does
  // not gate them against a baseline from another machine without a band of their own.
  benchmark::AddCustomContext(perfgate::context_keys::kHostDependent,
                              "transfers/((h2d|d2h)/(pageable|mapped)|latency/h2d)/.*");
  // A copy over a link cannot run faster than the link, and whatever else uses the host's memory or the link
  // (other tenants, the driver) only slows it: its repetitions sit at one floor with bursts above it. The harness
  // takes each process run's fastest repetition as its level for these, not the median (docs/statistics.md,
  // "A run's level", has the measurements).
  benchmark::AddCustomContext(perfgate::context_keys::kFloorBound,
                              "transfers/((h2d|d2h)/pinned|d2d|peer|all_to_one|one_to_all|nccl)/.*");
#if defined(PERFGATE_HAVE_NCCL)
  benchmark::AddCustomContext(perfgate::context_keys::kTransfersNccl,
                              fmt::format("NCCL {}; {}", nccl::version(), nccl::configure_environment()));
#else
  benchmark::AddCustomContext(perfgate::context_keys::kTransfersNccl,
                              "left out: this build has no NCCL (nccl.h/libnccl not found at configure time)");
#endif
  const int n = bench::gpu_count();
  if (n == 0) return;
  std::string matrix;
  for (int i = 0; i < n; ++i) {
    const auto& f = bench::link_facts(i);
    benchmark::AddCustomContext(fmt::format("{}{}.links", perfgate::context_keys::kTransfersGpuPrefix, i),
                                f.describe());
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      int access = 0;
      int rank = -1;
      int atomics = 0;
      cudaDeviceCanAccessPeer(&access, i, j);
      if (access) {
        cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, i, j);
        cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, i, j);
      }
      cudaGetLastError();
      const auto& g = bench::link_facts(j);
      const char* path = f.nvlinks > 0 && g.nvlinks > 0 ? "NVLink" : "PCIe";
      matrix += fmt::format("{}{}->{}: peer {}, perf rank {}, atomics {}, {}", matrix.empty() ? "" : "; ", i, j, access,
                            rank, atomics, path);
    }
  }
  benchmark::AddCustomContext(perfgate::context_keys::kTransfersTopology, matrix.empty() ? "one GPU" : matrix);
}

}  // namespace
}  // namespace perfgate::transfers

int main(int argc, char** argv) {
  perfgate::transfers::register_all();
  perfgate::bench::add_context_hook(&perfgate::transfers::add_transfers_context);
  perfgate::bench::add_context_hook(&perfgate::bench::add_gpu_slowdown_context);
#if !defined(PERFGATE_HAVE_NCCL)
  std::fprintf(stderr, "transfers: NCCL cases left out: this build has no NCCL\n");
#endif
  return perfgate::bench::run_main(argc, argv);
}
