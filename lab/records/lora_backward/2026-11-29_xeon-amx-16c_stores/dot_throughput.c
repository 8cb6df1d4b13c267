// Products per second of one core: vdpbf16ps (AVX-512 BF16, 32 multiply-adds an instruction) with independent
// accumulators, and AMX tdpbf16ps (16 x 16 x K multiply-adds a tile product) at K = 32 and K = 8.
// Build: gcc -O2 -mavx512f -mavx512bf16 -mamx-tile -mamx-bf16 -fopenmp dot_throughput.c -o dot_throughput
// Run: OMP_NUM_THREADS=1 taskset -c 2 ./dot_throughput   (AMX parts skipped where the CPU or the OS lacks AMX)
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
static double vdp(long iters) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_setzero_ps();
  __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x3f803f80);
  double t0 = now();
  for (long k = 0; k < iters; ++k)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbf16_ps(a[i], x, y);
  double dt = now() - t0;
  float s = 0;
  for (int i = 0; i < 12; ++i) s += _mm512_reduce_add_ps(a[i]);
  if (s == 1.0f) printf("?");
  return 12.0 * 32.0 * iters / dt;
}
struct Cfg {
  uint8_t palette, start;
  uint8_t pad[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
static double amx(long iters, int k) {
  struct Cfg c;
  memset(&c, 0, sizeof c);
  c.palette = 1;
  for (int t = 0; t < 4; ++t) c.rows[t] = 16, c.colsb[t] = 64;        // C tiles 0..3: 16 x 16 fp32
  c.rows[4] = 16, c.colsb[4] = (uint16_t)(2 * k);                     // A: 16 x K bf16
  c.rows[5] = (uint8_t)(k / 2), c.colsb[5] = 64;                      // B: K/2 x 16 pairs
  _tile_loadconfig(&c);
  static uint16_t buf[16 * 32] __attribute__((aligned(64)));
  for (int i = 0; i < 16 * 32; ++i) buf[i] = 0x3f80;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, buf, 64);
  _tile_loadd(5, buf, 64);
  double t0 = now();
  for (long i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 5);
    _tile_dpbf16ps(1, 4, 5);
    _tile_dpbf16ps(2, 4, 5);
    _tile_dpbf16ps(3, 4, 5);
  }
  double dt = now() - t0;
  static float out[256] __attribute__((aligned(64)));
  _tile_stored(0, out, 64);
  _tile_release();
  if (out[0] == 1.0f) printf("?");
  return 4.0 * 16 * 16 * k * iters / dt;
}
int main(void) {
  int amx_ok = __builtin_cpu_supports("amx-bf16") && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#pragma omp parallel
  {
    double v = vdp(20000000);
    double a32 = amx_ok ? amx(2000000, 32) : 0, a8 = amx_ok ? amx(2000000, 8) : 0;
#pragma omp critical
    printf("thread %d: vdpbf16ps %.1f GMAC/s; AMX K=32 %.1f GMAC/s, K=8 %.1f GMAC/s%s\n", omp_get_thread_num(),
           v / 1e9, a32 / 1e9, a8 / 1e9, amx_ok ? "" : " (no AMX)");
  }
  return 0;
}
