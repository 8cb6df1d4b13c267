#include "perfgate/transfers/nccl_world.hpp"

#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nccl.h>

#include "perfgate/bench/cuda.hpp"
#include "perfgate/transfers/kernels.cuh"

namespace perfgate::transfers::nccl {
namespace {

#define PERFGATE_NCCL_CHECK(expr)                                                                      \
  do {                                                                                                 \
    const ncclResult_t perfgate_nccl_ = (expr);                                                        \
    if (perfgate_nccl_ != ncclSuccess)                                                                 \
      throw NcclError(fmt::format("NCCL error {} ({}) at {}:{}: {}", static_cast<int>(perfgate_nccl_), \
                                  ncclGetErrorString(perfgate_nccl_), __FILE__, __LINE__, #expr));     \
  } while (0)

struct Registered {
  void* ptr = nullptr;
  void* handle = nullptr;
  std::size_t bytes = 0;
};

struct World {
  std::vector<ncclComm_t> comms;
  std::map<std::pair<int, int>, Registered> registered;  // (device, slot)
};

void release(World& w, Registered& r, int device) {
  if (r.handle != nullptr) ncclCommDeregister(w.comms[static_cast<std::size_t>(device)], r.handle);
  if (r.ptr != nullptr) ncclMemFree(r.ptr);
  r = Registered{};
}

World& world() {
  static World w;
  return w;
}

std::mutex& mutex() {
  static std::mutex m;
  return m;
}

struct Elements {
  std::size_t count;
  ncclDataType_t type;
};

// Splits bytes into bf16 elements when even (the payload is bf16 activations), else bytes.
Elements as_elements(std::size_t bytes) {
  if (bytes % 2 == 0) return {bytes / 2, ncclBfloat16};
  return {bytes, ncclUint8};
}

}  // namespace

std::string version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

std::string configure_environment() {
  static std::mutex m;
  static std::string description;
  std::lock_guard<std::mutex> lock(m);
  if (!description.empty()) return description;
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  description = fmt::format("NCCL_NVLS_ENABLE=0 (forced; was {})", nvls ? nvls : "unset");
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  return description;
}

int world_size() {
  std::lock_guard<std::mutex> lock(mutex());
  World& w = world();
  if (w.comms.empty()) {
    configure_environment();
    const int n = bench::gpu_count();
    if (n < 1) throw NcclError("NCCL: no GPU");
    w.comms.resize(static_cast<std::size_t>(n));
    PERFGATE_NCCL_CHECK(ncclCommInitAll(w.comms.data(), n, nullptr));
  }
  return static_cast<int>(w.comms.size());
}

void destroy_world() {
  std::lock_guard<std::mutex> lock(mutex());
  World& w = world();
  for (auto& [key, r] : w.registered) release(w, r, key.first);
  w.registered.clear();
  for (ncclComm_t c : w.comms) ncclCommDestroy(c);
  w.comms.clear();
}

void* registered_buffer(int device, int slot, std::size_t bytes, std::uint32_t pattern_seed) {
  world_size();
  std::lock_guard<std::mutex> lock(mutex());
  World& w = world();
  Registered& r = w.registered[{device, slot}];
  if (r.bytes >= bytes) return r.ptr;
  PERFGATE_CUDA_CHECK(cudaSetDevice(device));
  release(w, r, device);
  PERFGATE_NCCL_CHECK(ncclMemAlloc(&r.ptr, bytes));
  r.bytes = bytes;
  PERFGATE_NCCL_CHECK(ncclCommRegister(w.comms[static_cast<std::size_t>(device)], r.ptr, bytes, &r.handle));
  if (slot == 0) {
    launch_fill_pattern(r.ptr, bytes / 4 * 4, pattern_seed, 0, nullptr);
    PERFGATE_CUDA_CHECK(cudaDeviceSynchronize());
  }
  return r.ptr;
}

void send_recv(int src, int dst, const void* send, void* recv, std::size_t bytes, cudaStream_t src_stream,
               cudaStream_t dst_stream) {
  world_size();
  World& w = world();
  const auto [count, type] = as_elements(bytes);
  PERFGATE_NCCL_CHECK(ncclGroupStart());
  PERFGATE_NCCL_CHECK(ncclSend(send, count, type, dst, w.comms[static_cast<std::size_t>(src)], src_stream));
  PERFGATE_NCCL_CHECK(ncclRecv(recv, count, type, src, w.comms[static_cast<std::size_t>(dst)], dst_stream));
  PERFGATE_NCCL_CHECK(ncclGroupEnd());
}

void all_to_all(int gpus, const void* const* send, void* const* recv, std::size_t chunk_bytes,
                const cudaStream_t* streams) {
  world_size();
  World& w = world();
  const auto [count, type] = as_elements(chunk_bytes);
  PERFGATE_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < gpus; ++r) {
    const auto* s = static_cast<const char*>(send[r]);
    auto* d = static_cast<char*>(recv[r]);
    ncclComm_t comm = w.comms[static_cast<std::size_t>(r)];
    for (int p = 0; p < gpus; ++p) {
      const std::size_t off = static_cast<std::size_t>(p) * chunk_bytes;
      PERFGATE_NCCL_CHECK(ncclSend(s + off, count, type, p, comm, streams[r]));
      PERFGATE_NCCL_CHECK(ncclRecv(d + off, count, type, p, comm, streams[r]));
    }
  }
  PERFGATE_NCCL_CHECK(ncclGroupEnd());
}

void all_to_all_v(int gpus, const void* const* send, void* const* recv, const std::size_t* bytes,
                  const std::size_t* send_offset, const std::size_t* recv_offset, const cudaStream_t* streams) {
  const AllToAllV part{
      .send = send, .recv = recv, .bytes = bytes, .send_offset = send_offset, .recv_offset = recv_offset};
  all_to_all_v(gpus, std::span(&part, 1), streams);
}

void all_to_all_v(int gpus, std::span<const AllToAllV> parts, const cudaStream_t* streams) {
  world_size();
  World& w = world();
  const auto n = static_cast<std::size_t>(gpus);
  PERFGATE_NCCL_CHECK(ncclGroupStart());
  for (std::size_t r = 0; r < n; ++r) {
    ncclComm_t comm = w.comms[r];
    for (std::size_t p = 0; p < n; ++p)
      for (const AllToAllV& a : parts) {
        if (const std::size_t out = a.bytes[r * n + p]; out > 0) {
          const auto [count, type] = as_elements(out);
          const auto* s = static_cast<const char*>(a.send[r]) + a.send_offset[r * n + p];
          PERFGATE_NCCL_CHECK(ncclSend(s, count, type, static_cast<int>(p), comm, streams[r]));
        }
        if (const std::size_t in = a.bytes[p * n + r]; in > 0) {
          const auto [count, type] = as_elements(in);
          auto* d = static_cast<char*>(a.recv[r]) + a.recv_offset[r * n + p];
          PERFGATE_NCCL_CHECK(ncclRecv(d, count, type, static_cast<int>(p), comm, streams[r]));
        }
      }
  }
  PERFGATE_NCCL_CHECK(ncclGroupEnd());
}

}  // namespace perfgate::transfers::nccl
