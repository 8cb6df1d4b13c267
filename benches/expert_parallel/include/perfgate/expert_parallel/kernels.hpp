#pragma once
// The row movers of the expert-parallel exchange (kernels.cu). bf16 rows are passed as std::uint16_t so that
// host code compiled without nvcc can call the launchers. hidden must be a multiple of 8 (16-byte vectors).
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace perfgate::expert_parallel {

// dst[i] = src[index[i]] for rows i < rows: packs a send buffer, or expands received rows into expert pairs.
void launch_gather_rows(const std::uint16_t* src, const int* index, std::int64_t rows, int hidden, std::uint16_t* dst,
                        cudaStream_t stream);

// The hand-written exchange (the DeepEP idea): row i of the source goes straight into GPU dest_gpu[i]'s
// buffer dst_ptrs[dest_gpu[i]] at row dest_row[i], through peer pointers (peer access on), one CTA per row
// with several 16-byte loads in flight per thread, as many CTAs as fill the SMs. Source row: src_index[i],
// or i when src_index is null. dst_ptrs is a device array of one pointer per GPU. Rows are visited from
// first_row on, wrapping around (see ExchangeRound: each GPU starts with its next peer's rows). max_ctas > 0
// caps the grid (here and below): the pipelined layer leaves the rest of the SMs to the experts.
void launch_scatter_to_peers(const std::uint16_t* src, const int* src_index, const int* dest_gpu, const int* dest_row,
                             std::int64_t rows, std::int64_t first_row, int hidden, std::uint16_t* const* dst_ptrs,
                             cudaStream_t stream, int max_ctas = 0);

// The SM-driven bulk copy of the peer ceiling: the same `bytes` of src into each of the `blocks` device
// pointers dst[0..blocks) (a device array; peer pointers allowed), the blocks' tiles interleaved so that
// every destination is written at once. bytes must be a multiple of 16.
void launch_bulk_copy(const void* src, void* const* dst, int blocks, std::size_t bytes, cudaStream_t stream);

// dst[r] = sum over i in [begin[r], begin[r + 1]) of weight[i] * src[index[i]] (weight 1 when weight is null,
// index i when index is null), accumulated in fp32 in that order, stored in bf16. A row with no terms is 0.
// dst_index: sum r goes to dst[dst_index[r]] instead (here and in launch_pull_sum), through a kernel of its own, so
// that a launch without it runs the plain kernel.
void launch_row_sum(const std::uint16_t* src, const int* begin, const int* index, const float* weight,
                    std::int64_t rows, int hidden, std::uint16_t* dst, cudaStream_t stream, int max_ctas = 0,
                    const int* dst_index = nullptr);

// The pull dispatch: dst[dst_index[r]] (dst[r] when dst_index is null) = row src_row[r] of src_ptrs[src_gpu[r]]
// (a device array of one pointer per GPU, peer pointers allowed), read by the receiving GPU, one CTA per row with
// several 16-byte loads in flight per thread, as many CTAs as fill the SMs; rows visited from first_row on,
// wrapping around.
void launch_pull_rows(const std::uint16_t* const* src_ptrs, const int* src_gpu, const int* src_row,
                      const int* dst_index, std::int64_t rows, std::int64_t first_row, int hidden, std::uint16_t* dst,
                      cudaStream_t stream, int max_ctas = 0);

// The fused pull combine: dst[r] = sum over i in [begin[r], begin[r + 1]) of row term_row[i] of
// src_ptrs[term_gpu[i]], read by the home GPU through peer pointers, accumulated in fp32 in that order and
// stored in bf16 once (the same bits as launch_row_sum over the same rows in the same order). One CTA per row.
void launch_pull_sum(const std::uint16_t* const* src_ptrs, const int* begin, const int* term_gpu, const int* term_row,
                     std::int64_t rows, int hidden, std::uint16_t* dst, cudaStream_t stream, int max_ctas = 0,
                     const int* dst_index = nullptr);

}  // namespace perfgate::expert_parallel
