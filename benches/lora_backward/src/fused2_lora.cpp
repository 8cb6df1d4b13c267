// `fused2` LoRA backward kernels: the math of fused_lora.cpp (same passes, same vdpbf16ps products, same
// bf16 rounding of G_B), arranged so that each thread keeps memory reads, products and streaming writes in
// flight at once. On the 2-vCPU AVX-512 BF16 runner the products alone take about as long as the bytes
// (every expert's fp32 gradients), and a core reads and streams out together faster than it does either
// alone; the kernels of fused_lora.cpp leave each to a phase of its own.
//   * lora_grads_dx_fused2, one expert: pass 1 (grad_B, G_B; bound by its products) prefetches into L2 what
//     comes next, A and the in-place sink rows; then grad_A (bound by its streaming stores) and the input
//     gradient (bound by its products) over tiles of kTileBlocks 16-column blocks, each input-gradient row
//     followed by its share of the tile's grad_A rows, prefetching the next expert's dy, x, U and B.
//   * the expert's dy and x row pairs are interleaved once into a thread-local buffer (pair_pack: two rows,
//     read sequentially), and pass 1 reads them from there.
// Row blocks of up to 16 rows as in fused_lora.cpp; gradients written with streaming stores when one block
// holds all of an expert's rows, as bf16 where the passes ask for it (lora_grads_dx_fused2's own path; elsewhere
// fp32, rounded after). rank 16 and in, out % 16 == 0 on AVX-512 BF16; the generic fallback is
// fused_lora.cpp's. The experiment knobs' entry points (split by columns, sliced by features) are below.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <vector>

// GCC 12 reports false (maybe-)uninitialized warnings inside its own AVX-512 intrinsic headers
// (_mm512_undefined_epi32, GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "fused2_kernels.hpp"
#include "fused_lora.hpp"
#include "vector_state.hpp"

