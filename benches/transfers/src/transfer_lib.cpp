#include "perfgate/transfers/transfer_lib.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "perfgate/bench/cuda.hpp"
#include "perfgate/transfers/kernels.cuh"
#include "perfgate/transfers/pattern.hpp"

namespace perfgate::transfers {

int copies_per_round(std::size_t bytes) {
  if (bytes == 0) return 1;
  const std::size_t target = 64 * MiB;
  const std::size_t n = (target + bytes - 1) / bytes;
  return static_cast<int>(std::clamp<std::size_t>(n, 1, 64));
}

// ---- measured ceilings -----------------------------------------------------------------------------
const MeasuredCeiling kH200x2Ceilings[] = {
    {"h2d/pinned", 256 * MiB, 55.2},
    {"h2d/pinned", 16 * MiB, 54.4},
    {"h2d/pinned", 1 * MiB, 42.7},
    {"h2d/pinned", 64 * KiB, 10.0},
    {"d2h/pinned", 256 * MiB, 55.2},
    {"d2h/pinned", 16 * MiB, 54.4},
    {"d2h/pinned", 1 * MiB, 42.7},
    {"d2h/pinned", 64 * KiB, 10.0},
    // D2D: 2.04 TB/s copied (4.07 TB/s read + written); the measured ceiling gives no size: taken as a large copy.
    {"d2d", 256 * MiB, 2040.0},
    {"peer/on", 256 * MiB, 393.6},
    {"peer/on", 16 * MiB, 348.0},
    {"peer/on", 1 * MiB, 137.0},
    {"peer/on", 64 * KiB, 12.4},
    {"peer/on/bidir", 256 * MiB, 775.0},
    {"peer/off", 256 * MiB, 38.3},
};
const std::size_t kH200x2CeilingCount = sizeof(kH200x2Ceilings) / sizeof(kH200x2Ceilings[0]);

std::optional<double> measured_ceiling_GBps(std::string_view pattern, std::size_t bytes, std::string_view gpu) {
  if (gpu.find("H200") == std::string_view::npos) return std::nullopt;
  const MeasuredCeiling* largest = nullptr;
  for (std::size_t i = 0; i < kH200x2CeilingCount; ++i) {
    const auto& c = kH200x2Ceilings[i];
    if (pattern != c.pattern) continue;
    if (c.bytes == bytes) return c.GBps;
    if (!largest || c.bytes > largest->bytes) largest = &c;
  }
  if (largest && bytes > largest->bytes) return largest->GBps;
  return std::nullopt;
}

// ---- buffers ---------------------------------------------------------------------------------------
namespace {
constexpr int kHostKey = -100;  // host entries: (kHostKey - kind, slot)

int host_key(HostKind kind) { return kHostKey - static_cast<int>(kind); }

void parallel_words(std::size_t words, const std::function<void(std::size_t, std::size_t)>& body) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t threads = std::min<std::size_t>({hw, 16, std::max<std::size_t>(1, words / (1 << 20))});
  if (threads <= 1) {
    body(0, words);
    return;
  }
  std::vector<std::thread> pool;
  const std::size_t per = (words + threads - 1) / threads;
  for (std::size_t t = 0; t < threads; ++t) {
    const std::size_t lo = t * per;
    const std::size_t hi = std::min(words, lo + per);
    if (lo >= hi) break;
    pool.emplace_back([&body, lo, hi] { body(lo, hi); });
  }
  for (auto& th : pool) th.join();
}

void free_entry(int a, void* ptr) {
  if (!ptr) return;
  if (a >= 0) {
    cudaSetDevice(a);
    cudaFree(ptr);
  } else if (a == host_key(HostKind::pinned)) {
    cudaFreeHost(ptr);
  } else {
    std::free(ptr);
  }
}
}  // namespace

BufferPool& BufferPool::instance() {
  static BufferPool pool;
  return pool;
}

BufferPool::~BufferPool() { release_all(); }

void BufferPool::release_all() {
  for (auto& [key, e] : entries_) free_entry(key.first, e.ptr);
  entries_.clear();
}

BufferPool::Entry& BufferPool::entry(int a, int b) {
  for (auto& [key, e] : entries_) {
    if (key.first == a && key.second == b) return e;
  }
  entries_.push_back({{a, b}, Entry{}});
  return entries_.back().second;
}

void* BufferPool::device(int dev, int slot, std::size_t bytes) {
  Entry& e = entry(dev, slot);
  if (e.capacity < bytes) {
    free_entry(dev, e.ptr);
    e = Entry{};
    PERFGATE_CUDA_CHECK(cudaSetDevice(dev));
    PERFGATE_CUDA_CHECK(cudaMalloc(&e.ptr, bytes));
    e.capacity = bytes;
  }
  return e.ptr;
}

