#include <algorithm>
#include <vector>

#include <cuda_bf16.h>

#include "perfgate/bench/cuda.hpp"
#include "perfgate/expert_parallel/kernels.hpp"

namespace perfgate::expert_parallel {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpsPerBlock * 32;
constexpr int kMaxBlocks = 4096;  // grid-stride beyond this: enough warps to cover every SM many times

// One warp per row, grid-striding over rows; lane l moves 16-byte vectors l, l + 32, ...
__device__ inline std::int64_t first_row() {
  return static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
}
__device__ inline std::int64_t row_stride() { return static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock; }

__global__ void gather_kernel(const uint4* __restrict__ src, const int* __restrict__ index, std::int64_t rows,
                              int vectors, uint4* __restrict__ dst) {
  const int lane = threadIdx.x % 32;
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    const uint4* from = src + static_cast<std::int64_t>(index[r]) * vectors;
    uint4* to = dst + r * vectors;
    for (int v = lane; v < vectors; v += 32) to[v] = from[v];
  }
}

// The scatter moves whole rows with one CTA per row (grid-striding over rows): kScatterUnroll 16-byte
// loads per thread are issued before their stores, so a thread keeps that many vectors in flight and a
// 14 KiB row (H 7168) is one load wave and one store wave of the CTA. Remote stores are fire-and-forget, so
// the bytes in flight per SM, not latency per row, bound the NVLink rate.
constexpr int kScatterThreads = 256;
constexpr int kScatterUnroll = 4;
constexpr int kScatterBlocksPerSm = 2048 / kScatterThreads;  // full occupancy (tiny register and no smem use)

// One row: vectors [0, vectors) of from into to, kScatterUnroll per thread per wave.
__device__ inline void copy_row(const uint4* __restrict__ from, uint4* __restrict__ to, int vectors) {
  constexpr int kWave = kScatterThreads * kScatterUnroll;
  for (int base = 0; base < vectors; base += kWave) {
    uint4 v[kScatterUnroll];
#pragma unroll
    for (int k = 0; k < kScatterUnroll; ++k) {
      const int i = base + k * kScatterThreads + static_cast<int>(threadIdx.x);
      if (i < vectors) v[k] = __ldg(from + i);
    }
#pragma unroll
    for (int k = 0; k < kScatterUnroll; ++k) {
      const int i = base + k * kScatterThreads + static_cast<int>(threadIdx.x);
      if (i < vectors) to[i] = v[k];
    }
  }
}

// Rows are visited from `first` on, wrapping around: the caller starts each GPU at its next peer's rows,
// so the GPUs' first (and every later) wave of stores is spread over all receivers instead of all of them
// writing into GPU 0 first.
__global__ void scatter_kernel(const uint4* __restrict__ src, const int* __restrict__ src_index,
                               const int* __restrict__ dest_gpu, const int* __restrict__ dest_row, std::int64_t rows,
                               std::int64_t first, int vectors, uint4* const* __restrict__ dst_ptrs) {
  for (std::int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const std::int64_t r = (i + first) % rows;
    const std::int64_t s = src_index ? src_index[r] : r;
    copy_row(src + s * vectors, dst_ptrs[dest_gpu[r]] + static_cast<std::int64_t>(dest_row[r]) * vectors, vectors);
  }
}

// The pull dispatch: row dst_index[r] (r when null) of dst is row src_row[r] of GPU src_gpu[r]'s buffer
// src_ptrs[src_gpu[r]], read through a peer pointer; visited from `first` on, wrapping around, like the scatter.
__global__ void pull_rows_kernel(const uint4* const* __restrict__ src_ptrs, const int* __restrict__ src_gpu,
                                 const int* __restrict__ src_row, const int* __restrict__ dst_index, std::int64_t rows,
                                 std::int64_t first, int vectors, uint4* __restrict__ dst) {
  for (std::int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const std::int64_t r = (i + first) % rows;
    const std::int64_t d = dst_index ? dst_index[r] : r;
    copy_row(src_ptrs[src_gpu[r]] + static_cast<std::int64_t>(src_row[r]) * vectors, dst + d * vectors, vectors);
  }
}

