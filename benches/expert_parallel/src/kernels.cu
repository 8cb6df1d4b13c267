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

__global__ void scatter_kernel(const uint4* __restrict__ src, const int* __restrict__ src_index,
                               const int* __restrict__ dest_gpu, const int* __restrict__ dest_row, std::int64_t rows,
                               int vectors, uint4* const* __restrict__ dst_ptrs) {
  const int lane = threadIdx.x % 32;
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    const std::int64_t s = src_index ? src_index[r] : r;
    const uint4* from = src + s * vectors;
    uint4* to = dst_ptrs[dest_gpu[r]] + static_cast<std::int64_t>(dest_row[r]) * vectors;
    for (int v = lane; v < vectors; v += 32) to[v] = from[v];
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

__global__ void row_sum_kernel(const uint4* __restrict__ src, const int* __restrict__ begin,
                               const int* __restrict__ index, const float* __restrict__ weight, std::int64_t rows,
                               int vectors, uint4* __restrict__ dst) {
  const int lane = threadIdx.x % 32;
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    for (int v = lane; v < vectors; v += 32) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int i = begin[r]; i < begin[r + 1]; ++i) {
        const std::int64_t s = index ? index[i] : i;
        accumulate(src[s * vectors + v], weight ? weight[i] : 1.0f, acc);
      }
      dst[r * vectors + v] = to_bf16(acc);
    }
  }
}

unsigned blocks_for(std::int64_t rows) {
  const std::int64_t b = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<unsigned>(b < kMaxBlocks ? b : kMaxBlocks);
}

}  // namespace

void launch_gather_rows(const std::uint16_t* src, const int* index, std::int64_t rows, int hidden, std::uint16_t* dst,
                        cudaStream_t stream) {
  if (rows <= 0) return;
  gather_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(reinterpret_cast<const uint4*>(src), index, rows, hidden / 8,
                                                           reinterpret_cast<uint4*>(dst));
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

void launch_scatter_to_peers(const std::uint16_t* src, const int* src_index, const int* dest_gpu, const int* dest_row,
                             std::int64_t rows, int hidden, std::uint16_t* const* dst_ptrs, cudaStream_t stream) {
  if (rows <= 0) return;
  scatter_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(reinterpret_cast<const uint4*>(src), src_index, dest_gpu,
                                                            dest_row, rows, hidden / 8,
                                                            reinterpret_cast<uint4* const*>(dst_ptrs));
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

void launch_row_sum(const std::uint16_t* src, const int* begin, const int* index, const float* weight,
                    std::int64_t rows, int hidden, std::uint16_t* dst, cudaStream_t stream) {
  if (rows <= 0) return;
  row_sum_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(reinterpret_cast<const uint4*>(src), begin, index, weight,
                                                            rows, hidden / 8, reinterpret_cast<uint4*>(dst));
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace perfgate::expert_parallel
