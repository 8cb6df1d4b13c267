#pragma once
// The expert-parallel MoE layer: a case's tokens on every GPU, the local experts of each GPU (expert_gemm's
// MoeFfn, bucketed cuBLAS), and the layer schedules: serial (dispatch -> experts -> combine) and pipelined
// (the tokens in chunks; the exchange of one chunk overlaps the experts of another).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "perfgate/expert_gemm/moe_runner.hpp"
#include "perfgate/expert_parallel/exchange.hpp"

namespace perfgate::expert_parallel {

// DeepSeek-V3's layer with the experts of one GPU out of `gpus`: 256 / gpus experts, top-1 per
// (row, expert) pair (the pairs are the FFN's tokens; the gate weights are applied after it).
expert_gemm::Shape local_shape(int gpus);
// GPU g's local expert weights, created on first use and kept for the process (seed 1000 + g).
const expert_gemm::ExpertWeights& local_weights(int gpus, int g);

// One case's tokens: router logits for gpus x tokens tokens (global token u is local token u % tokens of
// GPU u / tokens), their top-8 routing, random bf16 inputs and an output buffer on every GPU.
struct Problem {
  int gpus = 0;
  int tokens = 0;  // per GPU
  expert_gemm::RoutingResult routing;
  std::vector<DeviceBuffer<std::uint16_t>> x, out;  // [gpus], each [tokens, H]
  std::vector<const std::uint16_t*> x_ptrs() const;
  std::vector<std::uint16_t*> out_ptrs() const;
};
std::unique_ptr<Problem> make_problem(int gpus, int tokens, expert_gemm::Routing routing);

// The experts of one chunk on one GPU: expands the received rows into (row, expert) pairs, runs the FFN
// and sums each row's pairs weighted by the gates into the partial row that combine sends home.
class LocalExperts {
 public:
  // planted_fraction > 0: expert_gemm's planted slowdown (that fraction more GEMM FLOPs, into scratch).
  LocalExperts(int gpus, int g, const ExchangePlan& plan, double planted_fraction = 0);
  void enqueue(const std::uint16_t* recv, std::uint16_t* partial);  // on stream()
  cudaStream_t stream() const;
  bool empty() const { return ffn_ == nullptr; }

 private:
  int g_;
  std::int64_t rows_ = 0;
  std::unique_ptr<expert_gemm::MoeFfn> ffn_;
  DeviceBuffer<int> pair_row_, pair_begin_;
  DeviceBuffer<float> pair_weight_;
};

struct LayerOptions {
  // run_pipelined: the CTA cap of the kernel and pull variants' launches that run beside the experts (chunk
  // c + 1's dispatch and chunk c - 1's combine); 0 = no cap. The first dispatch and the last combine, which
  // nothing overlaps, and the serial and alone runs always take the full grid.
  int overlap_ctas = 0;
  // run_pipelined and run_exchange_only: the exchanges beside the experts over the copy engines instead (the
  // first dispatch and the last combine stay on the layer's exchange). The planted rows then ride only in the
  // layer's own exchange's launches.
  bool overlap_on_copy_engines = false;
  // Planted slowdown: every round's dispatch and combine move this fraction more rows (ExchangeRound::plant)
  // and every chunk's experts run this fraction more GEMM FLOPs (expert_gemm's planted_fraction).
  double planted_fraction = 0;
};

class EpLayer {
 public:
  EpLayer(GpuSet& set, Problem& problem, Exchange exchange, int chunks, LayerOptions options = {});
  // MultiTimer marks: 0 after dispatch, 1 after the experts (serial only).
  void run_serial(MultiTimer* phases);
  void run_pipelined();
  // The cap run_pipelined gives its overlapped launches: options.overlap_ctas for kernel, pull and push_sum, 0 for the
  // variants whose exchange takes no SMs worth capping (NCCL's own channels, the copy engines).
  int overlapped_ctas() const;
  Exchange overlapped_exchange() const;  // the exchange of the launches beside the experts
  void run_exchange_only();  // dispatch + combine of every chunk over the exchanges run_pipelined uses, no experts
  void run_experts_only();   // the experts of every chunk, no exchange
  const std::vector<ExchangePlan>& plans() const { return plans_; }
  ExchangeRound& round(int c) { return *rounds_[static_cast<std::size_t>(c)]; }

 private:
  void experts(int c);       // chunk c's experts, each GPU's after its comm stream and the previous chunk
  void join_experts(int c);  // each comm stream waits for chunk c's experts
  void mark(MultiTimer* phases, int index);  // a phase boundary after a barrier, when timing phases
  LocalExperts& local(int c, int g) { return *experts_[static_cast<std::size_t>(c)][static_cast<std::size_t>(g)]; }

  GpuSet& set_;
  Problem& problem_;
  Exchange exchange_;
  LayerOptions options_;
  std::vector<ExchangePlan> plans_;
  std::vector<std::unique_ptr<ExchangeRound>> rounds_;
  std::vector<std::vector<std::unique_ptr<LocalExperts>>> experts_;  // [chunk][gpu]
};

}  // namespace perfgate::expert_parallel
