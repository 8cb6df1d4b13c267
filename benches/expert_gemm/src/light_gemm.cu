// Grouped "skinny" GEMM for the light (few-row) experts of the `overlap` variant: a persistent kernel
// that streams every light expert's weight tile from HBM once and multiplies it with all rows of that
// expert (<= kLightMaxRows). See light_gemm.hpp and docs/expert_gemm.md.
//
// Formulation: C^T[n, t] = W[n, :] . X[t, :], so the weights are the mma A operand (16 weight rows x
// 16 k, row-major, loaded with ldmatrix) and the expert's rows are the B operand (k16 x 8 rows, "col",
// i.e. X row-major). A CTA owns a tile of 256 (or 128) weight rows, 16 or 32 per warp, and all of the
// expert's rows (see form_for below). k advances in 64-wide steps through a 4-8 stage
// cp.async pipeline (as deep as shared memory allows) that runs on across work items, so a CTA's loads
// never drain between tiles. The wgmma forms leave one k-step of MMAs running while the next stage is
// waited for and loaded, so that the tensor cores never wait on a stage the loads have already filled.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>

#include <cuda.h>  // CUtensorMap (form 6); the driver function itself is looked up at run time
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <fmt/format.h>

#include "perfgate/bench/cuda.hpp"
#include "perfgate/expert_gemm/light_gemm.hpp"
#include "swiglu.cuh"

