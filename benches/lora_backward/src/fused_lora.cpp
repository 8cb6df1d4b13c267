// Fused LoRA backward of one expert's projection: two passes instead of four GEMMs.
//   pass 1 (over the output features o): grad_B[o,:] = s * sum_t dy[t,o] U[t,:]  and  G_B[t,:] += dy[t,o] B[o,:]
//   pass 2 (over input features, 16 at a time): dx[t,i] += s * sum_q G_B[t,q] A[q,i]
//                                                grad_A[q,i] = s * sum_t G_B[t,q] x[t,i]
// dy is read once, the gradients are written once; with rank 16 a row of B / grad_B / U / G_B is one
// AVX-512 register. G_B is rounded to bf16 between the passes, like the other variants.
#include "fused_lora.hpp"

// GCC 12 reports a false maybe-uninitialized inside its own AVX-512 intrinsic headers (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

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

// rank 16, in % 16 == 0
__attribute__((target("avx512f"))) void lora_fused_avx512(const LoraPassArgs& a) {
  const int m = a.m, in = a.in, out = a.out;
  const __m512 s = _mm512_set1_ps(a.s);
  thread_local std::vector<float> gb;
  gb.assign(static_cast<std::size_t>(m) * 16, 0.0f);
  // pass 1
  for (int o = 0; o < out; ++o) {
    const __m512 b = load_bf16x16(a.B + static_cast<std::size_t>(o) * 16);
    __m512 acc = _mm512_setzero_ps();
    for (int t = 0; t < m; ++t) {
      const __m512 d = _mm512_set1_ps(to_float(a.dy[static_cast<std::size_t>(t) * a.ldy + o]));
      acc = _mm512_fmadd_ps(d, load_bf16x16(a.U + static_cast<std::size_t>(t) * a.ldu), acc);
      float* g = gb.data() + static_cast<std::size_t>(t) * 16;
      _mm512_storeu_ps(g, _mm512_fmadd_ps(d, b, _mm512_loadu_ps(g)));
    }
    _mm512_storeu_ps(a.gB + static_cast<std::size_t>(o) * 16, _mm512_mul_ps(s, acc));
  }
  // G_B rounded to bf16 (round to nearest even), kept as fp32 scalars for broadcasting
  std::vector<float>& g = gb;
  for (float& v : g) v = to_float(to_bf16(v));
  // pass 2
  for (int i0 = 0; i0 < in; i0 += 16) {
    __m512 av[16];
    for (int q = 0; q < 16; ++q) av[q] = load_bf16x16(a.A + static_cast<std::size_t>(q) * in + i0);
    __m512 ga[16];
    for (int q = 0; q < 16; ++q) ga[q] = _mm512_setzero_ps();
    for (int t = 0; t < m; ++t) {
      const __m512 xv = load_bf16x16(a.x + static_cast<std::size_t>(t) * a.ldx + i0);
      const float* gt = g.data() + static_cast<std::size_t>(t) * 16;
      __m512 acc = _mm512_setzero_ps();
      for (int q = 0; q < 16; ++q) {
        const __m512 gq = _mm512_set1_ps(gt[q]);
        acc = _mm512_fmadd_ps(gq, av[q], acc);
        ga[q] = _mm512_fmadd_ps(gq, xv, ga[q]);
      }
      float* d = a.dx + static_cast<std::size_t>(t) * a.lddx + i0;
      _mm512_storeu_ps(d, _mm512_fmadd_ps(s, acc, _mm512_loadu_ps(d)));
    }
    for (int q = 0; q < 16; ++q) _mm512_storeu_ps(a.gA + static_cast<std::size_t>(q) * in + i0, _mm512_mul_ps(s, ga[q]));
  }
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