// The bulk copy of the peer ceiling: `blocks` contiguous blocks of `vectors` 16-byte vectors each, src into
// dst[b]. Tiles of one wave (kScatterThreads * kScatterUnroll vectors) alternate between blocks, so every
// destination is written at once.
__global__ void bulk_kernel(const uint4* __restrict__ src, uint4* const* __restrict__ dst, int blocks,
                            std::int64_t vectors) {
  constexpr std::int64_t kWave = kScatterThreads * kScatterUnroll;
  const std::int64_t tiles_per_block = (vectors + kWave - 1) / kWave;
  for (std::int64_t t = blockIdx.x; t < tiles_per_block * blocks; t += gridDim.x) {
    const std::int64_t offset = (t / blocks) * kWave;
    const int b = static_cast<int>(t % blocks);
    const auto n = static_cast<int>(vectors - offset < kWave ? vectors - offset : kWave);
    copy_row(src + offset, dst[b] + offset, n);
  }
}

// 8 bf16 of one 16-byte vector, added into acc with weight w.
__device__ inline void accumulate(const uint4& v, float w, float* acc) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&v);
  for (int k = 0; k < 4; ++k) {
    const float2 f = __bfloat1622float2(h[k]);
    acc[2 * k] += w * f.x;
    acc[2 * k + 1] += w * f.y;
  }
}

__device__ inline uint4 to_bf16(const float* acc) {
  uint4 out;
  auto* h = reinterpret_cast<__nv_bfloat162*>(&out);
  for (int k = 0; k < 4; ++k) h[k] = __floats2bfloat162_rn(acc[2 * k], acc[2 * k + 1]);
  return out;
}

// kDstIndex: sum r goes to dst row dst_index[r] (the planted sums, folded into the same launch); without it the
// kernel is the plain one, which every unplanted launch keeps.
template <bool kDstIndex>
__device__ inline void row_sum(const uint4* __restrict__ src, const int* __restrict__ begin,
                               const int* __restrict__ index, const float* __restrict__ weight, std::int64_t rows,
                               int vectors, uint4* __restrict__ dst, const int* __restrict__ dst_index) {
  const int lane = threadIdx.x % 32;
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    const std::int64_t d = kDstIndex ? dst_index[r] : r;
    for (int v = lane; v < vectors; v += 32) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int i = begin[r]; i < begin[r + 1]; ++i) {
        const std::int64_t s = index ? index[i] : i;
        accumulate(src[s * vectors + v], weight ? weight[i] : 1.0f, acc);
      }
      dst[d * vectors + v] = to_bf16(acc);
    }
  }
}

__global__ void row_sum_kernel(const uint4* __restrict__ src, const int* __restrict__ begin,
                               const int* __restrict__ index, const float* __restrict__ weight, std::int64_t rows,
                               int vectors, uint4* __restrict__ dst) {
  row_sum<false>(src, begin, index, weight, rows, vectors, dst, nullptr);
}

__global__ void row_sum_to_kernel(const uint4* __restrict__ src, const int* __restrict__ begin,
                                  const int* __restrict__ index, const float* __restrict__ weight, std::int64_t rows,
                                  int vectors, uint4* __restrict__ dst, const int* __restrict__ dst_index) {
  row_sum<true>(src, begin, index, weight, rows, vectors, dst, dst_index);
}

// The fused pull combine, one CTA per output row: terms begin[r] .. begin[r + 1], term i being row
// term_row[i] of GPU term_gpu[i]'s buffer (peer pointers). kPullTerms terms of kScatterUnroll vectors each
// are loaded before any is added, so a thread keeps that many 16-byte loads in flight; they are added in
// term order, the order launch_row_sum adds the same rows in, so the two give the same bits.
constexpr int kPullTerms = 2;

// Peer rows are read with plain loads; rows that peers write while the kernel runs (push_sum's combine buffer)
// bypass L1 and the read-only path, which could hold them from before they arrived.
struct PlainLoad {
  __device__ static uint4 load(const uint4* p) { return *p; }
};
struct CoherentLoad {
  __device__ static uint4 load(const uint4* p) { return __ldcg(p); }
};

// Terms [i, end) (at most kPullTerms) of one wave: vectors base + k * kScatterThreads + threadIdx.x of the rows
// row_of(i), row_of(i + 1), ...
template <typename Load, typename RowOf>
__device__ inline void add_terms(RowOf row_of, int i, int end, int base, int vectors, float (&acc)[kScatterUnroll][8]) {
  uint4 v[kPullTerms][kScatterUnroll];
#pragma unroll
  for (int t = 0; t < kPullTerms; ++t) {
    if (i + t >= end) break;
    const uint4* row = row_of(i + t);
#pragma unroll
    for (int k = 0; k < kScatterUnroll; ++k) {
      const int j = base + k * kScatterThreads + static_cast<int>(threadIdx.x);
      if (j < vectors) v[t][k] = Load::load(row + j);
    }
  }
#pragma unroll
  for (int t = 0; t < kPullTerms; ++t) {
    if (i + t >= end) break;
#pragma unroll
    for (int k = 0; k < kScatterUnroll; ++k) accumulate(v[t][k], 1.0f, acc[k]);
  }
}

