// expert_parallel: the expert-parallel MoE layer over the GPUs of one host (DeepSeek-V3: H 7168, 256 experts,
// top-8, bf16). Dispatch and combine in three variants (NCCL all-to-all-v, copy engines, a peer-store
// kernel) against the all-pairs peer-copy ceiling measured in the same process, and the whole layer, serial
// and pipelined. See docs/expert_parallel.md.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "perfgate/bench/counters.hpp"
#include "perfgate/bench/cuda.hpp"
#include "perfgate/bench/main.hpp"
#include "perfgate/bench/nvtx.hpp"
#include "perfgate/bench/skip.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/expert_parallel/case_plan.hpp"
#include "perfgate/expert_parallel/checks.hpp"
#include "perfgate/expert_parallel/layer.hpp"
#if defined(PERFGATE_HAVE_NCCL)
#include "perfgate/transfers/nccl_world.hpp"
#endif

namespace ep = perfgate::expert_parallel;
namespace eg = perfgate::expert_gemm;
namespace pb = perfgate::bench;

namespace {

constexpr int kWarmup = 3;
constexpr int kAloneReps = 5;  // runs of the exchange alone and the experts alone (median), once per case

// ---- the case's state, kept while its repetitions run back to back ---------------------------------
// The last case's problem (tokens, routing, inputs), exchange round or layer, and what was measured once.
struct Current {
  std::string problem_key;
  std::unique_ptr<ep::Problem> problem;
  std::string name;
  std::unique_ptr<ep::ExchangeRound> round;  // dispatch / combine cases
  std::unique_ptr<ep::EpLayer> layer;        // layer cases
  std::optional<std::string> error;          // the correctness check's verdict
  double exchange_ms = 0, experts_ms = 0;    // layer: alone times
};
Current& current() {
  static Current c;
  return c;
}

ep::Problem& problem_for(const ep::CaseDesc& c) {
  Current& cur = current();
  const std::string key = fmt::format("{}/{}/{}", c.gpus, c.tokens, eg::routing_name(c.routing));
  if (cur.problem_key != key) {
    cur.round.reset();
    cur.layer.reset();
    cur.name.clear();
    cur.problem.reset();
    cur.problem = ep::make_problem(c.gpus, c.tokens, c.routing);
    cur.problem_key = key;
  }
  return *cur.problem;
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
void add_straggler_counters(benchmark::State& state, const ep::Problem& p) {
  const auto rows = ep::expert_rows_per_gpu(p.routing.counts, p.gpus);
  const ep::Straggler s = ep::find_straggler(rows);
  pb::set_info(state, "straggler_gpu", s.gpu);
  pb::set_info(state, "straggler_expert_rows", static_cast<double>(s.rows));
  pb::set_info(state, "mean_expert_rows", s.mean_rows);
  pb::set_info(state, "straggler_over_mean", s.over_mean);
}

// Bytes per GPU of one direction, its rate and its share of the all-pairs peer ceiling.
void add_traffic_counters(benchmark::State& state, const ep::Traffic& t, int gpus, double s_per_iter) {
  const double ceiling = ep::peer_ceiling_GBps(gpus);
  pb::set_info(state, "bytes_remote_per_gpu", t.mean_sent_remote);
  pb::set_info(state, "bytes_remote_max_gpu", t.max_remote);
  pb::set_info(state, "bytes_local_per_gpu", t.local / gpus);
  pb::set_info(state, "peer_ceiling_GB/s", ceiling);
  if (s_per_iter <= 0) return;
  pb::set_rate(state, "GB/s", t.mean_sent_remote / 1e9, s_per_iter);
  pb::set_percent_of(state, "peer_ceiling", t.mean_sent_remote / 1e9 / s_per_iter, ceiling);
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
ep::ExchangeRound& round_for(const ep::CaseDesc& c, ep::GpuSet& set) {
  Current& cur = current();
  ep::Problem& p = problem_for(c);
  if (cur.name != c.name || !cur.round) {
    cur.layer.reset();
    cur.round.reset();
    const eg::Shape& shape = eg::deepseek_v3();
    const auto plan = ep::plan_exchange(p.routing, shape.experts, shape.top_k, c.gpus, c.tokens, 0, c.tokens);
    cur.round = std::make_unique<ep::ExchangeRound>(set, plan, shape.hidden);
    pb::NvtxRange range("correctness_check");
    cur.error = c.op == ep::Op::dispatch ? ep::check_dispatch(set, *cur.round, c.exchange, p)
                                         : ep::check_combine(set, *cur.round, c.exchange, p);
    cur.name = c.name;
  }
  return *cur.round;
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
  ep::ExchangeRound& round = round_for(c, set);
  if (current().error) return pb::fail(state, *current().error);
  const ep::Problem& p = *current().problem;
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
  add_straggler_counters(state, p);
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

// Builds the case's layer, checks it against the CPU reference and measures the alone times, once.
ep::EpLayer& layer_for(const ep::CaseDesc& c, ep::GpuSet& set) {
  Current& cur = current();
  ep::Problem& p = problem_for(c);
  if (cur.name == c.name && cur.layer) return *cur.layer;
  cur.round.reset();
  cur.layer.reset();  // free the previous case's buffers before allocating this one's
  cur.layer = std::make_unique<ep::EpLayer>(set, p, c.exchange, c.chunks);
  cur.name = c.name;
  {
    pb::NvtxRange range("correctness_check");
    ep::poison_outputs(p);
    run_schedule(c, *cur.layer, nullptr);
    set.synchronize();
    cur.error = ep::check_layer_sample(p, {{0, 0}, {c.gpus - 1, c.tokens - 1}});
  }
  cur.exchange_ms = median_ms(set, kAloneReps, [&] { cur.layer->run_exchange_only(); });
  cur.experts_ms = median_ms(set, kAloneReps, [&] { cur.layer->run_experts_only(); });
  return *cur.layer;
}

void add_layer_counters(benchmark::State& state, const ep::CaseDesc& c, double layer_ms, const double phase_ms[3]) {
  const Current& cur = current();
  const double iters = static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
  if (c.schedule == ep::Schedule::serial) {
    pb::set_phase_ms(state, "dispatch", phase_ms[0]);
    pb::set_phase_ms(state, "experts", phase_ms[1]);
    pb::set_phase_ms(state, "combine", phase_ms[2]);
    pb::set_info(state, "exposed_exchange_ms", (phase_ms[0] + phase_ms[2]) / iters);
  } else {
    pb::set_phase_ms(state, "experts", cur.experts_ms * iters);
    pb::set_phase_ms(state, "exposed_exchange", std::max(0.0, layer_ms / iters - cur.experts_ms) * iters);
  }
  const double t_layer = layer_ms / iters;
  pb::set_info(state, "exchange_alone_ms", cur.exchange_ms);
  pb::set_info(state, "experts_alone_ms", cur.experts_ms);
  pb::set_info(state, "max_exchange_experts_ms", std::max(cur.exchange_ms, cur.experts_ms));
  // streaming_prefetch's overlap efficiency: 100% = the shorter part completely hidden, 0% = serial.
  const double shorter = std::min(cur.exchange_ms, cur.experts_ms);
  if (shorter > 0)
    pb::set_percent_of(state, "overlap_efficiency", (cur.exchange_ms + cur.experts_ms - t_layer) / shorter, 1.0);
  pb::set_rate(state, "tokens/s", static_cast<double>(c.gpus) * c.tokens, t_layer / 1e3);
}

void run_layer(benchmark::State& state, const ep::CaseDesc& c) {
  ep::GpuSet& set = ep::GpuSet::get(c.gpus);
  ep::EpLayer& layer = layer_for(c, set);
  if (current().error) return pb::fail(state, *current().error);
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
  add_layer_counters(state, c, total_ms, phase_ms);
  const ep::Traffic t = ep::traffic(layer.plans(), eg::deepseek_v3().hidden * 2);
  pb::set_info(state, "bytes_remote_per_gpu", 2 * t.mean_sent_remote);  // dispatch + combine
  add_straggler_counters(state, *current().problem);
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
    current() = Current{};  // a failed case leaves nothing half-built for the next one
    pb::fail(state, e.what());
  }
}

void add_suite_context() {
  benchmark::AddCustomContext(perfgate::context_keys::kSuite, "expert_parallel");
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
  for (const ep::CaseDesc& c : ep::plan_cases(ep::gpus_to_register(pb::gpu_count()), ep::have_nccl()))
    benchmark::RegisterBenchmark(c.name.c_str(), [c](benchmark::State& st) { run_case(st, c); })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  pb::add_context_hook(&add_suite_context);
  return pb::run_main(argc, argv);
}
