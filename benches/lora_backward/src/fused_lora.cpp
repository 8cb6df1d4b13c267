// Fused LoRA backward of one expert's projection: two passes instead of four GEMMs.
//   pass 1 (over the output features o): grad_B[o,:] = s * sum_t dy[t,o] U[t,:]  and  G_B[t,:] += dy[t,o] B[o,:]
//   pass 2 (over input features, 16 at a time): grad_A[q,i] = s * sum_t G_B[t,q] x[t,i]   (lora_grads_fused)
//                                                dx[t,i] += s * sum_q G_B[t,q] A[q,i]    (lora_dx_fused)
// dy is read once, the gradients are written once; with rank 16 a row of B / grad_B / U / G_B is one
// AVX-512 register. G_B is rounded to bf16 between the passes, like the other variants. Gate and up
// share x and dx, so their dx pass is one call that updates dx once for both.
#include "fused_lora.hpp"

#include "perfgate/bench/hardware.hpp"

// GCC 12 reports false (maybe-)uninitialized warnings inside its own AVX-512 intrinsic headers
// (_mm512_undefined_epi32, GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PERFGATE_LORA_X86 1
#else
#define PERFGATE_LORA_X86 0
#endif

namespace perfgate::lora_backward {
namespace {

// Rows of an expert's input-gradient sink (see DxSink).
float* sink_row(const DxSink& d, int t) {
  return d.out + static_cast<std::size_t>(d.rows != nullptr ? d.rows[t] : t) * d.ldo;
}

void grads_generic(const LoraPassArgs& a, bf16* gbh) {
  const int m = a.m, in = a.in, out = a.out, r = a.r;
  std::vector<float> gb(static_cast<std::size_t>(m) * r, 0.0f);
  for (int o = 0; o < out; ++o) {
    for (int q = 0; q < r; ++q) {
      float acc = 0.0f;
      for (int t = 0; t < m; ++t)
        acc += to_float(a.dy[static_cast<std::size_t>(t) * a.ldy + o]) *
               to_float(a.U[static_cast<std::size_t>(t) * a.ldu + q]);
      a.gB[static_cast<std::size_t>(o) * r + q] = a.s * acc;
    }
    for (int t = 0; t < m; ++t) {
      const float d = to_float(a.dy[static_cast<std::size_t>(t) * a.ldy + o]);
      for (int q = 0; q < r; ++q)
        gb[static_cast<std::size_t>(t) * r + q] += d * to_float(a.B[static_cast<std::size_t>(o) * r + q]);
    }
  }
  for (std::size_t j = 0; j < gb.size(); ++j) gbh[j] = to_bf16(gb[j]);
  for (int q = 0; q < r; ++q)
    for (int i = 0; i < in; ++i) {
      float acc = 0.0f;
      for (int t = 0; t < m; ++t)
        acc +=
            to_float(gbh[static_cast<std::size_t>(t) * r + q]) * to_float(a.x[static_cast<std::size_t>(t) * a.ldx + i]);
      a.gA[static_cast<std::size_t>(q) * in + i] = a.s * acc;
    }
}

void dx_generic(std::span<const LoraPassArgs> passes, const bf16* gbh, const DxSink& sink, int c0, int c1) {
  const LoraPassArgs& f = passes.front();
  const std::size_t per_pass = static_cast<std::size_t>(f.m) * f.r;
  for (int t = 0; t < f.m; ++t) {
    float* o = sink_row(sink, t);
    for (int i = c0; i < c1; ++i) {
      float acc = 0.0f;
      for (std::size_t k = 0; k < passes.size(); ++k) {
        const bf16* g = gbh + k * per_pass + static_cast<std::size_t>(t) * f.r;
        for (int q = 0; q < f.r; ++q)
          acc += to_float(g[q]) * to_float(passes[k].A[static_cast<std::size_t>(q) * f.in + i]);
      }
      o[i] += f.s * acc + (sink.base != nullptr ? sink.base[static_cast<std::size_t>(t) * sink.ldb + i] : 0.0f);
    }
  }
}

#if PERFGATE_LORA_X86
#define PERFGATE_LORA_TARGET __attribute__((target("avx512f,avx512bf16")))
// The AVX-512 path multiplies with vdpbf16ps: each fp32 lane accumulates a pair of bf16 products,
// a.lo * b.lo + a.hi * b.hi, so every GEMM here runs over its k dimension two at a time. One operand is
// a pair of rows interleaved lane by lane (pair_rows), the other one pair broadcast to all lanes; a
// pair that is contiguous in memory (two neighbouring columns of one row) is broadcast straight from
// memory. Products of bf16 values are exact in fp32 and summed in fp32 (denormals flushed), so the
// result matches the fp32-FMA form well inside the bf16 error bound, in half the instructions.

// 16 lanes of (r0[c], r1[c]); r1 == nullptr gives (r0[c], 0).
PERFGATE_LORA_TARGET inline __m512i pair_rows(const bf16* r0, const bf16* r1) {
  const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0)));
  if (r1 == nullptr) return lo;
  const __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1)));
  return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}
