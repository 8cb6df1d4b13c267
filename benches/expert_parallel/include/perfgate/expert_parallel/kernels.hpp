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
// first_row on, wrapping around (see ExchangeRound: each GPU starts with its next peer's rows).
void launch_scatter_to_peers(const std::uint16_t* src, const int* src_index, const int* dest_gpu, const int* dest_row,
                             std::int64_t rows, std::int64_t first_row, int hidden, std::uint16_t* const* dst_ptrs,
                             cudaStream_t stream);

// The SM-driven bulk copy of the peer ceiling: the same `bytes` of src into each of the `blocks` device
// pointers dst[0..blocks) (a device array; peer pointers allowed), the blocks' tiles interleaved so that
// every destination is written at once. bytes must be a multiple of 16.
void launch_bulk_copy(const void* src, void* const* dst, int blocks, std::size_t bytes, cudaStream_t stream);

// dst[r] = sum over i in [begin[r], begin[r + 1]) of weight[i] * src[index[i]] (weight 1 when weight is null,
// index i when index is null), accumulated in fp32 in that order, stored in bf16. A row with no terms is 0.
void launch_row_sum(const std::uint16_t* src, const int* begin, const int* index, const float* weight,
                    std::int64_t rows, int hidden, std::uint16_t* dst, cudaStream_t stream);

}  // namespace perfgate::expert_parallel
