// expert_parallel: the expert-parallel MoE layer over the GPUs of one host (DeepSeek-V3: H 7168, 256 experts,
// top-8, bf16). Dispatch and combine in four variants (NCCL all-to-all-v, copy engines, a peer-store
// kernel, a peer-load kernel) against the all-pairs peer-copy ceiling measured in the same process, and the whole
// layer, serial and pipelined. See docs/expert_parallel.md.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "perfgate/bench/counters.hpp"
#include "perfgate/bench/cuda.hpp"
#include "perfgate/bench/gpu_slowdown.hpp"
#include "perfgate/bench/main.hpp"
#include "perfgate/bench/nvtx.hpp"
#include "perfgate/bench/skip.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/expert_parallel/case_plan.hpp"
#include "perfgate/expert_parallel/checks.hpp"
#include "perfgate/expert_parallel/layer.hpp"
#include "perfgate/expert_parallel/lru_cache.hpp"
#if defined(PERFGATE_HAVE_NCCL)
#include "perfgate/transfers/nccl_world.hpp"
#endif

namespace ep = perfgate::expert_parallel;
namespace eg = perfgate::expert_gemm;
namespace pb = perfgate::bench;

namespace {

constexpr int kWarmup = 3;
constexpr int kAloneReps = 5;  // runs of the exchange alone and the experts alone (median), once per case

// ---- what the process keeps between cases ---------------------------------------------------------
// The harness interleaves cases and repetitions in random order, so everything costly is kept per case (or
// per problem) for the whole process: the correctness verdict and the alone times are measured once per case
// and never again; problems, exchange rounds and layers are kept in small LRU caches (GPU memory: a 4096-token
// layer holds about 2 GB per GPU beside the expert weights) and rebuilt, unchecked, when evicted.
constexpr std::size_t kMaxProblems = 8;  // inputs and outputs: about 120 MB per GPU at 4096 tokens
constexpr std::size_t kMaxRounds = 6;    // one per problem: every dispatch/combine variant moves the same rows
constexpr std::size_t kMaxLayers = 4;

struct RoundEntry {
  std::shared_ptr<ep::Problem> problem;  // declared first: destroyed after the round that uses it
  std::unique_ptr<ep::ExchangeRound> round;
};
struct LayerEntry {
  std::shared_ptr<ep::Problem> problem;  // the layer holds a reference to it
  std::unique_ptr<ep::EpLayer> layer;
};
struct AloneTimes {
  double exchange_ms = 0, experts_ms = 0;
};

struct Cache {
  ep::LruCache<std::string, std::shared_ptr<ep::Problem>> problems{kMaxProblems};
  ep::LruCache<std::string, RoundEntry> rounds{kMaxRounds};
  ep::LruCache<std::string, LayerEntry> layers{kMaxLayers};
  std::map<std::string, std::optional<std::string>> verdicts;  // per case name: nullopt = right
  std::map<std::string, AloneTimes> alone;                     // per layer case name
  std::map<std::string, double> experts_unchunked_ms;          // per problem key
};
Cache& cache() {
  static Cache c;
  return c;
}

// Frees every GPU buffer the cache holds (after a failed case: nothing half-built stays), keeping what was
// measured: the verdicts and alone times stay true.
void drop_buffers() {
  Cache& c = cache();
  c.layers.clear();
  c.rounds.clear();
  c.problems.clear();
}

// PERFGATE_EP_OVERLAP_CTAS, read once; a bad value is bad input (exit 2), as for the planted slowdown's knob.
int overlap_ctas() {
  static const int ctas = [] {
    try {
      return ep::parse_overlap_ctas(std::getenv(ep::kOverlapCtasVar));
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "bench_expert_parallel: %s\n", e.what());
      std::exit(2);
    }
  }();
  return ctas;
}

double planted_fraction(const ep::CaseDesc& c) { return pb::gpu_slowdown().fraction_for(c.name); }

std::string problem_key(const ep::CaseDesc& c) {
  return fmt::format("gpus:{}/tokens:{}/routing:{}", c.gpus, c.tokens, eg::routing_name(c.routing));
}