PERFGATE_LORA_TARGET inline __m512i broadcast_pair(const bf16* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm512_set1_epi32(static_cast<int>(v));
}
PERFGATE_LORA_TARGET inline __m512 dot_pairs(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(a), reinterpret_cast<__m512bh&>(b));
}
// Stores s * acc, or adds it to what a previous row block stored. `stream`: the block is the only one
// and dst 64-byte aligned, so the line is written whole with a streaming store: no read for ownership of
// gradient lines that nothing reads back in this pass.
PERFGATE_LORA_TARGET inline void store_scaled(float* dst, __m512 s, __m512 acc, bool first, bool stream = false) {
  if (stream) return _mm512_stream_ps(dst, _mm512_mul_ps(s, acc));
  _mm512_storeu_ps(dst, first ? _mm512_mul_ps(s, acc) : _mm512_fmadd_ps(s, acc, _mm512_loadu_ps(dst)));
}

// Rows per block: pass 1 keeps a G_B accumulator per row and 8 U row pairs in registers (24 of the 32).
constexpr int kBlockRows = 16;

// Pass 1 on a block of T <= kBlockRows rows (t0..t0+T-1), k = rows for grad_B and k = output features for G_B:
//   grad_B[o, :] (+)= s sum_t dy[t, o] U[t, :]   (U row pairs in registers, dy pairs broadcast)
//   G_B[t, :] += sum_o dy[t, o] B[o, :]           (B row pairs built per o pair, dy pairs from memory)
template <int T>
PERFGATE_LORA_TARGET void pass1_block(const LoraPassArgs& a, int t0, bool first, float* gbuf) {
  constexpr int P = (T + 1) / 2;
  const __m512 s = _mm512_set1_ps(a.s);
  const bf16* dyr[T];
  __m512i u[P];
  __m512 g[T];
  for (int j = 0; j < T; ++j) {
    dyr[j] = a.dy + static_cast<std::size_t>(t0 + j) * a.ldy;
    g[j] = _mm512_setzero_ps();
  }
  for (int q = 0; q < P; ++q) {
    const bf16* r1 = 2 * q + 1 < T ? a.U + static_cast<std::size_t>(t0 + 2 * q + 1) * a.ldu : nullptr;
    u[q] = pair_rows(a.U + static_cast<std::size_t>(t0 + 2 * q) * a.ldu, r1);
  }
  alignas(64) std::uint32_t dy_pairs[P][16];
  const bool stream = a.m <= kBlockRows && reinterpret_cast<std::uintptr_t>(a.gB) % 64 == 0;
  for (int o0 = 0; o0 < a.out; o0 += 16) {
    for (int q = 0; q < P; ++q)
      _mm512_store_si512(dy_pairs[q], pair_rows(dyr[2 * q] + o0, 2 * q + 1 < T ? dyr[2 * q + 1] + o0 : nullptr));
    for (int c = 0; c < 16; ++c) {
      __m512 acc = _mm512_setzero_ps();
      for (int q = 0; q < P; ++q) acc = dot_pairs(acc, u[q], _mm512_set1_epi32(static_cast<int>(dy_pairs[q][c])));
      store_scaled(a.gB + static_cast<std::size_t>(o0 + c) * 16, s, acc, first, stream);
    }
    for (int c = 0; c < 16; c += 2) {
      const bf16* b0 = a.B + static_cast<std::size_t>(o0 + c) * 16;
      const __m512i b = pair_rows(b0, b0 + 16);
      for (int j = 0; j < T; ++j) g[j] = dot_pairs(g[j], b, broadcast_pair(dyr[j] + o0 + c));
    }
  }
  for (int j = 0; j < T; ++j) _mm512_storeu_ps(gbuf + static_cast<std::size_t>(t0 + j) * 16, g[j]);
}

