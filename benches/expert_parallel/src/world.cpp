#include "perfgate/expert_parallel/world.hpp"

#include <algorithm>
#include <map>
#include <memory>

#include "perfgate/bench/cuda.hpp"
#include "perfgate/transfers/transfer_lib.hpp"

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

namespace {

// One round: every GPU copies kCeilingBytes to every other GPU, each pair on its own stream.
float ceiling_round(GpuSet& set, const std::vector<void*>& src, const std::vector<void*>& dst, MultiTimer& timer) {
  const int n = set.size();
  timer.start();
  for (int g = 0; g < n; ++g)
    for (int p = 0; p < n; ++p) {
      if (p == g) continue;
      set.join(g, set.peer(g, p), set.comm(g));
      auto* to = static_cast<char*>(dst[static_cast<std::size_t>(p)]) + static_cast<std::size_t>(g) * kCeilingBytes;
      PERFGATE_CUDA_CHECK(
          cudaMemcpyPeerAsync(to, p, src[static_cast<std::size_t>(g)], g, kCeilingBytes, set.peer(g, p)));
    }
  for (int g = 0; g < n; ++g)
    for (int p = 0; p < n; ++p)
      if (p != g) set.join(g, set.comm(g), set.peer(g, p));
  timer.stop();
  return timer.elapsed_ms();
}

double measure_ceiling(int gpus) {
  GpuSet& set = GpuSet::get(gpus);
  std::vector<void*> src(static_cast<std::size_t>(gpus)), dst(static_cast<std::size_t>(gpus));
  for (int g = 0; g < gpus; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    PERFGATE_CUDA_CHECK(cudaMalloc(&src[static_cast<std::size_t>(g)], kCeilingBytes));
    PERFGATE_CUDA_CHECK(cudaMalloc(&dst[static_cast<std::size_t>(g)], kCeilingBytes * static_cast<std::size_t>(gpus)));
    PERFGATE_CUDA_CHECK(cudaMemset(src[static_cast<std::size_t>(g)], 1, kCeilingBytes));
  }
  MultiTimer timer(set);
  float best = ceiling_round(set, src, dst, timer);  // the first round warms up
  for (int i = 0; i < 4; ++i) best = std::min(best, ceiling_round(set, src, dst, timer));
  for (int g = 0; g < gpus; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    PERFGATE_CUDA_CHECK(cudaFree(src[static_cast<std::size_t>(g)]));
    PERFGATE_CUDA_CHECK(cudaFree(dst[static_cast<std::size_t>(g)]));
  }
  const double bytes_per_gpu = static_cast<double>(kCeilingBytes) * (gpus - 1);
  return bytes_per_gpu / (static_cast<double>(best) * 1e-3) / 1e9;
}

}  // namespace

double peer_ceiling_GBps(int gpus) {
  static std::map<int, double> measured;
  auto it = measured.find(gpus);
  if (it == measured.end()) it = measured.emplace(gpus, measure_ceiling(gpus)).first;
  return it->second;
}

}  // namespace perfgate::expert_parallel
