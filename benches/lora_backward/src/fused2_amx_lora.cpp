// `fused2` LoRA backward with its products on AMX tiles, where the CPU has AMX: the passes, the order of
// the work, the bf16 rounding of G_B, the streaming stores and the prefetching of fused2_lora.cpp, with every
// product a tdpbf16ps instead of vdpbf16ps. On a Xeon with AMX a core's vdpbf16ps rate is far below a Zen 4
// core's, and there the products kept fused2 from its memory traffic's pace; a tile product does 16 x 16 x K
// multiply-adds at once.
// The four products of one expert (m <= 16 rows, rank 16), as tile products C += A B (B in pairs of K rows):
//   G_B    (m x 16)  = dy (m x out) B           A: dy rows, K = 32 outputs a step; B: B's row pairs
//   grad_B (16 x 16) = dy^T U, 16 outputs a step A: dy^T (pairs of rows, transposed); B: U's row pairs; K = m
//   grad_A (16 x 16) = G_B^T x, 16 inputs a step A: G_B^T (pairs of rows);           B: x's row pairs; K = m
//   dx     (m x 16)  = [G_B_gate G_B_up] [A_gate; A_up], 16 inputs a step; K = 32 (the up half zero for down)
// A tile product's result goes through a small buffer in L1 to the streaming stores (there is no streaming
// tile store), rounded to bf16 on the way where the passes ask for bf16 gradients. Falls back to fused2_lora.cpp
// where AMX or the shapes do not allow it.
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>

#if defined(__linux__) && defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

// GCC 12 reports false (maybe-)uninitialized warnings inside its own AVX-512 intrinsic headers
// (_mm512_undefined_epi32, GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "fused2_kernels.hpp"
#include "fused_lora.hpp"
#include "vector_state.hpp"

