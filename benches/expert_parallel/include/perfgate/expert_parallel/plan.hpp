#pragma once
// Host side of the expert-parallel exchange: where every token row goes and comes back. Experts are
// spread evenly over the GPUs (expert e on GPU e / (experts / gpus)); a token is sent once to each
// distinct GPU that holds one of its top-k experts (deduplicated per GPU, as DeepEP does). Everything the
// GPU variants need (counts, offsets, row tables) is computed here, up front, so it is unit-testable
// without a GPU and the three exchange variants move exactly the same rows.
#include <cstdint>
#include <span>
#include <vector>

#include "perfgate/expert_gemm/moe_problem.hpp"

namespace perfgate::expert_parallel {

// One exchange round: tokens [first_token, first_token + tokens) of every GPU (a chunk of the layer).
// Row tables are per GPU; "rows" are hidden-sized bf16 rows.
struct ExchangePlan {
  int gpus = 0;
  int experts_per_gpu = 0;
  int first_token = 0;  // the chunk's first local token id on every GPU
  int tokens = 0;       // tokens per GPU in this chunk

  std::vector<std::int64_t> counts;       // [s * gpus + d]: rows GPU s sends to GPU d (d == s included)
  std::vector<std::int64_t> send_offset;  // [s * gpus + d]: first row for d in s's send buffer
  std::vector<std::int64_t> recv_offset;  // [d * gpus + s]: first row from s in d's receive buffer
  std::vector<std::int64_t> send_rows;    // [s]: rows in s's send buffer (== rows coming back to s)
  std::vector<std::int64_t> recv_rows;    // [d]: rows in d's receive buffer

  // Per send row of GPU s, grouped by destination, tokens ascending within a destination:
  std::vector<std::vector<int>> send_token;     // [s][row]: the local token id
  std::vector<std::vector<int>> send_dest_gpu;  // [s][row]: d
  std::vector<std::vector<int>> send_dest_row;  // [s][row]: the row in d's receive buffer
  // Per receive row of GPU d, grouped by source:
  std::vector<std::vector<int>> recv_src_gpu;  // [d][row]: s
  std::vector<std::vector<int>> recv_src_row;  // [d][row]: the row in s's send (and combine) buffer

  // Combine at home: token t (t - first_token) of GPU s sums rows home_rows[home_begin[t] ..
  // home_begin[t + 1]) of its combine buffer (the same layout as its send buffer), destinations ascending.
  std::vector<std::vector<int>> home_begin;  // [s][tokens + 1]
  std::vector<std::vector<int>> home_rows;   // [s][send_rows]

  // Expert work at GPU d: (receive row, local expert) pairs, grouped by receive row in row order;
  // pair_begin[r] .. pair_begin[r + 1] are row r's pairs.
  std::vector<std::vector<int>> pair_begin;     // [d][recv_rows + 1]
  std::vector<std::vector<int>> pair_row;       // [d][pairs]: the receive row
  std::vector<std::vector<int>> pair_expert;    // [d][pairs]: local expert index
  std::vector<std::vector<float>> pair_weight;  // [d][pairs]: the gate weight

