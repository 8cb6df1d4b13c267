#pragma once
// The non-GEMM stages of the MoE expert FFN as CUDA kernels (moe_kernels.cu). bf16 buffers are passed
// as std::uint16_t so that host code compiled without nvcc can call these launchers.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace perfgate::expert_gemm {

inline constexpr int kMaxTopK = 8;

// Random non-zero bf16 values: a random sign times a magnitude in [0.1, 1) * scale, from a hash of
// (seed, index), so a buffer is reproducible without a host copy.
void launch_fill_random_bf16(std::uint16_t* data, std::size_t count, std::uint64_t seed, float scale,
                             cudaStream_t stream);
// Every element set to `bits` (e.g. 0x7FC0, a NaN, to poison an output before a run).
void launch_fill_bf16(std::uint16_t* data, std::size_t count, std::uint16_t bits, cudaStream_t stream);

// Top-k routing: one warp per token picks the k largest logits (ties to the lower index, descending
// order), writes softmax weights over them and counts tokens per expert (`counts` must be zero first).
void launch_topk(const float* logits, int tokens, int experts, int top_k, int* topk_expert, float* topk_weight,
                 int* counts, cudaStream_t stream);
// Exclusive prefix sum of `counts` into `offsets` (one block; experts <= 1024).
void launch_scan(const int* counts, int experts, int* offsets, cudaStream_t stream);
// Copies each (token, j) row of x into the slot `slot_base[e] + n`, n a per-expert cursor (zero first);
// records the slot in slot_of[token * top_k + j]. hidden must be a multiple of 8.
void launch_permute(const std::uint16_t* x, int tokens, int hidden, int top_k, const int* topk_expert,
                    const int* slot_base, int* cursor, int* slot_of, std::uint16_t* x_perm, cudaStream_t stream);
// a[r, i] = SiLU(h[r, i]) * h[r, I + i] for rows [0, rows); h is [rows, 2I] (gate | up). I % 8 == 0.
void launch_swiglu(const std::uint16_t* gate_up, std::int64_t rows, int intermediate, std::uint16_t* act,
                   cudaStream_t stream);
// y[t, :] = sum_j weight[t, j] * d[slot_of[t, j], :], accumulated in fp32, stored in bf16.
void launch_combine(const std::uint16_t* expert_out, int tokens, int hidden, int top_k, const int* slot_of,
                    const float* topk_weight, std::uint16_t* y, cudaStream_t stream);

}  // namespace perfgate::expert_gemm
