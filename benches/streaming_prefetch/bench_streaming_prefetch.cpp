// streaming_prefetch: layer weights streamed host -> GPU on a copy stream while the previous layer
// computes (seed 002). See docs/streaming_prefetch.md for what each counter means and how it is measured.
//
//   streaming_prefetch/step/resident/model:M                     compute-only floor
//   streaming_prefetch/step/serial/model:M                       copy, then compute, no overlap
//   streaming_prefetch/step/streamed/model:M/distance:D/slots:S  the prefetching cache (D < S)
//   streaming_prefetch/step/transfer_only/model:M                IO floor
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "perfgate/bench/check.hpp"
#include "perfgate/bench/counters.hpp"
#include "perfgate/bench/cuda.hpp"
#include "perfgate/bench/gpu_slowdown.hpp"
#include "perfgate/bench/links.hpp"
#include "perfgate/bench/main.hpp"
#include "perfgate/bench/nvml.hpp"
#include "perfgate/bench/skip.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/streaming_prefetch/engine.hpp"

namespace {

namespace pb = perfgate::bench;
using perfgate::streaming_prefetch::Mode;
using perfgate::streaming_prefetch::ModelShape;
using perfgate::streaming_prefetch::StepStats;
using perfgate::streaming_prefetch::StreamConfig;
using perfgate::streaming_prefetch::StreamingEngine;

constexpr const char* kSuite = "streaming_prefetch";
constexpr double kMeasuredH2DBytesPerSecond = 55.2e9;  // pinned H2D, 256 MiB, nvidia-h200 (docs/transfers.md)-x2
constexpr int kWarmupSteps = 2;
constexpr int kFloorSteps = 10;
constexpr int kDevice = 0;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Floors measured once per model and process, before the first case of that model runs.
struct Floors {
  double compute_ms = 0;   // resident step, median of kFloorSteps
  double transfer_ms = 0;  // transfer_only step, median of kFloorSteps
  double link_bytes_per_second = 0;
  unsigned pcie_gen = 0;
  unsigned pcie_width = 0;
  std::vector<std::uint16_t> reference;  // resident output, the bits every other mode must reproduce
};

struct ModelState {
  std::unique_ptr<StreamingEngine> engine;
  std::optional<Floors> floors;
  std::set<std::string> checked;  // cases whose result matched the reference
};

ModelState& model_state(const std::string& name) {
  static std::map<std::string, ModelState> states;
  ModelState& ms = states[name];
  if (!ms.engine) ms.engine = std::make_unique<StreamingEngine>(perfgate::streaming_prefetch::model_preset(name));
  return ms;
}

double median_step(StreamingEngine& engine, Mode mode, const StreamConfig& config) {
  engine.configure(mode, config);
  for (int i = 0; i < kWarmupSteps; ++i) engine.step();
  std::vector<double> steps;
  for (int i = 0; i < kFloorSteps; ++i) steps.push_back(engine.step().step_ms);
  return median(steps);
}

float bf16_bits_to_float(std::uint16_t bits) {
  const std::uint32_t word = static_cast<std::uint32_t>(bits) << 16;
  float f = 0.0f;
  std::memcpy(&f, &word, sizeof(f));
  return f;
}

// Throws on a degenerate reference (NaN/inf or all zero), which would make the equality check vacuous.
const Floors& floors(ModelState& ms) {
  if (ms.floors) return *ms.floors;
  StreamingEngine& engine = *ms.engine;
  Floors f;
  f.compute_ms = median_step(engine, Mode::resident, {});
  f.reference = engine.output();
  double sum_sq = 0.0;
  for (std::uint16_t bits : f.reference) {
    const float v = bf16_bits_to_float(bits);
    if (!std::isfinite(v))
      throw std::runtime_error("resident reference output holds a non-finite value: the model is ill-scaled");
    sum_sq += static_cast<double>(v) * v;
  }
  if (sum_sq == 0.0) throw std::runtime_error("resident reference output is all zeros");
  f.transfer_ms = median_step(engine, Mode::transfer_only, StreamConfig{0, 2, 0});
  // Read the link right after the copies, while it is trained up (an idle link may drop its generation).
  const auto facts = pb::nvml::query(pb::pci_bus_id(kDevice));
  if (facts.pcie_gen_current && facts.pcie_width_current) {
    f.pcie_gen = *facts.pcie_gen_current;
    f.pcie_width = *facts.pcie_width_current;
    f.link_bytes_per_second = pb::pcie_bytes_per_second(f.pcie_gen, f.pcie_width);
  }
  ms.floors = std::move(f);
  return *ms.floors;
}

void check_case(ModelState& ms, const std::string& key, Mode mode, const StreamConfig& config, const Floors& f) {
  if (mode == Mode::transfer_only || ms.checked.count(key)) return;
  StreamingEngine& engine = *ms.engine;
  engine.configure(mode, config);
  // Step 1 starts cold (on-demand fetches); step 2 runs on layers prefetched during step 1.
  for (int s = 1; s <= 2; ++s) {
    engine.step();
    const auto out = engine.output();
    if (auto err = pb::check_equal(fmt::format("hidden state after step {} vs resident", s),
                                   std::span<const std::uint16_t>(out), std::span<const std::uint16_t>(f.reference)))
      throw std::runtime_error(*err);
  }
  ms.checked.insert(key);
}

// The timed steps, summed; one step per iteration, its step_ms the iteration's time.
StepStats measure_steps(benchmark::State& state, StreamingEngine& engine) {
  StepStats sum;
  for (auto _ : state) {
    const StepStats s = engine.step();
    state.SetIterationTime(s.step_ms * 1e-3);
    sum.step_ms += s.step_ms;
    sum.compute_ms += s.compute_ms;
    sum.wait_ms += s.wait_ms;
    sum.transfer_ms += s.transfer_ms;
    sum.h2d_bytes += s.h2d_bytes;
    sum.ensures += s.ensures;
    sum.hits += s.hits;
    sum.ready += s.ready;
  }
  return sum;
}

// step, layer and compute milliseconds, tokens/s, TFLOP/s and the sync wait, over n steps.
void report_step_counters(benchmark::State& state, const ModelShape& shape, Mode mode, const StepStats& sum, double n) {
  const double step_s = sum.step_ms / n * 1e-3;
  pb::set_phase_ms(state, "step", sum.step_ms);
  pb::set_phase_ms(state, "layer", sum.step_ms / shape.layers);
  if (mode != Mode::transfer_only) {
    pb::set_phase_ms(state, "compute", sum.compute_ms);
    pb::set_rate(state, "tokens/s", shape.tokens, step_s);
    pb::set_rate(state, "TFLOP/s", shape.flops_per_layer() * shape.layers * 1e-12, step_s);
    pb::set_info(state, "sync_wait_ms", sum.wait_ms / n);
    pb::set_percent_of(state, "sync_wait", sum.wait_ms, sum.step_ms);
  }
}

// The host-to-device copies' time and rates, over n steps.
void report_transfer_counters(benchmark::State& state, Mode mode, const StepStats& sum, double n, const Floors& f) {
  if (sum.h2d_bytes == 0) return;
  const double step_s = sum.step_ms / n * 1e-3;
  pb::set_phase_ms(state, "transfer", sum.transfer_ms);
  const double bytes_per_second = static_cast<double>(sum.h2d_bytes) / (sum.step_ms * 1e-3);
  if (mode == Mode::transfer_only) pb::set_rate(state, "GB/s", static_cast<double>(sum.h2d_bytes) / n * 1e-9, step_s);
  pb::set_info(state, "h2d_GBps", bytes_per_second * 1e-9);
  pb::set_percent_of(state, "h2d_measured_55_2GBps", bytes_per_second, kMeasuredH2DBytesPerSecond);
  if (f.link_bytes_per_second > 0) pb::set_percent_of(state, "pcie_link", bytes_per_second, f.link_bytes_per_second);
}

// The step against the floors (compute alone, copies alone), the cache's rates, the model and the link.
void report_floor_counters(benchmark::State& state, const ModelShape& shape, Mode mode, const StepStats& sum, double n,
                           const Floors& f) {
  const double step_ms = sum.step_ms / n;
  if (mode == Mode::streamed || mode == Mode::serial) {
    const double overlap = (f.compute_ms + f.transfer_ms - step_ms) / std::min(f.compute_ms, f.transfer_ms);
    pb::set_percent_of(state, "overlap_efficiency", overlap, 1.0);
  }
  if (mode == Mode::streamed && sum.ensures > 0) {
    pb::set_info(state, "cache_hit_rate", static_cast<double>(sum.hits) / sum.ensures);
    pb::set_info(state, "ready_rate", static_cast<double>(sum.ready) / sum.ensures);
  }
  pb::set_info(state, "floor_compute_ms", f.compute_ms);
  pb::set_info(state, "floor_transfer_ms", f.transfer_ms);
  pb::set_info(state, "balance_ratio", f.compute_ms / f.transfer_ms);
  pb::set_info(state, "step_vs_floor", step_ms / std::max(f.compute_ms, f.transfer_ms));
  pb::set_info(state, "layer_MB", static_cast<double>(shape.bytes_per_layer()) * 1e-6);
  if (f.pcie_gen > 0) {
    pb::set_info(state, "pcie_gen", f.pcie_gen);
    pb::set_info(state, "pcie_width", f.pcie_width);
  }
}

void run_case(benchmark::State& state, const std::string& case_name, const std::string& model_name, Mode mode,
              StreamConfig config) {
  if (!pb::require_gpus(state, 1)) return;
  try {
    const ModelShape shape = perfgate::streaming_prefetch::model_preset(model_name);
    if (mode == Mode::streamed) perfgate::streaming_prefetch::validate(shape, config);  // bad arguments -> fail()
    ModelState& ms = model_state(model_name);
    StreamingEngine& engine = *ms.engine;
    // The floors (and the reference output) are the unplanted model's; a planted case is checked with its
    // second GEMMs running, so they are shown to leave the output alone.
    engine.set_planted(0.0);
    const Floors& f = floors(ms);
    // transfer_only has no compute to add to: never planted.
    const double planted_fraction = mode == Mode::transfer_only ? 0.0 : pb::gpu_slowdown().fraction_for(case_name);
    const perfgate::streaming_prefetch::PlantedGemms planted = engine.set_planted(planted_fraction);
    check_case(ms, case_name, mode, config, f);

    engine.configure(mode, config);
    for (int i = 0; i < kWarmupSteps; ++i) engine.step();  // reach the steady state of the pipeline

    pb::nvml::Monitor monitor(pb::pci_bus_id(kDevice));
    const StepStats sum = measure_steps(state, engine);
    const pb::nvml::MonitorSummary clocks = monitor.stop();

    const double n = static_cast<double>(state.iterations());
    if (n <= 0) return;
    report_step_counters(state, shape, mode, sum, n);
    report_transfer_counters(state, mode, sum, n, f);
    report_floor_counters(state, shape, mode, sum, n, f);
    if (planted_fraction > 0) {
      pb::set_info(state, "planted.fraction", planted_fraction);
      pb::set_info(state, "planted.flop_share", planted.flop_share);
    }
    pb::add_clock_counters(state, kDevice, clocks);
  } catch (const std::exception& e) { pb::fail(state, e.what()); }
}

void add_suite_context() {
  benchmark::AddCustomContext(perfgate::context_keys::kSuite, kSuite);
  // A step cannot beat its GEMMs at the top clock nor its copy at the link's speed, and the host's traffic or a
  // lower clock only slows it: the harness levels each process run by its fastest repetition (docs/statistics.md,
  // "A run's level").
  benchmark::AddCustomContext(perfgate::context_keys::kFloorBound, "streaming_prefetch/step/.*");
  benchmark::AddCustomContext(
      perfgate::context_keys::kNvtxRanges,
      "ensure_layer_X,prefetch_layers_[X,Y],h2d_transfer_layer_X,layer_X_attention,layer_X_ffn");
  for (const auto& name : perfgate::streaming_prefetch::model_preset_names()) {
    const ModelShape m = perfgate::streaming_prefetch::model_preset(name);
    benchmark::AddCustomContext(
        perfgate::context_keys::kStreamingModelPrefix + name,
        fmt::format("layers {} hidden {} intermediate {} tokens {} layer_bytes {} layer_flop {:.4g}", m.layers,
                    m.hidden, m.intermediate, m.tokens, m.bytes_per_layer(), m.flops_per_layer()));
  }
}

void register_case(const std::string& name, const std::string& model, Mode mode, StreamConfig config) {
  benchmark::RegisterBenchmark(
      name.c_str(), [name, model, mode, config](benchmark::State& st) { run_case(st, name, model, mode, config); })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

[[maybe_unused]] const bool registered = [] {
  pb::add_context_hook(&add_suite_context);
  pb::add_context_hook(&pb::add_gpu_slowdown_context);
  for (const auto& model : perfgate::streaming_prefetch::model_preset_names()) {
    const std::string prefix = fmt::format("{}/step/", kSuite);
    const std::string tail = "/model:" + model;
    register_case(prefix + "resident" + tail, model, Mode::resident, {});
    register_case(prefix + "serial" + tail, model, Mode::serial, {});
    for (int slots : {2, 4, 6})
      for (int distance : {0, 1, 2, 3})
        if (distance < slots)
          register_case(fmt::format("{}streamed{}/distance:{}/slots:{}", prefix, tail, distance, slots), model,
                        Mode::streamed, StreamConfig{distance, slots, 0});
    register_case(prefix + "transfer_only" + tail, model, Mode::transfer_only, StreamConfig{0, 2, 0});
  }
  return true;
}();

}  // namespace

PERFGATE_BENCH_MAIN()
