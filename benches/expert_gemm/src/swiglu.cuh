#pragma once
// SiLU as both SwiGLU paths apply it: the activation kernel (moe_kernels.cu) and the light kernel's gate_up
// epilogue (light_gemm.cu). One definition, so the fused path stays the unfused one's bit for bit.
#include <cuda_bf16.h>

namespace perfgate::expert_gemm {

__device__ __forceinline__ float silu(float g) { return g / (1.0f + __expf(-g)); }

// The value a bf16 store and reload gives: the unfused pass keeps gate and up in bf16 between its two kernels.
__device__ __forceinline__ float bf16_rounded(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

}  // namespace perfgate::expert_gemm
