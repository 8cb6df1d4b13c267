#include <algorithm>
#include <cmath>

#include <climits>
#include <cuda_bf16.h>

#include "perfgate/bench/cuda.hpp"
#include "perfgate/bench/splitmix64.hpp"
#include "perfgate/expert_gemm/moe_kernels.hpp"
#include "swiglu.cuh"

namespace perfgate::expert_gemm {
namespace {

constexpr unsigned kFullMask = 0xFFFFFFFFu;

__global__ void fill_random_kernel(__nv_bfloat16* data, std::size_t count, std::uint64_t seed, float scale) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const std::uint64_t r = bench::splitmix64(seed ^ (i * 0xD1B54A32D192ED03ull));
    const float magnitude = 0.1f + 0.9f * static_cast<float>(r >> 40) * (1.0f / 16777216.0f);
    data[i] = __float2bfloat16_rn((r & 1u) ? -magnitude * scale : magnitude * scale);
  }
}

__global__ void fill_kernel(std::uint16_t* data, std::size_t count, std::uint16_t bits) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    data[i] = bits;
}

__global__ void topk_kernel(const float* __restrict__ logits, int tokens, int experts, int top_k,
                            int* __restrict__ topk_expert, float* __restrict__ topk_weight, int* __restrict__ counts) {
  const int token = static_cast<int>((static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5);
  const int lane = static_cast<int>(threadIdx.x & 31u);
  if (token >= tokens) return;
  const float* row = logits + static_cast<std::size_t>(token) * experts;
  int sel[kMaxTopK];
  float val[kMaxTopK];
#pragma unroll
  for (int j = 0; j < kMaxTopK; ++j) {
    sel[j] = -1;
    val[j] = -INFINITY;
    if (j < top_k) {
      float best = -INFINITY;
      int best_e = INT_MAX;
      for (int e = lane; e < experts; e += 32) {
        bool taken = false;
#pragma unroll
        for (int q = 0; q < kMaxTopK; ++q) taken = taken || (q < j && sel[q] == e);
        const float v = row[e];
        if (!taken && (v > best || (v == best && e < best_e))) {
          best = v;
          best_e = e;
        }
      }
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) {
        const float other = __shfl_xor_sync(kFullMask, best, offset);
        const int other_e = __shfl_xor_sync(kFullMask, best_e, offset);
        if (other > best || (other == best && other_e < best_e)) {
          best = other;
          best_e = other_e;
        }
      }
      sel[j] = best_e;
      val[j] = best;
    }
  }
  if (lane != 0) return;
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxTopK; ++j)
    if (j < top_k) sum += expf(val[j] - val[0]);
#pragma unroll
  for (int j = 0; j < kMaxTopK; ++j) {
    if (j < top_k) {
      const std::size_t at = static_cast<std::size_t>(token) * top_k + j;
      topk_expert[at] = sel[j];
      topk_weight[at] = expf(val[j] - val[0]) / sum;
      atomicAdd(&counts[sel[j]], 1);
    }
  }
}

__global__ void scan_kernel(const int* __restrict__ counts, int experts, int* __restrict__ offsets) {
  // Few hundred experts: one thread is as fast as a tree and obviously right.
  if (threadIdx.x != 0) return;
  int at = 0;
  for (int e = 0; e < experts; ++e) {
    offsets[e] = at;
    at += counts[e];
  }
}

__global__ void permute_kernel(const uint4* __restrict__ x, int vectors_per_row, int top_k,
                               const int* __restrict__ topk_expert, const int* __restrict__ slot_base,
                               int* __restrict__ cursor, int* __restrict__ slot_of, uint4* __restrict__ x_perm) {
  __shared__ int slot;
  const int pair = static_cast<int>(blockIdx.x);
  if (threadIdx.x == 0) {
    const int e = topk_expert[pair];
    slot = slot_base[e] + atomicAdd(&cursor[e], 1);
    slot_of[pair] = slot;
  }
  __syncthreads();
  const uint4* src = x + static_cast<std::size_t>(pair / top_k) * vectors_per_row;
  uint4* dst = x_perm + static_cast<std::size_t>(slot) * vectors_per_row;
  for (int v = static_cast<int>(threadIdx.x); v < vectors_per_row; v += static_cast<int>(blockDim.x)) dst[v] = src[v];
}

// One block per row, so that a thread finds its row and column without a 64-bit division per vector.
__global__ void swiglu_kernel(const uint4* __restrict__ gate_up, int vectors_per_half, uint4* __restrict__ act) {
  const std::size_t row = blockIdx.x;
  const uint4* gate = gate_up + row * 2 * vectors_per_half;
  const uint4* up = gate + vectors_per_half;
  for (int c = static_cast<int>(threadIdx.x); c < vectors_per_half; c += static_cast<int>(blockDim.x)) {
    const uint4 g4 = gate[c];
    const uint4 u4 = up[c];
    const __nv_bfloat162* g = reinterpret_cast<const __nv_bfloat162*>(&g4);
    const __nv_bfloat162* u = reinterpret_cast<const __nv_bfloat162*>(&u4);
    uint4 out;
    __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float2 gf = __bfloat1622float2(g[q]);
      const float2 uf = __bfloat1622float2(u[q]);
      o[q] = __floats2bfloat162_rn(silu(gf.x) * uf.x, silu(gf.y) * uf.y);
    }
    act[row * vectors_per_half + c] = out;
  }
}