void* BufferPool::host(HostKind kind, int slot, std::size_t bytes) {
  const int key = host_key(kind);
  Entry& e = entry(key, slot);
  if (e.capacity < bytes) {
    free_entry(key, e.ptr);
    e = Entry{};
    if (kind == HostKind::pinned) {
      PERFGATE_CUDA_CHECK(cudaHostAlloc(&e.ptr, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
    } else {
      const std::size_t rounded = (bytes + 4095) / 4096 * 4096;
      e.ptr = std::aligned_alloc(4096, rounded);
      if (!e.ptr) throw bench::CudaError(fmt::format("pageable allocation of {} bytes failed", bytes));
      std::memset(e.ptr, 0, rounded);  // fault the pages in now, not inside the first timed copy
    }
    e.capacity = bytes;
  }
  return e.ptr;
}

void* BufferPool::device_source(int dev, std::size_t bytes) {
  void* p = device(dev, 0, bytes);
  Entry& e = entry(dev, 0);
  if (e.patterned < bytes) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(dev));
    launch_fill_pattern(p, e.capacity / 4 * 4, device_seed(dev), 0, nullptr);
    PERFGATE_CUDA_CHECK(cudaDeviceSynchronize());
    e.patterned = e.capacity;
  }
  return p;
}

void* BufferPool::host_source(HostKind kind, std::size_t bytes) {
  void* p = host(kind, 0, bytes);
  Entry& e = entry(host_key(kind), 0);
  if (e.patterned < bytes) {
    fill_host_pattern(p, e.capacity / 4 * 4, host_seed(kind));
    e.patterned = e.capacity;
  }
  return p;
}

std::uint32_t host_seed(HostKind kind) { return kind == HostKind::pinned ? kPinnedSeed : kPageableSeed; }

void fill_host_pattern(void* dst, std::size_t bytes, std::uint32_t seed, std::uint64_t first_word) {
  auto* w = static_cast<std::uint32_t*>(dst);
  parallel_words(bytes / 4, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) w[i] = pattern_word(seed, first_word + i);
  });
}

void poison_device(void* ptr, int device, std::size_t bytes) {
  PERFGATE_CUDA_CHECK(cudaSetDevice(device));
  PERFGATE_CUDA_CHECK(cudaMemset(ptr, 0xA5, bytes));
  PERFGATE_CUDA_CHECK(cudaDeviceSynchronize());
}

void poison_host(void* ptr, std::size_t bytes) { std::memset(ptr, 0x5A, bytes); }

std::optional<std::string> check_device(const void* data, int device, std::size_t bytes, std::uint32_t seed,
                                        std::uint64_t first_word, std::string_view what) {
  static std::map<int, unsigned long long*> counters;
  PERFGATE_CUDA_CHECK(cudaSetDevice(device));
  unsigned long long*& counter = counters[device];
  if (!counter) PERFGATE_CUDA_CHECK(cudaMalloc(&counter, sizeof(unsigned long long)));
  PERFGATE_CUDA_CHECK(cudaMemset(counter, 0, sizeof(unsigned long long)));
  launch_count_mismatches(data, bytes, seed, first_word, counter, nullptr);
  unsigned long long bad = 0;
  PERFGATE_CUDA_CHECK(cudaMemcpy(&bad, counter, sizeof(bad), cudaMemcpyDeviceToHost));
  if (bad == 0) return std::nullopt;
  return fmt::format("wrong result: {}: {} of {} words differ from the source pattern", what, bad, bytes / 4);
}

std::optional<std::string> check_host(const void* data, std::size_t bytes, std::uint32_t seed, std::uint64_t first_word,
                                      std::string_view what) {
  const auto* w = static_cast<const std::uint32_t*>(data);
  std::atomic<std::size_t> bad{0};
  parallel_words(bytes / 4, [&](std::size_t lo, std::size_t hi) {
    std::size_t local = 0;
    for (std::size_t i = lo; i < hi; ++i) local += w[i] != pattern_word(seed, first_word + i);
    bad += local;
  });
  if (bad == 0) return std::nullopt;
  return fmt::format("wrong result: {}: {} of {} words differ from the source pattern", what, bad.load(), bytes / 4);
}

// ---- peer access -----------------------------------------------------------------------------------
bool can_access_peer(int a, int b) {
  int ok = 0;
  PERFGATE_CUDA_CHECK(cudaDeviceCanAccessPeer(&ok, a, b));
  return ok != 0;
}