namespace perfgate::lora_backward {

#if PERFGATE_LORA2_X86
namespace {
using namespace fused2_detail;  // the kernels' shared pieces (fused2_kernels.hpp)
using fused2_detail::put;       // beside the put<M> below, which would hide it

// How a kernel writes a gradient block: streamed, stored, or added to what an earlier row block stored.
enum class Put { kStream, kStore, kAdd };
Put put_mode(bool first, bool stream) { return stream ? Put::kStream : first ? Put::kStore : Put::kAdd; }
template <Put M, typename G>
PERFGATE_LORA2_TARGET inline void put(G* dst, __m512 s, __m512 acc) {
  if constexpr (std::is_same_v<G, bf16>) {
    put(dst, s, acc, M != Put::kAdd, M == Put::kStream);
  } else if constexpr (M == Put::kStream) {
    _mm512_stream_ps(dst, _mm512_mul_ps(s, acc));
  } else if constexpr (M == Put::kStore) {
    _mm512_storeu_ps(dst, _mm512_mul_ps(s, acc));
  } else {
    _mm512_storeu_ps(dst, _mm512_fmadd_ps(s, acc, _mm512_loadu_ps(dst)));
  }
}

// Pass 1 on rows t0..t0+T-1 with dy packed as dyp[P][out]:
//   grad_B[o, :] (+)= s sum_t dy[t, o] U[t, :]   G_B[t, :] = sum_o dy[t, o] B[o, :]  (fp32 into gbuf)
// The write mode is a template argument and the prefetcher a local copy, so that the loop over o keeps the T
// G_B accumulators in registers (a runtime store choice and a prefetcher behind a pointer made GCC keep them
// on the stack as well, a store of each per step).
template <int T, Put M, typename G>
PERFGATE_LORA2_TARGET void pass1_as(const LoraPassArgs& a, int t0, const std::uint32_t* dyp, float* gbuf,
                                    LinePrefetcher* pf) {
  constexpr int P = (T + 1) / 2;
  const __m512 s = _mm512_set1_ps(a.s);
  const std::size_t w = static_cast<std::size_t>(a.out), ldy = static_cast<std::size_t>(a.ldy);
  const int out = a.out;
  const bf16* const dy0 = a.dy + static_cast<std::size_t>(t0) * ldy;
  const bf16* const B = a.B;
  G* const gB = grad_b_dst<G>(a);
  LinePrefetcher lines = pf != nullptr ? *pf : LinePrefetcher{};
  __m512i u[P];
  __m512 g[T];
#pragma GCC unroll 16
  for (int p = 0; p < P; ++p) {
    const bf16* r0 = a.U + static_cast<std::size_t>(t0 + 2 * p) * a.ldu;
    u[p] = pair16(r0, 2 * p + 1 < T ? r0 + a.ldu : nullptr);
  }
#pragma GCC unroll 16
  for (int j = 0; j < T; ++j) g[j] = _mm512_setzero_ps();
  for (int o = 0; o < out; o += 2) {
#pragma GCC unroll 2
    for (int c = 0; c < 2; ++c) {
      __m512 acc = _mm512_setzero_ps();
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) acc = dot(acc, u[p], bcast(dyp[p * w + o + c]));
      put<M>(gB + static_cast<std::size_t>(o + c) * 16, s, acc);
    }
    const bf16* b0 = B + static_cast<std::size_t>(o) * 16;
    const __m512i b = pair16(b0, b0 + 16);
#pragma GCC unroll 16
    for (int j = 0; j < T; ++j) g[j] = dot(g[j], b, bcast_pair(dy0 + static_cast<std::size_t>(j) * ldy + o));
    lines.step();
  }
#pragma GCC unroll 16
  for (int j = 0; j < T; ++j) _mm512_storeu_ps(gbuf + static_cast<std::size_t>(t0 + j) * 16, g[j]);
  if (pf != nullptr) *pf = lines;
}
// bf16 gradients only from one block (the whole expert): they are rounded once, never added to.
template <int T>
PERFGATE_LORA2_TARGET void pass1(const LoraPassArgs& a, int t0, bool first, const std::uint32_t* dyp, float* gbuf,
                                 LinePrefetcher* pf, bool bf16_out) {
  if (bf16_out) {
    if (!first) throw std::logic_error("fused2 pass 1: bf16 gradients from more than one row block");
    if (streams(a.m, a.gB16)) return pass1_as<T, Put::kStream, bf16>(a, t0, dyp, gbuf, pf);
    return pass1_as<T, Put::kStore, bf16>(a, t0, dyp, gbuf, pf);
  }
  switch (put_mode(first, streams(a.m, a.gB))) {
    case Put::kStream: return pass1_as<T, Put::kStream, float>(a, t0, dyp, gbuf, pf);
    case Put::kStore: return pass1_as<T, Put::kStore, float>(a, t0, dyp, gbuf, pf);
    case Put::kAdd: return pass1_as<T, Put::kAdd, float>(a, t0, dyp, gbuf, pf);
  }
}

// grad_A[q, c0:c1] (+)= s sum_t G_B[t, q] x[t, c0:c1] of every pass on rows t0..t0+T-1, x packed as
// xp[P][c1 - c0], one row q at a time.
template <int T>
PERFGATE_LORA2_TARGET void grad_a(std::span<const LoraPassArgs> passes, int t0, bool first, const bf16* gbh,
                                  const std::uint32_t* xp, int c0, int c1) {
  constexpr int P = (T + 1) / 2;
  const LoraPassArgs& f = passes.front();
  const __m512 s = _mm512_set1_ps(f.s);
  const std::size_t w = static_cast<std::size_t>(c1 - c0), per_pass = static_cast<std::size_t>(f.m) * 16;
  for (std::size_t k = 0; k < passes.size(); ++k) {
    const bf16* gk = gbh + k * per_pass + static_cast<std::size_t>(t0) * 16;
    const bool stream = streams(f.m, passes[k].gA);
    for (int q = 0; q < 16; ++q) {
      __m512i gq[P];
      for (int p = 0; p < P; ++p) {
        const std::uint32_t lo = gk[static_cast<std::size_t>(2 * p) * 16 + q];
        const std::uint32_t hi = 2 * p + 1 < T ? gk[static_cast<std::size_t>(2 * p + 1) * 16 + q] : 0u;
        gq[p] = bcast(lo | (hi << 16));
      }
      float* dst = passes[k].gA + static_cast<std::size_t>(q) * f.in + c0;
      for (std::size_t i = 0; i < w; i += 16) {
        __m512 acc = _mm512_setzero_ps();
        for (int p = 0; p < P; ++p) acc = dot(acc, load_pairs(xp + p * w + i), gq[p]);
        put(dst + i, s, acc, first, stream);
      }
    }
  }
}

template <template <int> class F, int T = 1, typename... Args>
void by_rows(int rows, Args&&... args) {
  if constexpr (T < kRows) {
    if (rows != T) return by_rows<F, T + 1>(rows, args...);
  }
  F<T>::run(args...);
}
template <int T>
struct Pass1 {
  static void run(const LoraPassArgs& a, int t0, bool first, const std::uint32_t* dyp, float* g, LinePrefetcher* pf,
                  bool bf16_out) {
    pass1<T>(a, t0, first, dyp, g, pf, bf16_out);
  }
};
template <int T>
struct GradA {
  static void run(std::span<const LoraPassArgs> passes, int t0, bool first, const bf16* g, const std::uint32_t* xp,
                  int c0, int c1) {
    grad_a<T>(passes, t0, first, g, xp, c0, c1);
  }
};

// Pass 1 of one pass over all of its rows: grad_B (into gB16 with bf16_out), and G_B (fp32, [m][16]) into gb.
PERFGATE_LORA2_TARGET void pass1_rows(const LoraPassArgs& a, float* gb, LinePrefetcher* pf = nullptr,
                                      bool bf16_out = false) {
  thread_local Packed pk;
  for (int t0 = 0; t0 < a.m; t0 += kRows) {
    const int T = std::min(kRows, a.m - t0);
    std::uint32_t* dyp = pk.get(static_cast<std::size_t>((T + 1) / 2) * a.out);
    pair_pack(a.dy + static_cast<std::size_t>(t0) * a.ldy, a.ldy, T, 0, a.out, dyp);
    by_rows<Pass1>(T, a, t0, t0 == 0, dyp, gb, pf, bf16_out);
  }
}

// Pass 1 of every pass: grad_B (bf16 with bf16_out), and G_B rounded to bf16 into gbh ([passes][m][16]).
PERFGATE_LORA2_TARGET void pass1_avx512(std::span<const LoraPassArgs> passes, bf16* gbh, LinePrefetcher* pf = nullptr,
                                        bool bf16_out = false) {
  const std::size_t per_pass = static_cast<std::size_t>(passes.front().m) * 16;
  thread_local std::vector<float> gb;
  gb.resize(per_pass);
  for (std::size_t k = 0; k < passes.size(); ++k) {
    pass1_rows(passes[k], gb.data(), pf, bf16_out);
    for (std::size_t j = 0; j < per_pass; ++j) gbh[k * per_pass + j] = to_bf16(gb[j]);
  }
}

// The pass restricted to output features [o0, o1): its dy columns, B rows and grad_B rows.
LoraPassArgs out_slice(const LoraPassArgs& a, int o0, int o1) {
  LoraPassArgs s = a;
  s.dy += o0;
  s.B += static_cast<std::size_t>(o0) * 16;
  s.gB += static_cast<std::size_t>(o0) * 16;
  if (s.gB16 != nullptr) s.gB16 += static_cast<std::size_t>(o0) * 16;
  s.out = o1 - o0;
  return s;
}

// G_B of every pass rounded to bf16, summed from the slices' fp32 partials in a fixed order (every thread
// that needs it gets the same values).
void sum_partials(const float* parts, std::size_t stride, int nparts, std::size_t n, bf16* gbh) {
  for (std::size_t j = 0; j < n; ++j) {
    float v = 0.0f;
    for (int s = 0; s < nparts; ++s) v += parts[static_cast<std::size_t>(s) * stride + j];
    gbh[j] = to_bf16(v);
  }
}

// grad_A of every pass over columns [c0, c1), from one packed x.
PERFGATE_LORA2_TARGET void grad_a_avx512(std::span<const LoraPassArgs> passes, const bf16* gbh, int c0, int c1) {
  const LoraPassArgs& f = passes.front();
  thread_local Packed pk;
  for (int t0 = 0; t0 < f.m; t0 += kRows) {
    const int T = std::min(kRows, f.m - t0);
    std::uint32_t* xp = pk.get(static_cast<std::size_t>((T + 1) / 2) * static_cast<std::size_t>(c1 - c0));
    pair_pack(f.x + static_cast<std::size_t>(t0) * f.ldx, f.ldx, T, c0, c1, xp);
    by_rows<GradA>(T, passes, t0, t0 == 0, gbh, xp, c0, c1);
  }
}

// 16-column blocks ahead that the input-gradient pass prefetches its sink and base rows: every row is its own
// page (a 4 KiB row of grad_input or of the base gradient), read one line per block, a stream too short and
// too scattered for the hardware prefetchers, whose misses stalled the pass.
constexpr int kDxPrefetch = 4;

// dx of one 16-column block i0 of [.., c1): the A row pairs of the block in registers, G_B pairs broadcast;
// each sink and base row's line kDxPrefetch blocks ahead prefetched (nothing brought the rows into L2 before).
PERFGATE_LORA2_TARGET inline void dx_block(std::span<const LoraPassArgs> passes, const bf16* gbh, const DxSink& sink,
                                           int i0, int c1) {
  const LoraPassArgs& f = passes.front();
  const std::size_t n = passes.size(), per_pass = static_cast<std::size_t>(f.m) * 16;
  const __m512 s = _mm512_set1_ps(f.s);
  __m512i av[2][8];
  for (std::size_t k = 0; k < n; ++k)
    for (int p = 0; p < 8; ++p) {
      const bf16* r0 = passes[k].A + static_cast<std::size_t>(2 * p) * f.in + i0;
      av[k][p] = pair16(r0, r0 + f.in);
    }
  for (int t = 0; t < f.m; ++t) {
    __m512 acc = _mm512_setzero_ps();
    for (std::size_t k = 0; k < n; ++k) {
      const bf16* gt = gbh + k * per_pass + static_cast<std::size_t>(t) * 16;
      for (int p = 0; p < 8; ++p) acc = dot(acc, av[k][p], bcast_pair(gt + 2 * p));
    }
    float* o = sink_out(sink, t, i0);
    const float* base = sink_base(sink, t, i0);
    if (i0 + 16 * kDxPrefetch < c1) {
      _mm_prefetch(reinterpret_cast<const char*>(o + 16 * kDxPrefetch), _MM_HINT_T0);
      if (base != nullptr) _mm_prefetch(reinterpret_cast<const char*>(base + 16 * kDxPrefetch), _MM_HINT_T0);
    }
    add_to_sink(o, base, s, acc);
  }
}

// dx over columns [c0, c1) (multiples of 16), one update for all passes, 16 columns at a time.
PERFGATE_LORA2_TARGET void dx_avx512(std::span<const LoraPassArgs> passes, const bf16* gbh, const DxSink& sink, int c0,
                                     int c1) {
  for (int i0 = c0; i0 < c1; i0 += 16) dx_block(passes, gbh, sink, i0, c1);
}

// One input-gradient row t of the 16-column block at i0: s (G_B A)[t] added to the sink (with its base row),
// from the A row pairs of the N passes in registers. Two accumulators halve the chain of dependent products.
template <int N>
PERFGATE_LORA2_TARGET inline void dx_row(const __m512i (&av)[N][8], const bf16* gbh, std::size_t per_pass,
                                         const DxSink& sink, int t, int i0, __m512 s) {
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int k = 0; k < N; ++k) {
    const bf16* gt = gbh + static_cast<std::size_t>(k) * per_pass + static_cast<std::size_t>(t) * 16;
    for (int p = 0; p < 8; ++p) acc[p % 2] = dot(acc[p % 2], av[k][p], bcast_pair(gt + 2 * p));
  }
  float* o = sink_out(sink, t, i0);
  const float* base = sink_base(sink, t, i0);
  const __m512 sum = _mm512_add_ps(acc[0], acc[1]);
  add_to_sink(o, base, s, sum);
}

