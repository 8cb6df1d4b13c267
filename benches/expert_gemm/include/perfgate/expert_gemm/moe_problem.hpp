#pragma once
// Host side of the MoE expert FFN fixture: shapes, router logits for uniform / Zipf routing, the CPU
// top-k routing and fp64 reference, the row layouts and buckets the GPU variants use, and the work
// counts (FLOPs, bytes) the roofline is computed from. No CUDA here, so it is unit-testable anywhere.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace perfgate::expert_gemm {

struct Shape {
  std::string name;
  int experts = 0;
  int hidden = 0;        // H: model dimension
  int intermediate = 0;  // I: expert FFN dimension (gate and up each produce I columns)
  int top_k = 0;
};

const Shape& deepseek_v3();  // 256 experts, H 7168, I 2048, top-8
const Shape& small_shape();  // 64 experts, H 1024, I 512, top-4: quick runs and the correctness check
const Shape* find_shape(const std::string& name);

enum class Routing { uniform, zipf };
const char* routing_name(Routing routing);

// Router logits [tokens, experts], row-major fp32. For every token `top_k` distinct experts are drawn
// (uniformly, or with Zipf(1.0) popularity over a random permutation of the experts) and given logits
// in [1, 3); every other expert gets a logit in [-3, 0.5). Top-k of these logits therefore reproduces
// the drawn experts, and the routing weights (softmax over the selected logits) are non-uniform.
std::vector<float> make_router_logits(const Shape& shape, int tokens, Routing routing, std::uint64_t seed);

// Top-k routing as the GPU does it: the k largest logits, ties to the lower expert index, in
// descending order; weights = softmax over the selected logits.
struct RoutingResult {
  std::vector<int> expert;    // [tokens * top_k]
  std::vector<float> weight;  // [tokens * top_k]
  std::vector<int> counts;    // [experts] tokens routed to each expert
};
RoutingResult route_cpu(const Shape& shape, int tokens, std::span<const float> logits);

struct RoutingStats {
  int active_experts = 0;
  int max_rows = 0;
  double mean_rows = 0.0;  // over all experts
  double max_over_mean = 0.0;
};
RoutingStats routing_stats(std::span<const int> counts);

// Experts grouped by padded row count. A bucket holds pieces: piece i is rows [row_offset[i],
// row_offset[i] + pad_rows) of expert experts[i] (rows past the expert's count are padding); all pieces
// of a bucket run as one batched GEMM.
struct Bucket {
  int pad_rows = 0;
  std::vector<int> experts;
  std::vector<int> row_offset;
};
struct BucketOptions {
  int granule = 32;    // rows <= 256 are padded up to a multiple of this; larger counts to a multiple of 64
  int chunk_rows = 0;  // > 0: an expert's rows are cut into pieces of chunk_rows (plus a padded remainder)
};
// Pieces with the same padded row count share a bucket. Buckets are ordered by descending pad;
// experts with no rows are left out.
std::vector<Bucket> plan_buckets(std::span<const int> counts, const BucketOptions& options = {});

// Where each expert's rows start in the permuted activation buffers.
struct RowLayout {
  std::vector<int> slot_base;  // [experts]
  std::int64_t total_rows = 0;
};
RowLayout compact_layout(std::span<const int> counts);               // exclusive prefix sum
RowLayout padded_layout(std::span<const int> counts, int pad_rows);  // expert e at e * pad_rows
// Each expert's rows are contiguous: its pieces, in row order, padded.
RowLayout bucket_layout(std::span<const int> counts, const std::vector<Bucket>& buckets);

// Useful work of one forward pass (padding not counted) and the bytes that must move.
struct Work {
  double flops_gate_up = 0;
  double flops_down = 0;
  double weight_bytes_gate_up = 0;  // every activated expert's weights once
  double weight_bytes_down = 0;
  double act_bytes_gate_up = 0;  // GEMM operands: permuted x in, gate|up out
  double act_bytes_down = 0;     // SiLU(gate)*up in, expert outputs out
  double io_bytes = 0;           // whole FFN: x and router logits in, combined output out
  double flops() const { return flops_gate_up + flops_down; }
  double gemm_bytes_gate_up() const { return weight_bytes_gate_up + act_bytes_gate_up; }
  double gemm_bytes_down() const { return weight_bytes_down + act_bytes_down; }
  double ffn_bytes() const { return weight_bytes_gate_up + weight_bytes_down + io_bytes; }
};
Work count_work(const Shape& shape, int tokens, std::span<const int> counts);

// Planted slowdown (PERFGATE_GPU_SLOWDOWN): the experts whose GEMMs (gate|up and down) run a second
// time, so that the pass does `fraction` more GEMM work. An expert's useful GEMM FLOPs are proportional to
// its routed rows (6 x rows x I x H), so the FLOP share is the row share. Chosen by an exact subset sum
// over the row counts: no other set of experts comes closer to fraction x all rows (ties: fewer rows,
// then lower expert indices). With uniform routing that is about fraction x experts of ~equal size;
// with Zipf routing a mix of popular and rare experts.
struct PlantedExperts {
  std::vector<int> experts;  // ascending
  std::int64_t rows = 0;     // their routed rows
  double flop_share = 0.0;   // rows / all routed rows: their share of the pass's useful GEMM FLOPs
};
// fraction in [0, 1]; 0 (or no routed rows) chooses nothing.
PlantedExperts choose_planted_experts(std::span<const int> counts, double fraction);

// bf16 <-> fp32 on the host (round to nearest even), bit-compatible with __float2bfloat16_rn.
std::uint16_t float_to_bf16(float value);
float bf16_to_float(std::uint16_t bits);

// fp64 reference of the whole FFN from bf16 operands. Intermediates are rounded to bf16 where the GPU
// stores them in bf16 (gate|up output, activation, expert output), so the remaining difference is the
// accumulation order. x [tokens, H]; gate_up [E, 2I, H] (gate rows first, then up rows); down [E, H, I].
// Only the experts that `routing` uses are read. Returns y [tokens, H].
std::vector<double> reference_ffn(const Shape& shape, int tokens, std::span<const std::uint16_t> x,
                                  std::span<const std::uint16_t> gate_up, std::span<const std::uint16_t> down,
                                  const RoutingResult& routing);

}  // namespace perfgate::expert_gemm