namespace perfgate::expert_gemm {
namespace {

constexpr int kBK = 64;             // k per pipeline stage (128 bytes per smem row)
constexpr int kSmemLimit = 232448;  // 227 KB per block on sm_90

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

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t addr, std::uint32_t& r0, std::uint32_t& r1, std::uint32_t& r2,
                                            std::uint32_t& r3) {
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

// Shared-memory tiles: rows of 128 bytes (64 bf16 of k), 16-byte chunk c of row r stored at chunk
// c ^ (r & 7), so that ldmatrix's 8 row addresses and the cp.async writes hit 8 different bank groups.

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
// The B fragments of a 16-wide k slice are loaded together before their MMAs, so that the shared-memory
// latency is paid once per slice rather than once per MMA pair.
template <int kMT, int kMaxT, int T16>
__device__ __forceinline__ void compute_step(float (&acc)[kMT][2 * kMaxT][4], std::uint32_t s_w, std::uint32_t s_x,
                                             int warp, int lane) {
  const int mi = lane >> 3;
  const int r = lane & 7;
  const std::uint32_t a_row = static_cast<std::uint32_t>(warp * 16 * kMT + r + (mi & 1) * 8) * 128u;
  const std::uint32_t b_row = static_cast<std::uint32_t>(r + (mi >> 1) * 8) * 128u;
#pragma unroll
  for (int ks = 0; ks < kBK / 16; ++ks) {
    std::uint32_t a[kMT][4];
#pragma unroll
    for (int m = 0; m < kMT; ++m)
      ldmatrix_x4(s_w + a_row + static_cast<std::uint32_t>(m) * 2048u +
                      (static_cast<std::uint32_t>((ks * 2 + (mi >> 1)) ^ r) << 4),
                  a[m][0], a[m][1], a[m][2], a[m][3]);
    std::uint32_t b[T16][4];
    const std::uint32_t b_chunk = static_cast<std::uint32_t>((ks * 2 + (mi & 1)) ^ r) << 4;
#pragma unroll
    for (int t = 0; t < T16; ++t)
      ldmatrix_x4(s_x + b_row + static_cast<std::uint32_t>(t) * 2048u + b_chunk, b[t][0], b[t][1], b[t][2], b[t][3]);
#pragma unroll
    for (int m = 0; m < kMT; ++m)
#pragma unroll
      for (int t = 0; t < T16; ++t) {
        mma_bf16(acc[m][2 * t], a[m], b[t][0], b[t][1]);
        mma_bf16(acc[m][2 * t + 1], a[m], b[t][2], b[t][3]);
      }
  }
}

// Writes the finished tile: acc[j] holds weight rows (g, g + 8) x expert rows 8j + 2q + {0, 1}
// (g = lane / 4, q = lane % 4). Neighbouring lanes (lane ^ 4) hold weight rows g and g + 1, so one
// shuffle gives each lane two adjacent output columns of one row: 4-byte stores.
template <int kMaxT, int T16>
__device__ __forceinline__ void store_tile(const float (&acc)[2 * kMaxT][4], __nv_bfloat16* c, int ldc, int rows,
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

// Run-time tile height -> compile-time instantiation (an if-chain over 1..kMaxT).
template <int kMT, int kMaxT, int T = 1>
__device__ __forceinline__ void dispatch_compute(int t16, float (&acc)[kMT][2 * kMaxT][4], std::uint32_t s_w,
                                                 std::uint32_t s_x, int warp, int lane) {
  if (t16 == T) {
    compute_step<kMT, kMaxT, T>(acc, s_w, s_x, warp, lane);
  } else if constexpr (T < kMaxT) {
    dispatch_compute<kMT, kMaxT, T + 1>(t16, acc, s_w, s_x, warp, lane);
  }
}
template <int kMT, int kMaxT, int T = 1>
__device__ __forceinline__ void dispatch_store(int t16, const float (&acc)[kMT][2 * kMaxT][4], __nv_bfloat16* c,
                                               int ldc, int rows, int col0, int lane) {
  if (t16 == T) {
#pragma unroll
    for (int m = 0; m < kMT; ++m) store_tile<kMaxT, T>(acc[m], c, ldc, rows, col0 + m * 16, lane);
  } else if constexpr (T < kMaxT) {
    dispatch_store<kMT, kMaxT, T + 1>(t16, acc, c, ldc, rows, col0, lane);
  }
}

// Where a CTA is in its sequence of (item, k-step): items blockIdx.x, blockIdx.x + gridDim.x, ...
// with this thread's first source chunk of the item (k = 0) precomputed.
struct Cursor {
  int item;
  int kk;
  int nb;
  int rows;
  int row_base;
  const __nv_bfloat16* w;  // this thread's W chunk (row row0, chunk ch) of the item at k = 0
  const __nv_bfloat16* x;  // this thread's X chunk (row row0, chunk ch) at k = 0
};

template <int kBN>
__device__ __forceinline__ void cursor_set(Cursor& c, const Params& p, int item, int n_blocks, int row0, int ch) {
  c.item = item;
  c.kk = 0;
  const int e_idx = item / n_blocks;
  c.nb = item - e_idx * n_blocks;
  const int4 info = __ldg(p.items + e_idx);
  c.rows = info.z;
  c.row_base = info.y;
  c.w = p.w + static_cast<std::size_t>(info.x) * p.w_expert_stride +
        (static_cast<std::size_t>(c.nb) * kBN + row0) * p.k + ch * 8;
  c.x = p.x + (static_cast<std::size_t>(info.y) + row0) * p.k + ch * 8;
}

// Forms 1-3 (mma.sync): kWarps warps of 16 * kMT weight rows each, expert rows up to 16 * kMaxT.
template <int kWarps, int kMT, int kMaxT>
struct MmaSyncForm {
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kBN = kWarps * 16 * kMT;
  static constexpr int kMaxRows = kMaxT * 16;
  static constexpr std::uint32_t kAlign = 1;  // no alignment beyond the tiles' own
  static constexpr int kInFlight = 0;         // mma.sync is synchronous
  struct Acc {
    float v[kMT][2 * kMaxT][4];
  };
  __device__ __forceinline__ static void zero(Acc& acc) {
#pragma unroll
    for (int m = 0; m < kMT; ++m)
#pragma unroll
      for (int j = 0; j < 2 * kMaxT; ++j)
#pragma unroll
        for (int v = 0; v < 4; ++v) acc.v[m][j][v] = 0.0f;
  }
  __device__ __forceinline__ static void stage_ready() {}
  __device__ __forceinline__ static void drain(Acc&) {}
  __device__ __forceinline__ static void compute(int t16, Acc& acc, std::uint32_t s_w, std::uint32_t s_x, int warp,
                                                 int lane) {
    dispatch_compute<kMT, kMaxT>(t16, acc.v, s_w, s_x, warp, lane);
  }
  __device__ __forceinline__ static void store(int t16, const Acc& acc, __nv_bfloat16* c, int ldc, int rows,
                                               int tile_col0, int warp, int lane) {
    dispatch_store<kMT, kMaxT>(t16, acc.v, c, ldc, rows, tile_col0 + warp * 16 * kMT, lane);
  }
};

// Expert rows (the wgmma N dimension) of form 4 and of form 5; form 4 keeps the accumulators (and the
// registers) of the common case small.
constexpr int kWgmmaMaxRows = 64;
constexpr int kWgmmaTallMaxRows = 128;
constexpr int kTmaTallestRows = 192;  // form 6's tallest instance

#if PERFGATE_LIGHT_WGMMA
// ---- Forms 4 and 5: wgmma (sm_90a). Two warpgroups, 256 weight rows per tile (two m64 slices each); the
// expert's rows are the wgmma N dimension (padded to 16, at most kMaxRows) and are read from
// shared memory once per warpgroup instead of once per warp, which is what kept the mma.sync forms at
// ~24 bytes per SM clock. Same cp.async pipeline and tiles: chunk c of row r stored at c ^ (r & 7)
// is wgmma's 128-byte swizzle when every tile starts on a 1024-byte boundary.

// Shared-memory matrix descriptor, K-major operand in 128-byte swizzle: 8-row groups 1024 bytes apart.
__device__ __forceinline__ std::uint64_t smem_desc_sw128(std::uint32_t addr) {
  std::uint64_t d = static_cast<std::uint64_t>((addr & 0x3FFFFu) >> 4);
  d |= std::uint64_t{1} << 16;          // leading byte offset: unused for swizzled K-major operands
  d |= std::uint64_t{1024 >> 4} << 32;  // stride byte offset
  d |= std::uint64_t{1} << 62;          // 128-byte swizzle
  return d;
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// cp.async writes shared memory through the generic proxy, wgmma reads it through the async proxy.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// D[64 x N] += A[64 x 16] . B[N x 16]^T, both operands K-major in shared memory. One specialisation
// per N: inline asm needs a literal operand list (N / 2 accumulator registers), as in CUTLASS's SM90
// MMA atoms. Issuing N / 16 m64n16 instructions instead would re-read A from shared memory N / 16 times.
template <int N>
__device__ __forceinline__ void wgmma_ss(float* d, std::uint64_t a, std::uint64_t b);
template <>
__device__ __forceinline__ void wgmma_ss<16>(float* d, std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, "
      "0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(a), "l"(b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_ss<32>(float* d, std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_ss<48>(float* d, std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %26, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23}, %24, %25, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
      : "l"(a), "l"(b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_ss<64>(float* d, std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, "
      "1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_ss<80>(float* d, std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39}, %40, %41, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
      : "l"(a), "l"(b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_ss<96>(float* d, std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, %48, %49, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
      : "l"(a), "l"(b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_ss<112>(float* d, std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %58, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n112k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55}, %56, "
      "%57, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])
      : "l"(a), "l"(b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_ss<128>(float* d, std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
      "%57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(1));
}

// Form 6's tall instance (up to 192 rows).
template <>
__device__ __forceinline__ void wgmma_ss<144>(float* d, std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %74, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n144k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
      "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71}, %72, %73, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71])
      : "l"(a), "l"(b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_ss<160>(float* d, std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n160k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
      "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
      "%79}, %80, %81, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),
        "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
      : "l"(a), "l"(b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_ss<176>(float* d, std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %90, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
      "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
      "%79, %80, %81, %82, %83, %84, %85, %86, %87}, %88, %89, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),
        "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),
        "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
      : "l"(a), "l"(b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_ss<192>(float* d, std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
      "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
      "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, %96, %97, p, 1, 1, 0, "
      "0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),
        "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),
        "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]),
        "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
      : "l"(a), "l"(b), "r"(1));
}

// The wgmma asm hands the accumulators back at issue; after a wait, this keeps the compiler from reading
// the first N / 2 of them (in store_tile) before the MMAs have written them.
template <int N, int kAcc>
__device__ __forceinline__ void fence_accumulators(float (&acc)[2][kAcc]) {
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int v = 0; v < N / 2; ++v) asm volatile("" : "+f"(acc[m][v])::"memory");
}

// Leaves kInFlight commit groups running: with 1, the next k-step's loads and barrier overlap this
// step's MMAs (the pipeline then keeps one stage more out of reach of the loads; see light_gemm_kernel).
template <int N, int kAcc, int kInFlight>
__device__ __forceinline__ void wgmma_step(float (&acc)[2][kAcc], std::uint32_t s_w, std::uint32_t s_x) {
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kBK / 16; ++ks) {
    const std::uint64_t b = smem_desc_sw128(s_x + static_cast<std::uint32_t>(ks) * 32u);
#pragma unroll
    for (int m = 0; m < 2; ++m)
      wgmma_ss<N>(
          acc[m],
          smem_desc_sw128(s_w + static_cast<std::uint32_t>(m) * 64u * 128u + static_cast<std::uint32_t>(ks) * 32u), b);
  }
  wgmma_commit();
  wgmma_wait<kInFlight>();
  fence_accumulators<N>(acc);
}

template <int kMaxT, int kInFlight, int T = 1>
__device__ __forceinline__ void dispatch_wgmma(int t16, float (&acc)[2][8 * kMaxT], std::uint32_t s_w,
                                               std::uint32_t s_x) {
  if (t16 == T) {
    wgmma_step<16 * T, 8 * kMaxT, kInFlight>(acc, s_w, s_x);
  } else if constexpr (T < kMaxT) {
    dispatch_wgmma<kMaxT, kInFlight, T + 1>(t16, acc, s_w, s_x);
  }
}

// Forms 4 and 5: two warpgroups; warpgroup wg owns weight rows 128 wg .. 128 wg + 127 of the tile.
// kInFlightT = 1: each k-step returns with its MMAs still running (drain() waits before the store).
template <int kMaxRowsT, int kInFlightT>
struct WgmmaForm {
  static constexpr int kThreads = 256;
  static constexpr int kInFlight = kInFlightT;
  static constexpr int kBN = 256;
  static constexpr int kMaxRows = kMaxRowsT;
  static constexpr std::uint32_t kAlign = 1024;  // 128-byte swizzle atoms
  static constexpr int kMaxT = kMaxRows / 16;
  struct Acc {
    float v[2][kMaxRows / 2];
  };
  __device__ __forceinline__ static void zero(Acc& acc) {
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int v = 0; v < kMaxRows / 2; ++v) acc.v[m][v] = 0.0f;
  }
  __device__ __forceinline__ static void stage_ready() { fence_proxy_async(); }
  __device__ __forceinline__ static void compute(int t16, Acc& acc, std::uint32_t s_w, std::uint32_t s_x, int warp,
                                                 int /*lane*/) {
    dispatch_wgmma<kMaxT, kInFlight>(t16, acc.v, s_w + static_cast<std::uint32_t>(warp >> 2) * 128u * 128u, s_x);
  }
  __device__ __forceinline__ static void drain(Acc& acc) {
    if constexpr (kInFlight > 0) {
      wgmma_wait<0>();
      fence_accumulators<kMaxRows>(acc.v);
    }
  }
  // acc.v[m] is an m64nN accumulator: warp w of the warpgroup holds weight rows 16 w + (g, g + 8), in the
  // layout of an mma.sync m16n8 C fragment per 8 expert rows, so store_tile writes it.
  __device__ __forceinline__ static void store(int t16, const Acc& acc, __nv_bfloat16* c, int ldc, int rows,
                                               int tile_col0, int warp, int lane) {
    const int col0 = tile_col0 + (warp >> 2) * 128 + (warp & 3) * 16;
#pragma unroll
    for (int m = 0; m < 2; ++m)
      dispatch_store<1, kMaxT>(t16, reinterpret_cast<const float(&)[1][2 * kMaxT][4]>(acc.v[m]), c, ldc, rows,
                               col0 + m * 64, lane);
  }
};

// ---- Form 6: forms 4 and 5's MMAs and tiles, fed by TMA through an mbarrier pipeline, warp-specialized.
// Forms 1-5 issue every load from every thread (cp.async) and meet at a block barrier every k-step, so a
// warp's MMAs wait for the slowest warp's loads; at the ~128 rows of uniform routing that kept form 5 well
// below cuBLAS's streaming rate (docs/expert_gemm.md). Here one producer thread issues one TMA for the
// stage's 256 weight rows and one for the expert's rows, into a stage whose "full" barrier counts the
// bytes; the two consumer warpgroups wait on that barrier, run their wgmma, and free the stage on its
// "empty" barrier once those MMAs are done (one commit group stays in flight, as in forms 4 and 5). The
// producer runs up to kStages k-steps ahead, across items, and no barrier spans the whole block.
// The X box is the smallest of 16/32/64/128/192 rows that covers the expert: rows past its count belong to
// the next expert (or are zero past the buffer) and only feed accumulator columns that are never stored.

constexpr int kTmaConsumerWarps = 8;
// Two consumer warpgroups and a producer warpgroup (one thread of it issues the loads). Registers are
// allocated per warpgroup, so the producer's is shrunk to kTmaProducerRegs and the consumers' grown to
// kTmaConsumerRegs (setmaxnreg): the 192-row instance holds 192 accumulators per thread.
constexpr int kTmaThreads = (kTmaConsumerWarps + 4) * 32;
constexpr unsigned kTmaProducerRegs = 40;
constexpr unsigned kTmaConsumerRegs = 232;
// X boxes of every multiple of 16 rows up to the tallest instance, so that an expert's rows arrive with at most 15
// rows of padding. Boxes of powers of two (LightGemmArgs::pow2_x_boxes) read up to 63 rows of the next expert too,
// for every weight tile, through an L2 that form 6 keeps near its throughput limit.
constexpr int kTmaXBoxes = kTmaTallestRows / 16;

__host__ __device__ constexpr int tma_box_rows(int box) { return 16 * (box + 1); }

struct TmaParams {
  CUtensorMap w;              // {k, n, experts}, box {64, 256, 1}
  CUtensorMap w64;            // the same tensor, box {64, 64, 1} (the SwiGLU tiles' quarters; swiglu only)
  CUtensorMap x[kTmaXBoxes];  // {k, rows}, box {64, tma_box_rows(i)}
  __nv_bfloat16* c;           // [rows][n], or [rows][n / 2] with swiglu
  int n;
  int k;
  const int4* items;
  int n_experts;
  int swiglu;        // 1: gate_up with SiLU(gate) * up in the epilogue (LightGemmArgs::swiglu)
  int pow2_x_boxes;  // 1: X boxes of 16, 32, 64, 128 and 192 rows only (LightGemmArgs::pow2_x_boxes)
};

__device__ __forceinline__ void mbar_init(std::uint32_t bar, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "LAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@p bra DONE;\n"
      "bra LAB_WAIT;\n"
      "DONE:\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(std::uint32_t dst, const CUtensorMap* map, std::uint32_t bar, int c0,
                                            int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::
          "r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void tma_load_2d(std::uint32_t dst, const CUtensorMap* map, std::uint32_t bar, int c0,
                                            int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

__device__ __forceinline__ int tma_x_box(int rows, bool pow2) {
  const int t16 = max(1, (rows + 15) >> 4);  // 16-row groups the box must cover
  int cover = t16;
  if (pow2) {
    cover = 1;
    while (cover < t16) cover *= 2;
  }
  return min(cover, kTmaXBoxes) - 1;
}

// Stage layout of form 6 for experts of at most kMaxRows rows: 256 weight rows, then kMaxRows expert rows,
// each stage on a 1024-byte boundary (the 128-byte swizzle's atom); the barriers follow the stages.
template <int kMaxRows>
struct TmaLayout {
  static constexpr std::uint32_t kWBytes = 256u * kBK * 2u;
  static constexpr std::uint32_t kStageBytes = kWBytes + static_cast<std::uint32_t>(kMaxRows) * kBK * 2u;
  static constexpr int kStages = static_cast<int>((kSmemLimit - 1024 - 256) / kStageBytes);
  static constexpr std::size_t kSmemBytes = kStages * kStageBytes + 1024 + 2 * 8 * kStages;
  static_assert(kStageBytes % 1024 == 0 && kStages >= 3, "form 6 stage layout");
};

// A SwiGLU tile: intermediate columns j0 .. j0 + 127 (j0 = 128 nb) as four 64-row quarters, gate j0, up j0,
// gate j0 + 64, up j0 + 64 (W = [gate rows | up rows], n / 2 each). Warpgroup g's two m64 slices are then the
// gate and the up rows of the same 64 columns, so each thread holds both halves of every output it writes.
__device__ __forceinline__ void tma_load_swiglu_tile(std::uint32_t dst, const TmaParams& p, std::uint32_t bar, int k0,
                                                     int nb, int expert) {
  const int half = p.n / 2;
#pragma unroll
  for (int q = 0; q < 4; ++q)
    tma_load_3d(dst + static_cast<std::uint32_t>(q) * 64u * 128u, &p.w64, bar, k0,
                (q & 1) * half + nb * 128 + (q >> 1) * 64, expert);
}

// The producer thread: every (item, k-step) of this CTA, in order, into stage (step % kStages).
template <int kMaxRows>
__device__ void tma_produce(const TmaParams& p, std::uint32_t base, std::uint32_t full, std::uint32_t empty) {
  using L = TmaLayout<kMaxRows>;
  const int n_blocks = p.n / 256;
  const int k_steps = p.k / kBK;
  const int total = p.n_experts * n_blocks;
  int step = 0;
  for (int item = static_cast<int>(blockIdx.x); item < total; item += static_cast<int>(gridDim.x)) {
    const int e_idx = item / n_blocks;
    const int nb = item - e_idx * n_blocks;
    const int4 info = __ldg(p.items + e_idx);
    const int box = tma_x_box(info.z, p.pow2_x_boxes != 0);
    const std::uint32_t bytes = L::kWBytes + static_cast<std::uint32_t>(tma_box_rows(box)) * kBK * 2u;
    for (int kk = 0; kk < k_steps; ++kk, ++step) {
      const int s = step % L::kStages;
      const int round = step / L::kStages;
      if (round > 0) mbar_wait(empty + 8u * s, static_cast<std::uint32_t>(round - 1) & 1u);
      const std::uint32_t dst = base + static_cast<std::uint32_t>(s) * L::kStageBytes;
      mbar_expect_tx(full + 8u * s, bytes);
      if (p.swiglu) {
        tma_load_swiglu_tile(dst, p, full + 8u * s, kk * kBK, nb, info.x);
      } else {
        tma_load_3d(dst, &p.w, full + 8u * s, kk * kBK, nb * 256, info.x);
      }
      tma_load_2d(dst + L::kWBytes, &p.x[box], full + 8u * s, kk * kBK, info.y);
    }
  }
}

// The SwiGLU epilogue: slice 0 holds gate, slice 1 up (tma_load_swiglu_tile). Both are rounded to bf16 first,
// where the unfused pass stores them, so that the result is the activation kernel's bit for bit.
template <int kMaxRows>
__device__ __forceinline__ void tma_store_swiglu(int t16, typename WgmmaForm<kMaxRows, 1>::Acc& acc, __nv_bfloat16* c,
                                                 int ldc, int rows, int nb, int warp, int lane) {
#pragma unroll
  for (int v = 0; v < kMaxRows / 2; ++v) acc.v[0][v] = silu(bf16_rounded(acc.v[0][v])) * bf16_rounded(acc.v[1][v]);
  constexpr int kMaxT = kMaxRows / 16;
  dispatch_store<1, kMaxT>(t16, reinterpret_cast<const float(&)[1][2 * kMaxT][4]>(acc.v[0]), c, ldc, rows,
                           nb * 128 + (warp >> 2) * 64 + (warp & 3) * 16, lane);
}

// The consumer warps: form 5's MMAs and store on each stage the producer filled.
template <int kMaxRows>
__device__ void tma_consume(const TmaParams& p, std::uint32_t base, std::uint32_t full, std::uint32_t empty, int warp,
                            int lane) {
  using L = TmaLayout<kMaxRows>;
  using Form = WgmmaForm<kMaxRows, 1>;
  static_assert(Form::kBN == 256 && Form::kThreads == kTmaConsumerWarps * 32 && Form::kAlign == 1024,
                "form 6 runs the tiles of forms 4 and 5 on its consumer warps");
  const int n_blocks = p.n / 256;
  const int k_steps = p.k / kBK;
  const int total = p.n_experts * n_blocks;
  typename Form::Acc acc;
  Form::zero(acc);
  int step = 0;
  int pending = -1;  // the stage whose MMAs are still in flight
  for (int item = static_cast<int>(blockIdx.x); item < total; item += static_cast<int>(gridDim.x)) {
    const int e_idx = item / n_blocks;
    const int nb = item - e_idx * n_blocks;
    const int4 info = __ldg(p.items + e_idx);
    const int t16 = (info.z + 15) >> 4;
    for (int kk = 0; kk < k_steps; ++kk, ++step) {
      const int s = step % L::kStages;
      mbar_wait(full + 8u * s, static_cast<std::uint32_t>(step / L::kStages) & 1u);
      const std::uint32_t s_w = base + static_cast<std::uint32_t>(s) * L::kStageBytes;
      Form::compute(t16, acc, s_w, s_w + L::kWBytes, warp, lane);  // returns with this step's MMAs in flight
      if (pending >= 0 && lane == 0) mbar_arrive(empty + 8u * pending);
      pending = s;
    }
    Form::drain(acc);
    if (lane == 0) mbar_arrive(empty + 8u * pending);
    pending = -1;
    if (p.swiglu) {
      tma_store_swiglu<kMaxRows>(t16, acc, p.c + static_cast<std::size_t>(info.y) * (p.n / 2), p.n / 2, info.z, nb,
                                 warp, lane);
    } else {
      Form::store(t16, acc, p.c + static_cast<std::size_t>(info.y) * p.n, p.n, info.z, nb * 256, warp, lane);
    }
    Form::zero(acc);
  }
}

template <int kMaxRows>
__global__ void __launch_bounds__(kTmaThreads, 1) light_gemm_tma_kernel(const __grid_constant__ TmaParams p) {
  using L = TmaLayout<kMaxRows>;
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  if (static_cast<int>(blockIdx.x) >= p.n_experts * (p.n / 256)) return;
  const std::uint32_t base = (smem_addr(smem) + 1023u) & ~1023u;
  const std::uint32_t full = base + static_cast<std::uint32_t>(L::kStages) * L::kStageBytes;
  const std::uint32_t empty = full + 8u * L::kStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < L::kStages; ++s) {
      mbar_init(full + 8u * s, 1);                   // the producer's arrive, plus the TMA bytes
      mbar_init(empty + 8u * s, kTmaConsumerWarps);  // one arrive per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (warp >= kTmaConsumerWarps) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kTmaProducerRegs));
    if (warp == kTmaConsumerWarps && lane == 0) tma_produce<kMaxRows>(p, base, full, empty);
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kTmaConsumerRegs));
  tma_consume<kMaxRows>(p, base, full, empty, warp, lane);
}
#endif  // PERFGATE_LIGHT_WGMMA

// The pipeline every form shares: a persistent CTA walks the items blockIdx.x, blockIdx.x + gridDim.x, ...
// k-step by k-step, loads kStages - 1 - Form::kInFlight steps ahead (across items), and hands each stage
// to Form::compute; after an item's last k-step Form::store writes the tile. A stage is reloaded only
// after the barrier that follows its MMAs' wait: with kInFlight MMA groups left running, that is
// kInFlight iterations later, so the loads lag the computation by that many more stages.
// One software pipeline with its prologue, steady state and epilogue: split, it would spread the stage
// bookkeeping over device functions and hide the order of loads, MMAs and barriers that is its point.
template <class Form, int kStages>
__global__ void __launch_bounds__(Form::kThreads, 1) light_gemm_kernel(  // NOLINT(readability-function-size)
    const Params p) {
  constexpr int kThreads = Form::kThreads;
  constexpr int kBN = Form::kBN;
  constexpr int kRowsPerPass = kThreads / 8;  // rows one pass of 16-byte chunks covers
  constexpr int kXPasses = (Form::kMaxRows + kRowsPerPass - 1) / kRowsPerPass;
  constexpr int kAhead = kStages - 1 - Form::kInFlight;  // stages loaded ahead of the one computed
  static_assert(kAhead >= 2, "too few stages for the MMAs left in flight");
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int n_blocks = p.n / kBN;
  const int k_steps = p.k / kBK;
  const int total_items = p.n_experts * n_blocks;
  const int grid = static_cast<int>(gridDim.x);
  if (static_cast<int>(blockIdx.x) >= total_items) return;
  const std::uint32_t w_stage_bytes = kBN * kBK * 2;
  const std::uint32_t stage_bytes = w_stage_bytes + static_cast<std::uint32_t>(p.x_stage_rows) * kBK * 2;
  const std::uint32_t smem_base = (smem_addr(smem) + (Form::kAlign - 1)) & ~(Form::kAlign - 1);
  // This thread's 16-byte chunks: column chunk `ch` of rows row0 + kRowsPerPass * i.
  const int ch = tid & 7;
  const int row0 = tid >> 3;
  const std::uint32_t dst0 = static_cast<std::uint32_t>(row0 * 128 + ((ch ^ (row0 & 7)) << 4));
  const std::size_t pass_stride = static_cast<std::size_t>(kRowsPerPass) * p.k;

  Cursor ld;
  cursor_set<kBN>(ld, p, static_cast<int>(blockIdx.x), n_blocks, row0, ch);
  Cursor cm = ld;

  auto load_step = [&](int slot) {
    const std::uint32_t s_w = smem_base + static_cast<std::uint32_t>(slot) * stage_bytes + dst0;
    const std::uint32_t s_x = s_w + w_stage_bytes;
    const __nv_bfloat16* w = ld.w + ld.kk * kBK;
#pragma unroll
    for (int i = 0; i < kBN / kRowsPerPass; ++i)
      cp_async16(s_w + static_cast<std::uint32_t>(i * kRowsPerPass * 128), w + i * pass_stride, 16);
    const int pad_rows = (ld.rows + 15) & ~15;
    const __nv_bfloat16* x = ld.x + ld.kk * kBK;
#pragma unroll
    for (int i = 0; i < kXPasses; ++i) {
      const int row = row0 + i * kRowsPerPass;
      if (row < pad_rows) {
        const bool valid = row < ld.rows;  // rows past the expert's count are zero-filled
        cp_async16(s_x + static_cast<std::uint32_t>(i * kRowsPerPass * 128), valid ? x + i * pass_stride : p.x,
                   valid ? 16 : 0);
      }
    }
    if (++ld.kk == k_steps) {
      const int next = ld.item + grid;
      if (next < total_items) {
        cursor_set<kBN>(ld, p, next, n_blocks, row0, ch);
      } else {
        ld.item = total_items;  // done
      }
    }
  };

  typename Form::Acc acc;
  Form::zero(acc);

#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (ld.item < total_items) load_step(s);
    cp_async_commit();
  }

  int slot = 0;
  int lslot = kAhead;
  while (cm.item < total_items) {
    cp_async_wait<kAhead - 1>();
    Form::stage_ready();
    __syncthreads();
    if (ld.item < total_items) load_step(lslot);
    cp_async_commit();
    lslot = lslot + 1 == kStages ? 0 : lslot + 1;
    const int t16 = (cm.rows + 15) >> 4;
    const std::uint32_t s_w = smem_base + static_cast<std::uint32_t>(slot) * stage_bytes;
    Form::compute(t16, acc, s_w, s_w + w_stage_bytes, warp, lane);
    slot = slot + 1 == kStages ? 0 : slot + 1;
    if (++cm.kk == k_steps) {
      Form::drain(acc);
      Form::store(t16, acc, p.c + static_cast<std::size_t>(cm.row_base) * p.n, p.n, cm.rows, cm.nb * kBN, warp, lane);
      Form::zero(acc);
      const int next = cm.item + grid;
      if (next < total_items) {
        cursor_set<kBN>(cm, p, next, n_blocks, row0, ch);
      } else {
        cm.item = total_items;
      }
    }
  }
  Form::drain(acc);
  cp_async_wait<0>();
}

// Kernel form for the tallest light expert (LightGemmArgs::form, PERFGATE_EXPERT_GEMM_LIGHT_FORM in the
// bench, requests one for experiments):
//   form 1: 8 warps x 32 weight rows (two m16 tiles: every X fragment feeds 2 MMAs, half the shared-
//           memory re-reads of X of form 2), 256-row tiles, up to 96 rows;
//   form 2: 16 warps x 16 weight rows, 256-row tiles, up to 96 rows (4 warps per scheduler);
//   form 3: 8 warps x 16 weight rows, 128-row tiles, up to 192 rows;
//   form 4: wgmma, 2 warpgroups x 128 weight rows, 256-row tiles, up to 64 rows;
//   form 5: form 4 with accumulators for up to 128 rows;
//   form 6: forms 4 and 5 fed by TMA through mbarriers, a producer warp beside them, up to 192 rows
//           (requested only).
// Forms 4 and 5 are the default (up to 128 rows) where the file was built for sm_90a and the GPU is
// compute capability 9.0; forms 1 and 3 elsewhere.
bool wgmma_usable() {
#if PERFGATE_LIGHT_WGMMA
  static const bool usable = [] {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    return major == 9 && minor == 0;
  }();
  return usable;
#else
  return false;
#endif
}

int form_for(int max_rows, int requested) {
  const bool mma_sync = requested == 1 || requested == 2 || !wgmma_usable();
  if (mma_sync) return max_rows > 96 ? 3 : requested == 2 ? 2 : 1;
  if (requested == 6 && max_rows <= kTmaTallestRows) return 6;
  return max_rows <= kWgmmaMaxRows ? 4 : max_rows <= kWgmmaTallMaxRows ? 5 : 3;
}
int tile_rows_for(int form) { return form == 3 ? 128 : 256; }

std::size_t stage_bytes_for(int form, int max_rows) {
  const int x_rows = max_rows < 16 ? 16 : (max_rows + 15) / 16 * 16;
  return static_cast<std::size_t>(tile_rows_for(form)) * kBK * 2 + static_cast<std::size_t>(x_rows) * kBK * 2;
}

// forms 4 and 5 align their tiles to 1024 bytes inside the dynamic shared memory
std::size_t align_slack(int form) { return form >= 4 ? 1024 : 0; }

// As many stages as fit in 227 KB of shared memory, 4 to 8.
int stages_for(int form, int max_rows) {
  const int fit = static_cast<int>((kSmemLimit - align_slack(form)) / stage_bytes_for(form, max_rows));
  return std::clamp(fit, 4, 8);
}

#if PERFGATE_LIGHT_WGMMA
// Form 6's tensor maps are encoded by the driver; the runtime hands out its entry point, so nothing links
// libcuda.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    PERFGATE_CUDA_CHECK(
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || fn == nullptr)
      throw std::runtime_error("light GEMM form 6: the CUDA driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// A bf16 tensor of `rank` dimensions (innermost first) read in boxes of 64 x ... elements, 128-byte swizzled.
CUtensorMap bf16_tensor_map(const void* base, cuuint32_t rank, const cuuint64_t* dims, const cuuint64_t* strides,
                            const cuuint32_t* box) {
  CUtensorMap map{};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult r =
      tensor_map_encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, const_cast<void*>(base), dims, strides, box,
                           element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error(
        fmt::format("light GEMM form 6: cuTensorMapEncodeTiled failed ({}) for a rank-{} tensor "
                    "of {} x {} elements",
                    static_cast<int>(r), rank, dims[0], dims[1]));
  return map;
}

TmaParams tma_params(const LightGemmArgs& a) {
  TmaParams p{};
  const auto k = static_cast<cuuint64_t>(a.k);
  const cuuint64_t w_dims[3] = {k, static_cast<cuuint64_t>(a.n), static_cast<cuuint64_t>(a.experts)};
  const cuuint64_t w_strides[2] = {k * 2, static_cast<cuuint64_t>(a.w_expert_stride) * 2};
  const cuuint32_t w_box[3] = {kBK, 256, 1};
  p.w = bf16_tensor_map(a.w, 3, w_dims, w_strides, w_box);
  const cuuint32_t w64_box[3] = {kBK, 64, 1};
  if (a.swiglu) p.w64 = bf16_tensor_map(a.w, 3, w_dims, w_strides, w64_box);
  const cuuint64_t x_dims[2] = {k, static_cast<cuuint64_t>(a.x_rows)};
  const cuuint64_t x_strides[1] = {k * 2};
  for (int i = 0; i < kTmaXBoxes; ++i) {
    const cuuint32_t x_box[2] = {kBK, static_cast<cuuint32_t>(tma_box_rows(i))};
    p.x[i] = bf16_tensor_map(a.x, 2, x_dims, x_strides, x_box);
  }
  p.c = reinterpret_cast<__nv_bfloat16*>(a.c);
  p.n = a.n;
  p.k = a.k;
  p.items = a.items;
  p.n_experts = a.n_items;
  p.swiglu = a.swiglu ? 1 : 0;
  p.pow2_x_boxes = a.pow2_x_boxes ? 1 : 0;
  return p;
}

#endif  // PERFGATE_LIGHT_WGMMA

// Lets Kernel use `bytes` of dynamic shared memory; the attribute is set on the first launch of each kernel.
template <auto Kernel>
void allow_dynamic_smem(int bytes) {
  static const bool set = [bytes] {
    PERFGATE_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    return true;
  }();
  (void)set;
}

#if PERFGATE_LIGHT_WGMMA
template <int kMaxRows>
void launch_tma(const TmaParams& p, int grid, cudaStream_t stream) {
  using L = TmaLayout<kMaxRows>;
  allow_dynamic_smem<light_gemm_tma_kernel<kMaxRows>>(static_cast<int>(L::kSmemBytes));
  light_gemm_tma_kernel<kMaxRows><<<grid, kTmaThreads, L::kSmemBytes, stream>>>(p);
}

void launch_form6(const LightGemmArgs& a, const TmaParams& p, cudaStream_t stream) {
  const int grid = std::max(1, std::min(a.ctas, a.n_items * (a.n / 256)));
  if (a.max_rows <= kWgmmaMaxRows) launch_tma<kWgmmaMaxRows>(p, grid, stream);
  else if (a.max_rows <= kWgmmaTallMaxRows) launch_tma<kWgmmaTallMaxRows>(p, grid, stream);
  else launch_tma<kTmaTallestRows>(p, grid, stream);
}
#endif  // PERFGATE_LIGHT_WGMMA

template <class Form, int S>
void launch_one(const Params& p, int grid, std::size_t smem, cudaStream_t stream) {
  allow_dynamic_smem<light_gemm_kernel<Form, S>>(kSmemLimit);
  light_gemm_kernel<Form, S><<<grid, Form::kThreads, smem, stream>>>(p);
}

template <class Form>
void launch_stages(int stages, const Params& p, int grid, std::size_t smem, cudaStream_t stream) {
  switch (stages) {
    case 4: launch_one<Form, 4>(p, grid, smem, stream); break;
    case 5: launch_one<Form, 5>(p, grid, smem, stream); break;
    case 6: launch_one<Form, 6>(p, grid, smem, stream); break;
    case 7: launch_one<Form, 7>(p, grid, smem, stream); break;
    default: launch_one<Form, 8>(p, grid, smem, stream); break;
  }
}

// Forms 1-5: the cp.async pipeline's Params, and the launch of the form's kernel.
Params cp_async_params(const LightGemmArgs& args) {
  Params p;
  p.w = reinterpret_cast<const __nv_bfloat16*>(args.w);
  p.w_expert_stride = args.w_expert_stride;
  p.x = reinterpret_cast<const __nv_bfloat16*>(args.x);
  p.c = reinterpret_cast<__nv_bfloat16*>(args.c);
  p.n = args.n;
  p.k = args.k;
  p.items = args.items;
  p.n_experts = args.n_items;
  p.x_stage_rows = std::max(16, (args.max_rows + 15) / 16 * 16);
  return p;
}

void launch_cp_async_form(int form, const LightGemmArgs& args, cudaStream_t stream) {
  const Params p = cp_async_params(args);
  const int total_items = args.n_items * (args.n / tile_rows_for(form));
  const int grid = std::max(1, std::min(args.ctas, total_items));
  const std::size_t smem = light_gemm_smem_bytes(args.max_rows, args.form);
  const int stages = stages_for(form, args.max_rows);
  if (form == 4 || form == 5) {
#if PERFGATE_LIGHT_WGMMA
    // PERFGATE_EXPERT_GEMM_LIGHT_ASYNC=0: wait for every k-step's MMAs, the earlier kernel, for A/B runs
    // (docs/expert_gemm.md, "wgmma with one k-step left in flight")
    static const bool async = [] {
      const char* v = std::getenv("PERFGATE_EXPERT_GEMM_LIGHT_ASYNC");
      return !(v && *v == '0');
    }();
    if (form == 4) {
      if (async) launch_stages<WgmmaForm<kWgmmaMaxRows, 1>>(stages, p, grid, smem, stream);
      else launch_stages<WgmmaForm<kWgmmaMaxRows, 0>>(stages, p, grid, smem, stream);
    } else {
      if (async) launch_stages<WgmmaForm<kWgmmaTallMaxRows, 1>>(stages, p, grid, smem, stream);
      else launch_stages<WgmmaForm<kWgmmaTallMaxRows, 0>>(stages, p, grid, smem, stream);
    }
#endif
  } else if (form == 1) {
    launch_stages<MmaSyncForm<8, 2, 6>>(stages, p, grid, smem, stream);
  } else if (form == 2) {
    launch_stages<MmaSyncForm<16, 1, 6>>(stages, p, grid, smem, stream);
  } else {
    launch_stages<MmaSyncForm<8, 1, kLightMaxRows / 16>>(stages, p, grid, smem, stream);
  }
}

}  // namespace

int light_gemm_form(int max_rows, int requested) { return form_for(max_rows, requested); }

bool light_gemm_fuses_swiglu(int max_rows, int requested) { return form_for(max_rows, requested) == 6; }

std::size_t light_gemm_smem_bytes(int max_rows, int requested) {
  const int form = form_for(max_rows, requested);
#if PERFGATE_LIGHT_WGMMA
  if (form == 6)
    return max_rows <= kWgmmaMaxRows       ? TmaLayout<kWgmmaMaxRows>::kSmemBytes
           : max_rows <= kWgmmaTallMaxRows ? TmaLayout<kWgmmaTallMaxRows>::kSmemBytes
                                           : TmaLayout<kTmaTallestRows>::kSmemBytes;
#endif
  return static_cast<std::size_t>(stages_for(form, max_rows)) * stage_bytes_for(form, max_rows) + align_slack(form);
}

struct LightGemm::Tma {
#if PERFGATE_LIGHT_WGMMA
  TmaParams params;
#endif
};

LightGemm::LightGemm() = default;
LightGemm::~LightGemm() = default;
LightGemm::LightGemm(LightGemm&&) noexcept = default;
LightGemm& LightGemm::operator=(LightGemm&&) noexcept = default;

LightGemm::LightGemm(const LightGemmArgs& args) : args_(args) {
  if (args.n_items <= 0) return;
  const int max_rows = args.max_rows;
  if (max_rows > kLightMaxRows || max_rows <= 0)
    throw std::invalid_argument("light GEMM: rows per expert out of range");
  form_ = form_for(max_rows, args.form);
  if (args.n % tile_rows_for(form_) != 0 || args.k % kBK != 0)
    throw std::invalid_argument("light GEMM: n must be a multiple of 256 and k of 64");
  if (args.swiglu && form_ != 6) throw std::invalid_argument("light GEMM: the SwiGLU epilogue needs form 6");
#if PERFGATE_LIGHT_WGMMA
  if (form_ == 6) tma_ = std::make_unique<Tma>(Tma{tma_params(args)});
#endif
}

void LightGemm::launch(cudaStream_t stream) const {
  if (args_.n_items <= 0) return;
#if PERFGATE_LIGHT_WGMMA
  if (form_ == 6) {
    launch_form6(args_, tma_->params, stream);
    PERFGATE_CUDA_CHECK(cudaGetLastError());
    return;
  }
#endif
  launch_cp_async_form(form_, args_, stream);
  PERFGATE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace perfgate::expert_gemm