// grad_A[q, i] (+)= s sum_t G_B[t, q] x[t, i] on a block of T <= kBlockRows rows: x row pairs of a 16-column
// block in registers, G_B column pairs (gbt[q][p] = G_B[2p, q], G_B[2p + 1, q]) broadcast.
template <int T>
PERFGATE_LORA_TARGET void grad_a_block(const LoraPassArgs& a, int t0, bool first, const bf16* gbh) {
  constexpr int P = (T + 1) / 2;
  const __m512 s = _mm512_set1_ps(a.s);
  std::uint32_t gbt[16][P];
  const bool stream = a.m <= kBlockRows && reinterpret_cast<std::uintptr_t>(a.gA) % 64 == 0;
  for (int q = 0; q < 16; ++q)
    for (int p = 0; p < P; ++p) {
      const std::uint32_t lo = gbh[static_cast<std::size_t>(t0 + 2 * p) * 16 + q];
      const std::uint32_t hi = 2 * p + 1 < T ? gbh[static_cast<std::size_t>(t0 + 2 * p + 1) * 16 + q] : 0u;
      gbt[q][p] = lo | (hi << 16);
    }
  for (int i0 = 0; i0 < a.in; i0 += 16) {
    __m512i xv[P];
    for (int p = 0; p < P; ++p) {
      const bf16* r0 = a.x + static_cast<std::size_t>(t0 + 2 * p) * a.ldx + i0;
      xv[p] = pair_rows(r0, 2 * p + 1 < T ? r0 + a.ldx : nullptr);
    }
    for (int q = 0; q < 16; ++q) {
      __m512 acc = _mm512_setzero_ps();
      for (int p = 0; p < P; ++p) acc = dot_pairs(acc, xv[p], _mm512_set1_epi32(static_cast<int>(gbt[q][p])));
      store_scaled(a.gA + static_cast<std::size_t>(q) * a.in + i0, s, acc, first, stream);
    }
  }
}

// Row block height -> compile-time instantiation (1..kBlockRows).
template <template <int> class F, int T = 1, typename... Args>
void by_rows(int rows, Args&&... args) {
  if constexpr (T < kBlockRows) {
    if (rows != T) return by_rows<F, T + 1>(rows, args...);
  }
  F<T>::run(args...);
}
template <int T>
struct Pass1 {
  static void run(const LoraPassArgs& a, int t0, bool first, float* g) { pass1_block<T>(a, t0, first, g); }
};
template <int T>
struct GradA {
  static void run(const LoraPassArgs& a, int t0, bool first, const bf16* g) { grad_a_block<T>(a, t0, first, g); }
};

// rank 16, in % 16 == 0, out % 16 == 0; the passes share m (lora_grads_fused).
PERFGATE_LORA_TARGET void grads_avx512(std::span<const LoraPassArgs> passes, bf16* gbh) {
  const int m = passes.front().m;
  const std::size_t per_pass = static_cast<std::size_t>(m) * 16;
  thread_local std::vector<float> gb;
  gb.resize(per_pass);
  // pass 1 of every projection: grad_B and G_B, G_B rounded to bf16 like the other variants
  for (std::size_t k = 0; k < passes.size(); ++k) {
    for (int t0 = 0; t0 < m; t0 += kBlockRows)
      by_rows<Pass1>(std::min(kBlockRows, m - t0), passes[k], t0, t0 == 0, gb.data());
    for (std::size_t j = 0; j < per_pass; ++j) gbh[k * per_pass + j] = to_bf16(gb[j]);
  }
  // grad_A = s G_B^T x
  for (std::size_t k = 0; k < passes.size(); ++k)
    for (int t0 = 0; t0 < m; t0 += kBlockRows)
      by_rows<GradA>(std::min(kBlockRows, m - t0), passes[k], t0, t0 == 0, gbh + k * per_pass);
  _mm_sfence();  // order the streaming stores before the phase's barrier
}

