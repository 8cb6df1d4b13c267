// Read bandwidth of one or more cores for the access patterns of the fused2 LoRA kernels
// (lab/results/lora_backward-notebook.md, round 4): whether a core reads faster through the hardware
// prefetchers or through software prefetches, and what 4 KiB pages visited out of order cost. THREADS threads
// (default 2; a second argument 1 asks for transparent huge pages), each over its own part of a 256 MiB buffer, best of
// 5 passes, GB/s of bytes read.
//   seq        plain 64-byte loads front to back (hardware prefetch only)
//   seq+pf D   the same with prefetcht1 D lines ahead
//   pages      whole 4 KiB pages in a shuffled order, plain loads
//   pages+pf   the same, every line of the next page prefetched (prefetcht1) while this page is read
//   16 rows    16 rows 2 KiB apart read 64 bytes at a time across the rows (the input-gradient pass's A)
//
//   g++ -O2 -mavx512f -pthread lab/tools/read_patterns.cpp -o /tmp/read_patterns && taskset -c 0,1
//   /tmp/read_patterns 2
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

constexpr std::size_t kLine = 64, kPage = 4096, kLinesPerPage = kPage / kLine;

// One thread's reads of [lo, hi) (bytes, page aligned) in `mode`; the sum keeps the loads alive.
float read_part(const char* a, std::size_t lo, std::size_t hi, int mode, int dist,
                const std::vector<std::size_t>& order) {
  __m512 acc = _mm512_setzero_ps();
  auto load = [&](std::size_t off) {
    acc = _mm512_add_ps(acc, _mm512_load_ps(reinterpret_cast<const float*>(a + off)));
  };
  if (mode == 0)
    for (std::size_t i = lo; i < hi; i += kLine) load(i);
  if (mode == 1)
    for (std::size_t i = lo; i < hi; i += kLine) {
      if (i + dist * kLine < hi) _mm_prefetch(a + i + dist * kLine, _MM_HINT_T1);
      load(i);
    }
  if (mode == 2 || mode == 3) {
    const std::size_t pages = (hi - lo) / kPage;
    for (std::size_t p = 0; p < pages; ++p) {
      const std::size_t base = lo + order[p % order.size()] % pages * kPage;
      const std::size_t next = lo + order[(p + 1) % order.size()] % pages * kPage;
      for (std::size_t l = 0; l < kLinesPerPage; ++l) {
        if (mode == 3) _mm_prefetch(a + next + l * kLine, _MM_HINT_T1);
        load(base + l * kLine);
      }
    }
  }
  if (mode == 4) {  // blocks of 16 rows x 2 KiB, read column block by column block
    constexpr std::size_t kRow = 2048, kBlock = 16 * kRow;
    for (std::size_t b = lo; b + kBlock <= hi; b += kBlock)
      for (std::size_t c = 0; c < kRow; c += kLine)
        for (std::size_t r = 0; r < 16; ++r) load(b + r * kRow + c);
  }
  alignas(64) float out[16];
  _mm512_store_ps(out, acc);
  return out[0];
}
}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const std::size_t bytes = std::size_t(256) << 20;
  char* a = static_cast<char*>(std::aligned_alloc(kPage, bytes));
  if (argc > 2 && std::atoi(argv[2]) == 1) madvise(a, bytes, MADV_HUGEPAGE);  // 2 MiB pages where THP allows
  std::memset(a, 1, bytes);
  std::vector<std::size_t> order(bytes / kPage / threads);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  volatile float sink = 0;
  auto run = [&](int mode, int dist) {
    double best = 1e9;
    for (int rep = 0; rep < 5; ++rep) {
      std::vector<std::thread> ts;
      const double t0 = now();
      for (int t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
          const std::size_t part = bytes / threads / kPage * kPage;
          sink = sink + read_part(a, part * t, part * (t + 1), mode, dist, order);
        });
      for (auto& th : ts) th.join();
      best = std::min(best, now() - t0);
    }
    return bytes / best / 1e9;
  };
  std::printf(
      "threads %d, huge %d: seq %.1f | seq+pf 8 %.1f | seq+pf 32 %.1f | pages %.1f | pages+pf %.1f | 16 rows %.1f "
      "GB/s\n",
      threads, argc > 2 ? std::atoi(argv[2]) : 0, run(0, 0), run(1, 8), run(1, 32), run(2, 0), run(3, 0), run(4, 0));
}