// 16-column blocks of grad_A written together, row by row: each grad_A row then receives a run of adjacent
// lines instead of one line per visit, so the streaming stores of one row leave as one sequential burst (the
// rows of an expert's grad_A lie a whole page apart, and the memory serves one line from each of 16 or 32 of
// them at a time worse than runs of adjacent lines).
constexpr int kTileBlocks = 8;

// grad_A rows [q0, q1) (of the N passes' 16 N rows) over the `blocks` 16-column blocks from i0, from the
// blocks' x pairs.
template <int P, typename G>
PERFGATE_LORA2_TARGET inline void grad_a_rows(const __m512i (*xp)[P], int blocks, const std::uint32_t (*gbt)[P],
                                              G* const* rows, int q0, int q1, int i0, __m512 s, bool stream) {
  for (int q = q0; q < q1; ++q) {
    __m512i g[P];
    for (int p = 0; p < P; ++p) g[p] = bcast(gbt[q][p]);
    for (int b = 0; b < blocks; ++b) {
      __m512 acc = _mm512_setzero_ps();
      for (int p = 0; p < P; ++p) acc = dot(acc, xp[b][p], g[p]);
      put(rows[q] + i0 + 16 * b, s, acc, true, stream);
    }
  }
}

// G_B of the N passes as column pairs (G_B[2p, q], G_B[2p + 1, q]), pass k's at 16 k + q, with the grad_A row
// each goes to; true when every pass's grad_A may take streaming stores.
template <int T, int N, typename G>
PERFGATE_LORA2_TARGET inline bool gb_pairs_and_rows(std::span<const LoraPassArgs> passes, const bf16* gbh,
                                                    std::uint32_t (*gbt)[(T + 1) / 2], G** rows) {
  gb_row_pairs(N, gbh, T, &gbt[0][0], (T + 1) / 2);
  bool stream = true;
  for (int k = 0; k < N; ++k) {
    G* const gA = grad_a_dst<G>(passes[k]);
    stream = stream && streams(T, gA);
    for (int q = 0; q < 16; ++q) rows[16 * k + q] = gA + static_cast<std::size_t>(q) * passes.front().in;
  }
  return stream;
}