std::shared_ptr<ep::Problem> problem_for(const ep::CaseDesc& c) {
  auto& problems = cache().problems;
  const std::string key = problem_key(c);
  if (auto* p = problems.find(key)) return *p;
  problems.make_room();
  return problems.insert(key, ep::make_problem(c.gpus, c.tokens, c.routing));
}

// Median milliseconds of `reps` runs of `op` after one warm-up run, each timed over all GPUs.
template <typename Op>
double median_ms(ep::GpuSet& set, int reps, Op&& op) {
  ep::MultiTimer timer(set);
  op();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    timer.start();
    op();
    timer.stop();
    ms.push_back(timer.elapsed_ms());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// ---- counters ---------------------------------------------------------------------------------------
// Under Zipf routing the straggler also goes into the benchmark's label, which perfgate's report lists.
void add_straggler_counters(benchmark::State& state, const ep::CaseDesc& c, const ep::Problem& p) {
  const auto rows = ep::expert_rows_per_gpu(p.routing.counts, p.gpus);
  const ep::Straggler s = ep::find_straggler(rows);
  pb::set_info(state, "straggler_gpu", s.gpu);
  pb::set_info(state, "straggler_expert_rows", static_cast<double>(s.rows));
  pb::set_info(state, "mean_expert_rows", s.mean_rows);
  pb::set_info(state, "straggler_over_mean", s.over_mean);
  if (c.routing == eg::Routing::zipf)
    state.SetLabel(fmt::format("straggler GPU {}: {:.2f}x the mean expert load ({} (token, expert) pairs, mean {:.0f})",
                               s.gpu, s.over_mean, s.rows, s.mean_rows));
}

// The peer ceiling (the best of its methods), each method's rate, and which one set it.
void add_ceiling_counters(benchmark::State& state, const ep::PeerCeiling& ceiling) {
  pb::set_info(state, "peer_ceiling_GB/s", ceiling.GBps);
  pb::set_info(state, "peer_ceiling_method", static_cast<double>(ceiling.method));  // 0 ce, 1 kernel, 2 nccl
  for (const auto& [method, rate] : ceiling.methods)
    pb::set_info(state, fmt::format("peer_ceiling.{}_GB/s", ep::ceiling_method_name(method)), rate);
}

// Bytes per GPU of one direction, its rate and its share of the peer ceiling.
void add_traffic_counters(benchmark::State& state, const ep::Traffic& t, int gpus, double s_per_iter) {
  const ep::PeerCeiling& ceiling = ep::peer_ceiling(gpus);
  pb::set_info(state, "bytes_remote_per_gpu", t.mean_sent_remote);
  pb::set_info(state, "bytes_remote_max_gpu", t.max_remote);
  pb::set_info(state, "bytes_local_per_gpu", t.local / gpus);
  add_ceiling_counters(state, ceiling);
  if (s_per_iter <= 0) return;
  pb::set_rate(state, "GB/s", t.mean_sent_remote / 1e9, s_per_iter);
  pb::set_percent_of(state, "peer_ceiling", t.mean_sent_remote / 1e9 / s_per_iter, ceiling.GBps);
}

std::optional<std::string> skip_reason(const ep::CaseDesc& c) {
  const int visible = pb::gpu_count();
  if (visible < c.gpus)
    return visible == 0 ? pb::no_gpu_reason() : fmt::format("needs {} GPUs, {} present", c.gpus, visible);
#if defined(PERFGATE_HAVE_NCCL)
  if (c.exchange == ep::Exchange::nccl && perfgate::transfers::nccl::world_size() != c.gpus)
    return fmt::format("NCCL world has {} ranks, the case needs {}", perfgate::transfers::nccl::world_size(), c.gpus);
#endif
  return std::nullopt;
}

// ---- dispatch and combine alone -----------------------------------------------------------------------
// The problem's exchange round (built on first use, or again after eviction) and the case's verdict
// (checked once per process).
RoundEntry& round_for(const ep::CaseDesc& c, ep::GpuSet& set) {
  Cache& cache_ = cache();
  const std::string key = problem_key(c);
  RoundEntry* entry = cache_.rounds.find(key);
  if (entry == nullptr) {
    cache_.rounds.make_room();  // free an old round before allocating this one
    RoundEntry e{.problem = problem_for(c), .round = nullptr};
    const eg::Shape& shape = eg::deepseek_v3();
    const auto plan = ep::plan_exchange(e.problem->routing, shape.experts, shape.top_k, c.gpus, c.tokens, 0, c.tokens);
    e.round = std::make_unique<ep::ExchangeRound>(set, plan, shape.hidden);
    entry = &cache_.rounds.insert(key, std::move(e));
  }
  // Before the check: the planted rows must leave the result alone, so the check runs with them.
  entry->round->plant(c.exchange, planted_fraction(c));
  if (!cache_.verdicts.contains(c.name)) {
    pb::NvtxRange range("correctness_check");
    cache_.verdicts[c.name] = c.op == ep::Op::dispatch
                                  ? ep::check_dispatch(set, *entry->round, c.exchange, *entry->problem)
                                  : ep::check_combine(set, *entry->round, c.exchange, *entry->problem);
  }
  return *entry;
}

void exchange_once(const ep::CaseDesc& c, ep::ExchangeRound& round, const ep::Problem& p) {
  if (c.op == ep::Op::dispatch) {
    round.dispatch(c.exchange, p.x_ptrs());
  } else {
    round.combine(c.exchange, p.out_ptrs());
  }
}

void run_exchange(benchmark::State& state, const ep::CaseDesc& c) {
  ep::GpuSet& set = ep::GpuSet::get(c.gpus);
  RoundEntry& entry = round_for(c, set);
  if (const auto& error = cache().verdicts[c.name]) return pb::fail(state, *error);
  ep::ExchangeRound& round = *entry.round;
  const ep::Problem& p = *entry.problem;
  for (int i = 0; i < kWarmup; ++i) exchange_once(c, round, p);
  ep::MultiTimer timer(set);
  pb::nvml::Monitor monitor(pb::pci_bus_id(0));
  double total_ms = 0;
  for (auto _ : state) {
    timer.start();
    exchange_once(c, round, p);
    timer.stop();
    const double ms = timer.elapsed_ms();
    total_ms += ms;
    state.SetIterationTime(ms / 1e3);
  }
  const auto clocks = monitor.stop();
  const double s_per_iter =
      total_ms / 1e3 / static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
  add_traffic_counters(state, ep::traffic(round.plan(), eg::deepseek_v3().hidden * 2), c.gpus, s_per_iter);
  if (planted_fraction(c) > 0) {  // GB/s above counts the case's own rows only
    pb::set_info(state, "planted.fraction", planted_fraction(c));
    pb::set_info(state, "planted.share", round.planted_share(c.op == ep::Op::combine));
  }
  add_straggler_counters(state, c, p);
  pb::add_clock_counters(state, 0, clocks);
}

// ---- the layer ----------------------------------------------------------------------------------------
void run_schedule(const ep::CaseDesc& c, ep::EpLayer& layer, ep::MultiTimer* phases) {
  if (c.schedule == ep::Schedule::serial) {
    layer.run_serial(phases);
  } else {
    layer.run_pipelined();
  }
}

// The case's layer, built on first use or again after eviction.
LayerEntry& layer_entry(const ep::CaseDesc& c, ep::GpuSet& set) {
  auto& layers = cache().layers;
  if (LayerEntry* e = layers.find(c.name)) return *e;
  layers.make_room();  // free an old layer's buffers before allocating this one's
  LayerEntry e{.problem = problem_for(c), .layer = nullptr};
  const ep::LayerOptions options{.overlap_ctas = overlap_ctas(),
                                 .overlap_on_copy_engines = c.schedule == ep::Schedule::pipelined_ce,
                                 .planted_fraction = planted_fraction(c)};
  e.layer = std::make_unique<ep::EpLayer>(set, *e.problem, c.exchange, c.chunks, options);
  return layers.insert(c.name, std::move(e));
}

// The experts alone over the whole batch in one chunk: what a pipelined case's chunked experts compare with.
// Once per problem, never planted; an unplanted serial case's own experts-alone time is the same measurement.
double experts_unchunked_ms(const ep::CaseDesc& c, ep::GpuSet& set, ep::Problem& p) {
  auto& measured = cache().experts_unchunked_ms;
  const std::string key = problem_key(c);
  if (auto it = measured.find(key); it != measured.end()) return it->second;
  ep::EpLayer whole(set, p, c.exchange, 1);
  return measured[key] = median_ms(set, kAloneReps, [&] { whole.run_experts_only(); });
}

// Checks the layer against the CPU reference and measures the alone times, once per case and process.
void check_and_measure_once(const ep::CaseDesc& c, ep::GpuSet& set, LayerEntry& e) {
  Cache& cache_ = cache();
  if (!cache_.verdicts.contains(c.name)) {
    pb::NvtxRange range("correctness_check");
    ep::poison_outputs(*e.problem);
    run_schedule(c, *e.layer, nullptr);
    set.synchronize();
    cache_.verdicts[c.name] = ep::check_layer_sample(*e.problem, {{0, 0}, {c.gpus - 1, c.tokens - 1}});
  }
  if (cache_.verdicts[c.name] || cache_.alone.contains(c.name)) return;
  AloneTimes t;
  t.exchange_ms = median_ms(set, kAloneReps, [&] { e.layer->run_exchange_only(); });
  t.experts_ms = median_ms(set, kAloneReps, [&] { e.layer->run_experts_only(); });
  if (c.chunks == 1 && planted_fraction(c) == 0)  // the same measurement
    cache_.experts_unchunked_ms.emplace(problem_key(c), t.experts_ms);
  cache_.alone[c.name] = t;
}

void add_layer_counters(benchmark::State& state, const ep::CaseDesc& c, double layer_ms, const double phase_ms[3],
                        double unchunked_ms) {
  const AloneTimes& alone = cache().alone.at(c.name);
  const double iters = static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
  if (c.schedule == ep::Schedule::serial) {
    pb::set_phase_ms(state, "dispatch", phase_ms[0]);
    pb::set_phase_ms(state, "experts", phase_ms[1]);
    pb::set_phase_ms(state, "combine", phase_ms[2]);
    pb::set_info(state, "exposed_exchange_ms", (phase_ms[0] + phase_ms[2]) / iters);
  } else {
    pb::set_phase_ms(state, "experts", alone.experts_ms * iters);
    pb::set_phase_ms(state, "exposed_exchange", std::max(0.0, layer_ms / iters - alone.experts_ms) * iters);
  }
  const double t_layer = layer_ms / iters;
  const double longer = std::max(alone.exchange_ms, alone.experts_ms);
  pb::set_info(state, "exchange_alone_ms", alone.exchange_ms);
  pb::set_info(state, "experts_alone_ms", alone.experts_ms);
  // Chunking makes each expert GEMM smaller: the unchunked time says what the chunks cost before any overlap.
  pb::set_info(state, "experts_unchunked_ms", unchunked_ms);
  pb::set_info(state, "experts_chunking_cost_ms", alone.experts_ms - unchunked_ms);
  pb::set_info(state, "max_exchange_experts_ms", longer);
  if (longer > 0) pb::set_info(state, "layer_over_max", t_layer / longer);  // 1.0 = perfect overlap
  // streaming_prefetch's overlap efficiency: 100% = the shorter part completely hidden, 0% = serial.
  const double shorter = std::min(alone.exchange_ms, alone.experts_ms);
  if (shorter > 0)
    pb::set_percent_of(state, "overlap_efficiency", (alone.exchange_ms + alone.experts_ms - t_layer) / shorter, 1.0);
  pb::set_rate(state, "tokens/s", static_cast<double>(c.gpus) * c.tokens, t_layer / 1e3);
}

void run_layer(benchmark::State& state, const ep::CaseDesc& c) {
  ep::GpuSet& set = ep::GpuSet::get(c.gpus);
  LayerEntry& entry = layer_entry(c, set);
  check_and_measure_once(c, set, entry);
  if (const auto& error = cache().verdicts[c.name]) return pb::fail(state, *error);
  ep::EpLayer& layer = *entry.layer;
  const double unchunked_ms = c.chunks == 1 && planted_fraction(c) == 0 ? cache().alone.at(c.name).experts_ms
                                                                        : experts_unchunked_ms(c, set, *entry.problem);
  for (int i = 0; i < kWarmup; ++i) run_schedule(c, layer, nullptr);
  ep::MultiTimer timer(set);
  pb::nvml::Monitor monitor(pb::pci_bus_id(0));
  double total_ms = 0, phase_ms[3] = {0, 0, 0};
  const bool serial = c.schedule == ep::Schedule::serial;
  for (auto _ : state) {
    timer.start();
    run_schedule(c, layer, serial ? &timer : nullptr);
    timer.stop();
    const double ms = timer.elapsed_ms();
    total_ms += ms;
    if (serial)
      for (int k = 0; k < 3; ++k) phase_ms[k] += timer.between_ms(k - 1, k == 2 ? ep::MultiTimer::kMarks : k);
    state.SetIterationTime(ms / 1e3);
  }
  const auto clocks = monitor.stop();
  add_layer_counters(state, c, total_ms, phase_ms, unchunked_ms);
  const ep::Traffic t = ep::traffic(layer.plans(), eg::deepseek_v3().hidden * 2);
  pb::set_info(state, "bytes_remote_per_gpu", 2 * t.mean_sent_remote);  // dispatch + combine
  if (c.schedule != ep::Schedule::serial) pb::set_info(state, "overlap_ctas", layer.overlapped_ctas());
  if (planted_fraction(c) > 0) pb::set_info(state, "planted.fraction", planted_fraction(c));
  add_straggler_counters(state, c, *entry.problem);
  pb::add_clock_counters(state, 0, clocks);
}

void run_case(benchmark::State& state, const ep::CaseDesc& c) {
  if (auto why = skip_reason(c)) return pb::skip(state, *why);
  try {
    if (c.op == ep::Op::layer) {
      run_layer(state, c);
    } else {
      run_exchange(state, c);
    }
  } catch (const std::exception& e) {
    drop_buffers();  // a failed case leaves nothing half-built for the next one
    pb::fail(state, e.what());
  }
}

// PERFGATE_EP_PUSH_SUM_RECEIVERS is read by every exchange round; a bad value exits 2 here, before any case runs.
void check_receiver_percent() {
  try {
    ep::parse_receiver_percent(std::getenv(ep::kReceiverPercentVar));
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "bench_expert_parallel: %s\n", e.what());
    std::exit(2);
  }
}

