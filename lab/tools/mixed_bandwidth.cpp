// Memory bandwidth of a CPU runner for the LoRA phases' floor (lab/results/lora_backward-notebook.md): read only,
// streaming (non-temporal) writes only, plain writes, and a streaming copy (read and write at once), over THREADS
// threads (default 2) on 256 MiB buffers, best of 5.
//
//   g++ -O2 -mavx512f -pthread lab/tools/mixed_bandwidth.cpp -o /tmp/mixed_bandwidth && taskset -c 0,1
//   /tmp/mixed_bandwidth 2
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
int main(int argc, char** argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 2;
  const size_t n = (size_t(256) << 20) / sizeof(float);
  float* a = (float*)aligned_alloc(64, n * 4);
  float* b = (float*)aligned_alloc(64, n * 4);
  memset(a, 1, n * 4);
  memset(b, 1, n * 4);
  auto run = [&](int mode) {
    double best = 1e9;
    for (int rep = 0; rep < 5; ++rep) {
      std::vector<std::thread> ts;
      double t0 = now();
      for (int t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
          size_t lo = n / threads * t, hi = n / threads * (t + 1);
          __m512 acc = _mm512_setzero_ps(), v = _mm512_set1_ps(1.0f);
          if (mode == 0)
            for (size_t i = lo; i < hi; i += 16) acc = _mm512_add_ps(acc, _mm512_load_ps(a + i));
          if (mode == 1)
            for (size_t i = lo; i < hi; i += 16) _mm512_stream_ps(b + i, v);
          if (mode == 2)
            for (size_t i = lo; i < hi; i += 16) _mm512_store_ps(b + i, v);
          if (mode == 3)
            for (size_t i = lo; i < hi; i += 16) _mm512_stream_ps(b + i, _mm512_load_ps(a + i));
          if (mode == 0) {
            volatile float s = _mm512_reduce_add_ps(acc);
            (void)s;
          }
          _mm_sfence();
        });
      for (auto& t : ts) t.join();
      best = std::min(best, now() - t0);
    }
    double bytes = (mode == 3 ? 2.0 : 1.0) * n * 4;
    return bytes / best / 1e9;
  };
  printf("threads %d: read %.1f GB/s, NT write %.1f GB/s, write %.1f GB/s (RFO not counted), copy NT %.1f GB/s\n",
         threads, run(0), run(1), run(2), run(3));
}