// The x row pairs of `blocks` 16-column blocks from i0.
template <int T>
PERFGATE_LORA2_TARGET inline void x_pairs(const LoraPassArgs& f, int i0, int blocks, __m512i (*xp)[(T + 1) / 2]) {
  for (int b = 0; b < blocks; ++b)
    for (int p = 0; p < (T + 1) / 2; ++p) {
      const bf16* r0 = f.x + static_cast<std::size_t>(2 * p) * f.ldx + i0 + 16 * b;
      xp[b][p] = pair16(r0, 2 * p + 1 < T ? r0 + f.ldx : nullptr);
    }
}

// The A row pairs of the N passes at the 16-column block i.
template <int N>
PERFGATE_LORA2_TARGET inline void a_pairs(std::span<const LoraPassArgs> passes, int i, __m512i (&av)[N][8]) {
  for (int k = 0; k < N; ++k)
    for (int p = 0; p < 8; ++p) {
      const bf16* r0 = passes[k].A + static_cast<std::size_t>(2 * p) * passes.front().in + i;
      av[k][p] = pair16(r0, r0 + passes.front().in);
    }
}

// grad_A and dx of one expert of T <= kRows rows and N passes, kTileBlocks 16-column blocks at a time. grad_A
// alone is bound by its streaming stores (4 products per 64 bytes written) and dx by its products (a block's A
// pairs serve every row). Each dx row is followed by its share of the tile's grad_A rows, so the streaming
// stores leave at an even pace between the products instead of in one burst that stalls the products behind
// it.
template <int T, int N, typename G>
PERFGATE_LORA2_TARGET void grad_a_dx(std::span<const LoraPassArgs> passes, const bf16* gbh, const DxSink& sink,
                                     LinePrefetcher* pf) {
  constexpr int P = (T + 1) / 2, Q = 16 * N;
  const LoraPassArgs& f = passes.front();
  const std::size_t per_pass = static_cast<std::size_t>(T) * 16;
  const __m512 s = _mm512_set1_ps(f.s);
  alignas(64) std::uint32_t gbt[Q][P];
  G* rows[Q];
  const bool stream = gb_pairs_and_rows<T, N, G>(passes, gbh, gbt, rows);
  LinePrefetcher lines = *pf;  // a local copy, so that its state stays in registers
  __m512i xp[kTileBlocks][P];  // x pairs of the tile's blocks
  for (int i0 = 0; i0 < f.in; i0 += 16 * kTileBlocks) {
    const int blocks = std::min(kTileBlocks, (f.in - i0) / 16), steps = blocks * T;
    x_pairs<T>(f, i0, blocks, xp);
    for (int b = 0, step = 0; b < blocks; ++b) {
      __m512i av[N][8];
      a_pairs<N>(passes, i0 + 16 * b, av);
      for (int t = 0; t < T; ++t, ++step) {
        grad_a_rows<P>(xp, blocks, gbt, rows, Q * step / steps, Q * (step + 1) / steps, i0, s, stream);
        dx_row<N>(av, gbh, per_pass, sink, t, i0 + 16 * b, s);  // pass 1 prefetched A and the sink rows
      }
      lines.step();
    }
  }
}