void add_suite_context() {
  benchmark::AddCustomContext(perfgate::context_keys::kSuite, "expert_parallel");
  benchmark::AddCustomContext(perfgate::context_keys::kExpertParallelOverlapCtas, std::to_string(overlap_ctas()));
  benchmark::AddCustomContext(perfgate::context_keys::kNvtxRanges,
                              "EP_Dispatch,EP_Combine,EP_Experts,EP_Layer_Serial,EP_Layer_Pipelined,Expert_Forward");
  benchmark::AddCustomContext(perfgate::context_keys::kExpertParallelRegisteredGpus,
                              std::to_string(ep::gpus_to_register(pb::gpu_count())));
#if defined(PERFGATE_HAVE_NCCL)
  benchmark::AddCustomContext(
      perfgate::context_keys::kExpertParallelNccl,
      perfgate::transfers::nccl::version() + ", " + perfgate::transfers::nccl::configure_environment());
#else
  benchmark::AddCustomContext(perfgate::context_keys::kExpertParallelNccl,
                              "not built (no NCCL): the nccl cases are left out");
#endif
}

}  // namespace

int main(int argc, char** argv) {
  pb::set_default_min_time(0.1);
  check_receiver_percent();
  for (const ep::CaseDesc& c : ep::plan_cases(ep::gpus_to_register(pb::gpu_count()), ep::have_nccl()))
    benchmark::RegisterBenchmark(c.name.c_str(), [c](benchmark::State& st) { run_case(st, c); })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  pb::add_context_hook(&add_suite_context);
  pb::add_context_hook(&pb::add_gpu_slowdown_context);
  return pb::run_main(argc, argv);
}
