// Fused LoRA backward of one expert's projection: two passes instead of four GEMMs.
//   pass 1 (over the output features o): grad_B[o,:] = s * sum_t dy[t,o] U[t,:]  and  G_B[t,:] += dy[t,o] B[o,:]
//   pass 2 (over input features, 16 at a time): dx[t,i] += s * sum_q G_B[t,q] A[q,i]
//                                                grad_A[q,i] = s * sum_t G_B[t,q] x[t,i]
// dy is read once, the gradients are written once; with rank 16 a row of B / grad_B / U / G_B is one
// AVX-512 register. G_B is rounded to bf16 between the passes, like the other variants.
#include "fused_lora.hpp"

// GCC 12 reports false (maybe-)uninitialized warnings inside its own AVX-512 intrinsic headers
// (_mm512_undefined_epi32, GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PERFGATE_LORA_X86 1
#else
#define PERFGATE_LORA_X86 0
#endif

namespace perfgate::lora {
namespace {

void lora_fused_generic(const LoraPassArgs& a) {
  const int m = a.m, in = a.in, out = a.out, r = a.r;
  std::vector<float> gb(static_cast<std::size_t>(m) * r, 0.0f);
  for (int o = 0; o < out; ++o) {
    for (int q = 0; q < r; ++q) {
      float acc = 0.0f;
      for (int t = 0; t < m; ++t) acc += to_float(a.dy[static_cast<std::size_t>(t) * a.ldy + o]) * to_float(a.U[static_cast<std::size_t>(t) * a.ldu + q]);
      a.gB[static_cast<std::size_t>(o) * r + q] = a.s * acc;
    }
    for (int t = 0; t < m; ++t) {
      const float d = to_float(a.dy[static_cast<std::size_t>(t) * a.ldy + o]);
      for (int q = 0; q < r; ++q) gb[static_cast<std::size_t>(t) * r + q] += d * to_float(a.B[static_cast<std::size_t>(o) * r + q]);
    }
  }
  for (float& v : gb) v = to_float(to_bf16(v));
  for (int q = 0; q < r; ++q)
    for (int i = 0; i < in; ++i) {
      float acc = 0.0f;
      for (int t = 0; t < m; ++t) acc += gb[static_cast<std::size_t>(t) * r + q] * to_float(a.x[static_cast<std::size_t>(t) * a.ldx + i]);
      a.gA[static_cast<std::size_t>(q) * in + i] = a.s * acc;
    }
  for (int t = 0; t < m; ++t)
    for (int i = 0; i < in; ++i) {
      float acc = 0.0f;
      for (int q = 0; q < r; ++q) acc += gb[static_cast<std::size_t>(t) * r + q] * to_float(a.A[static_cast<std::size_t>(q) * in + i]);
      a.dx[static_cast<std::size_t>(t) * a.lddx + i] += a.s * acc;
    }
}

#if PERFGATE_LORA_X86
__attribute__((target("avx512f"))) inline __m512 load_bf16x16(const bf16* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Pass 1 on a block of T <= 8 rows: U rows, G_B accumulators in registers; grad_B written on the
// first block and accumulated on later ones.
// Streaming stores for the gradients: off by default (PERFGATE_LORA_FUSED_STREAM=1 turns them on).
// A/B on the AMX device host (threads 2, 3 interleaved pairs): LoRA phases 2.40-2.71 ms with
// streaming vs 2.51-2.61 ms without: no gain where the L3 (300 MiB) holds the 19 MB of gradients.
bool streaming_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("PERFGATE_LORA_FUSED_STREAM");
    return v && v[0] == '1';
  }();
  return on;
}

// Stores a finished output line: streaming (no read-for-ownership) when 64-byte aligned.
__attribute__((target("avx512f"))) inline void store_out(float* dst, __m512 v, bool stream) {
  if (stream) _mm512_stream_ps(dst, v);
  else _mm512_storeu_ps(dst, v);
}

template <int T>
__attribute__((target("avx512f"))) void pass1_block(const LoraPassArgs& a, int t0, bool first, bool last, float* gbuf) {
  const bool stream = last && streaming_enabled() && (reinterpret_cast<std::uintptr_t>(a.gB) % 64 == 0);
  const __m512 s = _mm512_set1_ps(a.s);
  __m512 u[T], g[T];
  const bf16* dyr[T];
  for (int j = 0; j < T; ++j) {
    u[j] = load_bf16x16(a.U + static_cast<std::size_t>(t0 + j) * a.ldu);
    g[j] = _mm512_setzero_ps();
    dyr[j] = a.dy + static_cast<std::size_t>(t0 + j) * a.ldy;
  }
  for (int o = 0; o < a.out; ++o) {
    const __m512 b = load_bf16x16(a.B + static_cast<std::size_t>(o) * 16);
    __m512 acc = _mm512_setzero_ps();
    for (int j = 0; j < T; ++j) {
      const __m512 d = _mm512_set1_ps(to_float(dyr[j][o]));
      acc = _mm512_fmadd_ps(d, u[j], acc);
      g[j] = _mm512_fmadd_ps(d, b, g[j]);
    }
    float* dst = a.gB + static_cast<std::size_t>(o) * 16;
    store_out(dst, first ? _mm512_mul_ps(s, acc) : _mm512_fmadd_ps(s, acc, _mm512_loadu_ps(dst)), stream);
  }
  for (int j = 0; j < T; ++j) _mm512_storeu_ps(gbuf + static_cast<std::size_t>(t0 + j) * 16, g[j]);
}

// grad_A on a block of T <= 8 rows: x rows in registers, one 16-column block at a time.
template <int T>
__attribute__((target("avx512f"))) void grad_a_block(const LoraPassArgs& a, int t0, bool first, bool last, const float* g) {
  const bool stream =
      last && streaming_enabled() && (reinterpret_cast<std::uintptr_t>(a.gA) % 64 == 0) && a.in % 16 == 0;
  const __m512 s = _mm512_set1_ps(a.s);
  for (int i0 = 0; i0 < a.in; i0 += 16) {
    __m512 xv[T];
    for (int j = 0; j < T; ++j) xv[j] = load_bf16x16(a.x + static_cast<std::size_t>(t0 + j) * a.ldx + i0);
    for (int q = 0; q < 16; ++q) {
      __m512 acc = _mm512_setzero_ps();
      for (int j = 0; j < T; ++j) acc = _mm512_fmadd_ps(_mm512_set1_ps(g[static_cast<std::size_t>(t0 + j) * 16 + q]), xv[j], acc);
      float* dst = a.gA + static_cast<std::size_t>(q) * a.in + i0;
      store_out(dst, first ? _mm512_mul_ps(s, acc) : _mm512_fmadd_ps(s, acc, _mm512_loadu_ps(dst)), stream);
    }
  }
}

template <template <int> class F, typename... Args>
void by_rows(int rows, Args&&... args) {
  switch (rows) {
    case 1: F<1>::run(args...); break;
    case 2: F<2>::run(args...); break;
    case 3: F<3>::run(args...); break;
    case 4: F<4>::run(args...); break;
    case 5: F<5>::run(args...); break;
    case 6: F<6>::run(args...); break;
    case 7: F<7>::run(args...); break;
    default: F<8>::run(args...); break;
  }
}
template <int T>
struct Pass1 {
  static void run(const LoraPassArgs& a, int t0, bool first, bool last, float* g) { pass1_block<T>(a, t0, first, last, g); }
};
template <int T>
struct GradA {
  static void run(const LoraPassArgs& a, int t0, bool first, bool last, const float* g) {
    grad_a_block<T>(a, t0, first, last, g);
  }
};

// rank 16, in % 16 == 0
__attribute__((target("avx512f"))) void lora_fused_avx512(const LoraPassArgs& a) {
  const int m = a.m, in = a.in;
  const __m512 s = _mm512_set1_ps(a.s);
  thread_local std::vector<float> gb;
  gb.resize(static_cast<std::size_t>(m) * 16);
  if (m == 0) {
    std::fill(a.gB, a.gB + static_cast<std::size_t>(a.out) * 16, 0.0f);
    std::fill(a.gA, a.gA + static_cast<std::size_t>(in) * 16, 0.0f);
    return;
  }
  // pass 1: grad_B and G_B
  for (int t0 = 0; t0 < m; t0 += 8) by_rows<Pass1>(std::min(8, m - t0), a, t0, t0 == 0, t0 + 8 >= m, gb.data());
  // G_B rounded to bf16, like the other variants
  for (float& v : gb) v = to_float(to_bf16(v));
  const float* g = gb.data();
  // pass 2a: dx += s G_B A, A's 16 rows of a 16-column block in registers
  for (int i0 = 0; i0 < in; i0 += 16) {
    __m512 av[16];
    for (int q = 0; q < 16; ++q) av[q] = load_bf16x16(a.A + static_cast<std::size_t>(q) * in + i0);
    for (int t = 0; t < m; ++t) {
      const float* gt = g + static_cast<std::size_t>(t) * 16;
      __m512 acc = _mm512_setzero_ps();
      for (int q = 0; q < 16; ++q) acc = _mm512_fmadd_ps(_mm512_set1_ps(gt[q]), av[q], acc);
      float* d = a.dx + static_cast<std::size_t>(t) * a.lddx + i0;
      _mm512_storeu_ps(d, _mm512_fmadd_ps(s, acc, _mm512_loadu_ps(d)));
    }
  }
  // pass 2b: grad_A = s G_B^T x
  for (int t0 = 0; t0 < m; t0 += 8) by_rows<GradA>(std::min(8, m - t0), a, t0, t0 == 0, t0 + 8 >= m, g);
  _mm_sfence();  // order the streaming stores before the phase's barrier
}

bool have_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}
#endif

}  // namespace

void lora_pass_fused(const LoraPassArgs& a) {
#if PERFGATE_LORA_X86
  if (a.r == 16 && a.in % 16 == 0 && have_avx512()) return lora_fused_avx512(a);
#endif
  lora_fused_generic(a);
}

bool lora_fused_vectorised(int rank, int in) {
#if PERFGATE_LORA_X86
  return rank == 16 && in % 16 == 0 && have_avx512();
#else
  (void)rank;
  (void)in;
  return false;
#endif
}

}  // namespace perfgate::lora