template <int T>
struct GradADx {
  static void run(std::span<const LoraPassArgs> passes, const bf16* g, const DxSink& sink, LinePrefetcher* pf) {
    if (bf16_grads(passes)) return with_passes<bf16>(passes, g, sink, pf);
    with_passes<float>(passes, g, sink, pf);
  }
  template <typename G>
  static void with_passes(std::span<const LoraPassArgs> passes, const bf16* g, const DxSink& sink, LinePrefetcher* pf) {
    if (passes.size() == 1) return grad_a_dx<T, 1, G>(passes, g, sink, pf);
    grad_a_dx<T, 2, G>(passes, g, sink, pf);
  }
};

}  // namespace
#endif

#if !PERFGATE_LORA2_X86
namespace {
bool vector_path(std::span<const LoraPassArgs>) { return false; }  // fused2_kernels.hpp's, where x86 has one
}  // namespace
#endif

void lora_grads_fused2(std::span<const LoraPassArgs> passes, bf16* gb) {
#if PERFGATE_LORA2_X86
  if (vector_path(passes)) {
    pass1_avx512(passes, gb);
    grad_a_avx512(passes, gb, 0, passes.front().in);
    _mm_sfence();                       // order the streaming stores before the phase's barrier
    return clean_upper_vector_state();  // the SSE code after these kernels (vector_state.hpp)
  }
#endif
  lora_grads_fused(passes, gb);
}