// One output row: the sum of terms [first, end) (row_of gives each term's row), one wave of the CTA at a time.
template <typename Load, typename RowOf>
__device__ inline void sum_terms_into(RowOf row_of, int first, int end, int vectors, uint4* __restrict__ dst) {
  constexpr int kWave = kScatterThreads * kScatterUnroll;
  for (int base = 0; base < vectors; base += kWave) {
    float acc[kScatterUnroll][8] = {};
    for (int i = first; i < end; i += kPullTerms) add_terms<Load>(row_of, i, end, base, vectors, acc);
#pragma unroll
    for (int k = 0; k < kScatterUnroll; ++k) {
      const int j = base + k * kScatterThreads + static_cast<int>(threadIdx.x);
      if (j < vectors) dst[j] = to_bf16(acc[k]);
    }
  }
}

// kDstIndex as for row_sum.
template <bool kDstIndex>
__device__ inline void pull_sum(const uint4* const* __restrict__ src_ptrs, const int* __restrict__ begin,
                                const int* __restrict__ term_gpu, const int* __restrict__ term_row, std::int64_t rows,
                                int vectors, uint4* __restrict__ dst, const int* __restrict__ dst_index) {
  const auto row_of = [&](int i) { return src_ptrs[term_gpu[i]] + static_cast<std::int64_t>(term_row[i]) * vectors; };
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int64_t d = kDstIndex ? dst_index[r] : r;
    sum_terms_into<PlainLoad>(row_of, begin[r], begin[r + 1], vectors, dst + d * vectors);
  }
}

__global__ void pull_sum_kernel(const uint4* const* __restrict__ src_ptrs, const int* __restrict__ begin,
                                const int* __restrict__ term_gpu, const int* __restrict__ term_row, std::int64_t rows,
                                int vectors, uint4* __restrict__ dst) {
  pull_sum<false>(src_ptrs, begin, term_gpu, term_row, rows, vectors, dst, nullptr);
}

__global__ void pull_sum_to_kernel(const uint4* const* __restrict__ src_ptrs, const int* __restrict__ begin,
                                   const int* __restrict__ term_gpu, const int* __restrict__ term_row,
                                   std::int64_t rows, int vectors, uint4* __restrict__ dst,
                                   const int* __restrict__ dst_index) {
  pull_sum<true>(src_ptrs, begin, term_gpu, term_row, rows, vectors, dst, dst_index);
}

// push_sum (launch_push_sum): the device side of PushSumArgs, rows as 16-byte vectors.
struct PushSumParams {
  const uint4* partial;
  const int* send_row;
  const int* send_dest_gpu;
  const int* send_dest_row;
  const int* send_token;
  std::int64_t send_rows;
  uint4* const* back_ptrs;
  int* const* arrived_ptrs;
  const uint4* back;
  const int* begin;
  const int* term;
  const int* remote_terms;
  const int* arrived;
  unsigned epoch;
  int* ticket;
  unsigned ticket_base;
  std::int64_t tokens;
  uint4* out;
  int vectors;
  int senders;  // CTAs [0, senders) push, the rest sum
};

// The pushing CTAs: each row into its home, then one arrival on its token's counter there. The CTA's stores are
// issued before the barrier; the fence then orders all of them before the count (the release the home's
// acquire pairs with). Planted rows (token < 0) count nothing: their bytes are the same.
__device__ inline void push_rows(const PushSumParams& p) {
  for (std::int64_t k = blockIdx.x; k < p.send_rows; k += p.senders) {
    const int home = p.send_dest_gpu[k];
    copy_row(p.partial + static_cast<std::int64_t>(p.send_row[k]) * p.vectors,
             p.back_ptrs[home] + static_cast<std::int64_t>(p.send_dest_row[k]) * p.vectors, p.vectors);
    const int token = p.send_token[k];
    if (token < 0) continue;  // the same k, so the same branch, for the whole CTA
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence_system();
      atomicAdd_system(p.arrived_ptrs[home] + token, 1);
    }
  }
}

