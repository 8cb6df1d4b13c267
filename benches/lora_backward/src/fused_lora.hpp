#pragma once
// Fused LoRA backward pass of one expert's projection (see fused_lora.cpp).
#include <span>

#include "perfgate/lora_backward/moe_lora.hpp"

namespace perfgate::lora {

struct LoraPassArgs {
  int m = 0, in = 0, out = 0, r = 0;
  float s = 1.0f;
  const bf16* dy = nullptr;  int ldy = 0;   // [m][out] gradient of the projection output
  const bf16* x = nullptr;   int ldx = 0;   // [m][in]  projection input
  const bf16* U = nullptr;   int ldu = 0;   // [m][r]   x A^T from the forward
  const bf16* A = nullptr;                  // [r][in]
  const bf16* B = nullptr;                  // [out][r]
  float* gA = nullptr;                      // [r][in]  written
  float* gB = nullptr;                      // [out][r] written
  float* dx = nullptr;       int lddx = 0;  // [m][in]  accumulated: dx += s G_B A
};

// The LoRA backward of one or two projections of one expert that share their input x and its
// gradient dx (gate and up): dx is read and written once for both. m == 0 writes zero gradients.
void lora_passes_fused(std::span<const LoraPassArgs> passes);
// Whether lora_passes_fused takes the AVX-512 BF16 path for this shape on this CPU.
bool lora_fused_vectorised(int rank, int in, int out);

}  // namespace perfgate::lora