void lora_dx_fused2(std::span<const LoraPassArgs> passes, const bf16* gb, const DxSink& sink, int c0, int c1) {
#if PERFGATE_LORA2_X86
  if (vector_path(passes) && c0 < c1 && c0 % 16 == 0 && c1 % 16 == 0) {
    dx_avx512(passes, gb, sink, c0, c1);
    return clean_upper_vector_state();  // the SSE code after these kernels (vector_state.hpp)
  }
#endif
  lora_dx_fused(passes, gb, sink, c0, c1);
}

bool lora_split_fused2(std::span<const LoraPassArgs> passes) { return vector_path(passes); }

namespace {
// lora_grads_dx_fused2 where its own path does not apply: the fp32 kernels, then the bf16 rounding where asked.
void grads_dx_fp32(std::span<const LoraPassArgs> passes, bf16* gb, const DxSink& sink) {
  std::array<LoraPassArgs, 2> fp32{};
  if (passes.size() > fp32.size()) throw std::invalid_argument("lora_grads_dx_fused2: at most two passes");
  std::transform(passes.begin(), passes.end(), fp32.begin(), fp32_grads_only);
  const std::span<const LoraPassArgs> p32(fp32.data(), passes.size());
  lora_grads_fused2(p32, gb);
  if (!passes.empty() && passes.front().m > 0) lora_dx_fused2(p32, gb, sink, 0, passes.front().in);
  round_grads_to_bf16(passes);
}
}  // namespace

