#include "perfgate/expert_parallel/layer.hpp"

#include <map>

#include "perfgate/bench/check.hpp"
#include "perfgate/bench/cuda.hpp"
#include "perfgate/bench/nvtx.hpp"
#include "perfgate/expert_gemm/moe_kernels.hpp"
#include "perfgate/expert_parallel/kernels.hpp"

namespace perfgate::expert_parallel {
namespace eg = expert_gemm;
namespace {

constexpr std::uint64_t kRouterSeed = 0xE9A11E1;
constexpr std::uint64_t kInputSeed = 0x1A9E7;

// Logits that make top-1 pick each pair's local expert (the FFN's own routing then reproduces the plan).
std::vector<float> pair_logits(const ExchangePlan& plan, int g, int experts) {
  const std::vector<int>& expert = plan.pair_expert[static_cast<std::size_t>(g)];
  std::vector<float> logits(expert.size() * static_cast<std::size_t>(experts), -1.0f);
  for (std::size_t p = 0; p < expert.size(); ++p) logits[p * experts + expert[p]] = 2.0f;
  return logits;
}

}  // namespace

eg::Shape local_shape(int gpus) {
  const eg::Shape& full = eg::deepseek_v3();
  return {.name = full.name + "/ep" + std::to_string(gpus),
          .experts = full.experts / gpus,
          .hidden = full.hidden,
          .intermediate = full.intermediate,
          .top_k = 1};
}

const eg::ExpertWeights& local_weights(int gpus, int g) {
  static std::map<std::pair<int, int>, std::unique_ptr<eg::ExpertWeights>> cache;
  auto& slot = cache[{gpus, g}];
  if (!slot) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    slot = std::make_unique<eg::ExpertWeights>(local_shape(gpus), 1000 + static_cast<std::uint64_t>(g));
  }
  return *slot;
}

std::vector<const std::uint16_t*> Problem::x_ptrs() const {
  std::vector<const std::uint16_t*> v;
  for (const auto& b : x) v.push_back(b.get());
  return v;
}

std::vector<std::uint16_t*> Problem::out_ptrs() const {
  std::vector<std::uint16_t*> v;
  for (const auto& b : out) v.push_back(b.get());
  return v;
}

std::unique_ptr<Problem> make_problem(int gpus, int tokens, eg::Routing routing) {
  auto p = std::make_unique<Problem>();
  p->gpus = gpus;
  p->tokens = tokens;
  const eg::Shape& shape = eg::deepseek_v3();
  const std::vector<float> logits = eg::make_router_logits(shape, gpus * tokens, routing, kRouterSeed);
  p->routing = eg::route_cpu(shape, gpus * tokens, logits);
  const std::size_t elements = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(shape.hidden);
  for (int g = 0; g < gpus; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    p->x.emplace_back(elements);
    p->out.emplace_back(elements);
    eg::launch_fill_random_bf16(p->x.back().get(), elements, kInputSeed + static_cast<std::uint64_t>(g), 1.0f, nullptr);
    PERFGATE_CUDA_CHECK(cudaDeviceSynchronize());
  }
  return p;
}

LocalExperts::LocalExperts(int gpus, int g, const ExchangePlan& plan, double planted_fraction) : g_(g) {
  const auto i = static_cast<std::size_t>(g);
  rows_ = plan.recv_rows[i];
  const auto pairs = static_cast<int>(plan.pairs(g));
  if (pairs == 0) return;  // no row came here (then no partial row goes back either)
  PERFGATE_CUDA_CHECK(cudaSetDevice(g));
  const eg::ExpertWeights& weights = local_weights(gpus, g);
  const std::vector<float> logits = pair_logits(plan, g, weights.shape().experts);
  const eg::RoutingResult route = eg::route_cpu(weights.shape(), pairs, logits);
  eg::FfnOptions options;
  options.planted_fraction = planted_fraction;
  ffn_ = std::make_unique<eg::MoeFfn>(weights, pairs, eg::Variant::bucketed, logits, route, options);
  pair_row_ = expert_gemm::to_device(plan.pair_row[i]);
  pair_begin_ = expert_gemm::to_device(plan.pair_begin[i]);
  pair_weight_ = expert_gemm::to_device(plan.pair_weight[i]);
}

cudaStream_t LocalExperts::stream() const { return ffn_ ? ffn_->stream() : nullptr; }

