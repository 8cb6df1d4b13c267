#pragma once
// Host side of the transfer suite: buffer pool with patterned sources, the stream blocker, lanes
// (stream + events per device), the timing of queued rounds, peer-access control, the measured
// ceilings measured on nvidia-h200-x2 (docs/transfers.md), and DeepSeek-V3 dispatch sizes. Used by the benchmarks and
// the unit test alike.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime.h>

namespace perfgate::transfers {

inline constexpr std::size_t KiB = 1024;
inline constexpr std::size_t MiB = 1024 * KiB;
inline constexpr std::size_t GiB = 1024 * MiB;

// ---- sizes ---------------------------------------------------------------------------------------
// DeepSeek-V3 expert-parallel dispatch (and, symmetrically, combine): every token goes to top-8
// experts, each copy is one hidden vector of 7168 bf16 values.
inline constexpr std::size_t kDeepSeekTopK = 8;
inline constexpr std::size_t kDeepSeekHidden = 7168;
inline constexpr std::size_t kBf16Bytes = 2;
constexpr std::size_t dispatch_bytes_per_gpu(std::size_t tokens) {
  return tokens * kDeepSeekTopK * kDeepSeekHidden * kBf16Bytes;
}
// Bytes one GPU sends to each of `gpus` GPUs (itself included) in a uniform all-to-all: whole tokens.
constexpr std::size_t alltoall_chunk_bytes(std::size_t tokens, int gpus) {
  return gpus <= 0 ? 0 : (tokens * kDeepSeekTopK / static_cast<std::size_t>(gpus)) * kDeepSeekHidden * kBf16Bytes;
}

// Copies queued per timed round: enough that one round moves >= 64 MiB or 64 copies, whichever
// comes first, so small copies are timed back to back (nvbandwidth's loop count, p2p sample's repeat).
int copies_per_round(std::size_t bytes);
inline constexpr int kLatencyCopies = 64;

// ---- measured ceilings -----------------------------------------------------------------------------
struct MeasuredCeiling {
  const char* pattern;  // "h2d/pinned", "d2h/pinned", "d2d", "peer/on", "peer/on/bidir", "peer/off"
  std::size_t bytes;
  double GBps;
};
// Source: docs/transfers.md, "Measured ceilings", on nvidia-h200-x2 (2x H200, NVLink NV18, PCIe 5 x16) by a
// plain probe, whose record that section links. Valid for H200 GPUs only.
inline constexpr const char* kCeilingSource = "measured ceilings (docs/transfers.md), nvidia-h200-x2";
extern const MeasuredCeiling kH200x2Ceilings[];
extern const std::size_t kH200x2CeilingCount;

// The ceiling for `pattern` at `bytes` on a GPU named `gpu_name`: the entry of that size, or the
// largest-size entry for larger copies; nullopt when the GPU is not an H200 or nothing applies.
std::optional<double> measured_ceiling_GBps(std::string_view pattern, std::size_t bytes, std::string_view gpu_name);

// ---- buffers ---------------------------------------------------------------------------------------
enum class HostKind { pinned, pageable };

// Grow-only pool, so repetitions of a benchmark do not re-allocate (pinned allocations of 1 GiB take
// long). Slot 0 of each device/host kind is a *source*: it holds the pattern of device_seed(dev) /
// kPinnedSeed / kPageableSeed and is never written by a copy. Other slots are destinations.
class BufferPool {
 public:
  static BufferPool& instance();
  void* device(int device, int slot, std::size_t bytes);
  void* host(HostKind kind, int slot, std::size_t bytes);  // pinned: portable + mapped
  void* device_source(int device, std::size_t bytes);      // slot 0, patterned
  void* host_source(HostKind kind, std::size_t bytes);     // slot 0, patterned
  void release_all();
  ~BufferPool();

 private:
  struct Entry {
    void* ptr = nullptr;
    std::size_t capacity = 0;
    std::size_t patterned = 0;
  };
  Entry& entry(int key_a, int key_b);
  std::vector<std::pair<std::pair<int, int>, Entry>> entries_;
};

std::uint32_t host_seed(HostKind kind);
void fill_host_pattern(void* dst, std::size_t bytes, std::uint32_t seed, std::uint64_t first_word = 0);

// Poison before a checked copy, so unwritten words fail.
void poison_device(void* ptr, int device, std::size_t bytes);
void poison_host(void* ptr, std::size_t bytes);
// nullopt when `bytes` of data hold pattern(seed, first_word + i); else a one-line message.
std::optional<std::string> check_device(const void* data, int device, std::size_t bytes, std::uint32_t seed,
                                        std::uint64_t first_word, std::string_view what);
std::optional<std::string> check_host(const void* data, std::size_t bytes, std::uint32_t seed, std::uint64_t first_word,
                                      std::string_view what);

// ---- peer access -----------------------------------------------------------------------------------
bool can_access_peer(int a, int b);
// Enables or disables peer access in both directions (idempotent). Enabling throws when impossible.
void set_peer_access(int a, int b, bool on);

// ---- streams, blocker, timing ----------------------------------------------------------------------
struct Lane {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
};
// A non-blocking stream with its two events on `device`; `index` tells several lanes of one device apart.
Lane lane(int device, int index = 0);

// Holds a stream with the spin kernel until release(): pinned, mapped flags in host memory.
class Blocker {
 public:
  static Blocker& instance();
  void block(const Lane& lane);
  void release();
  bool timed_out() const;
  static constexpr unsigned long long kTimeoutNs = 1'000'000'000ull;

 private:
  Blocker();
  volatile int* flag_ = nullptr;
  volatile int* timed_out_ = nullptr;
};

struct RoundTiming {
  double seconds = 0;
  bool blocked = false;  // the copies were queued behind the spin kernel
  bool blocker_timed_out = false;
};

// Queues `rounds` calls of `round` on the lanes and times them with events on lanes[0]:
// [spin kernel] start(lane0) -> other lanes wait on it -> rounds -> other lanes' stops -> stop(lane0).
RoundTiming time_rounds(const std::vector<Lane>& lanes, const std::function<void()>& round, int rounds,
                        bool use_blocker);

std::string gpu_name(int device);

}  // namespace perfgate::transfers