__global__ void combine_kernel(const uint4* __restrict__ expert_out, int vectors_per_row, int top_k,
                               const int* __restrict__ slot_of, const float* __restrict__ topk_weight,
                               uint4* __restrict__ y) {
  __shared__ int slots[kMaxTopK];
  __shared__ float weights[kMaxTopK];
  const int token = static_cast<int>(blockIdx.x);
  if (threadIdx.x < static_cast<unsigned>(top_k)) {
    slots[threadIdx.x] = slot_of[static_cast<std::size_t>(token) * top_k + threadIdx.x];
    weights[threadIdx.x] = topk_weight[static_cast<std::size_t>(token) * top_k + threadIdx.x];
  }
  __syncthreads();
  for (int v = static_cast<int>(threadIdx.x); v < vectors_per_row; v += static_cast<int>(blockDim.x)) {
    // every slot's vector loaded before any is used, so that the top_k loads are in flight together
    uint4 d4[kMaxTopK];
#pragma unroll
    for (int j = 0; j < kMaxTopK; ++j)
      if (j < top_k) d4[j] = expert_out[static_cast<std::size_t>(slots[j]) * vectors_per_row + v];
    float acc[8] = {};
#pragma unroll
    for (int j = 0; j < kMaxTopK; ++j) {
      if (j >= top_k) continue;
      const __nv_bfloat162* d = reinterpret_cast<const __nv_bfloat162*>(&d4[j]);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float2 f = __bfloat1622float2(d[q]);
        acc[2 * q] += weights[j] * f.x;
        acc[2 * q + 1] += weights[j] * f.y;
      }
    }
    uint4 out;
    __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
    for (int q = 0; q < 4; ++q) o[q] = __floats2bfloat162_rn(acc[2 * q], acc[2 * q + 1]);
    y[static_cast<std::size_t>(token) * vectors_per_row + v] = out;
  }
}

unsigned grid_for(std::size_t work, unsigned block, unsigned cap = 132u * 16u) {
  const std::size_t blocks = (work + block - 1) / block;
  return static_cast<unsigned>(blocks < cap ? (blocks > 0 ? blocks : 1) : cap);
}

}  // namespace

void launch_fill_random_bf16(std::uint16_t* data, std::size_t count, std::uint64_t seed, float scale,
                             cudaStream_t stream) {
  fill_random_kernel<<<grid_for(count, 256), 256, 0, stream>>>(reinterpret_cast<__nv_bfloat16*>(data), count, seed,
                                                               scale);
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

void launch_fill_bf16(std::uint16_t* data, std::size_t count, std::uint16_t bits, cudaStream_t stream) {
  fill_kernel<<<grid_for(count, 256), 256, 0, stream>>>(data, count, bits);
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

void launch_topk(const float* logits, int tokens, int experts, int top_k, int* topk_expert, float* topk_weight,
                 int* counts, cudaStream_t stream) {
  const unsigned block = 128;
  const unsigned grid = static_cast<unsigned>((static_cast<long>(tokens) * 32 + block - 1) / block);
  topk_kernel<<<grid, block, 0, stream>>>(logits, tokens, experts, top_k, topk_expert, topk_weight, counts);
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

void launch_scan(const int* counts, int experts, int* offsets, cudaStream_t stream) {
  scan_kernel<<<1, 32, 0, stream>>>(counts, experts, offsets);
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

void launch_permute(const std::uint16_t* x, int tokens, int hidden, int top_k, const int* topk_expert,
                    const int* slot_base, int* cursor, int* slot_of, std::uint16_t* x_perm, cudaStream_t stream) {
  permute_kernel<<<static_cast<unsigned>(tokens * top_k), 128, 0, stream>>>(
      reinterpret_cast<const uint4*>(x), hidden / 8, top_k, topk_expert, slot_base, cursor, slot_of,
      reinterpret_cast<uint4*>(x_perm));
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

void launch_swiglu(const std::uint16_t* gate_up, std::int64_t rows, int intermediate, std::uint16_t* act,
                   cudaStream_t stream) {
  const int vectors_per_half = intermediate / 8;
  const unsigned block = std::clamp((vectors_per_half + 31) / 32 * 32, 32, 256);
  swiglu_kernel<<<static_cast<unsigned>(rows), block, 0, stream>>>(reinterpret_cast<const uint4*>(gate_up),
                                                                   vectors_per_half, reinterpret_cast<uint4*>(act));
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

void launch_combine(const std::uint16_t* expert_out, int tokens, int hidden, int top_k, const int* slot_of,
                    const float* topk_weight, std::uint16_t* y, cudaStream_t stream) {
  combine_kernel<<<static_cast<unsigned>(tokens), 128, 0, stream>>>(
      reinterpret_cast<const uint4*>(expert_out), hidden / 8, top_k, slot_of, topk_weight, reinterpret_cast<uint4*>(y));
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace perfgate::expert_gemm
