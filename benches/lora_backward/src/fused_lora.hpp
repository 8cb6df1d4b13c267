#pragma once
// Fused LoRA backward of one expert's projections (see fused_lora.cpp).
#include <cstddef>
#include <span>

#include "perfgate/lora_backward/moe_lora.hpp"

namespace perfgate::lora_backward {

struct LoraPassArgs {
  int m = 0, in = 0, out = 0, r = 0;
  float s = 1.0f;
  const bf16* dy = nullptr;
  int ldy = 0;  // [m][out] gradient of the projection output
  const bf16* x = nullptr;
  int ldx = 0;  // [m][in]  projection input
  const bf16* U = nullptr;
  int ldu = 0;              // [m][r]   x A^T from the forward
  const bf16* A = nullptr;  // [r][in]
  const bf16* B = nullptr;  // [out][r]
  float* gA = nullptr;      // [r][in]  written
  float* gB = nullptr;      // [out][r] written
  // bf16 gradients (a config with bf16_grads): where set, the result goes here, rounded once from fp32. Only
  // lora_grads_dx_fused2 and lora_grads_dx_fused2_amx store them; every other kernel writes gA and gB alone,
  // and its caller rounds them (LoraGrads::round_experts).
  bf16* gA16 = nullptr;  // [r][in]
  bf16* gB16 = nullptr;  // [out][r]
};

// The passes with their bf16 gradient pointers cleared (what the fp32-only kernels are given), and the fp32
// gradients of the passes rounded into their bf16 ones (nothing where a pass has none).
LoraPassArgs fp32_grads_only(LoraPassArgs a);
void round_grads_to_bf16(std::span<const LoraPassArgs> passes);

// Where the input-gradient pass adds its result: for each row t of the expert and column c,
//   out[row(t)][c] += s (G_B A)[t][c] + base[t][c]   (base term only when base != nullptr),
// row(t) = rows[t], or t when rows == nullptr. With base = the rows' base-GEMM gradient and rows =
// their tokens, it adds the expert's rows straight into grad_input (no fp32 row buffer written and
// read back); with out = that row buffer and neither, it updates it in place.
struct DxSink {
  float* out = nullptr;
  int ldo = 0;
  const int* rows = nullptr;
  const float* base = nullptr;
  int ldb = 0;
};

// The gradient pass of one or two projections of one expert that share m, in and s (gate and up):
// grad_B, grad_A, and G_B = dy B rounded to bf16 into gb ([passes][m][r]). m == 0 writes zero gradients.
void lora_grads_fused(std::span<const LoraPassArgs> passes, bf16* gb);
// The input-gradient pass over columns [c0, c1) of `in`, summed over the passes: s G_B A into `sink`.
// Column ranges of one expert are independent, so threads may split them.
void lora_dx_fused(std::span<const LoraPassArgs> passes, const bf16* gb, const DxSink& sink, int c0, int c1);
// The same two passes with every operand walked front to back, one or two rows at a time (fused2_lora.cpp):
// the `fused2` variant. Same arguments and results (to rounding order); the passes of lora_grads_fused2 must
// share x (gate and up do). Falls back to the functions above where the vector path does not apply.
void lora_grads_fused2(std::span<const LoraPassArgs> passes, bf16* gb);
void lora_dx_fused2(std::span<const LoraPassArgs> passes, const bf16* gb, const DxSink& sink, int c0, int c1);
// Both fused2 passes of one expert over all of `in`, grad_A and the input gradient 16 columns at a time side
// by side: the gradient pass, then the input gradient into sink. `next`: the passes of the expert this thread
// runs next (empty: none), whose inputs are prefetched while this one streams its gradients out.
void lora_grads_dx_fused2(std::span<const LoraPassArgs> passes, bf16* gb, const DxSink& sink,
                          std::span<const LoraPassArgs> next = {});
// lora_grads_dx_fused2 with every product on AMX tiles (fused2_amx_lora.cpp; what `fused2` runs): same arguments
// and results (to rounding order). Falls back to lora_grads_dx_fused2 where the CPU has no AMX, Linux
// does not grant the tile registers, or an expert has more than 16 rows.
void lora_grads_dx_fused2_amx(std::span<const LoraPassArgs> passes, bf16* gb, const DxSink& sink,
                              std::span<const LoraPassArgs> next = {});
// The same without the software prefetches of the lines the next steps read (PERFGATE_LORA_FUSED2_AMX_NO_PREFETCH=1,
// experiment knob): the hardware prefetchers alone.
void lora_grads_dx_fused2_amx_unprefetched(std::span<const LoraPassArgs> passes, bf16* gb, const DxSink& sink,
                                           std::span<const LoraPassArgs> next = {});
// Whether this CPU and OS give lora_grads_dx_fused2_amx its AMX path.
bool lora_fused2_amx_usable();
// fused2 split by columns (PERFGATE_LORA_FUSED2_SPLIT=1, an experiment): pass 1 alone (grad_B, G_B), then
// grad_A and the input gradient together over a column range, so a thread that owns columns [c0, c1) reads A
// and writes grad_A in one sweep. Only where lora_split_fused2 says the vector path applies (else they throw).
bool lora_split_fused2(std::span<const LoraPassArgs> passes);
void lora_pass1_fused2(std::span<const LoraPassArgs> passes, bf16* gb);
void lora_grad_a_dx_fused2(std::span<const LoraPassArgs> passes, const bf16* gb, const DxSink& sink, int c0, int c1);
// fused2 sliced (PERFGATE_LORA_FUSED2_SLICED=1, an experiment): every thread takes a slice of the features of every
// expert, so both threads carry equal shares of the read and the streaming-write traffic at once. Stage 1, output
// features [o0, o1): grad_B's rows and this slice's fp32 partial of G_B ([passes][m][r]) into part. Stage 2, after all
// slices' stage 1: G_B = bf16(sum of the nparts partials, part_stride floats apart), then grad_A and the input
// gradient over input features [c0, c1). An expert without rows gets zero gradients in its slice. Only where
// lora_split_fused2 says the vector path applies (else they throw).
void lora_pass1_slice_fused2(std::span<const LoraPassArgs> passes, int o0, int o1, float* part);
void lora_grad_a_dx_slice_fused2(std::span<const LoraPassArgs> passes, const float* parts, std::size_t part_stride,
                                 int nparts, const DxSink& sink, int c0, int c1);
// Whether the fused passes take the AVX-512 BF16 path for this shape on this CPU.
bool lora_fused_vectorised(int rank, int in, int out);

}  // namespace perfgate::lora_backward
