#pragma once
// The GPUs of one expert-parallel run: peer access between every pair, one exchange stream per GPU and one
// copy-engine stream per (GPU, peer), cross-GPU barriers made of events, a timer over all GPUs, and the
// peer-copy ceiling measured once per process.
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

namespace perfgate::expert_parallel {

class GpuSet {
 public:
  // One per GPU count and process, created on first use (peer access on between all pairs; throws when a
  // pair cannot reach each other). Kept for the whole run, so benchmarks do not pay it again.
  static GpuSet& get(int gpus);
  ~GpuSet();
  GpuSet(const GpuSet&) = delete;
  GpuSet& operator=(const GpuSet&) = delete;

  int size() const { return gpus_; }
  cudaStream_t comm(int g) const { return comm_[static_cast<std::size_t>(g)]; }
  std::span<const cudaStream_t> comm_streams() const { return comm_; }
  cudaStream_t peer(int g, int p) const { return peer_[static_cast<std::size_t>(g * gpus_ + p)]; }

  // Every waiters[g] waits for all work queued so far on every signalers[s] (one stream per GPU, index =
  // device): the point where a GPU may read what its peers wrote into it.
  void barrier(std::span<const cudaStream_t> signalers, std::span<const cudaStream_t> waiters);
  void comm_barrier() { barrier(comm_, comm_); }
  // waiter waits for signaler, both on GPU g.
  void join(int g, cudaStream_t waiter, cudaStream_t signaler);
  void synchronize();

 private:
  explicit GpuSet(int gpus);
  int gpus_;
  std::vector<cudaStream_t> comm_;
  std::vector<cudaStream_t> peer_;
  std::vector<cudaEvent_t> barrier_events_;  // one per GPU
  std::vector<cudaEvent_t> join_events_;     // one per GPU
};

// One event per GPU (timing off), recorded and waited for across the GPUs: the one-way handshakes of the
// exchange (a receiver's "done reading" before its senders write again).
class GpuEvents {
 public:
  explicit GpuEvents(int gpus);
  ~GpuEvents();
  GpuEvents(const GpuEvents&) = delete;
  GpuEvents& operator=(const GpuEvents&) = delete;
  void record(int g, cudaStream_t stream);    // GPU g's event, on its stream
  void wait_all(int g, cudaStream_t waiter);  // waiter (on GPU g) waits for every GPU's last record
                                              // (an event never recorded is no wait)
 private:
  std::vector<cudaEvent_t> events_;
};

// Times work queued on the comm streams of all GPUs: start on GPU 0, which every comm stream waits for;
// stop on GPU 0 after it waited for every comm stream.
class MultiTimer {
 public:
  explicit MultiTimer(GpuSet& set);
  ~MultiTimer();
  MultiTimer(const MultiTimer&) = delete;
  MultiTimer& operator=(const MultiTimer&) = delete;
  void start();
  void mark(int index);  // after a barrier: a phase boundary on GPU 0 (index < kMarks)
  void stop();
  float elapsed_ms();              // waits for the stop
  float between_ms(int a, int b);  // marks; -1 = start, kMarks = stop
  static constexpr int kMarks = 4;

 private:
  cudaEvent_t event(int index) const;
  GpuSet& set_;
  cudaEvent_t start_{}, stop_{};
  cudaEvent_t marks_[kMarks]{};
};

// The peer ceiling: per-GPU egress (GB/s, 1e9) during an all-to-all in which every GPU sends kCeilingBytes to
// every other GPU and receives as much from each, all at once, over NVLink. Measured once per process and GPU
// count as the best of several ways to move that same pattern (best of a few rounds each), so that no
// exchange variant can beat it by moving the bytes a better way:
//   copy_engine  cudaMemcpyPeerAsync, one stream per (GPU, peer);
//   kernel       an SM-driven bulk copy kernel per GPU storing into every peer through peer pointers;
//   nccl         NCCL's all-to-all of equal blocks (when built with NCCL and its world has `gpus` ranks).
inline constexpr std::size_t kCeilingBytes = std::size_t{128} << 20;
enum class CeilingMethod { copy_engine = 0, kernel = 1, nccl = 2 };
const char* ceiling_method_name(CeilingMethod method);

struct PeerCeiling {
  double GBps = 0;                                        // the best method's rate
  CeilingMethod method = CeilingMethod::copy_engine;      // the method that set it
  std::vector<std::pair<CeilingMethod, double>> methods;  // every method measured, with its GB/s
};
// The method with the highest rate (the first on a tie); GBps 0 when `methods` is empty.
PeerCeiling best_ceiling(std::vector<std::pair<CeilingMethod, double>> methods);
const PeerCeiling& peer_ceiling(int gpus);
inline double peer_ceiling_GBps(int gpus) { return peer_ceiling(gpus).GBps; }

}  // namespace perfgate::expert_parallel
