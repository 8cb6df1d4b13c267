#include "perfgate/expert_parallel/world.hpp"

#include <algorithm>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "perfgate/bench/cuda.hpp"
#include "perfgate/expert_parallel/kernels.hpp"
#include "perfgate/transfers/transfer_lib.hpp"
#if defined(PERFGATE_HAVE_NCCL)
#include "perfgate/transfers/nccl_world.hpp"
#endif

namespace perfgate::expert_parallel {
namespace {

cudaStream_t new_stream(int g) {
  PERFGATE_CUDA_CHECK(cudaSetDevice(g));
  cudaStream_t s = nullptr;
  PERFGATE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

cudaEvent_t new_event(int g, bool timing) {
  PERFGATE_CUDA_CHECK(cudaSetDevice(g));
  cudaEvent_t e = nullptr;
  PERFGATE_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return e;
}

}  // namespace

GpuSet& GpuSet::get(int gpus) {
  static std::map<int, std::unique_ptr<GpuSet>> sets;
  auto& slot = sets[gpus];
  if (!slot) slot.reset(new GpuSet(gpus));
  return *slot;
}

GpuSet::GpuSet(int gpus) : gpus_(gpus) {
  for (int a = 0; a < gpus; ++a)
    for (int b = a + 1; b < gpus; ++b) transfers::set_peer_access(a, b, true);
  for (int g = 0; g < gpus; ++g) {
    comm_.push_back(new_stream(g));
    barrier_events_.push_back(new_event(g, false));
    join_events_.push_back(new_event(g, false));
    for (int p = 0; p < gpus; ++p) peer_.push_back(new_stream(g));
  }
}

GpuSet::~GpuSet() {
  for (cudaStream_t s : comm_) cudaStreamDestroy(s);
  for (cudaStream_t s : peer_) cudaStreamDestroy(s);
  for (cudaEvent_t e : barrier_events_) cudaEventDestroy(e);
  for (cudaEvent_t e : join_events_) cudaEventDestroy(e);
}

void GpuSet::barrier(std::span<const cudaStream_t> signalers, std::span<const cudaStream_t> waiters) {
  for (int g = 0; g < gpus_; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    PERFGATE_CUDA_CHECK(
        cudaEventRecord(barrier_events_[static_cast<std::size_t>(g)], signalers[static_cast<std::size_t>(g)]));
  }
  for (int g = 0; g < gpus_; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    for (cudaEvent_t e : barrier_events_)
      PERFGATE_CUDA_CHECK(cudaStreamWaitEvent(waiters[static_cast<std::size_t>(g)], e, 0));
  }
}

void GpuSet::join(int g, cudaStream_t waiter, cudaStream_t signaler) {
  PERFGATE_CUDA_CHECK(cudaSetDevice(g));
  cudaEvent_t e = join_events_[static_cast<std::size_t>(g)];
  PERFGATE_CUDA_CHECK(cudaEventRecord(e, signaler));
  PERFGATE_CUDA_CHECK(cudaStreamWaitEvent(waiter, e, 0));
}

void GpuSet::synchronize() {
  for (int g = 0; g < gpus_; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    PERFGATE_CUDA_CHECK(cudaDeviceSynchronize());
  }
}

GpuEvents::GpuEvents(int gpus) {
  for (int g = 0; g < gpus; ++g) events_.push_back(new_event(g, false));
}

GpuEvents::~GpuEvents() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

void GpuEvents::record(int g, cudaStream_t stream) {
  PERFGATE_CUDA_CHECK(cudaSetDevice(g));
  PERFGATE_CUDA_CHECK(cudaEventRecord(events_[static_cast<std::size_t>(g)], stream));
}

void GpuEvents::wait_all(int g, cudaStream_t waiter) {
  PERFGATE_CUDA_CHECK(cudaSetDevice(g));
  for (cudaEvent_t e : events_) PERFGATE_CUDA_CHECK(cudaStreamWaitEvent(waiter, e, 0));
}

MultiTimer::MultiTimer(GpuSet& set) : set_(set) {
  start_ = new_event(0, true);
  stop_ = new_event(0, true);
  for (cudaEvent_t& e : marks_) e = new_event(0, true);
}

MultiTimer::~MultiTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
  for (cudaEvent_t e : marks_) cudaEventDestroy(e);
}

void MultiTimer::start() {
  PERFGATE_CUDA_CHECK(cudaSetDevice(0));
  PERFGATE_CUDA_CHECK(cudaEventRecord(start_, set_.comm(0)));
  for (int g = 1; g < set_.size(); ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    PERFGATE_CUDA_CHECK(cudaStreamWaitEvent(set_.comm(g), start_, 0));
  }
}

void MultiTimer::mark(int index) {
  PERFGATE_CUDA_CHECK(cudaSetDevice(0));
  PERFGATE_CUDA_CHECK(cudaEventRecord(marks_[index], set_.comm(0)));
}

void MultiTimer::stop() {
  set_.comm_barrier();  // GPU 0's stream (and every other) waits for every GPU
  PERFGATE_CUDA_CHECK(cudaSetDevice(0));
  PERFGATE_CUDA_CHECK(cudaEventRecord(stop_, set_.comm(0)));
}

cudaEvent_t MultiTimer::event(int index) const {
  if (index < 0) return start_;
  return index >= kMarks ? stop_ : marks_[index];
}

float MultiTimer::elapsed_ms() { return between_ms(-1, kMarks); }

float MultiTimer::between_ms(int a, int b) {
  PERFGATE_CUDA_CHECK(cudaEventSynchronize(stop_));
  float ms = 0;
  PERFGATE_CUDA_CHECK(cudaEventElapsedTime(&ms, event(a), event(b)));
  return ms;
}

const char* ceiling_method_name(CeilingMethod method) {
  switch (method) {
    case CeilingMethod::copy_engine: return "copy_engine";
    case CeilingMethod::kernel: return "kernel";
    default: return "nccl";
  }
}

PeerCeiling best_ceiling(std::vector<std::pair<CeilingMethod, double>> methods) {
  PeerCeiling c;
  for (const auto& [method, rate] : methods)
    if (rate > c.GBps) {
      c.GBps = rate;
      c.method = method;
    }
  c.methods = std::move(methods);
  return c;
}

namespace {

// The all-to-all of the ceiling: GPU g's src block goes to every peer p, at dst[p] + g * kCeilingBytes.
// peer_dst[g] is GPU g's device array of those destinations (its peers ascending), for the bulk kernel.
struct CeilingBuffers {
  explicit CeilingBuffers(int gpus);
  ~CeilingBuffers();
  CeilingBuffers(const CeilingBuffers&) = delete;
  CeilingBuffers& operator=(const CeilingBuffers&) = delete;
  char* to(int g, int p) const {
    return dst[static_cast<std::size_t>(p)] + static_cast<std::size_t>(g) * kCeilingBytes;
  }
  int gpus;
  std::vector<char*> src, dst;
  std::vector<void**> peer_dst;
};

CeilingBuffers::CeilingBuffers(int n)
    : gpus(n),
      src(static_cast<std::size_t>(n)),
      dst(static_cast<std::size_t>(n)),
      peer_dst(static_cast<std::size_t>(n)) {
  const auto i = [](int g) { return static_cast<std::size_t>(g); };
  for (int g = 0; g < n; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    PERFGATE_CUDA_CHECK(cudaMalloc(&src[i(g)], kCeilingBytes));
    PERFGATE_CUDA_CHECK(cudaMalloc(&dst[i(g)], kCeilingBytes * i(n)));
    PERFGATE_CUDA_CHECK(cudaMemset(src[i(g)], 1, kCeilingBytes));
    PERFGATE_CUDA_CHECK(cudaMalloc(&peer_dst[i(g)], sizeof(void*) * i(n)));
  }
  for (int g = 0; g < n; ++g) {
    std::vector<void*> peers;
    for (int p = 0; p < n; ++p)
      if (p != g) peers.push_back(to(g, p));
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    PERFGATE_CUDA_CHECK(cudaMemcpy(peer_dst[i(g)], peers.data(), sizeof(void*) * peers.size(), cudaMemcpyHostToDevice));
  }
}

CeilingBuffers::~CeilingBuffers() {
  for (int g = 0; g < gpus; ++g) {
    cudaSetDevice(g);
    cudaFree(src[static_cast<std::size_t>(g)]);
    cudaFree(dst[static_cast<std::size_t>(g)]);
    cudaFree(peer_dst[static_cast<std::size_t>(g)]);
  }
}

// copy_engine: every (GPU, peer) pair on its own stream, all at once.
void copy_engine_all_to_all(GpuSet& set, const CeilingBuffers& b) {
  const int n = set.size();
  for (int g = 0; g < n; ++g)
    for (int p = 0; p < n; ++p) {
      if (p == g) continue;
      set.join(g, set.peer(g, p), set.comm(g));
      PERFGATE_CUDA_CHECK(
          cudaMemcpyPeerAsync(b.to(g, p), p, b.src[static_cast<std::size_t>(g)], g, kCeilingBytes, set.peer(g, p)));
    }
  for (int g = 0; g < n; ++g)
    for (int p = 0; p < n; ++p)
      if (p != g) set.join(g, set.comm(g), set.peer(g, p));
}

// kernel: one bulk copy kernel per GPU into all its peers.
void kernel_all_to_all(GpuSet& set, const CeilingBuffers& b) {
  for (int g = 0; g < set.size(); ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    launch_bulk_copy(b.src[static_cast<std::size_t>(g)], b.peer_dst[static_cast<std::size_t>(g)], set.size() - 1,
                     kCeilingBytes, set.comm(g));
  }
}

#if defined(PERFGATE_HAVE_NCCL)
// nccl: equal blocks to every peer (none to itself), as one NCCL group.
void nccl_all_to_all(GpuSet& set, const CeilingBuffers& b) {
  const int n = set.size();
  const auto cells = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  std::vector<std::size_t> bytes(cells, kCeilingBytes), send_offset(cells, 0), recv_offset(cells, 0);
  for (int g = 0; g < n; ++g) {
    bytes[static_cast<std::size_t>(g * n + g)] = 0;
    for (int s = 0; s < n; ++s)
      recv_offset[static_cast<std::size_t>(g * n + s)] = static_cast<std::size_t>(s) * kCeilingBytes;
  }
  std::vector<const void*> from(b.src.begin(), b.src.end());
  std::vector<void*> to(b.dst.begin(), b.dst.end());
  transfers::nccl::all_to_all_v(n, from.data(), to.data(), bytes.data(), send_offset.data(), recv_offset.data(),
                                set.comm_streams().data());
}
#endif

// Best (shortest) of a warm-up round and 4 timed rounds of `op`, as per-GPU egress in GB/s.
template <typename Op>
double best_rate(GpuSet& set, Op&& op) {
  MultiTimer timer(set);
  float best = 0;
  for (int i = 0; i < 5; ++i) {
    timer.start();
    op();
    timer.stop();
    const float ms = timer.elapsed_ms();
    if (i == 1 || (i > 1 && ms < best)) best = ms;  // round 0 warms up
  }
  const double bytes_per_gpu = static_cast<double>(kCeilingBytes) * (set.size() - 1);
  return bytes_per_gpu / (static_cast<double>(best) * 1e-3) / 1e9;
}

PeerCeiling measure_ceiling(int gpus) {
  GpuSet& set = GpuSet::get(gpus);
  std::vector<std::pair<CeilingMethod, double>> methods;
  {
    const CeilingBuffers b(gpus);
    methods.emplace_back(CeilingMethod::copy_engine, best_rate(set, [&] { copy_engine_all_to_all(set, b); }));
    methods.emplace_back(CeilingMethod::kernel, best_rate(set, [&] { kernel_all_to_all(set, b); }));
#if defined(PERFGATE_HAVE_NCCL)
    if (transfers::nccl::world_size() == gpus)
      methods.emplace_back(CeilingMethod::nccl, best_rate(set, [&] { nccl_all_to_all(set, b); }));
#endif
    set.synchronize();  // before the buffers go
  }
  PeerCeiling c = best_ceiling(std::move(methods));
  for (const auto& [method, rate] : c.methods)
    fmt::print(stderr, "expert_parallel: peer ceiling over {} GPUs by {}: {:.1f} GB/s per GPU\n", gpus,
               ceiling_method_name(method), rate);
  return c;
}

}  // namespace

const PeerCeiling& peer_ceiling(int gpus) {
  static std::map<int, PeerCeiling> measured;
  auto it = measured.find(gpus);
  if (it == measured.end()) it = measured.emplace(gpus, measure_ceiling(gpus)).first;
  return it->second;
}

}  // namespace perfgate::expert_parallel
