// Grouped "skinny" GEMM for the light (few-row) experts of the `overlap` variant: a persistent kernel
// that streams every light expert's weight tile from HBM once and multiplies it with all rows of that
// expert (<= kLightMaxRows). See light_gemm.hpp and docs/expert_gemm.md.
//
// Formulation: C^T[n, t] = W[n, :] . X[t, :], so the weights are the mma A operand (16 weight rows x
// 16 k, row-major, loaded with ldmatrix) and the expert's rows are the B operand (k16 x 8 rows, "col",
// i.e. X row-major). A CTA of 8 warps owns a tile of 128 weight rows (16 per warp) and all of the
// expert's rows; k advances in 64-wide steps through a 5-stage cp.async pipeline that runs on across
// work items, so a CTA's loads never drain between tiles.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "light_gemm.hpp"
#include "perfgate/bench/cuda.hpp"

namespace perfgate::expert_gemm {
namespace {

constexpr int kBN = 128;       // weight rows per tile
constexpr int kBK = 64;        // k per pipeline stage (128 bytes per smem row)
constexpr int kThreads = 256;  // 8 warps x 16 weight rows
constexpr int kStages = 5;
constexpr int kMaxT16 = kLightMaxRows / 16;

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(std::uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t addr, std::uint32_t& r0, std::uint32_t& r1,
                                            std::uint32_t& r2, std::uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Byte offset of 16-byte chunk `chunk` (0..7) of smem row `row` (128 bytes per row, XOR-swizzled so
// that ldmatrix's 8 row addresses hit 8 different bank groups).
__device__ __forceinline__ std::uint32_t swz(int row, int chunk) {
  return static_cast<std::uint32_t>(row * 128 + ((chunk ^ (row & 7)) << 4));
}

struct Params {
  const __nv_bfloat16* w;  // [experts][n][k]
  std::size_t w_expert_stride;
  const __nv_bfloat16* x;  // [rows][k] (permuted rows; expert e's rows start at its row_base)
  __nv_bfloat16* c;        // [rows][n]
  int n;
  int k;
  const int4* items;  // per light expert: {expert, row_base, rows, 0}, heaviest first
  int n_experts;
  int x_stage_rows;  // rows of X per smem stage (max padded rows over the light experts)
};

// One k-step (kBK) of the tile: every warp multiplies its 16 weight rows with T16 x 16 expert rows.
template <int T16>
__device__ __forceinline__ void compute_step(float (&acc)[2 * kMaxT16][4], std::uint32_t s_w, std::uint32_t s_x,
                                             int warp, int lane) {
  const int mi = lane >> 3;
  const int r = lane & 7;
#pragma unroll
  for (int ks = 0; ks < kBK / 16; ++ks) {
    std::uint32_t a[4];
    const int arow = warp * 16 + r + (mi & 1) * 8;
    ldmatrix_x4(s_w + swz(arow, ks * 2 + (mi >> 1)), a[0], a[1], a[2], a[3]);
#pragma unroll
    for (int t = 0; t < T16; ++t) {
      std::uint32_t b0, b1, b2, b3;
      const int brow = t * 16 + r + (mi >> 1) * 8;
      ldmatrix_x4(s_x + swz(brow, ks * 2 + (mi & 1)), b0, b1, b2, b3);
      mma_bf16(acc[2 * t], a, b0, b1);
      mma_bf16(acc[2 * t + 1], a, b2, b3);
    }
  }
}

// Writes the finished tile: acc[j] holds weight rows (g, g + 8) x expert rows 8j + 2q + {0, 1}
// (g = lane / 4, q = lane % 4). Neighbouring lanes (lane ^ 4) hold weight rows g and g + 1, so one
// shuffle gives each lane two adjacent output columns of one row: 4-byte stores.
template <int T16>
__device__ __forceinline__ void store_tile(float (&acc)[2 * kMaxT16][4], __nv_bfloat16* c, int ldc, int rows,
                                           int col0, int lane) {
  const int g = lane >> 2;
  const int q = lane & 3;
  const bool even = (g & 1) == 0;
#pragma unroll
  for (int j = 0; j < 2 * T16; ++j) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float lo = acc[j][2 * half];      // weight row g (+8 for half 1), expert row 8j + 2q
      const float hi = acc[j][2 * half + 1];  // same weight row, expert row 8j + 2q + 1
      const float recv = __shfl_xor_sync(0xFFFFFFFFu, even ? hi : lo, 4);
      const int row = 8 * j + 2 * q + (even ? 0 : 1);
      const int col = col0 + half * 8 + (even ? g : g - 1);
      __nv_bfloat162 v;
      v.x = __float2bfloat16_rn(even ? lo : recv);
      v.y = __float2bfloat16_rn(even ? recv : hi);
      if (row < rows) *reinterpret_cast<__nv_bfloat162*>(c + static_cast<std::size_t>(row) * ldc + col) = v;
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1) light_gemm_kernel(const Params p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int n_blocks = p.n / kBN;
  const int k_steps = p.k / kBK;
  const int total_items = p.n_experts * n_blocks;
  const int my_items = total_items > static_cast<int>(blockIdx.x)
                           ? (total_items - static_cast<int>(blockIdx.x) + static_cast<int>(gridDim.x) - 1) /
                                 static_cast<int>(gridDim.x)
                           : 0;
  const long total_steps = static_cast<long>(my_items) * k_steps;
  const std::uint32_t w_stage_bytes = kBN * kBK * 2;
  const std::uint32_t stage_bytes = w_stage_bytes + static_cast<std::uint32_t>(p.x_stage_rows) * kBK * 2;
  const std::uint32_t smem_base = smem_addr(smem);

  auto load_step = [&](long s, int slot) {
    const int j = static_cast<int>(s / k_steps);
    const int kk = static_cast<int>(s - static_cast<long>(j) * k_steps);
    const int item = static_cast<int>(blockIdx.x) + j * static_cast<int>(gridDim.x);
    const int e_idx = item / n_blocks;
    const int nb = item - e_idx * n_blocks;
    const int4 info = __ldg(p.items + e_idx);
    const std::uint32_t s_w = smem_base + static_cast<std::uint32_t>(slot) * stage_bytes;
    const std::uint32_t s_x = s_w + w_stage_bytes;
    const __nv_bfloat16* w = p.w + static_cast<std::size_t>(info.x) * p.w_expert_stride +
                             static_cast<std::size_t>(nb) * kBN * p.k + static_cast<std::size_t>(kk) * kBK;
#pragma unroll
    for (int i = 0; i < kBN * 8 / kThreads; ++i) {
      const int idx = tid + i * kThreads;
      const int row = idx >> 3;
      const int ch = idx & 7;
      cp_async16(s_w + swz(row, ch), w + static_cast<std::size_t>(row) * p.k + ch * 8, 16);
    }
    const int rows = info.z;
    const int pad_rows = (rows + 15) & ~15;
    const __nv_bfloat16* x = p.x + static_cast<std::size_t>(info.y) * p.k + static_cast<std::size_t>(kk) * kBK;
    for (int idx = tid; idx < pad_rows * 8; idx += kThreads) {
      const int row = idx >> 3;
      const int ch = idx & 7;
      const bool valid = row < rows;  // rows past the expert's count are zero-filled
      cp_async16(s_x + swz(row, ch), valid ? x + static_cast<std::size_t>(row) * p.k + ch * 8 : p.x,
                 valid ? 16 : 0);
    }
  };

  float acc[2 * kMaxT16][4];
#pragma unroll
  for (int j = 0; j < 2 * kMaxT16; ++j)
#pragma unroll
    for (int v = 0; v < 4; ++v) acc[j][v] = 0.0f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < total_steps) load_step(s, s);
    cp_async_commit();
  }

  int slot = 0;
  for (long s = 0; s < total_steps; ++s) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    {
      const long ls = s + kStages - 1;
      int lslot = slot + kStages - 1;
      if (lslot >= kStages) lslot -= kStages;
      if (ls < total_steps) load_step(ls, lslot);
      cp_async_commit();
    }
    const int j = static_cast<int>(s / k_steps);
    const int kk = static_cast<int>(s - static_cast<long>(j) * k_steps);
    const int item = static_cast<int>(blockIdx.x) + j * static_cast<int>(gridDim.x);
    const int e_idx = item / n_blocks;
    const int4 info = __ldg(p.items + e_idx);
    const int t16 = (info.z + 15) >> 4;
    const std::uint32_t s_w = smem_base + static_cast<std::uint32_t>(slot) * stage_bytes;
    const std::uint32_t s_x = s_w + w_stage_bytes;
    switch (t16) {
#define PERFGATE_LIGHT_CASE(T) \
  case T: compute_step<T>(acc, s_w, s_x, warp, lane); break;
      PERFGATE_LIGHT_CASE(1)
      PERFGATE_LIGHT_CASE(2)
      PERFGATE_LIGHT_CASE(3)
      PERFGATE_LIGHT_CASE(4)
      PERFGATE_LIGHT_CASE(5)
      PERFGATE_LIGHT_CASE(6)
      PERFGATE_LIGHT_CASE(7)
      PERFGATE_LIGHT_CASE(8)
      PERFGATE_LIGHT_CASE(9)
      PERFGATE_LIGHT_CASE(10)
      PERFGATE_LIGHT_CASE(11)
      PERFGATE_LIGHT_CASE(12)
#undef PERFGATE_LIGHT_CASE
      default: break;
    }
    if (kk == k_steps - 1) {
      const int nb = item - e_idx * n_blocks;
      __nv_bfloat16* c = p.c + static_cast<std::size_t>(info.y) * p.n;
      const int col0 = nb * kBN + warp * 16;
      switch (t16) {
#define PERFGATE_LIGHT_CASE(T) \
  case T: store_tile<T>(acc, c, p.n, info.z, col0, lane); break;
        PERFGATE_LIGHT_CASE(1)
        PERFGATE_LIGHT_CASE(2)
        PERFGATE_LIGHT_CASE(3)
        PERFGATE_LIGHT_CASE(4)
        PERFGATE_LIGHT_CASE(5)
        PERFGATE_LIGHT_CASE(6)
        PERFGATE_LIGHT_CASE(7)
        PERFGATE_LIGHT_CASE(8)
        PERFGATE_LIGHT_CASE(9)
        PERFGATE_LIGHT_CASE(10)
        PERFGATE_LIGHT_CASE(11)
        PERFGATE_LIGHT_CASE(12)
#undef PERFGATE_LIGHT_CASE
        default: break;
      }
#pragma unroll
      for (int jj = 0; jj < 2 * kMaxT16; ++jj)
#pragma unroll
        for (int v = 0; v < 4; ++v) acc[jj][v] = 0.0f;
    }
    slot = slot + 1 == kStages ? 0 : slot + 1;
  }
  cp_async_wait<0>();
}

}  // namespace

