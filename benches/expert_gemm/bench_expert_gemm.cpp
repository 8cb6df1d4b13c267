// expert_gemm: the MoE expert FFN forward (router logits -> top-k -> permute -> gate/up -> SiLU*up ->
// down -> un-permute + combine) on cuBLAS, in several GEMM variants, against a roofline measured in the
// same run (calibration/dense_gemm and calibration/copy). See docs/expert_gemm.md.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "perfgate/bench/counters.hpp"
#include "perfgate/bench/cuda.hpp"
#include "perfgate/bench/gpu_slowdown.hpp"
#include "perfgate/bench/main.hpp"
#include "perfgate/bench/nvtx.hpp"
#include "perfgate/bench/setup_profile.hpp"
#include "perfgate/bench/skip.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/expert_gemm/light_gemm.hpp"
#include "perfgate/expert_gemm/moe_kernels.hpp"
#include "perfgate/expert_gemm/moe_runner.hpp"

namespace eg = perfgate::expert_gemm;
namespace pb = perfgate::bench;

namespace {

constexpr int kDevice = 0;
constexpr int kWarmup = 3;

// ---- same-run ceilings --------------------------------------------------------------------------
struct Ceilings {
  double dense_flops_per_s = 0.0;  // best cuBLAS bf16 rate seen in this process
  double copy_bytes_per_s = 0.0;   // best D2D copy rate, bytes read + written
};
Ceilings& ceilings() {
  static Ceilings c;
  return c;
}

constexpr int kDenseN = 8192;
constexpr std::size_t kCopyBytes = std::size_t{1} << 30;

// Times `count` runs of a dense 8192^3 bf16 GEMM (random data); returns ms per GEMM of each run.
class DenseGemm {
 public:
  DenseGemm() : a_(elems()), b_(elems()), c_(elems()), workspace_(32u << 20) {
    PERFGATE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    eg::check_cublas(cublasCreate(&handle_), "cublasCreate");
    eg::check_cublas(cublasSetWorkspace(handle_, workspace_.get(), workspace_.bytes()), "cublasSetWorkspace");
    eg::check_cublas(cublasSetStream(handle_, stream_), "cublasSetStream");
    eg::launch_fill_random_bf16(a_.get(), a_.size(), 11, 1.0f, stream_);
    eg::launch_fill_random_bf16(b_.get(), b_.size(), 12, 1.0f, stream_);
    PERFGATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  ~DenseGemm() {
    cublasDestroy(handle_);
    cudaStreamDestroy(stream_);
  }
  DenseGemm(const DenseGemm&) = delete;
  DenseGemm& operator=(const DenseGemm&) = delete;
  static std::size_t elems() { return static_cast<std::size_t>(kDenseN) * kDenseN; }
  static double flops() { return 2.0 * kDenseN * kDenseN * static_cast<double>(kDenseN); }
  void enqueue() {
    const float alpha = 1.0f;
    const float beta = 0.0f;
    eg::check_cublas(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, kDenseN, kDenseN, kDenseN, &alpha, a_.get(),
                                  CUDA_R_16BF, kDenseN, b_.get(), CUDA_R_16BF, kDenseN, &beta, c_.get(), CUDA_R_16BF,
                                  kDenseN, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmEx(dense)");
  }
  cudaStream_t stream() const { return stream_; }

 private:
  eg::DeviceBuffer<std::uint16_t> a_, b_, c_;
  eg::DeviceBuffer<std::uint8_t> workspace_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t handle_ = nullptr;
};

class DeviceCopy {
 public:
  DeviceCopy() : src_(kCopyBytes), dst_(kCopyBytes) {
    PERFGATE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    eg::launch_fill_random_bf16(reinterpret_cast<std::uint16_t*>(src_.get()), kCopyBytes / 2, 13, 1.0f, stream_);
    PERFGATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  ~DeviceCopy() { cudaStreamDestroy(stream_); }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  static double bytes_moved() { return 2.0 * static_cast<double>(kCopyBytes); }  // read + written
  void enqueue() {
    PERFGATE_CUDA_CHECK(cudaMemcpyAsync(dst_.get(), src_.get(), kCopyBytes, cudaMemcpyDeviceToDevice, stream_));
  }
  bool verify() {
    PERFGATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::uint64_t a = 0;
    std::uint64_t b = 0;
    PERFGATE_CUDA_CHECK(cudaMemcpy(&a, src_.get() + kCopyBytes - 8, 8, cudaMemcpyDeviceToHost));
    PERFGATE_CUDA_CHECK(cudaMemcpy(&b, dst_.get() + kCopyBytes - 8, 8, cudaMemcpyDeviceToHost));
    return a == b;
  }
  cudaStream_t stream() const { return stream_; }

 private:
  eg::DeviceBuffer<std::uint8_t> src_, dst_;
  cudaStream_t stream_ = nullptr;
};

// One of each per process: their buffers (2.4 GB) and cuBLAS handle serve every call of the calibration
// benchmarks and the ceilings that the variants need when the calibrations are filtered out. Like every
// per-process cache here they are never destroyed: the driver frees the memory at exit, and a destructor
// running after main() would call into CUDA while it unloads.
DenseGemm& dense_gemm() {
  static auto* gemm = new DenseGemm();
  return *gemm;
}
DeviceCopy& device_copy() {
  static auto* copy = new DeviceCopy();
  return *copy;
}

template <typename Op>
double time_once_ms(Op& op) {
  pb::EventTimer timer;
  timer.start(op.stream());
  op.enqueue();
  timer.stop(op.stream());
  return timer.elapsed_ms();
}

// The measured loop of a calibration benchmark: one timed launch per iteration, in the "measure" setup
// span and under the clock monitor (its summary into `clocks`). Returns the mean seconds per launch.
template <typename Op>
double measure_calibration(benchmark::State& state, Op& op, std::optional<pb::SetupSpan>& span,
                           pb::nvml::MonitorSummary& clocks) {
  double total_ms = 0.0;
  span.emplace("measure");
  pb::nvml::Monitor monitor(pb::pci_bus_id(kDevice));
  for (auto _ : state) {
    const double ms = time_once_ms(op);
    total_ms += ms;
    state.SetIterationTime(ms / 1e3);
  }
  clocks = monitor.stop();
  span.reset();
  return total_ms / 1e3 / static_cast<double>(state.iterations());
}

// Seconds taken by `reps` launches back to back after the warm-up, timed as one span on the op's stream.
template <typename Op>
double sustained_seconds(Op& op, int reps) {
  for (int i = 0; i < kWarmup; ++i) op.enqueue();
  pb::EventTimer timer;
  timer.start(op.stream());
  for (int i = 0; i < reps; ++i) op.enqueue();
  timer.stop(op.stream());
  return timer.elapsed_ms() / 1e3;
}

// Variants need both ceilings; when the calibration benchmarks were filtered out, measure them here.
void ensure_ceilings() {
  Ceilings& c = ceilings();
  if (c.dense_flops_per_s > 0.0 && c.copy_bytes_per_s > 0.0) return;
  pb::SetupSpan span("ceilings");
  // Sustained for ~0.3 s like the calibration benchmarks (a GEMM burst of a few ms runs before the
  // power limit lowers the clocks, and would overstate the dense rate by ~20% on the H200).
  if (c.dense_flops_per_s <= 0.0) {
    constexpr int kReps = 200;
    c.dense_flops_per_s = DenseGemm::flops() * kReps / sustained_seconds(dense_gemm(), kReps);
  }
  if (c.copy_bytes_per_s <= 0.0) {
    // Copies run at full clock (no power cap to settle into): 50 x 0.7 ms is steady (CV 0.4%).
    constexpr int kReps = 50;
    c.copy_bytes_per_s = DeviceCopy::bytes_moved() * kReps / sustained_seconds(device_copy(), kReps);
  }
}

void bm_dense_gemm(benchmark::State& state) {
  if (!pb::require_gpus(state, 1)) return;
  try {
    std::optional<pb::SetupSpan> span(std::in_place, "calibration_setup");
    DenseGemm& gemm = dense_gemm();
    for (int i = 0; i < kWarmup; ++i) gemm.enqueue();
    pb::nvml::MonitorSummary clocks;
    const double seconds = measure_calibration(state, gemm, span, clocks);
    pb::set_rate(state, "TFLOP/s", DenseGemm::flops() / 1e12, seconds);
    ceilings().dense_flops_per_s = std::max(ceilings().dense_flops_per_s, DenseGemm::flops() / seconds);
    pb::set_info(state, "m=n=k", kDenseN);
    pb::add_clock_counters(state, kDevice, clocks);
  } catch (const std::exception& e) { pb::fail(state, e.what()); }
}

void bm_copy(benchmark::State& state) {
  if (!pb::require_gpus(state, 1)) return;
  try {
    std::optional<pb::SetupSpan> span(std::in_place, "calibration_setup");
    DeviceCopy& copy = device_copy();
    for (int i = 0; i < kWarmup; ++i) copy.enqueue();
    if (!copy.verify()) {
      pb::fail(state, "wrong result: device-to-device copy did not copy");
      return;
    }
    pb::nvml::MonitorSummary clocks;
    const double seconds = measure_calibration(state, copy, span, clocks);
    pb::set_rate(state, "GB/s", DeviceCopy::bytes_moved() / 1e9, seconds);  // bytes read + written
    ceilings().copy_bytes_per_s = std::max(ceilings().copy_bytes_per_s, DeviceCopy::bytes_moved() / seconds);
    pb::set_info(state, "bytes", static_cast<double>(kCopyBytes));
    pb::add_clock_counters(state, kDevice, clocks);
  } catch (const std::exception& e) { pb::fail(state, e.what()); }
}

// ---- the FFN variants ---------------------------------------------------------------------------
const eg::ExpertWeights& weights_for(const eg::Shape& shape) {
  static auto* cache = new std::map<std::string, std::unique_ptr<eg::ExpertWeights>>();
  auto& slot = (*cache)[shape.name];
  if (!slot) {
    pb::SetupSpan span("weights");
    slot = std::make_unique<eg::ExpertWeights>(shape, 0x5EED0000u + static_cast<std::uint64_t>(shape.experts));
  }
  return *slot;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// Tuning knobs for experiments (docs/expert_gemm.md); the defaults are what the baselines use.
eg::FfnOptions ffn_options_from_env() {
  eg::FfnOptions o;
  o.heavy_sms = env_int("PERFGATE_EXPERT_GEMM_HEAVY_SMS", 0);
  o.granule = env_int("PERFGATE_EXPERT_GEMM_GRANULE", o.granule);
  o.chunk_rows = env_int("PERFGATE_EXPERT_GEMM_CHUNK_ROWS", o.chunk_rows);
  o.light_rows = env_int("PERFGATE_EXPERT_GEMM_LIGHT_ROWS", o.light_rows);
  o.light_ctas = env_int("PERFGATE_EXPERT_GEMM_LIGHT_CTAS", o.light_ctas);
  o.overlap_serial = env_int("PERFGATE_EXPERT_GEMM_OVERLAP_SERIAL", 0) != 0;
  o.tail_buckets = env_int("PERFGATE_EXPERT_GEMM_TAIL_BUCKETS", -1);
  o.light_form = env_int("PERFGATE_EXPERT_GEMM_LIGHT_FORM", 0);
  o.light_swiglu = env_int("PERFGATE_EXPERT_GEMM_LIGHT_SWIGLU", 0) != 0;
  o.light_pow2_x_boxes = env_int("PERFGATE_EXPERT_GEMM_LIGHT_POW2_BOXES", 0) != 0;
  o.host_sync_us = env_int("PERFGATE_EXPERT_GEMM_HOST_SYNC_US", 0);
  return o;
}

// Each variant is checked once per process against the CPU reference, before its first timing.
const std::optional<std::string>& correctness(eg::Variant variant) {
  static std::map<eg::Variant, std::optional<std::string>> done;
  auto it = done.find(variant);
  if (it == done.end()) {
    pb::NvtxRange range("correctness_check");
    pb::SetupSpan span("reference_check");
    const eg::ExpertWeights& w = weights_for(eg::small_shape());
    // One seed for every variant: they share the CPU reference (computed once per process).
    constexpr std::uint64_t seed = 1000u;
    // The bucket settings under test, with chunking scaled down to the small shape's row counts.
    eg::FfnOptions options = ffn_options_from_env();
    if (options.chunk_rows > 0) options.chunk_rows = 16;
    // With a planted slowdown, the check runs it too: its duplicates must leave the output alone.
    options.planted_fraction = pb::gpu_slowdown().fraction();
    std::optional<std::string> result = eg::check_variant(variant, w, eg::Routing::zipf, seed, true, options);
    if (!result) result = eg::check_variant(variant, w, eg::Routing::uniform, seed + 7, false, options);
    // overlap: every tile height of the light kernel's forms (eg::kLightCheckTokens)
    if (eg::is_overlap(variant))
      for (int tokens : eg::kLightCheckTokens)
        if (!result) result = eg::check_variant(variant, w, eg::Routing::zipf, seed + tokens, false, options, tokens);
    it = done.emplace(variant, std::move(result)).first;
  }
  return it->second;
}

struct Case {
  std::string name;
  const eg::Shape* shape;
  int tokens;
  eg::Routing routing;
  eg::Variant variant;
  bool cold;
};

// A case ready to time: routing planned on the CPU, buffers allocated, input filled, routing verified on
// the device, graph captured. Google Benchmark calls a benchmark function once per repetition and once more
// per iteration-count estimate; preparing each call anew cost ~0.1 s (DeepSeek-V3 shape), so a process
// keeps its prepared cases (docs/expert_gemm.md, "Process cost").
struct PreparedCase {
  eg::RoutingResult plan;
  eg::FfnOptions options;
  std::unique_ptr<eg::MoeFfn> ffn;
  bool graph = false;
  std::optional<std::string> error;  // routing verification failed
  std::uint64_t last_use = 0;
};

// Hot and cold share a prepared case, unless a planted slowdown selects only one of them.
std::string case_key(const Case& c) {
  return fmt::format("{}/{}/{}/{}/plant:{}", c.shape->name, c.tokens, eg::routing_name(c.routing),
                     eg::variant_name(c.variant), pb::gpu_slowdown().fraction_for(c.name));
}

// Free device memory below which prepared cases are released, least recently used first (the DeepSeek-V3
// weights take 22.5 GB, a 4096-token case about 1.5 GB).
constexpr std::size_t kKeepFreeBytes = std::size_t{12} << 30;

void release_prepared_until_free(std::map<std::string, PreparedCase>& cache, std::size_t need_free) {
  while (!cache.empty()) {
    std::size_t free = 0, total = 0;
    PERFGATE_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    if (free >= need_free) return;
    auto oldest = cache.begin();
    for (auto it = cache.begin(); it != cache.end(); ++it)
      if (it->second.last_use < oldest->second.last_use) oldest = it;
    cache.erase(oldest);
  }
}

PreparedCase& prepared(const Case& c, const Ceilings& ceil) {
  static auto* cache = new std::map<std::string, PreparedCase>();
  static std::uint64_t uses = 0;
  const std::string key = case_key(c);
  auto it = cache->find(key);
  if (it == cache->end()) {
    const eg::Shape& shape = *c.shape;
    const eg::ExpertWeights& weights = weights_for(shape);
    release_prepared_until_free(*cache, kKeepFreeBytes);
    const std::uint64_t seed =
        77u + static_cast<std::uint64_t>(c.tokens) * 2 + (c.routing == eg::Routing::zipf ? 1 : 0);
    PreparedCase p;
    std::optional<pb::SetupSpan> span(std::in_place, "ffn_routing_cpu");
    const auto logits = eg::make_router_logits(shape, c.tokens, c.routing, seed);
    p.plan = eg::route_cpu(shape, c.tokens, logits);
    span.emplace("ffn_setup");
    p.options = ffn_options_from_env();
    // The measured ridge, unless an experiment moves it (bucketed_streams: which buckets take the side stream).
    const int ridge_override = env_int("PERFGATE_EXPERT_GEMM_RIDGE_ROWS", 0);
    p.options.ridge_rows = ridge_override > 0 ? ridge_override : ceil.dense_flops_per_s / ceil.copy_bytes_per_s;
    p.options.planted_fraction = pb::gpu_slowdown().fraction_for(c.name);
    // Graphs where launches are small: the per-expert loop, and few tokens.
    p.options.graph =
        env_int("PERFGATE_EXPERT_GEMM_GRAPHS", 1) != 0 && (c.variant == eg::Variant::per_expert || c.tokens <= 128);
    p.ffn = std::make_unique<eg::MoeFfn>(weights, c.tokens, c.variant, logits, p.plan, p.options);
    span.emplace("ffn_prepare");
    p.ffn->fill_random_input(seed + 5);
    p.ffn->run();
    PERFGATE_CUDA_CHECK(cudaStreamSynchronize(p.ffn->stream()));
    p.error = p.ffn->verify_routing();
    if (!p.error) p.graph = p.options.graph && p.ffn->capture_graph();
    it = cache->emplace(key, std::move(p)).first;
  }
  it->second.last_use = ++uses;
  return it->second;
}

// What the timed loop of one case adds up: per stage, per overlap part (light and heavy), in all.
struct FfnTotals {
  std::array<double, eg::kStageCount> stage{};
  std::array<double, 4> parts{};
  double total_ms = 0.0;
  pb::nvml::MonitorSummary clocks;
};

// Warms the case up and measures it: the fixture's timed loop.
FfnTotals measure_ffn(benchmark::State& state, const Case& c, eg::MoeFfn& ffn) {
  FfnTotals t;
  std::optional<pb::SetupSpan> span(std::in_place, "ffn_warmup");
  for (int i = 0; i < kWarmup; ++i) ffn.run();
  PERFGATE_CUDA_CHECK(cudaStreamSynchronize(ffn.stream()));

  span.emplace("ffn_l2_flusher");
  std::unique_ptr<pb::L2Flusher> flusher;
  if (c.cold) flusher = std::make_unique<pb::L2Flusher>(kDevice);
  span.emplace("measure");
  pb::nvml::Monitor monitor(pb::pci_bus_id(kDevice));
  for (auto _ : state) {
    if (flusher) flusher->flush(ffn.stream());
    ffn.run();
    const auto stages = ffn.stage_ms();
    const float ms = ffn.total_ms();
    for (std::size_t i = 0; i < stages.size(); ++i) t.stage[i] += stages[i];
    if (eg::is_overlap(c.variant)) {
      const auto parts = ffn.overlap_parts_ms();
      for (std::size_t i = 0; i < parts.size(); ++i) t.parts[i] += parts[i];
    }
    t.total_ms += ms;
    state.SetIterationTime(ms / 1e3);
  }
  PERFGATE_CUDA_CHECK(cudaGetLastError());
  t.clocks = monitor.stop();
  return t;
}

// The overlap variant's counters: the light kernel's shape and, without graphs, its time and the heavy calls'.
void report_overlap_counters(benchmark::State& state, const eg::Shape& shape, const PreparedCase& prep,
                             const FfnTotals& t) {
  const eg::MoeFfn& ffn = *prep.ffn;
  const double iters = static_cast<double>(state.iterations());
  pb::set_info(state, "light.rows_max", ffn.options().light_rows);
  pb::set_info(state, "light.ctas", ffn.options().light_ctas);
  pb::set_info(state, "light.serial", ffn.options().overlap_serial ? 1.0 : 0.0);
  if (ffn.light_swiglu()) pb::set_info(state, "light.swiglu", 1.0);
  if (ffn.options().light_pow2_x_boxes) pb::set_info(state, "light.pow2_x_boxes", 1.0);
  if (ffn.tail_buckets() > 0) pb::set_info(state, "light.tail_buckets", ffn.tail_buckets());
  pb::set_info(state, "light.experts", ffn.light_experts());
  pb::set_info(state, "light.rows", static_cast<double>(ffn.light_rows_total()));
  if (ffn.light_experts() > 0)
    pb::set_info(state, "light.form", eg::light_gemm_form(ffn.light_max_rows(), ffn.options().light_form));
  if (prep.graph || t.parts[0] < 0.0) return;
  // Milliseconds of the light kernel and of the heavy cuBLAS calls per stage, and the light
  // kernel's weight bandwidth (its experts' weights once / its time).
  const char* names[4] = {"light.gate_up_ms", "heavy.gate_up_ms", "light.down_ms", "heavy.down_ms"};
  for (std::size_t i = 0; i < 4; ++i) pb::set_info(state, names[i], t.parts[i] / iters);
  const double light_w = 2.0 * ffn.light_experts() * 3.0 * shape.intermediate * shape.hidden;
  const double light_ms = (t.parts[0] + t.parts[2]) / iters;
  if (light_ms > 0) pb::set_info(state, "light.weight_gbps", light_w / (light_ms / 1e3) / 1e9);
}

// The planted slow-down's counters: its fraction, and the duplicated experts' share of FLOPs and roofline.
void report_planted_counters(benchmark::State& state, const Case& c, const PreparedCase& prep, const Ceilings& ceil,
                             double gemm_roofline_s) {
  const eg::Shape& shape = *c.shape;
  const eg::MoeFfn& ffn = *prep.ffn;
  pb::set_info(state, "planted.fraction", prep.options.planted_fraction);
  pb::set_info(state, "planted.flop_share", ffn.planted().flop_share);
  pb::set_info(state, "planted.experts", static_cast<double>(ffn.planted().experts.size()));
  // The duplicates' share of the GEMM roofline (FLOPs or weight bytes, whichever bounds each stage):
  // where light experts are chosen (Zipf), it exceeds the FLOP share, and the time follows it more.
  std::vector<int> chosen(prep.plan.counts.size(), 0);
  for (int e : ffn.planted().experts)
    chosen[static_cast<std::size_t>(e)] = prep.plan.counts[static_cast<std::size_t>(e)];
  const eg::Work dup = eg::count_work(shape, c.tokens, chosen);
  const double f = ceil.dense_flops_per_s;
  const double b = ceil.copy_bytes_per_s;
  const double roof_dup = pb::roofline_seconds(dup.flops_gate_up, f, dup.gemm_bytes_gate_up(), b) +
                          pb::roofline_seconds(dup.flops_down, f, dup.gemm_bytes_down(), b);
  pb::set_info(state, "planted.roofline_share", roof_dup / gemm_roofline_s);
}

// The case's counters from what its timed loop added up: rates, roofline shares, routing, and the variant's own.
void report_ffn_counters(benchmark::State& state, const Case& c, const PreparedCase& prep, const Ceilings& ceil,
                         const FfnTotals& t) {
  const eg::Shape& shape = *c.shape;
  const eg::MoeFfn& ffn = *prep.ffn;
  const eg::FfnOptions& options = prep.options;
  const double iters = static_cast<double>(state.iterations());
  const double seconds = t.total_ms / 1e3 / iters;
  for (std::size_t i = 0; i < t.stage.size(); ++i) pb::set_phase_ms(state, eg::kStageNames[i], t.stage[i]);
  const eg::Work work = eg::count_work(shape, c.tokens, prep.plan.counts);
  const double f = ceil.dense_flops_per_s;
  const double b = ceil.copy_bytes_per_s;
  const double roof_ffn = pb::roofline_seconds(work.flops(), f, work.ffn_bytes(), b);
  const double roof_gu = pb::roofline_seconds(work.flops_gate_up, f, work.gemm_bytes_gate_up(), b);
  const double roof_dn = pb::roofline_seconds(work.flops_down, f, work.gemm_bytes_down(), b);
  const double gu_s = t.stage[2] / 1e3 / iters;
  const double dn_s = t.stage[4] / 1e3 / iters;

  pb::set_rate(state, "TFLOP/s", work.flops() / 1e12, seconds);
  pb::set_rate(state, "GB/s", work.ffn_bytes() / 1e9, seconds);
  pb::set_percent_of(state, "roofline", roof_ffn, seconds);
  pb::set_percent_of(state, "dense", work.flops() / seconds, f);
  pb::set_percent_of(state, "gemm_roofline", roof_gu + roof_dn, gu_s + dn_s);
  pb::set_percent_of(state, "gate_up_roofline", roof_gu, gu_s);
  pb::set_percent_of(state, "down_roofline", roof_dn, dn_s);
  const eg::RoutingStats rs = eg::routing_stats(prep.plan.counts);
  pb::set_info(state, "tokens_per_expert.max_over_mean", rs.max_over_mean);
  pb::set_info(state, "tokens_per_expert.max", rs.max_rows);
  pb::set_info(state, "experts.active", rs.active_experts);
  pb::set_info(state, "rows.padding_factor",
               static_cast<double>(ffn.computed_rows()) / (static_cast<double>(c.tokens) * shape.top_k));
  pb::set_info(state, "roofline_ms", roof_ffn * 1e3);
  pb::set_info(state, "gemm_roofline_ms", (roof_gu + roof_dn) * 1e3);
  pb::set_info(state, "ceiling.dense_tflops", f / 1e12);
  pb::set_info(state, "ceiling.copy_gbps", b / 1e9);
  pb::set_info(state, "graph", prep.graph ? 1.0 : 0.0);
  pb::set_info(state, "gemm_launches", ffn.gemm_launches());
  if (c.variant == eg::Variant::bucketed_streams || eg::is_overlap(c.variant))
    pb::set_info(state, "heavy_sms", ffn.heavy_sms());
  if (eg::is_overlap(c.variant)) report_overlap_counters(state, shape, prep, t);
  if (c.variant == eg::Variant::bucketed || c.variant == eg::Variant::bucketed_streams || eg::is_overlap(c.variant)) {
    pb::set_info(state, "bucket.granule", options.granule);
    pb::set_info(state, "bucket.chunk_rows", options.chunk_rows);
  }
  if (options.host_sync_us > 0) pb::set_info(state, "planted.host_sync_us", options.host_sync_us);
  if (options.planted_fraction > 0.0) report_planted_counters(state, c, prep, ceil, roof_gu + roof_dn);
  pb::add_clock_counters(state, kDevice, t.clocks);
}

void bm_ffn(benchmark::State& state, Case c) {
  pb::SetupSpan call_span("ffn_call");
  if (!pb::require_gpus(state, 1)) return;
  try {
    if (const auto& err = correctness(c.variant)) {
      pb::fail(state, *err);
      return;
    }
    ensure_ceilings();
    const Ceilings ceil = ceilings();
    PreparedCase& prep = prepared(c, ceil);
    if (prep.error) {
      pb::fail(state, *prep.error);
      return;
    }
    const FfnTotals totals = measure_ffn(state, c, *prep.ffn);
    report_ffn_counters(state, c, prep, ceil, totals);
  } catch (const std::exception& e) { pb::fail(state, e.what()); }
}

void add_suite_context() {
  benchmark::AddCustomContext(perfgate::context_keys::kSuite, "expert_gemm");
  benchmark::AddCustomContext(perfgate::context_keys::kNvtxRanges,
                              "Expert_Forward,Routing,Permute,Linear1_Computation,Activation,Linear2_Computation,"
                              "Combine");
  // Whose time follows the SM clock: the dense GEMM, and the FFN at DeepSeek-V3 x 4096 tokens, whose GEMM
  // stages run near the dense rate. Where the two sides of a comparison ran at different clocks, these are
  // judged in cycles (docs/statistics.md, "Cycle space"); the copy calibration and the small, launch- and
  // weight-bound cases are not.
  benchmark::AddCustomContext(perfgate::context_keys::kComputeBound,
                              "expert_gemm/(calibration/dense_gemm|ffn/[^/]+/shape:deepseek-v3/tokens:4096/.*)");
}

[[maybe_unused]] const bool registered = [] {
  pb::add_context_hook(&add_suite_context);
  pb::add_context_hook(&pb::add_gpu_slowdown_context);
  // A repetition of 0.1 s holds 10-1000 iterations of these millisecond kernels, enough on a quiet GPU
  // (baselines and the gate use 0.1 s too); Google Benchmark's own 0.5 s made `perfgate ab` without
  // --min-time spend most of its time measuring.
  pb::set_default_min_time(0.1);
  benchmark::RegisterBenchmark("expert_gemm/calibration/dense_gemm", bm_dense_gemm)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("expert_gemm/calibration/copy", bm_copy)->UseManualTime()->Unit(benchmark::kMillisecond);
  for (const eg::Shape* shape : {&eg::small_shape(), &eg::deepseek_v3()}) {
    for (int tokens : {1, 32, 128, 512, 4096}) {
      for (eg::Routing routing : {eg::Routing::uniform, eg::Routing::zipf}) {
        for (eg::Variant variant : eg::all_variants()) {
          for (bool cold : {true, false}) {
            const std::string name =
                fmt::format("expert_gemm/ffn/{}/shape:{}/tokens:{}/routing:{}/mode:{}", eg::variant_name(variant),
                            shape->name, tokens, eg::routing_name(routing), cold ? "cold" : "hot");
            benchmark::RegisterBenchmark(name.c_str(), bm_ffn, Case{name, shape, tokens, routing, variant, cold})
                ->UseManualTime()
                ->Unit(benchmark::kMillisecond);
          }
        }
      }
    }
  }
  return true;
}();

}  // namespace

PERFGATE_BENCH_MAIN()