namespace perfgate::lora_backward {

#if PERFGATE_LORA2_X86 && defined(__linux__)
namespace {
using namespace fused2_detail;  // the kernels' shared pieces (fused2_kernels.hpp)

#define PERFGATE_LORA2_AMX __attribute__((target("avx512f,avx512bf16,amx-tile,amx-bf16")))

// The CPU has AMX bf16 and Linux lets this process use the tile registers (asked once; oneDNN asks too).
bool amx_usable() {
  static const bool usable = [] {
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // CPUID leaf 7: EDX bit 22 AMX-BF16, bit 24 AMX-TILE
    const bool cpu = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (edx >> 22 & 1u) && (edx >> 24 & 1u);
    return cpu && syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
}

// ldtilecfg's 64-byte operand, palette 1.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::array<std::uint8_t, 14> reserved{};
  std::array<std::uint16_t, 16> colsb{};
  std::array<std::uint8_t, 16> rows{};
};

// The tiles of one expert of m rows, P = (m + 1) / 2 row pairs (the tile numbers are literals in the code):
//   0: G_B (m x 16 fp32)    1: dy, 32 outputs (m x 32 bf16)          2: pairs of B or A rows (16 x 16 pairs)
//   3: grad_B / grad_A block (16 x 16 fp32)  4: dy^T or G_B^T pairs (16 x P pairs)  5: U or x pairs (P x 16)
//   6: dx block (m x 16 fp32)  7: [G_B_gate G_B_up] (m x 32 bf16)
PERFGATE_LORA2_AMX void configure_tiles(int m) {
  const auto rows = static_cast<std::uint8_t>(m), pairs = static_cast<std::uint8_t>((m + 1) / 2);
  TileConfig c;
  c.rows = {rows, rows, 16, 16, 16, pairs, rows, rows};
  c.colsb = {64, 64, 64, 64, static_cast<std::uint16_t>(4 * pairs), 64, 64, 64};
  _tile_loadconfig(&c);
}

// Per-thread buffers in L1 between the tile products and the vector code.
struct AmxScratch {
  alignas(64) std::uint32_t wide[16][16];   // tile 2's pairs
  alignas(64) std::uint32_t narrow[8][16];  // tile 5's pairs (U)
  alignas(64) std::uint32_t dyt[16][8];     // tile 4's dy^T pairs
  alignas(64) float block[16][16];          // tile 3's or tile 6's result
  alignas(64) float gb[kRows][16];          // tile 0's G_B
  alignas(64) bf16 gcat[kRows][32];         // tile 7's rows
  alignas(64) std::uint32_t gbt[32][8];     // tile 4's G_B^T pairs, pass k's at rows 16 k
  alignas(64) float out[32][16 * 8];        // grad_A of a tile of 8 blocks, pass k's rows at 16 k
};
AmxScratch& scratch() {
  thread_local AmxScratch s;
  return s;
}

// dy^T pairs of the 16 outputs from o0, from dy packed as dyp[p][o] (P rows of w): dyt[o][p] = dyp[p][o0 + o].
PERFGATE_LORA2_AMX inline void dy_transposed(const std::uint32_t* dyp, std::size_t w, int P, int o0,
                                             std::uint32_t (*dyt)[8]) {
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i p = _mm512_and_si512(lane, _mm512_set1_epi32(7));
  const __m512i base =
      _mm512_add_epi32(_mm512_mullo_epi32(p, _mm512_set1_epi32(static_cast<int>(w))), _mm512_srli_epi32(lane, 3));
  const __mmask16 valid = static_cast<__mmask16>(((1u << P) - 1u) * 0x0101u);
  for (int j = 0; j < 8; ++j) {  // rows 2j and 2j + 1 of dyt
    const __m512i idx = _mm512_add_epi32(base, _mm512_set1_epi32(o0 + 2 * j));
    const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, idx, dyp, 4);
    _mm512_store_si512(dyt[2 * j], v);
  }
}

// s * the 16 x 16 block into 16 rows of dst (float or bf16), ld elements apart, streamed or stored.
template <typename G>
PERFGATE_LORA2_AMX inline void put_block(const float (*block)[16], G* dst, std::size_t ld, __m512 s, bool stream) {
  for (int q = 0; q < 16; ++q) put(dst + static_cast<std::size_t>(q) * ld, s, _mm512_load_ps(block[q]), true, stream);
}

// Pass 1 of one pass (m <= 16 rows, out % 32 == 0): grad_B, and G_B rounded to bf16 into gbh ([m][16]).
PERFGATE_LORA2_AMX void pass1_amx(const LoraPassArgs& a, bf16* gbh, LinePrefetcher& lines) {
  AmxScratch& sc = scratch();
  thread_local Packed pk;
  const int m = a.m, P = (m + 1) / 2;
  const std::size_t w = static_cast<std::size_t>(a.out);
  std::uint32_t* dyp = pk.get(static_cast<std::size_t>(P) * w);
  pair_pack(a.dy, static_cast<std::size_t>(a.ldy), m, 0, a.out, dyp);
  for (int p = 0; p < P; ++p) {
    const bf16* r0 = a.U + static_cast<std::size_t>(2 * p) * a.ldu;
    _mm512_store_si512(sc.narrow[p], pair16(r0, 2 * p + 1 < m ? r0 + a.ldu : nullptr));
  }
  _tile_loadd(5, sc.narrow, 64);
  _tile_zero(0);
  const __m512 s = _mm512_set1_ps(a.s);
  const bool stream = streams(m, a.gB16 != nullptr ? static_cast<const void*>(a.gB16) : a.gB);
  for (int o0 = 0; o0 < a.out; o0 += 32) {
    for (int p = 0; p < 16; ++p) {
      const bf16* b0 = a.B + static_cast<std::size_t>(o0 + 2 * p) * 16;
      _mm512_store_si512(sc.wide[p], pair16(b0, b0 + 16));
    }
    _tile_loadd(2, sc.wide, 64);
    _tile_loadd(1, a.dy + o0, static_cast<long>(a.ldy) * 2);
    _tile_dpbf16ps(0, 1, 2);
    for (int h = 0; h < 32; h += 16) {
      dy_transposed(dyp, w, P, o0 + h, sc.dyt);
      _tile_loadd(4, sc.dyt, 32);
      _tile_zero(3);
      _tile_dpbf16ps(3, 4, 5);
      _tile_stored(3, sc.block, 64);
      const std::size_t at = static_cast<std::size_t>(o0 + h) * 16;
      if (a.gB16 != nullptr) put_block(sc.block, a.gB16 + at, 16, s, stream);
      else put_block(sc.block, a.gB + at, 16, s, stream);
    }
    for (int k = 0; k < 16; ++k) lines.step();
  }
  _tile_stored(0, sc.gb, 64);
  for (int t = 0; t < m; ++t)
    for (int q = 0; q < 16; ++q) gbh[t * 16 + q] = to_bf16(sc.gb[t][q]);
}

// Tile 7's rows ([G_B_gate G_B_up], the up half zero for one pass) and tile 4's G_B^T pairs of every pass.
PERFGATE_LORA2_AMX void gb_operands(std::span<const LoraPassArgs> passes, const bf16* gbh, AmxScratch& sc) {
  const int m = passes.front().m;
  const std::size_t per_pass = static_cast<std::size_t>(m) * 16;
  for (int t = 0; t < m; ++t)
    for (int c = 0; c < 32; ++c)
      sc.gcat[t][c] = static_cast<std::size_t>(c / 16) < passes.size()
                          ? gbh[static_cast<std::size_t>(c / 16) * per_pass + static_cast<std::size_t>(t) * 16 + c % 16]
                          : bf16{};
  gb_row_pairs(passes.size(), gbh, m, &sc.gbt[0][0], 8);
}

// Tile 2's pairs of A rows for the 16 inputs from c: rows 0-7 gate's (or down's) A, rows 8-15 up's, or zero.
PERFGATE_LORA2_AMX inline void a_pairs_tile(std::span<const LoraPassArgs> passes, int c, AmxScratch& sc) {
  const std::size_t in = static_cast<std::size_t>(passes.front().in);
  for (std::size_t k = 0; k < 2; ++k)
    for (int p = 0; p < 8; ++p) {
      std::uint32_t* dst = sc.wide[8 * k + static_cast<std::size_t>(p)];
      if (k >= passes.size()) {
        _mm512_store_si512(dst, _mm512_setzero_si512());
        continue;
      }
      const bf16* r0 = passes[k].A + static_cast<std::size_t>(2 * p) * in + c;
      _mm512_store_si512(dst, pair16(r0, r0 + in));
    }
}

// The input gradient of the 16 inputs from c: s dx block added to the sink rows (with their base rows).
PERFGATE_LORA2_AMX void dx_block_amx(std::span<const LoraPassArgs> passes, const DxSink& sink, int c, AmxScratch& sc) {
  a_pairs_tile(passes, c, sc);
  _tile_loadd(2, sc.wide, 64);
  _tile_zero(6);
  _tile_dpbf16ps(6, 7, 2);
  _tile_stored(6, sc.block, 64);
  const __m512 s = _mm512_set1_ps(passes.front().s);
  for (int t = 0; t < passes.front().m; ++t) {
    float* o = sink_out(sink, t, c);
    const float* base = sink_base(sink, t, c);
    add_to_sink(o, base, s, _mm512_load_ps(sc.block[t]));
  }
}

// grad_A of every pass over the `blocks` 16-input blocks from i0 into sc.out, from x pairs packed as xp.
PERFGATE_LORA2_AMX void grad_a_tile(std::size_t npasses, const std::uint32_t* xp, int blocks, AmxScratch& sc) {
  const long xstride = 16L * blocks * 4;
  for (int b = 0; b < blocks; ++b) {
    _tile_loadd(5, xp + 16 * b, xstride);
    for (std::size_t k = 0; k < npasses; ++k) {
      _tile_loadd(4, sc.gbt[16 * k], 32);
      _tile_zero(3);
      _tile_dpbf16ps(3, 4, 5);
      _tile_stored(3, &sc.out[16 * k][16 * b], static_cast<long>(sizeof sc.out[0]));
    }
  }
}

// grad_A rows [q0, q1) of the tile (of all passes' 16 N rows) streamed out as G (float or bf16), s applied, as
// runs of adjacent lines.
template <typename G>
PERFGATE_LORA2_AMX void put_grad_a_rows(std::span<const LoraPassArgs> passes, const AmxScratch& sc, int q0, int q1,
                                        int i0, int blocks, bool stream) {
  const __m512 s = _mm512_set1_ps(passes.front().s);
  for (int q = q0; q < q1; ++q) {
    G* row = grad_a_dst<G>(passes[static_cast<std::size_t>(q / 16)]) +
             static_cast<std::size_t>(q % 16) * passes.front().in + i0;
    for (int b = 0; b < blocks; ++b) put(row + 16 * b, s, _mm512_load_ps(&sc.out[q][16 * b]), true, stream);
  }
}

constexpr int kAmxTileBlocks = 8;  // 16-input blocks of grad_A written together, as fused2_lora.cpp's kTileBlocks

// grad_A and the input gradient of one expert, tiles of kAmxTileBlocks blocks: each block's input gradient
// followed by its share of the tile's grad_A rows, so that the streaming stores leave at an even pace.
PERFGATE_LORA2_AMX void grad_a_dx_amx(std::span<const LoraPassArgs> passes, const bf16* gbh, const DxSink& sink,
                                      LinePrefetcher& lines) {
  AmxScratch& sc = scratch();
  thread_local Packed pk;
  const LoraPassArgs& f = passes.front();
  const int m = f.m, P = (m + 1) / 2, Q = 16 * static_cast<int>(passes.size());
  gb_operands(passes, gbh, sc);
  _tile_loadd(7, sc.gcat, 64);
  const bool bf16_out = bf16_grads(passes);
  bool stream = true;
  for (const LoraPassArgs& a : passes)
    stream = stream && streams(m, bf16_out ? static_cast<const void*>(a.gA16) : a.gA);
  std::uint32_t* xp = pk.get(static_cast<std::size_t>(P) * 16 * kAmxTileBlocks);
  for (int i0 = 0; i0 < f.in; i0 += 16 * kAmxTileBlocks) {
    const int blocks = std::min(kAmxTileBlocks, (f.in - i0) / 16);
    pair_pack(f.x, static_cast<std::size_t>(f.ldx), m, i0, i0 + 16 * blocks, xp);
    grad_a_tile(passes.size(), xp, blocks, sc);
    for (int b = 0; b < blocks; ++b) {
      dx_block_amx(passes, sink, i0 + 16 * b, sc);
      const int q0 = Q * b / blocks, q1 = Q * (b + 1) / blocks;
      if (bf16_out) put_grad_a_rows<bf16>(passes, sc, q0, q1, i0, blocks, stream);
      else put_grad_a_rows<float>(passes, sc, q0, q1, i0, blocks, stream);
      lines.step();
    }
  }
}

// The AMX path applies: fused2's vector path, at most 16 rows, whole 32-output steps, AMX usable.
bool amx_path(std::span<const LoraPassArgs> passes) {
  return vector_path(passes) && passes.front().m <= kRows &&
         std::all_of(passes.begin(), passes.end(), [](const LoraPassArgs& a) { return a.out % 32 == 0; }) &&
         amx_usable();
}

// Both passes of one expert on the tiles: pass 1 of every pass (prefetching what grad_A and the input gradient
// read), then grad_A with the input gradient (prefetching the next expert's inputs); the tiles released after.
PERFGATE_LORA2_AMX void run_amx(std::span<const LoraPassArgs> passes, bf16* gb, const DxSink& sink,
                                std::span<const LoraPassArgs> next, bool prefetch) {
  LinePrefetcher pf = prefetch ? sink_lines(passes, sink) : LinePrefetcher{};
  configure_tiles(passes.front().m);
  const std::size_t per_pass = static_cast<std::size_t>(passes.front().m) * 16;
  for (std::size_t k = 0; k < passes.size(); ++k) pass1_amx(passes[k], gb + k * per_pass, pf);
  LinePrefetcher after = prefetch ? input_lines(next, passes.front().in) : LinePrefetcher{};
  grad_a_dx_amx(passes, gb, sink, after);
  _tile_release();  // oneDNN configures the tiles for itself before its own kernels
  _mm_sfence();     // order the streaming stores before the phase's barrier
}

}  // namespace
#endif

