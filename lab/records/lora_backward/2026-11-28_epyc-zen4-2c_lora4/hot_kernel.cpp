// hot-cache single-thread timing of lora_grads_dx_fused2 for one expert (m rows), GU3 and D4 shapes
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <random>
#include "fused_lora.hpp"
using namespace perfgate::lora_backward;
template <class T> T* al(std::size_t n) { return static_cast<T*>(aligned_alloc(64, ((n * sizeof(T) + 63) / 64) * 64 + 64)); }
int main(int argc, char** argv) {
  int m = argc > 1 ? atoi(argv[1]) : 8; int stream_off = argc > 2 ? atoi(argv[2]) : 4; long iters = argc > 3 ? atol(argv[3]) : 3000;
  std::mt19937 rng(1); std::uniform_real_distribution<float> d(-1, 1);
  auto rb = [&](std::size_t n) { bf16* p = al<bf16>(n); for (std::size_t i = 0; i < n; ++i) p[i] = to_bf16(d(rng)); return p; };
  for (int shape = 0; shape < 2; ++shape) {
    int in = shape == 0 ? 1024 : 512, out = shape == 0 ? 512 : 1024, n = shape == 0 ? 2 : 1;
    const bf16* x = rb(std::size_t(m) * in);
    LoraPassArgs a[2];
    for (int k = 0; k < n; ++k) {
      a[k].m = m; a[k].in = in; a[k].out = out; a[k].r = 16; a[k].s = 2.0f;
      a[k].dy = rb(std::size_t(m) * out); a[k].ldy = out; a[k].x = x; a[k].ldx = in; a[k].U = rb(std::size_t(m) * 16); a[k].ldu = 16;
      a[k].A = rb(16 * std::size_t(in)); a[k].B = rb(std::size_t(out) * 16);
      a[k].gA = al<float>(16 * std::size_t(in) + 16) + stream_off; a[k].gB = al<float>(std::size_t(out) * 16 + 16) + stream_off;
    }
    float* sink = al<float>(std::size_t(m) * in); for (std::size_t i = 0; i < std::size_t(m) * in; ++i) sink[i] = 0;
    bf16* gb = al<bf16>(2 * 16 * std::size_t(m));
    DxSink s{sink, in};
    for (int i = 0; i < 200; ++i) lora_grads_dx_fused2({a, std::size_t(n)}, gb, s);
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iters; ++i) lora_grads_dx_fused2({a, std::size_t(n)}, gb, s);
    double us = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters * 1e6;
    int P = (m + 1) / 2;
    double dots = n * (out * P + out * m / 2.0 + in * P + in * m / 2.0);
    printf("%s m=%d: %.2f us/call, %.0f dots, %.2f G dots/s\n", shape == 0 ? "GU3" : "D4 ", m, us, dots, dots / us / 1e3);
  }
}
