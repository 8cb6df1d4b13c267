#pragma once
// What the fused2 LoRA kernels share (fused2_lora.cpp: AVX-512 BF16 products; fused2_amx_lora.cpp: AMX tile
// products): row pairs packed for the bf16 pair products, the line prefetcher that brings the next work into L2
// while a pass streams its gradients out, the input-gradient sink's rows, and the vector path's shape checks.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "fused_lora.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PERFGATE_LORA2_X86 1
#else
#define PERFGATE_LORA2_X86 0
#endif

#if PERFGATE_LORA2_X86
namespace perfgate::lora_backward::fused2_detail {

#define PERFGATE_LORA2_TARGET __attribute__((target("avx512f,avx512bf16")))
constexpr int kRows = 16;  // rows per block, as fused_lora.cpp

// 16 lanes of (r0[c], r1[c]); r1 == nullptr gives (r0[c], 0).
PERFGATE_LORA2_TARGET inline __m512i pair16(const bf16* r0, const bf16* r1) {
  const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0)));
  if (r1 == nullptr) return lo;
  const __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1)));
  return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}
PERFGATE_LORA2_TARGET inline __m512 dot(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(a), reinterpret_cast<__m512bh&>(b));
}
PERFGATE_LORA2_TARGET inline __m512i bcast(std::uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
PERFGATE_LORA2_TARGET inline __m512i bcast_pair(const bf16* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return bcast(v);
}
PERFGATE_LORA2_TARGET inline __m512i load_pairs(const std::uint32_t* p) { return _mm512_load_si512(p); }

// s * acc into dst: streamed (the block is the only one, dst 64-byte aligned), stored, or added.
PERFGATE_LORA2_TARGET inline void put(float* dst, __m512 s, __m512 acc, bool first, bool stream) {
  if (stream) return _mm512_stream_ps(dst, _mm512_mul_ps(s, acc));
  _mm512_storeu_ps(dst, first ? _mm512_mul_ps(s, acc) : _mm512_fmadd_ps(s, acc, _mm512_loadu_ps(dst)));
}

// 16 bf16 widened to floats.
PERFGATE_LORA2_TARGET inline __m512 widen(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// s * acc rounded to 16 bf16 at dst (to nearest even, as to_bf16): streamed (dst 32-byte aligned), stored, or
// added (to the bf16 there).
PERFGATE_LORA2_TARGET inline void put(bf16* dst, __m512 s, __m512 acc, bool first, bool stream) {
  auto* d = reinterpret_cast<__m256i*>(dst);
  const __m512 v = first || stream ? _mm512_mul_ps(s, acc) : _mm512_fmadd_ps(s, acc, widen(_mm256_loadu_si256(d)));
  const __m256bh h = _mm512_cvtneps_pbh(v);
  const __m256i bits = reinterpret_cast<const __m256i&>(h);
  if (stream) return _mm256_stream_si256(d, bits);
  _mm256_storeu_si256(d, bits);
}

// Where a pass's gradients go as G: float (gA, gB) or bf16 (gA16, gB16, for a config with bf16 gradients).
template <typename G>
inline G* grad_a_dst(const LoraPassArgs& a) {
  if constexpr (std::is_same_v<G, bf16>) return a.gA16;
  else return a.gA;
}
template <typename G>
inline G* grad_b_dst(const LoraPassArgs& a) {
  if constexpr (std::is_same_v<G, bf16>) return a.gB16;
  else return a.gB;
}
inline bool bf16_grads(std::span<const LoraPassArgs> passes) {
  return !passes.empty() && passes.front().gA16 != nullptr;
}

// s * acc added to an input-gradient sink row's 16 floats at o, with its base row's at base (nullptr: none).
PERFGATE_LORA2_TARGET inline void add_to_sink(float* o, const float* base, __m512 s, __m512 acc) {
  const __m512 cur = _mm512_loadu_ps(o);
  _mm512_storeu_ps(o, base == nullptr ? _mm512_fmadd_ps(s, acc, cur)
                                      : _mm512_add_ps(cur, _mm512_fmadd_ps(s, acc, _mm512_loadu_ps(base))));
}

// G_B^T of the passes as row pairs: dst[(16 k + q) * stride + p] = (G_B_k[2p, q], G_B_k[2p + 1, q]) for the m
// rows of each pass's G_B in gbh ([passes][m][16]); an odd m's last pair takes a zero.
PERFGATE_LORA2_TARGET inline void gb_row_pairs(std::size_t passes, const bf16* gbh, int m, std::uint32_t* dst,
                                               std::size_t stride) {
  const std::size_t per_pass = static_cast<std::size_t>(m) * 16;
  for (std::size_t k = 0; k < passes; ++k)
    for (int q = 0; q < 16; ++q)
      for (int p = 0; p < (m + 1) / 2; ++p) {
        const bf16* g = gbh + k * per_pass;
        const std::uint32_t lo = g[static_cast<std::size_t>(2 * p) * 16 + q];
        const std::uint32_t hi = 2 * p + 1 < m ? g[static_cast<std::size_t>(2 * p + 1) * 16 + q] : 0u;
        dst[(16 * k + static_cast<std::size_t>(q)) * stride + static_cast<std::size_t>(p)] = lo | (hi << 16);
      }
}

// Thread-local 64-byte aligned buffers of packed pairs.
struct Packed {
  std::vector<std::uint32_t> buf;
  std::uint32_t* get(std::size_t n) {
    if (buf.size() < n + 16) buf.resize(n + 16);
    auto addr = reinterpret_cast<std::uintptr_t>(buf.data());
    return buf.data() + ((64 - addr % 64) % 64) / sizeof(std::uint32_t);
  }
};

// dst[p][c] = (rows[2p][c], rows[2p + 1][c]) for c in [c0, c1) (multiples of 16), p < (n + 1) / 2: n rows
// of stride ld, read two at a time front to back. dst rows are (c1 - c0) apart.
PERFGATE_LORA2_TARGET inline void pair_pack(const bf16* rows, std::size_t ld, int n, int c0, int c1,
                                            std::uint32_t* dst) {
  const std::size_t w = static_cast<std::size_t>(c1 - c0);
  for (int p = 0; p < (n + 1) / 2; ++p) {
    const bf16* r0 = rows + static_cast<std::size_t>(2 * p) * ld;
    const bf16* r1 = 2 * p + 1 < n ? r0 + ld : nullptr;
    for (int c = c0; c < c1; c += 16)
      _mm512_store_si512(dst + p * w + (c - c0), pair16(r0 + c, r1 != nullptr ? r1 + c : nullptr));
  }
}

inline bool streams(int m, const void* dst) { return m <= kRows && reinterpret_cast<std::uintptr_t>(dst) % 64 == 0; }

// Cache lines to bring into L2 a few at a time while other work runs: pass 1 is bound by its products and
// moves little, and the passes after it read A and the sink rows (one row per page, short streams the
// hardware prefetchers ramp up on too late); grad_A and the input gradient are bound by their streaming
// stores, and the next expert's pass 1 reads dy, x, U and B from memory.
struct LinePrefetcher {
  struct Range {
    const char* p;
    std::size_t lines, stride;
  };
  static constexpr int kRanges = 12;
  Range r[kRanges] = {};
  int n = 0, at = 0;
  std::size_t done = 0, per_step = 0;
  void add(const void* p, std::size_t bytes) {
    if (n < kRanges && bytes > 0) r[n++] = Range{static_cast<const char*>(p), (bytes + 63) / 64, 64};
  }
  // One line of every 4 KiB page of [p, p + bytes), for a range that is written later with streaming stores:
  // the prefetch does the page's address translation ahead of them. An expert's gradients span tens of pages,
  // each first touched by a streaming store, which would otherwise wait for the page walk (two-level under a
  // hypervisor).
  void add_pages(const void* p, std::size_t bytes) {
    if (n < kRanges && bytes > 0) r[n++] = Range{static_cast<const char*>(p), (bytes + 4095) / 4096, 4096};
  }
  // Spread every line over `steps` calls of step().
  void spread(std::size_t steps) {
    std::size_t total = 0;
    for (int i = 0; i < n; ++i) total += r[i].lines;
    per_step = steps > 0 ? (total + steps - 1) / steps : total;
  }
  void step() {
    for (std::size_t k = 0; k < per_step && at < n; ++k) {
      _mm_prefetch(r[at].p + r[at].stride * done, _MM_HINT_T1);
      if (++done == r[at].lines) done = 0, ++at;
    }
  }
};

// Sink row t's columns from c0, and its base row's (nullptr without a base term).
inline float* sink_out(const DxSink& sink, int t, int c0) {
  return sink.out + static_cast<std::size_t>(sink.rows != nullptr ? sink.rows[t] : t) * sink.ldo + c0;
}
inline const float* sink_base(const DxSink& sink, int t, int c0) {
  return sink.base != nullptr ? sink.base + static_cast<std::size_t>(t) * sink.ldb + c0 : nullptr;
}

// What grad_a_dx will read, to prefetch during pass 1: A of every pass, the sink rows when they are one block
// (an in-place sink), the base rows.
inline LinePrefetcher sink_lines(std::span<const LoraPassArgs> passes, const DxSink& sink) {
  const LoraPassArgs& f = passes.front();
  LinePrefetcher pf;
  const auto rows = static_cast<std::size_t>(f.m);
  if (sink.rows == nullptr) pf.add(sink.out, rows * static_cast<std::size_t>(sink.ldo) * sizeof(float));
  if (sink.base != nullptr) pf.add(sink.base, rows * static_cast<std::size_t>(sink.ldb) * sizeof(float));
  for (const LoraPassArgs& a : passes) pf.add(a.A, 16 * static_cast<std::size_t>(a.in) * sizeof(bf16));
  std::size_t steps = 0;
  for (const LoraPassArgs& a : passes) steps += static_cast<std::size_t>(a.out / 2);
  pf.spread(steps);
  return pf;
}

// What the next expert's pass 1 reads (its dy, U and B rows, and x), and one line of every page of the
// gradients it streams out, to prefetch during grad_a_dx over its 16-column blocks of `in`.
inline LinePrefetcher input_lines(std::span<const LoraPassArgs> next, int in) {
  LinePrefetcher pf;
  if (next.empty()) return pf;
  const auto rows = static_cast<std::size_t>(next.front().m);
  for (const LoraPassArgs& a : next) {
    pf.add(a.dy, rows * static_cast<std::size_t>(a.ldy) * sizeof(bf16));
    pf.add(a.U, rows * static_cast<std::size_t>(a.ldu) * sizeof(bf16));
    pf.add(a.B, static_cast<std::size_t>(a.out) * 16 * sizeof(bf16));
  }
  pf.add(next.front().x, rows * static_cast<std::size_t>(next.front().ldx) * sizeof(bf16));
  for (const LoraPassArgs& a : next) {  // its gradients' pages: see add_pages
    if (a.gA16 != nullptr) {
      pf.add_pages(a.gB16, static_cast<std::size_t>(a.out) * 16 * sizeof(bf16));
      pf.add_pages(a.gA16, static_cast<std::size_t>(a.in) * 16 * sizeof(bf16));
      continue;
    }
    pf.add_pages(a.gB, static_cast<std::size_t>(a.out) * 16 * sizeof(float));
    pf.add_pages(a.gA, static_cast<std::size_t>(a.in) * 16 * sizeof(float));
  }
  pf.spread(static_cast<std::size_t>(in / 16));
  return pf;
}

// The passes share m, in, r and s (as lora_grads_fused requires).
inline bool shares_rows(std::span<const LoraPassArgs> passes) {
  const LoraPassArgs& f = passes.front();
  return std::all_of(passes.begin(), passes.end(),
                     [&f](const LoraPassArgs& a) { return a.m == f.m && a.in == f.in && a.r == f.r && a.s == f.s; });
}
inline bool vectorised(std::span<const LoraPassArgs> passes) {
  return std::all_of(passes.begin(), passes.end(),
                     [](const LoraPassArgs& a) { return lora_fused_vectorised(a.r, a.in, a.out); });
}
// The vector path applies: rank 16, in and out % 16 == 0, AVX-512 BF16, passes sharing m, in, r, s and x
// (grad_A of both passes comes from one packed x: gate and up share it).
inline bool vector_path(std::span<const LoraPassArgs> passes) {
  return !passes.empty() && passes.size() <= 2 && passes.front().m > 0 && vectorised(passes) && shares_rows(passes) &&
         std::all_of(passes.begin(), passes.end(), [&passes](const LoraPassArgs& a) {
           return a.x == passes.front().x && a.ldx == passes.front().ldx;
         });
}

}  // namespace perfgate::lora_backward::fused2_detail
#endif