__device__ inline int load_acquire_system(const int* p) {
  int v;
  asm volatile("ld.acquire.sys.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// One thread waits until the counter reaches target (wrapping arithmetic: counters only grow), then the CTA.
__device__ inline void wait_for_count(const int* counter, unsigned target) {
  if (threadIdx.x == 0)
    while (static_cast<int>(static_cast<unsigned>(load_acquire_system(counter)) - target) < 0) __nanosleep(128);
  __syncthreads();
}

// The CTA's next token: this launch's next ticket (>= tokens once every token is taken).
__device__ inline std::int64_t next_token(const PushSumParams& p) {
  __shared__ unsigned ticket;
  if (threadIdx.x == 0) ticket = static_cast<unsigned>(atomicAdd(p.ticket, 1)) - p.ticket_base;
  __syncthreads();
  return ticket;  // read by every thread before thread 0 writes again: wait_for_count's barrier comes between
}

// Summing: token by token, each token's terms, its own partial rows (term < 0) and the combine buffer's rows
// pushed by the other GPUs, in home_rows order.
__device__ inline void sum_arrived_tokens(const PushSumParams& p) {
  const auto row_of = [&](int i) {
    const int e = p.term[i];
    return e >= 0 ? p.back + static_cast<std::int64_t>(e) * p.vectors
                  : p.partial + static_cast<std::int64_t>(-e - 1) * p.vectors;
  };
  for (std::int64_t t = next_token(p); t < p.tokens; t = next_token(p)) {
    wait_for_count(p.arrived + t, p.epoch * static_cast<unsigned>(p.remote_terms[t]));
    sum_terms_into<CoherentLoad>(row_of, p.begin[t], p.begin[t + 1], p.vectors, p.out + t * p.vectors);
  }
}

__global__ void __launch_bounds__(kScatterThreads) push_sum_kernel(PushSumParams p) {
  if (static_cast<int>(blockIdx.x) < p.senders) push_rows(p);
  sum_arrived_tokens(p);
}

// max_ctas > 0 caps a grid (the exchange beside the experts in the pipelined layer); 0 leaves it alone.
unsigned capped(std::int64_t blocks, int max_ctas) {
  return static_cast<unsigned>(max_ctas > 0 && blocks > max_ctas ? max_ctas : blocks);
}

unsigned blocks_for(std::int64_t rows, int max_ctas = 0) {
  const std::int64_t b = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return capped(b < kMaxBlocks ? b : kMaxBlocks, max_ctas);
}

// `query(device)` for the current device, asked once per device and kept in `cache` ([device]; 0 = not asked yet):
// the grids below are sized on every launch, inside the timing, and these values never change.
template <typename Query>
std::int64_t once_per_device(std::vector<std::int64_t>& cache, Query&& query) {
  int device = 0;
  PERFGATE_CUDA_CHECK(cudaGetDevice(&device));
  if (cache.size() <= static_cast<std::size_t>(device)) cache.resize(static_cast<std::size_t>(device) + 1, 0);
  std::int64_t& value = cache[static_cast<std::size_t>(device)];
  if (value == 0) value = query(device);
  return value;
}

std::int64_t device_sms() {
  static std::vector<std::int64_t> cache;
  return once_per_device(cache, [](int device) {
    int sms = 0;
    PERFGATE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return static_cast<std::int64_t>(sms);
  });
}

// Enough CTAs to fill every SM (never more than the work items): the grid strides over the rest.
unsigned scatter_blocks(std::int64_t work, int max_ctas = 0) {
  const std::int64_t full = device_sms() * kScatterBlocksPerSm;
  return capped(work < full ? work : full, max_ctas);
}

// The CTAs of push_sum_kernel that the current device holds resident at once.
std::int64_t push_sum_resident_ctas() {
  static std::vector<std::int64_t> cache;
  return once_per_device(cache, [](int) {
    int per_sm = 0;
    PERFGATE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, push_sum_kernel, kScatterThreads, 0));
    return device_sms() * per_sm;
  });
}

// push_sum's grid: as many CTAs as can be resident at once (so that no summing CTA holds an SM a pushing one
// of its own grid waits for), capped, split into pushers and summers.
PushSumParams push_sum_params(const PushSumArgs& a, int max_ctas, unsigned& grid) {
  grid = capped(push_sum_resident_ctas(), max_ctas);
  if (grid < 2) grid = 2;
  const int receivers = std::max(1, static_cast<int>(grid) * a.receiver_percent / 100);
  return {reinterpret_cast<const uint4*>(a.partial),
          a.send_row,
          a.send_dest_gpu,
          a.send_dest_row,
          a.send_token,
          a.send_rows,
          reinterpret_cast<uint4* const*>(a.back_ptrs),
          a.arrived_ptrs,
          reinterpret_cast<const uint4*>(a.back),
          a.begin,
          a.term,
          a.remote_terms,
          a.arrived,
          a.epoch,
          a.ticket,
          a.ticket_base,
          a.tokens,
          reinterpret_cast<uint4*>(a.out),
          a.hidden / 8,
          std::max(1, static_cast<int>(grid) - receivers)};
}

}  // namespace