void set_peer_access(int a, int b, bool on) {
  for (const auto& [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(from));
    const cudaError_t err = on ? cudaDeviceEnablePeerAccess(to, 0) : cudaDeviceDisablePeerAccess(to);
    if (err == cudaErrorPeerAccessAlreadyEnabled || err == cudaErrorPeerAccessNotEnabled) {
      cudaGetLastError();
      continue;
    }
    PERFGATE_CUDA_CHECK(err);
  }
}

// ---- streams, blocker, timing ----------------------------------------------------------------------
Lane lane(int device, int index) {
  static std::map<std::pair<int, int>, Lane> lanes;
  auto it = lanes.find({device, index});
  if (it != lanes.end()) return it->second;
  Lane l;
  l.device = device;
  PERFGATE_CUDA_CHECK(cudaSetDevice(device));
  PERFGATE_CUDA_CHECK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
  PERFGATE_CUDA_CHECK(cudaEventCreate(&l.start));
  PERFGATE_CUDA_CHECK(cudaEventCreate(&l.stop));
  lanes.emplace(std::pair{device, index}, l);
  return l;
}

Blocker& Blocker::instance() {
  static Blocker b;
  return b;
}

Blocker::Blocker() {
  void* p = nullptr;
  PERFGATE_CUDA_CHECK(cudaHostAlloc(&p, 2 * sizeof(int), cudaHostAllocPortable | cudaHostAllocMapped));
  flag_ = static_cast<volatile int*>(p);
  timed_out_ = flag_ + 1;
  *flag_ = 1;
  *timed_out_ = 0;
}

void Blocker::block(const Lane& l) {
  *flag_ = 0;
  *timed_out_ = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  PERFGATE_CUDA_CHECK(cudaSetDevice(l.device));
  launch_spin(flag_, timed_out_, kTimeoutNs, l.stream);
}

void Blocker::release() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  *flag_ = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

bool Blocker::timed_out() const { return *timed_out_ != 0; }

namespace {

// Records the start on the first lane's stream and makes the other lanes wait for it.
void fork_lanes(const std::vector<Lane>& lanes) {
  const Lane& l0 = lanes.front();
  PERFGATE_CUDA_CHECK(cudaSetDevice(l0.device));
  PERFGATE_CUDA_CHECK(cudaEventRecord(l0.start, l0.stream));
  for (std::size_t i = 1; i < lanes.size(); ++i) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(lanes[i].device));
    PERFGATE_CUDA_CHECK(cudaStreamWaitEvent(lanes[i].stream, l0.start, 0));
  }
}

// Makes the first lane wait for every other lane's end, then records the stop on it.
void join_lanes(const std::vector<Lane>& lanes) {
  const Lane& l0 = lanes.front();
  for (std::size_t i = 1; i < lanes.size(); ++i) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(lanes[i].device));
    PERFGATE_CUDA_CHECK(cudaEventRecord(lanes[i].stop, lanes[i].stream));
    PERFGATE_CUDA_CHECK(cudaSetDevice(l0.device));
    PERFGATE_CUDA_CHECK(cudaStreamWaitEvent(l0.stream, lanes[i].stop, 0));
  }
  PERFGATE_CUDA_CHECK(cudaSetDevice(l0.device));
  PERFGATE_CUDA_CHECK(cudaEventRecord(l0.stop, l0.stream));
}

}  // namespace

RoundTiming time_rounds(const std::vector<Lane>& lanes, const std::function<void()>& round, int rounds,
                        bool use_blocker) {
  if (lanes.empty()) throw bench::CudaError("time_rounds: no lanes");
  const Lane& l0 = lanes.front();
  Blocker& blocker = Blocker::instance();
  struct Release {
    Blocker* b;
    ~Release() {
      if (b) b->release();
    }
  } guard{use_blocker ? &blocker : nullptr};

  if (use_blocker) blocker.block(l0);
  fork_lanes(lanes);
  for (int r = 0; r < rounds; ++r) round();
  join_lanes(lanes);
  if (use_blocker) {
    blocker.release();
    guard.b = nullptr;
  }
  PERFGATE_CUDA_CHECK(cudaEventSynchronize(l0.stop));
  float ms = 0.0f;
  PERFGATE_CUDA_CHECK(cudaEventElapsedTime(&ms, l0.start, l0.stop));
  RoundTiming t;
  t.seconds = static_cast<double>(ms) / 1e3;
  t.blocked = use_blocker;
  t.blocker_timed_out = use_blocker && blocker.timed_out();
  return t;
}

std::string gpu_name(int device) {
  cudaDeviceProp prop{};
  PERFGATE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

}  // namespace perfgate::transfers
