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

// The push_sum combine of one GPU (PushSumTables), both sides in one launch, so that the home sums run while
// the rows are still arriving: the first CTAs push this GPU's remote partial rows into their homes' combine
// buffers, each row followed by a system-scope release of one arrival on its home token's counter; the other
// CTAs (receiver_percent of the grid, at least one) sum this GPU's tokens, and the pushing ones join them once
// their rows are out. A summing CTA takes the next token from a ticket counter (tokens in order, as they arrive)
// and waits until that token's counter has reached epoch * remote_terms[t]. A CTA waits only for other GPUs'
// pushing CTAs, never for one of its own grid. Counters start at 0 and only grow: epoch counts the push_sum
// combines run on them, this one included, and every launch takes tokens + grid tickets (each CTA's last one
// finds no token), so ticket_base is the tickets all earlier launches took. Returns the grid.
struct PushSumArgs {
  const std::uint16_t* partial = nullptr;  // this GPU's partial rows
  const int* send_row = nullptr;           // PushSumTables::send_* on the device
  const int* send_dest_gpu = nullptr;
  const int* send_dest_row = nullptr;
  const int* send_token = nullptr;
  std::int64_t send_rows = 0;
  std::uint16_t* const* back_ptrs = nullptr;  // every GPU's combine buffer (device array of peer pointers)
  int* const* arrived_ptrs = nullptr;         // every GPU's arrival counters (device array of peer pointers)
  const std::uint16_t* back = nullptr;        // this GPU's combine buffer
  const int* begin = nullptr;                 // the plan's home_begin of this GPU
  const int* term = nullptr;                  // PushSumTables::term
  const int* remote_terms = nullptr;
  const int* arrived = nullptr;  // this GPU's counters
  unsigned epoch = 0;
  int* ticket = nullptr;  // this GPU's ticket counter
  unsigned ticket_base = 0;
  std::int64_t tokens = 0;
  std::uint16_t* out = nullptr;  // the chunk's first output row
  int hidden = 0;
  int receiver_percent = 25;
};
unsigned launch_push_sum(const PushSumArgs& args, cudaStream_t stream, int max_ctas = 0);

}  // namespace perfgate::expert_parallel