unsigned launch_push_sum(const PushSumArgs& args, cudaStream_t stream, int max_ctas) {
  unsigned grid = 0;
  const PushSumParams params = push_sum_params(args, max_ctas, grid);
  push_sum_kernel<<<grid, kScatterThreads, 0, stream>>>(params);
  PERFGATE_CUDA_CHECK(cudaGetLastError());
  return grid;
}

void launch_gather_rows(const std::uint16_t* src, const int* index, std::int64_t rows, int hidden, std::uint16_t* dst,
                        cudaStream_t stream) {
  if (rows <= 0) return;
  gather_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(reinterpret_cast<const uint4*>(src), index, rows, hidden / 8,
                                                           reinterpret_cast<uint4*>(dst));
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

void launch_scatter_to_peers(const std::uint16_t* src, const int* src_index, const int* dest_gpu, const int* dest_row,
                             std::int64_t rows, std::int64_t first_row, int hidden, std::uint16_t* const* dst_ptrs,
                             cudaStream_t stream, int max_ctas) {
  if (rows <= 0) return;
  scatter_kernel<<<scatter_blocks(rows, max_ctas), kScatterThreads, 0, stream>>>(
      reinterpret_cast<const uint4*>(src), src_index, dest_gpu, dest_row, rows, first_row % rows, hidden / 8,
      reinterpret_cast<uint4* const*>(dst_ptrs));
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

void launch_bulk_copy(const void* src, void* const* dst, int blocks, std::size_t bytes, cudaStream_t stream) {
  if (blocks <= 0 || bytes == 0) return;
  const auto vectors = static_cast<std::int64_t>(bytes / 16);
  const std::int64_t tiles = (vectors + kScatterThreads * kScatterUnroll - 1) / (kScatterThreads * kScatterUnroll);
  bulk_kernel<<<scatter_blocks(tiles * blocks), kScatterThreads, 0, stream>>>(
      static_cast<const uint4*>(src), reinterpret_cast<uint4* const*>(dst), blocks, vectors);
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

void launch_row_sum(const std::uint16_t* src, const int* begin, const int* index, const float* weight,
                    std::int64_t rows, int hidden, std::uint16_t* dst, cudaStream_t stream, int max_ctas,
                    const int* dst_index) {
  if (rows <= 0) return;
  if (dst_index != nullptr) {
    row_sum_to_kernel<<<blocks_for(rows, max_ctas), kThreads, 0, stream>>>(reinterpret_cast<const uint4*>(src), begin,
                                                                           index, weight, rows, hidden / 8,
                                                                           reinterpret_cast<uint4*>(dst), dst_index);
  } else {
    row_sum_kernel<<<blocks_for(rows, max_ctas), kThreads, 0, stream>>>(
        reinterpret_cast<const uint4*>(src), begin, index, weight, rows, hidden / 8, reinterpret_cast<uint4*>(dst));
  }
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

void launch_pull_rows(const std::uint16_t* const* src_ptrs, const int* src_gpu, const int* src_row,
                      const int* dst_index, std::int64_t rows, std::int64_t first_row, int hidden, std::uint16_t* dst,
                      cudaStream_t stream, int max_ctas) {
  if (rows <= 0) return;
  pull_rows_kernel<<<scatter_blocks(rows, max_ctas), kScatterThreads, 0, stream>>>(
      reinterpret_cast<const uint4* const*>(src_ptrs), src_gpu, src_row, dst_index, rows, first_row % rows, hidden / 8,
      reinterpret_cast<uint4*>(dst));
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

void launch_pull_sum(const std::uint16_t* const* src_ptrs, const int* begin, const int* term_gpu, const int* term_row,
                     std::int64_t rows, int hidden, std::uint16_t* dst, cudaStream_t stream, int max_ctas,
                     const int* dst_index) {
  if (rows <= 0) return;
  if (dst_index != nullptr) {
    pull_sum_to_kernel<<<scatter_blocks(rows, max_ctas), kScatterThreads, 0, stream>>>(
        reinterpret_cast<const uint4* const*>(src_ptrs), begin, term_gpu, term_row, rows, hidden / 8,
        reinterpret_cast<uint4*>(dst), dst_index);
  } else {
    pull_sum_kernel<<<scatter_blocks(rows, max_ctas), kScatterThreads, 0, stream>>>(
        reinterpret_cast<const uint4* const*>(src_ptrs), begin, term_gpu, term_row, rows, hidden / 8,
        reinterpret_cast<uint4*>(dst));
  }
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace perfgate::expert_parallel
