#include <immintrin.h>
#include <chrono>
#include <cstdio>
__attribute__((target("avx512f,avx512bf16"))) double dots(long n) {
  __m512 a[12]; for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(i);
  __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x3f803f81);
  auto t0 = std::chrono::steady_clock::now();
  for (long k = 0; k < n; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) { a[i] = _mm512_dpbf16_ps(a[i], x, y); asm volatile("" : "+v"(a[i])); }
  }
  double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  float s = 0; for (int i = 0; i < 12; ++i) s += a[i][0]; if (s == 1.2345f) std::puts("");
  return 12.0 * n / ns;
}
__attribute__((target("avx512f"))) double fmas(long n) {
  __m512 a[12]; for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(i);
  __m512 x = _mm512_set1_ps(1.0001f), y = _mm512_set1_ps(0.9999f);
  auto t0 = std::chrono::steady_clock::now();
  for (long k = 0; k < n; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) { a[i] = _mm512_fmadd_ps(a[i], x, y); asm volatile("" : "+v"(a[i])); }
  }
  double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  float s = 0; for (int i = 0; i < 12; ++i) s += a[i][0]; if (s == 1.2345f) std::puts("");
  return 12.0 * n / ns;
}
__attribute__((target("avx512f,avx512bf16"))) double chain(long n) {
  __m512 a = _mm512_set1_ps(1);
  __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x3f803f81);
  auto t0 = std::chrono::steady_clock::now();
  for (long k = 0; k < n; ++k) { a = _mm512_dpbf16_ps(a, x, y); asm volatile("" : "+v"(a)); }
  double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  if (a[0] == 1.2345f) std::puts("");
  return ns / n;
}
int main() {
  for (int r = 0; r < 3; ++r)
    std::printf("dpbf16ps zmm: %.2f /ns   fma zmm: %.2f /ns   dpbf16 latency: %.3f ns\n", dots(50000000), fmas(50000000), chain(50000000));
}