void lora_grads_dx_fused2(std::span<const LoraPassArgs> passes, bf16* gb, const DxSink& sink,
                          std::span<const LoraPassArgs> next) {
#if PERFGATE_LORA2_X86
  if (vector_path(passes) && passes.front().m <= kRows) {
    LinePrefetcher pf = sink_lines(passes, sink);
    pass1_avx512(passes, gb, &pf, bf16_grads(passes));
    LinePrefetcher after = input_lines(next, passes.front().in);
    by_rows<GradADx>(passes.front().m, passes, gb, sink, &after);
    _mm_sfence();                       // order the streaming stores before the phase's barrier
    return clean_upper_vector_state();  // the SSE code after these kernels (vector_state.hpp)
  }
#endif
  grads_dx_fp32(passes, gb, sink);
}

void lora_pass1_slice_fused2(std::span<const LoraPassArgs> passes, int o0, int o1, float* part) {
  const int m = passes.front().m;
  if (m == 0) {  // an expert without rows: its slice of grad_B is zero
    for (const LoraPassArgs& a : passes)
      std::fill(a.gB + static_cast<std::size_t>(o0) * a.r, a.gB + static_cast<std::size_t>(o1) * a.r, 0.0f);
    return;
  }
#if PERFGATE_LORA2_X86
  if (vector_path(passes) && o0 < o1 && o0 % 16 == 0 && o1 % 16 == 0) {
    for (std::size_t k = 0; k < passes.size(); ++k)
      pass1_rows(out_slice(passes[k], o0, o1), part + k * static_cast<std::size_t>(m) * 16);
    _mm_sfence();
    return clean_upper_vector_state();  // the SSE code after these kernels (vector_state.hpp)
  }
#endif
  throw std::logic_error("lora_pass1_slice_fused2: no vector path for this output range");
}

void lora_grad_a_dx_slice_fused2(std::span<const LoraPassArgs> passes, const float* parts, std::size_t part_stride,
                                 int nparts, const DxSink& sink, int c0, int c1) {
  const LoraPassArgs& f = passes.front();
  if (f.m == 0) {  // no rows: the slice of grad_A is zero and there is no input gradient
    for (const LoraPassArgs& a : passes)
      for (int q = 0; q < a.r; ++q)
        std::fill(a.gA + static_cast<std::size_t>(q) * a.in + c0, a.gA + static_cast<std::size_t>(q) * a.in + c1, 0.0f);
    return;
  }
#if PERFGATE_LORA2_X86
  if (vector_path(passes) && c0 < c1 && c0 % 16 == 0 && c1 % 16 == 0) {
    thread_local std::vector<bf16> gbh;
    gbh.resize(passes.size() * static_cast<std::size_t>(f.m) * 16);
    sum_partials(parts, part_stride, nparts, gbh.size(), gbh.data());
    grad_a_avx512(passes, gbh.data(), c0, c1);
    dx_avx512(passes, gbh.data(), sink, c0, c1);
    _mm_sfence();
    return clean_upper_vector_state();  // the SSE code after these kernels (vector_state.hpp)
  }
#endif
  (void)parts, (void)part_stride, (void)nparts, (void)sink;
  throw std::logic_error("lora_grad_a_dx_slice_fused2: no vector path for this column range");
}

void lora_pass1_fused2(std::span<const LoraPassArgs> passes, bf16* gb) {
#if PERFGATE_LORA2_X86
  if (vector_path(passes)) {
    pass1_avx512(passes, gb);
    _mm_sfence();
    return clean_upper_vector_state();  // the SSE code after these kernels (vector_state.hpp)
  }
#endif
  (void)passes;
  (void)gb;
  throw std::logic_error("lora_pass1_fused2: no vector path (check lora_split_fused2 first)");
}

void lora_grad_a_dx_fused2(std::span<const LoraPassArgs> passes, const bf16* gb, const DxSink& sink, int c0, int c1) {
#if PERFGATE_LORA2_X86
  if (vector_path(passes) && c0 < c1 && c0 % 16 == 0 && c1 % 16 == 0) {
    grad_a_avx512(passes, gb, c0, c1);
    dx_avx512(passes, gb, sink, c0, c1);
    _mm_sfence();
    return clean_upper_vector_state();  // the SSE code after these kernels (vector_state.hpp)
  }
#endif
  (void)sink;
  throw std::logic_error("lora_grad_a_dx_fused2: no vector path for this column range");
}

}  // namespace perfgate::lora_backward