std::size_t light_gemm_smem_bytes(int max_rows) {
  const int x_rows = std::max(16, (max_rows + 15) / 16 * 16);
  return static_cast<std::size_t>(kStages) * (kBN * kBK * 2 + static_cast<std::size_t>(x_rows) * kBK * 2);
}

void launch_light_gemm(const std::uint16_t* w, std::size_t w_expert_stride, const std::uint16_t* x, std::uint16_t* c,
                       int n, int k, const int4* items, int n_experts, int max_rows, int ctas, cudaStream_t stream) {
  if (n_experts <= 0) return;
  if (n % kBN != 0 || k % kBK != 0)
    throw std::invalid_argument("light GEMM: n must be a multiple of 128 and k of 64");
  if (max_rows > kLightMaxRows || max_rows <= 0) throw std::invalid_argument("light GEMM: rows per expert out of range");
  static bool configured = false;
  if (!configured) {
    PERFGATE_CUDA_CHECK(cudaFuncSetAttribute(light_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(light_gemm_smem_bytes(kLightMaxRows))));
    configured = true;
  }
  Params p;
  p.w = reinterpret_cast<const __nv_bfloat16*>(w);
  p.w_expert_stride = w_expert_stride;
  p.x = reinterpret_cast<const __nv_bfloat16*>(x);
  p.c = reinterpret_cast<__nv_bfloat16*>(c);
  p.n = n;
  p.k = k;
  p.items = items;
  p.n_experts = n_experts;
  p.x_stage_rows = std::max(16, (max_rows + 15) / 16 * 16);
  const int total_items = n_experts * (n / kBN);
  const int grid = std::max(1, std::min(ctas, total_items));
  light_gemm_kernel<<<grid, kThreads, light_gemm_smem_bytes(max_rows), stream>>>(p);
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace perfgate::expert_gemm