  std::int64_t pairs(int d) const { return static_cast<std::int64_t>(pair_row[static_cast<std::size_t>(d)].size()); }
};

// The GPU holding expert e.
inline int gpu_of_expert(int expert, int experts_per_gpu) { return expert / experts_per_gpu; }

// `routing` covers gpus * tokens_per_gpu tokens: global token u is local token u % tokens_per_gpu of
// GPU u / tokens_per_gpu. Plans tokens [first_token, first_token + tokens) of every GPU.
// Throws std::invalid_argument when the experts do not split evenly over the GPUs.
ExchangePlan plan_exchange(const expert_gemm::RoutingResult& routing, int experts, int top_k, int gpus,
                           int tokens_per_gpu, int first_token, int tokens);

// The layer's chunks: tokens_per_gpu split into `chunks` near-equal ranges (the first ones one larger).
std::vector<ExchangePlan> plan_chunks(const expert_gemm::RoutingResult& routing, int experts, int top_k, int gpus,
                                      int tokens_per_gpu, int chunks);

// The pull variant's tables of GPU g, derived from the plan's push tables (the same rows move):
struct PullTables {
  // [receive row]: the local token of GPU recv_src_gpu[g][row] whose row of x it carries (dispatch reads it there).
  std::vector<int> recv_src_token;
  // [home term i, in home_rows[g] order]: the GPU holding the partial row and its row in that GPU's partial
  // buffer (combine sums home_begin[g][t] .. home_begin[g][t + 1] of these, the push path's order).
  std::vector<int> term_gpu, term_row;
};
PullTables pull_tables(const ExchangePlan& plan, int g);
// The local token whose row of x GPU g's receive row `row` carries (PullTables::recv_src_token[row]).
int recv_src_token(const ExchangePlan& plan, int g, int row);

// Planted slowdown (PERFGATE_GPU_SLOWDOWN): the rows moved a second time. Each (GPU, peer) block of GPU g's rows
// contributes its first planted_count(count, fraction) rows, so every link (and the GPU's own local copy) carries
// `fraction` more of its own rows. Side send: g's send rows (grouped by destination; dispatch pushes them);
// side recv: g's receive rows (grouped by source; combine pushes them back, dispatch pulls them).
enum class Side { send, recv };
std::int64_t planted_count(std::int64_t count, double fraction);  // llround(fraction * count)
std::vector<int> planted_rows(const ExchangePlan& plan, int g, Side side, double fraction);

// The rows one launch of GPU g walks with the planted rows folded in: every (GPU, peer) block of `side`, its own
// rows followed by its first planted_count(count, fraction) rows again, so that the one launch moves `fraction`
// more of every block instead of a second launch paying its own start and tail. rows indexes the plan's per-row
// tables of that side; block_offset[p] is where block p starts in rows (the launch starts at its next peer's).
// fraction 0: rows 0, 1, 2, ... and the plan's own offsets.
struct PlantedTable {
  std::vector<int> rows;
  std::vector<std::int64_t> block_offset;  // [peer]
  std::int64_t planted = 0;                // rows.size() - the side's own rows
};
PlantedTable planted_table(const ExchangePlan& plan, int g, Side side, double fraction);

// The home sums of GPU g (combine) with the planted ones folded in: every token's sum, then the sums of the first
// planted_count(tokens, fraction) tokens again, into the same output rows (the same terms in the same order: the
// same bits). term indexes the home's terms in home_rows order (home_rows, PullTables::term_gpu / term_row).
// fraction 0: the plan's home_begin, terms 0, 1, 2, ... and out rows 0, 1, 2, ...
struct PlantedSums {
  std::vector<int> begin;    // [sums + 1]: sum r adds terms term[begin[r]] .. term[begin[r + 1] - 1]
  std::vector<int> term;     // [begin.back()]
  std::vector<int> out;      // [sums]: the chunk's token (t - first_token) sum r writes
  std::int64_t planted = 0;  // out.size() - tokens
};
PlantedSums planted_sums(const ExchangePlan& plan, int g, double fraction);

// The push_sum combine of GPU g, both of its sides in one launch (launch_push_sum):
// - sending: g's partial rows that belong to other GPUs' tokens, each pushed into its home's combine buffer (the
//   push kernel's rows and places) and then counted in the home's arrival counter of that token. The rows are
//   ordered by home token, so that every home's first tokens arrive first, from every sender at once, and its
//   sums can start while the rest is still on the way. g's own rows are not sent: g sums them where they lie.
//   With a planted fraction, every remote block's first planted_count(count, fraction) rows follow again, with
//   no count (their bytes are the same, already counted).
// - summing: every home token's terms in home_rows order (the push path's order, so the same bits), each a row
//   of g's combine buffer (>= 0) or, for g's own rows, -(row + 1) of its partial buffer; a token's sum waits
//   until its counter holds remote_terms[t] more arrivals than before this combine.
struct PushSumTables {
  std::vector<int> send_row;       // [k]: g's partial (receive) row
  std::vector<int> send_dest_gpu;  // [k]: its home
  std::vector<int> send_dest_row;  // [k]: its row in the home's combine buffer
  std::vector<int> send_token;     // [k]: the home's token (t - first_token) whose counter it bumps; -1: planted
  std::int64_t planted = 0;        // planted rows among send_row
  std::vector<int> term;           // [home term]: encoded as above
  std::vector<int> remote_terms;   // [t]: terms of token t that other GPUs push
};
PushSumTables push_sum_tables(const ExchangePlan& plan, int g, double fraction);

// Bytes one exchange direction (dispatch; combine moves the same rows back) moves per GPU.
struct Traffic {
  std::vector<double> sent_remote;  // [s]: bytes s sends to other GPUs
  std::vector<double> recv_remote;  // [d]: bytes d receives from other GPUs
  double local = 0;                 // bytes every GPU keeps for itself, summed
  double mean_sent_remote = 0;
  double max_remote = 0;  // the largest sent or received remote bytes of any GPU
};
Traffic traffic(const ExchangePlan& plan, std::int64_t row_bytes);
Traffic traffic(std::span<const ExchangePlan> chunks, std::int64_t row_bytes);  // summed over chunks

// Expert load per GPU: tokens routed to its experts ((token, expert) pairs), and the straggler.
std::vector<std::int64_t> expert_rows_per_gpu(std::span<const int> expert_counts, int gpus);
struct Straggler {
  int gpu = 0;            // the most loaded GPU (the lowest index on a tie)
  std::int64_t rows = 0;  // its expert rows
  double mean_rows = 0;   // mean over GPUs
  double over_mean = 0;   // rows / mean_rows (0 without rows)
};
Straggler find_straggler(std::span<const std::int64_t> rows_per_gpu);

}  // namespace perfgate::expert_parallel