// dx over columns [c0, c1) (multiples of 16), one update for all passes: A row pairs of a 16-column block
// in registers, G_B pairs broadcast from memory.
PERFGATE_LORA_TARGET void dx_avx512(std::span<const LoraPassArgs> passes, const bf16* gbh, const DxSink& sink, int c0,
                                    int c1) {
  const LoraPassArgs& first = passes.front();
  const int m = first.m, in = first.in;
  const std::size_t n = passes.size(), per_pass = static_cast<std::size_t>(m) * 16;
  const __m512 s = _mm512_set1_ps(first.s);
  for (int i0 = c0; i0 < c1; i0 += 16) {
    __m512i av[2][8];
    for (std::size_t k = 0; k < n; ++k)
      for (int p = 0; p < 8; ++p) {
        const bf16* r0 = passes[k].A + static_cast<std::size_t>(2 * p) * in + i0;
        av[k][p] = pair_rows(r0, r0 + in);
      }
    for (int t = 0; t < m; ++t) {
      __m512 acc = _mm512_setzero_ps();
      for (std::size_t k = 0; k < n; ++k) {
        const bf16* gt = gbh + k * per_pass + static_cast<std::size_t>(t) * 16;
        for (int p = 0; p < 8; ++p) acc = dot_pairs(acc, av[k][p], broadcast_pair(gt + 2 * p));
      }
      float* o = sink_row(sink, t) + i0;
      const __m512 cur = _mm512_loadu_ps(o);
      _mm512_storeu_ps(
          o, sink.base == nullptr
                 ? _mm512_fmadd_ps(s, acc, cur)
                 : _mm512_add_ps(
                       cur, _mm512_fmadd_ps(s, acc,
                                            _mm512_loadu_ps(sink.base + static_cast<std::size_t>(t) * sink.ldb + i0))));
    }
  }
}

#endif

}  // namespace

namespace {
void check_passes(std::span<const LoraPassArgs> passes, const char* who) {
  const LoraPassArgs& f = passes.front();
  const bool shared = std::all_of(passes.begin(), passes.end(), [&f](const LoraPassArgs& a) {
    return a.m == f.m && a.in == f.in && a.r == f.r && a.s == f.s;
  });
  if (passes.size() > 2 || !shared)
    throw std::invalid_argument(std::string(who) + ": at most two passes, sharing m, in, r and s");
}
bool vectorised(std::span<const LoraPassArgs> passes) {
  return std::all_of(passes.begin(), passes.end(),
                     [](const LoraPassArgs& a) { return lora_fused_vectorised(a.r, a.in, a.out); });
}
}  // namespace

void lora_grads_fused(std::span<const LoraPassArgs> passes, bf16* gb) {
  if (passes.empty()) return;
  check_passes(passes, "lora_grads_fused");
  if (passes.front().m == 0) {
    for (const LoraPassArgs& a : passes) {
      std::fill(a.gB, a.gB + static_cast<std::size_t>(a.out) * a.r, 0.0f);
      std::fill(a.gA, a.gA + static_cast<std::size_t>(a.r) * a.in, 0.0f);
    }
    return;
  }
#if PERFGATE_LORA_X86
  if (vectorised(passes)) return grads_avx512(passes, gb);
#endif
  const std::size_t per_pass = static_cast<std::size_t>(passes.front().m) * passes.front().r;
  for (std::size_t k = 0; k < passes.size(); ++k) grads_generic(passes[k], gb + k * per_pass);
}

void lora_dx_fused(std::span<const LoraPassArgs> passes, const bf16* gb, const DxSink& sink, int c0, int c1) {
  if (passes.empty() || passes.front().m == 0 || c0 >= c1) return;
  check_passes(passes, "lora_dx_fused");
#if PERFGATE_LORA_X86
  if (vectorised(passes) && c0 % 16 == 0 && c1 % 16 == 0) return dx_avx512(passes, gb, sink, c0, c1);
#endif
  dx_generic(passes, gb, sink, c0, c1);
}

LoraPassArgs fp32_grads_only(LoraPassArgs a) {
  a.gA16 = nullptr;
  a.gB16 = nullptr;
  return a;
}

void round_grads_to_bf16(std::span<const LoraPassArgs> passes) {
  for (const LoraPassArgs& a : passes) {
    if (a.gA16 != nullptr) std::transform(a.gA, a.gA + static_cast<std::size_t>(a.r) * a.in, a.gA16, to_bf16);
    if (a.gB16 != nullptr) std::transform(a.gB, a.gB + static_cast<std::size_t>(a.out) * a.r, a.gB16, to_bf16);
  }
}

bool lora_fused_vectorised(int rank, int in, int out) {
#if PERFGATE_LORA_X86
  const auto& cpu = perfgate::bench::cpu_info();
  return rank == 16 && in % 16 == 0 && out % 16 == 0 && cpu.avx512f && cpu.avx512_bf16;
#else
  (void)rank;
  (void)in;
  (void)out;
  return false;
#endif
}

}  // namespace perfgate::lora_backward