bool lora_fused2_amx_usable() {
#if PERFGATE_LORA2_X86 && defined(__linux__)
  return amx_usable();
#else
  return false;
#endif
}

namespace {
void grads_dx_amx(std::span<const LoraPassArgs> passes, bf16* gb, const DxSink& sink,
                  std::span<const LoraPassArgs> next, bool prefetch) {
#if PERFGATE_LORA2_X86 && defined(__linux__)
  if (amx_path(passes)) {
    run_amx(passes, gb, sink, next, prefetch);
    return clean_upper_vector_state();  // the SSE code after these kernels (vector_state.hpp)
  }
#endif
  (void)prefetch;
  lora_grads_dx_fused2(passes, gb, sink, next);
}
}  // namespace

void lora_grads_dx_fused2_amx(std::span<const LoraPassArgs> passes, bf16* gb, const DxSink& sink,
                              std::span<const LoraPassArgs> next) {
  grads_dx_amx(passes, gb, sink, next, true);
}
void lora_grads_dx_fused2_amx_unprefetched(std::span<const LoraPassArgs> passes, bf16* gb, const DxSink& sink,
                                           std::span<const LoraPassArgs> next) {
  grads_dx_amx(passes, gb, sink, next, false);
}

}  // namespace perfgate::lora_backward
