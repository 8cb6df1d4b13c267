#pragma once
// The hand-written grouped GEMM of the `overlap` variant (light_gemm.cu): for every light expert e
// (at most kLightMaxRows rows), C[rows of e, :] = X[rows of e, :] W_e^T, with W_e = [n, k] row-major,
// X [rows, k] and C [rows, n] row-major bf16, fp32 accumulation. A persistent grid of `ctas` CTAs
// (one per SM) walks the (expert, 128-column tile) items; each weight tile is read from HBM once.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace perfgate::expert_gemm {

inline constexpr int kLightMaxRows = 192;

// items[i] = {expert, first row in X / C, rows, 0}, heaviest first; `max_rows` = the largest rows.
// Requires n % 256 == 0 (n % 128 == 0 where the 128-row-tile form 3 runs: see light_gemm.cu) and k % 64 == 0.
void launch_light_gemm(const std::uint16_t* w, std::size_t w_expert_stride, const std::uint16_t* x, std::uint16_t* c,
                       int n, int k, const int4* items, int n_experts, int max_rows, int ctas, cudaStream_t stream);
std::size_t light_gemm_smem_bytes(int max_rows);
// The kernel form launch_light_gemm uses for this tallest expert (light_gemm.cu: 1-3 mma.sync, 4-5 wgmma).
int light_gemm_form(int max_rows);

}  // namespace perfgate::expert_gemm