void LocalExperts::enqueue(const std::uint16_t* recv, std::uint16_t* partial) {
  if (!ffn_) return;
  PERFGATE_CUDA_CHECK(cudaSetDevice(g_));
  const int hidden = eg::deepseek_v3().hidden;
  launch_gather_rows(recv, pair_row_.get(), static_cast<std::int64_t>(pair_row_.size()), hidden, ffn_->input_device(),
                     ffn_->stream());
  ffn_->run();
  launch_row_sum(ffn_->output_device(), pair_begin_.get(), nullptr, pair_weight_.get(), rows_, hidden, partial,
                 ffn_->stream());
}

EpLayer::EpLayer(GpuSet& set, Problem& problem, Exchange exchange, int chunks, LayerOptions options)
    : set_(set), problem_(problem), exchange_(exchange), options_(options) {
  const eg::Shape& shape = eg::deepseek_v3();
  plans_ = plan_chunks(problem.routing, shape.experts, shape.top_k, problem.gpus, problem.tokens, chunks);
  for (const ExchangePlan& plan : plans_) {
    rounds_.push_back(std::make_unique<ExchangeRound>(set, plan, shape.hidden));
    rounds_.back()->plant(exchange, options.planted_fraction);
    experts_.emplace_back();
    for (int g = 0; g < problem.gpus; ++g)
      experts_.back().push_back(std::make_unique<LocalExperts>(problem.gpus, g, plan, options.planted_fraction));
  }
}

Exchange EpLayer::overlapped_exchange() const {
  return options_.overlap_on_copy_engines ? Exchange::copy_engine : exchange_;
}

int EpLayer::overlapped_ctas() const {
  const Exchange x = overlapped_exchange();
  return x == Exchange::nccl || x == Exchange::copy_engine ? 0 : options_.overlap_ctas;
}

void EpLayer::experts(int c) {
  bench::NvtxRange range("EP_Experts");
  for (int g = 0; g < set_.size(); ++g) {
    LocalExperts& e = local(c, g);
    if (e.empty()) continue;
    set_.join(g, e.stream(), set_.comm(g));  // after this chunk's rows arrived
    if (c > 0 && !local(c - 1, g).empty()) set_.join(g, e.stream(), local(c - 1, g).stream());  // chunks in order
    round(c).wait_partial_free(g, e.stream());  // every home's last pull of these partial rows is done
    e.enqueue(round(c).recv(g), round(c).partial(g));
  }
}

void EpLayer::join_experts(int c) {
  for (int g = 0; g < set_.size(); ++g)
    if (!local(c, g).empty()) set_.join(g, set_.comm(g), local(c, g).stream());
}

void EpLayer::mark(MultiTimer* phases, int index) {
  if (phases == nullptr) return;
  set_.comm_barrier();  // a phase ends when every GPU is done with it
  phases->mark(index);
}

void EpLayer::run_serial(MultiTimer* phases) {
  bench::NvtxRange range("EP_Layer_Serial");
  round(0).dispatch(exchange_, problem_.x_ptrs());
  mark(phases, 0);
  experts(0);
  join_experts(0);
  mark(phases, 1);
  round(0).combine(exchange_, problem_.out_ptrs());
}

// Issue order on the comm streams: d0, d1, c0, d2, c1, ... so that chunk c's dispatch runs beside chunk
// c - 1's experts and chunk c - 1's combine beside chunk c's experts: those take the capped grid, so that the
// exchange leaves the experts' GEMMs most SMs. d0 and the last combine overlap nothing: full grid.
void EpLayer::run_pipelined() {
  bench::NvtxRange range("EP_Layer_Pipelined");
  const int chunks = static_cast<int>(plans_.size());
  const int cap = overlapped_ctas();
  const Exchange beside = overlapped_exchange();
  round(0).dispatch(exchange_, problem_.x_ptrs());
  experts(0);
  for (int c = 1; c < chunks; ++c) {
    round(c).dispatch(beside, problem_.x_ptrs(), cap);
    experts(c);
    join_experts(c - 1);
    round(c - 1).combine(beside, problem_.out_ptrs(), cap);
  }
  join_experts(chunks - 1);
  round(chunks - 1).combine(exchange_, problem_.out_ptrs());
}

void EpLayer::run_exchange_only() {
  const int last = static_cast<int>(plans_.size()) - 1;
  const Exchange beside = overlapped_exchange();
  for (int c = 0; c <= last; ++c) {
    round(c).dispatch(c == 0 ? exchange_ : beside, problem_.x_ptrs());
    round(c).combine(c == last ? exchange_ : beside, problem_.out_ptrs());
  }
}

void EpLayer::run_experts_only() {
  for (std::size_t c = 0; c < plans_.size(); ++c) experts(static_cast<int>(c));
  for (std::size_t c = 0; c < plans_.size(); ++c) join_experts(static_cast<int>(c));
}

}  // namespace perfgate::expert_parallel
