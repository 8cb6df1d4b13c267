// Write and copy bandwidth of AVX-512 stores, streaming and ordinary, over regions of the LoRA gradients' size
// cycled through eight so that nothing stays cached. No clzero (an AMD instruction): this one runs on Intel too.
// Build: gcc -O2 -mavx512f -fopenmp write_bandwidth.c -o write_bandwidth; run: OMP_NUM_THREADS=2 taskset -c 2,3 ./write_bandwidth 19
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
static const char* kNames[] = {"streaming write", "ordinary write", "streaming copy (read+write)",
                               "ordinary copy (read+write)", "read only"};
int main(int argc, char** argv) {
  size_t mb = argc > 1 ? atol(argv[1]) : 19, n = mb * 1024 * 1024 / 4;
  float* buf = aligned_alloc(64, n * 4 * 8);
  float* src = aligned_alloc(64, n * 4 * 8);
  memset(buf, 1, n * 4 * 8);
  memset(src, 2, n * 4 * 8);
  volatile float sink = 0;
  for (int mode = 0; mode < 5; ++mode) {
    double best = 1e9;
    for (int rep = 0; rep < 40; ++rep) {
      float* b = buf + (rep % 8) * n;
      const float* s = src + (rep % 8) * n;
      double t0 = now();
#pragma omp parallel
      {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        size_t lo = n * t / T / 16 * 16, hi = n * (t + 1) / T / 16 * 16;
        __m512 v = _mm512_set1_ps(1.5f), acc = _mm512_setzero_ps();
        if (mode == 0) for (size_t i = lo; i < hi; i += 16) _mm512_stream_ps(b + i, v);
        if (mode == 1) for (size_t i = lo; i < hi; i += 16) _mm512_store_ps(b + i, v);
        if (mode == 2) for (size_t i = lo; i < hi; i += 16) _mm512_stream_ps(b + i, _mm512_load_ps(s + i));
        if (mode == 3) for (size_t i = lo; i < hi; i += 16) _mm512_store_ps(b + i, _mm512_load_ps(s + i));
        if (mode == 4) for (size_t i = lo; i < hi; i += 16) acc = _mm512_add_ps(acc, _mm512_load_ps(s + i));
        if (mode == 4) sink += _mm512_reduce_add_ps(acc);
      }
      _mm_sfence();
      double dt = now() - t0;
      if (dt < best) best = dt;
    }
    double bytes = (mode == 2 || mode == 3 ? 2.0 : 1.0) * n * 4;
    printf("%s: %.1f GB/s (%zu MB in %.3f ms, best of 40)\n", kNames[mode], bytes / best / 1e9, mb, best * 1e3);
  }
  return 0;
}
