// Probe: fused2's per-expert kernel (GU3: gate+up, then D4: down) timed on one expert held in cache (hot) and
// cycling through 64 experts' own buffers (cold), fp32 and bf16 gradients, one thread.
#include <atomic>
#include <algorithm>
#include <omp.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include "fused_lora.hpp"  // benches/lora_backward/src
using namespace perfgate::lora_backward;
template <class T> T* al(size_t n) { void* p = std::aligned_alloc(64, ((n * sizeof(T) + 63) / 64) * 64); std::memset(p, 0, n*sizeof(T)); return (T*)p; }
struct Expert {
  LoraPassArgs gu[2], d;
  float* sink_gu; float* sink_d; bf16 gb_gu[2 * 16 * 16]; bf16 gb_d[16 * 16];
};
static bf16* rnd(size_t n, std::mt19937& g) { bf16* p = al<bf16>(n); std::uniform_int_distribution<int> u(0, 255); for (size_t i = 0; i < n; ++i) { float f = (u(g) - 128) / 512.0f; uint32_t b; std::memcpy(&b, &f, 4); p[i] = bf16(b >> 16);} return p; }
LoraPassArgs pass(int m, int in, int out, const bf16* x, std::mt19937& g, bool b16) {
  LoraPassArgs a; a.m = m; a.in = in; a.out = out; a.r = 16; a.s = 2.0f;
  a.dy = rnd((size_t)m * out, g); a.ldy = out; a.x = x; a.ldx = in; a.U = rnd((size_t)m * 16, g); a.ldu = 16;
  a.A = rnd(16 * (size_t)in, g); a.B = rnd((size_t)out * 16, g);
  a.gA = al<float>(16 * (size_t)in); a.gB = al<float>((size_t)out * 16);
  if (b16) { a.gA16 = al<bf16>(16 * (size_t)in); a.gB16 = al<bf16>((size_t)out * 16); }
  return a;
}
int main(int argc, char** argv) {
  const int m0 = argc > 1 ? atoi(argv[1]) : 8; const int m = m0; const bool b16 = argc > 2 && atoi(argv[2]); const int nexp = argc > 3 ? atoi(argv[3]) : 1;
  const int H = 1024, I = 512, iters = argc > 4 ? atoi(argv[4]) : 4000;
  std::mt19937 g(7); std::vector<Expert> ex(nexp);
  static const int kLayerRows[64] = {15, 14, 13, 12, 12, 12, 11, 11, 10, 10, 10, 10, 10, 10, 10, 10, 9, 9, 9, 9, 9, 9, 9, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 5, 5, 5, 4, 4, 3, 2};
  const bool layer_rows = std::getenv("LAYER_ROWS") != nullptr;
  int idx = 0;
  for (auto& e : ex) {
    const int m = layer_rows ? kLayerRows[idx++ % 64] : m0;
    const bf16* x = rnd((size_t)m * H, g); const bf16* act = rnd((size_t)m * I, g);
    e.gu[0] = pass(m, H, I, x, g, b16); e.gu[1] = pass(m, H, I, x, g, b16); e.d = pass(m, I, H, act, g, b16);
    e.sink_gu = al<float>((size_t)m * H); e.sink_d = al<float>((size_t)m * I);
  }
  const bool only_pass1 = std::getenv("ONLY_PASS1") != nullptr;
  auto run = [&](Expert& e, Expert* nx) {
    if (only_pass1) { lora_pass1_fused2(std::span<const LoraPassArgs>(e.gu, 2), e.gb_gu); lora_pass1_fused2(std::span<const LoraPassArgs>(&e.d, 1), e.gb_d); return; }
    DxSink s1{e.sink_gu, H, nullptr, nullptr, 0}; DxSink s2{e.sink_d, I, nullptr, nullptr, 0};
    static const bool only_down = std::getenv("ONLY_DOWN") != nullptr, only_gu = std::getenv("ONLY_GU") != nullptr;
    if (only_down) return lora_grads_dx_fused2(std::span<const LoraPassArgs>(&e.d, 1), e.gb_d, s2, nx ? std::span<const LoraPassArgs>(&nx->d, 1) : std::span<const LoraPassArgs>());
    if (only_gu) return lora_grads_dx_fused2(std::span<const LoraPassArgs>(e.gu, 2), e.gb_gu, s1, nx ? std::span<const LoraPassArgs>(nx->gu, 2) : std::span<const LoraPassArgs>());
    lora_grads_dx_fused2(std::span<const LoraPassArgs>(e.gu, 2), e.gb_gu, s1, std::span<const LoraPassArgs>(&e.d, 1));
    lora_grads_dx_fused2(std::span<const LoraPassArgs>(&e.d, 1), e.gb_d, s2, nx ? std::span<const LoraPassArgs>(nx->gu, 2) : std::span<const LoraPassArgs>());
  };
  if (std::getenv("ROUNDS")) {  // the layer's schedule: every expert once a round, dynamically over the threads
    const int rounds = atoi(std::getenv("ROUNDS"));
    double best = 1e30, sum = 0;
    for (int r = 0; r < rounds; ++r) {
      std::atomic<int> counter{0};
      static std::vector<int> order = [&] { std::vector<int> o(nexp); for (int i = 0; i < nexp; ++i) o[i] = i; return o; }();
      if (std::getenv("SHUFFLE")) std::shuffle(order.begin(), order.end(), g);
      auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel
      {
        int cur = counter.fetch_add(1);
        while (cur < nexp) { const int nx = counter.fetch_add(1); run(ex[order[cur]], nx < nexp ? &ex[order[nx]] : nullptr); cur = nx; }
      }
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (r > 2) { sum += us; best = std::min(best, us); }
    }
    std::printf("m=%d grads=%s experts=%d threads=%d: round %.1f us mean, %.1f best\n", m, b16 ? "bf16" : "fp32", nexp, omp_get_max_threads(), sum / (rounds - 3), best);
    return 0;
  }
  for (int i = 0; i < 200; ++i) run(ex[i % nexp], &ex[(i + 1) % nexp]);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) run(ex[i % nexp], &ex[(i + 1) % nexp]);
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  std::printf("m=%d grads=%s experts=%d: %.2f us per expert (GU3+D4)\n", m, b16 ? "bf16" : "fp32", nexp, us);
}
