// lora_backward: the MoE layer with LoRA of seed 004 (AMX SFT MoE), forward / backward /
// forward+backward, `loop` (seed-faithful) vs `onednn` (all GEMMs through oneDNN matmul) vs `fused`/`fused2`
// (oneDNN base GEMMs, each expert's LoRA backward as one fused AVX-512 kernel; fused2: its sequential-stream form).
//
// Names:  lora_backward/{forward,backward,forward_backward}/{loop,onednn,fused,fused2}/cfg:<cfg>/qlen:<n>/threads:<n>
//         lora_backward/calibration/{amx_matmul,memory_bandwidth,memory_copy}/threads:<n>
// Counters (harness convention): tokens/s, TFLOP/s, phase.D0..phase.GU3 (ms per iteration),
//   D3_TFLOP/s, D4_TFLOP/s, GU1_TFLOP/s, GU3_TFLOP/s, pct.amx_peak, pct.roofline.{D3,GU1,base};
//   informational: lora_share_pct, rows_per_expert, active_experts.
// Environment:
//   PERFGATE_LORA_SLOWDOWN=0.10        every phase does 10% extra (busy) work: a known regression
//   PERFGATE_LORA_SLOWDOWN_PHASE=D3    ... only in that backward phase
//   PERFGATE_LORA_CONFIGS=ci,deepseek-v3   configs to register ("ci+rank=8" overrides a field)
//   PERFGATE_LORA_QLENS=1,16,128,512   PERFGATE_LORA_THREADS=1,2   (deepseek-v3: all cores)
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "perfgate/bench/counters.hpp"
#include "perfgate/bench/main.hpp"
#include "perfgate/bench/nvtx.hpp"
#include "perfgate/bench/prefaulted.hpp"
#include "perfgate/bench/setup_profile.hpp"
#include "perfgate/bench/skip.hpp"
#include "perfgate/bench/timer.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/lora_backward/moe_lora.hpp"

#if defined(__x86_64__)
#include <immintrin.h>  // _mm_clflush
#endif
#if PERFGATE_HAVE_ONEDNN
#include <dnnl.hpp>
#endif
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace {

namespace pb = perfgate::bench;
namespace pl = perfgate::lora_backward;

// ---- calibration: large oneDNN bf16 matmul (FLOP/s) and a streaming read (B/s) ------------------------
struct MatmulCalibration {
  double flops_per_s = 0.0;
  std::string impl;
};

#if PERFGATE_HAVE_ONEDNN
constexpr long kCalibN = 2048;

// Runs `reps` 2048^3 bf16 matmuls (fp32 out) and returns the best rate.
class CalibMatmul {
 public:
  CalibMatmul() : eng_(dnnl::engine::kind::cpu, 0), strm_(eng_) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::dims ab{kCalibN, kCalibN};
    dnnl::memory::desc a(ab, dt::bf16, tag::ab), b(ab, dt::bf16, tag::any), c(ab, dt::f32, tag::ab);
#if DNNL_VERSION_MAJOR >= 3
    dnnl::matmul::primitive_desc pd(eng_, a, b, c);
#else
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), eng_);
#endif
    impl_ = pd.impl_info_str();
    prim_ = dnnl::matmul(pd);
    ma_ = dnnl::memory(pd.src_desc(), eng_);
    mb_ = dnnl::memory(pd.weights_desc(), eng_);
    mc_ = dnnl::memory(pd.dst_desc(), eng_);
    // small non-zero bf16 values (0x3c00 ~ 0.0078) so no denormal/zero shortcuts
    for (auto* m : {&ma_, &mb_}) {
      auto* p = static_cast<std::uint16_t*>(m->get_data_handle());
      std::fill(p, p + m->get_desc().get_size() / 2, std::uint16_t{0x3c00});
    }
  }
  void run() {
    prim_.execute(strm_, {{DNNL_ARG_SRC, ma_}, {DNNL_ARG_WEIGHTS, mb_}, {DNNL_ARG_DST, mc_}});
    strm_.wait();
  }
  static double flops() { return 2.0 * kCalibN * kCalibN * kCalibN; }
  const std::string& impl() const { return impl_; }

 private:
  dnnl::engine eng_;
  dnnl::stream strm_;
  dnnl::matmul prim_;
  dnnl::memory ma_, mb_, mc_;
  std::string impl_;
};
#endif

// Sum of n words with 32 independent lanes; cloned for AVX-512 / AVX2 so the read is as wide as the
// CPU allows (the ceiling must be what the hardware can stream, not what a narrow loop reaches).
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
std::uint64_t
sum_words(const std::uint64_t* p, std::size_t n) {
  std::uint64_t lane[32] = {};
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int l = 0; l < 32; ++l) lane[l] += p[i + l];
  std::uint64_t total = 0;
  for (; i < n; ++i) total += p[i];
  for (std::uint64_t v : lane) total += v;
  return total;
}

// Flushes every cache line of [p, p + bytes) from every cache level, so the next pass reads from DRAM.
void flush_from_caches(const void* p, std::size_t bytes) {
#if defined(__x86_64__)
  const auto* c = static_cast<const char*>(p);
  const long lines = static_cast<long>(bytes / 64);
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
  for (long i = 0; i < lines; ++i) _mm_clflush(c + i * 64);
  _mm_mfence();
#else
  (void)p;
  (void)bytes;
#endif
}

// Streaming read from DRAM. Every cache line of the buffer is flushed before each timed pass, so the
// read comes from memory even where the last-level cache is larger than the buffer (300 MiB on the AMX
// host). That lets the buffer stay small: a large one that relied on size alone cost seconds of page
// faults in every bench process (docs/lora_backward.md, "Process cost and interleaving"), and cheap
// processes are what buy interleaved A/B rounds. The populated mapping holds private zero-filled pages,
// not the shared zero page, so no fill pass is needed either.
class CalibBandwidth {
 public:
  static constexpr std::size_t kBytes = std::size_t{256} << 20;  // 256 MiB
  CalibBandwidth() : buf_(kBytes / sizeof(std::uint64_t)) {}
  void evict() { flush_from_caches(buf_.data(), kBytes); }
  std::uint64_t run() {
    std::uint64_t total = 0;
    constexpr std::size_t kChunk = std::size_t{1} << 17;  // 1 MiB of words per task
    const long chunks = static_cast<long>(buf_.size() / kChunk);
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) reduction(+ : total)
#endif
    for (long c = 0; c < chunks; ++c) total += sum_words(buf_.data() + static_cast<std::size_t>(c) * kChunk, kChunk);
    return total;
  }

 private:
  pb::PrefaultedVector<std::uint64_t> buf_;
};

// Copies `words` 8-byte words from src to dst with 16-byte streaming stores (no read for ownership), so one
// pass reads and writes DRAM at once.
void stream_copy(const std::uint64_t* src, std::uint64_t* dst, std::size_t words) {
#if defined(__x86_64__)
  const auto* s = reinterpret_cast<const __m128i*>(src);
  auto* d = reinterpret_cast<__m128i*>(dst);
  for (std::size_t i = 0; i < words / 2; ++i) _mm_stream_si128(d + i, _mm_load_si128(s + i));
  _mm_sfence();
#else
  std::copy(src, src + words, dst);
#endif
}

// Streaming copy from DRAM to DRAM: the LoRA phases read their operands while they stream their fp32 gradients
// out, and a runner's memory may carry a read and a write stream side by side faster than either alone. Both
// buffers are flushed before each timed pass, as for CalibBandwidth; the bytes count both the read and the write.
class CalibCopy {
 public:
  static constexpr std::size_t kBufferBytes = std::size_t{128} << 20;  // 128 MiB read, 128 MiB written
  static constexpr std::size_t kBytes = 2 * kBufferBytes;
  CalibCopy() : src_(kBufferBytes / sizeof(std::uint64_t)), dst_(kBufferBytes / sizeof(std::uint64_t)) {
    for (std::size_t i = 0; i < src_.size(); ++i) src_[i] = i * 0x9E3779B97F4A7C15ull;
  }
  void evict() {
    flush_from_caches(src_.data(), kBufferBytes);
    flush_from_caches(dst_.data(), kBufferBytes);
  }
  void run() {
    constexpr std::size_t kChunk = std::size_t{1} << 17;  // 1 MiB of words per task
    const long chunks = static_cast<long>(src_.size() / kChunk);
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
    for (long c = 0; c < chunks; ++c) {
      const std::size_t at = static_cast<std::size_t>(c) * kChunk;
      stream_copy(src_.data() + at, dst_.data() + at, kChunk);
    }
  }
  // The copy arrived whole (checked once, before any timing).
  bool copied() const { return std::equal(src_.data(), src_.data() + src_.size(), dst_.data()); }

 private:
  pb::PrefaultedVector<std::uint64_t> src_;
  pb::PrefaultedVector<std::uint64_t> dst_;
};

// Measured once per thread count and cached (the fixtures' roofline and % of peak use these).
const MatmulCalibration& matmul_calibration(int threads) {
  static std::map<int, MatmulCalibration> cache;
  auto it = cache.find(threads);
  if (it != cache.end()) return it->second;
  const pb::SetupSpan span("ceilings");
  MatmulCalibration c;
#if PERFGATE_HAVE_ONEDNN
  if (!pl::onednn_available()) return cache.emplace(threads, c).first->second;  // no % of peak then
  pl::set_threads(threads);
  CalibMatmul mm;
  mm.run();
  for (int i = 0; i < 5; ++i) {
    pb::Stopwatch sw;
    mm.run();
    c.flops_per_s = std::max(c.flops_per_s, CalibMatmul::flops() / sw.elapsed_s());
  }
  c.impl = mm.impl();
#endif
  return cache.emplace(threads, c).first->second;
}

// Bytes per second of the fastest of 5 passes of a memory calibration, each pass after its caches are flushed.
template <typename Calib>
double fastest_pass_rate(Calib& calib) {
  double best = 0.0;
  for (int i = 0; i < 5; ++i) {
    calib.evict();
    pb::Stopwatch sw;
    if constexpr (std::is_void_v<decltype(calib.run())>) calib.run();  // its streaming stores are its result
    else benchmark::DoNotOptimize(calib.run());
    best = std::max(best, static_cast<double>(Calib::kBytes) / sw.elapsed_s());
  }
  return best;
}

// `measure()` once per thread count, cached for the process, run at that thread count as a ceiling.
template <typename Measure>
double once_per_thread_count(std::map<int, double>& cache, int threads, Measure&& measure) {
  auto it = cache.find(threads);
  if (it != cache.end()) return it->second;
  const pb::SetupSpan span("ceilings");
  pl::set_threads(threads);
  return cache.emplace(threads, measure()).first->second;
}

double bandwidth_calibration(int threads) {
  static std::map<int, double> cache;
  return once_per_thread_count(cache, threads, [] {
    CalibBandwidth bw;
    return fastest_pass_rate(bw);
  });
}

// Read-and-write bandwidth (CalibCopy); 0 when the copy came out wrong.
double copy_bandwidth_calibration(int threads) {
  static std::map<int, double> cache;
  return once_per_thread_count(cache, threads, [] {
    CalibCopy copy;
    copy.run();
    return copy.copied() ? fastest_pass_rate(copy) : 0.0;
  });
}

// A calibration evicts every cache: the next fixture call must warm up again.
void forget_last_timed();

void bench_calib_matmul(benchmark::State& st, int threads) {
  forget_last_timed();
#if PERFGATE_HAVE_ONEDNN
  if (!pl::onednn_available()) return pb::skip(st, "no bf16 matmul calibration: " + pl::onednn_unavailable_reason());
  try {
    pl::set_threads(threads);
    CalibMatmul mm;
    mm.run();
    for (auto _ : st) mm.run();
    st.counters["TFLOP/s"] =
        benchmark::Counter(CalibMatmul::flops() / 1e12, benchmark::Counter::kIsIterationInvariantRate);
    pb::set_info(st, "n", static_cast<double>(kCalibN));
  } catch (const std::exception& e) { pb::fail(st, fmt::format("oneDNN calibration matmul: {}", e.what())); }
#else
  (void)threads;
  pb::skip(st, "oneDNN not built (PERFGATE_HAVE_ONEDNN off): no bf16 matmul calibration");
#endif
}

void bench_calib_bandwidth(benchmark::State& st, int threads) {
  forget_last_timed();
  try {
    pl::set_threads(threads);
    CalibBandwidth bw;
    for (auto _ : st) {
      st.PauseTiming();
      bw.evict();
      st.ResumeTiming();
      benchmark::DoNotOptimize(bw.run());
    }
    st.counters["GB/s"] = benchmark::Counter(static_cast<double>(CalibBandwidth::kBytes) / 1e9,
                                             benchmark::Counter::kIsIterationInvariantRate);
  } catch (const std::exception& e) { pb::fail(st, fmt::format("memory bandwidth calibration: {}", e.what())); }
}

void bench_calib_copy(benchmark::State& st, int threads) {
  forget_last_timed();
  try {
    pl::set_threads(threads);
    CalibCopy copy;
    copy.run();
    if (!copy.copied()) return pb::fail(st, "memory copy calibration: the destination differs from the source");
    for (auto _ : st) {
      st.PauseTiming();
      copy.evict();
      st.ResumeTiming();
      copy.run();
    }
    st.counters["GB/s"] =
        benchmark::Counter(static_cast<double>(CalibCopy::kBytes) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  } catch (const std::exception& e) { pb::fail(st, fmt::format("memory copy calibration: {}", e.what())); }
}

// ---- shared model state (one config alive at a time, to bound memory) ------------------------------------
// Layers (a variant's prepared weight copies) of a small config all stay alive: with random interleaving
// (perfgate run/ab) the variants alternate between repetitions, and rebuilding a layer at each switch costs
// seconds per process and leaves the next repetition cold. A large config keeps the onednn and fused layers,
// which share their prepared base weights, and drops the loop's (docs/lora_backward.md, "Cost of a gate process").
constexpr double kKeepAllLayersBelowBytes = 2.0 * 1073741824.0;
// What a process keeps of one config. Every config keeps its own: under random interleaving the gate's ci and
// deepseek-v3 benchmarks alternate, and dropping the other config's state at a switch would regenerate its
// weights and repeat its reference checks at every visit.
struct ConfigState {
  std::unique_ptr<pl::Weights> weights;
  std::map<std::string, std::unique_ptr<pl::MoeLoraLayer>> layers;  // by variant
  bool keep_all_layers() const { return weights && static_cast<double>(weights->bytes()) < kKeepAllLayersBelowBytes; }
  std::map<int, pl::Problem> problems;
  std::map<int, pl::Reference> refs;
  std::set<std::string> checked;  // "variant/qlen/threads" passed the reference check
  std::set<std::string> warmed;   // run keys warmed up at least once in this process
};
struct Shared {
  std::map<std::string, ConfigState> configs;  // by config name
  std::string last_timed;  // "cfg/case/variant/qlen/threads" of the call that timed last, if nothing since
};
Shared& shared() {
  static Shared s;
  return s;
}
void forget_last_timed() { shared().last_timed.clear(); }

double mem_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  long long kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit) {
    if (key == "MemAvailable:") return static_cast<double>(kb) * 1024.0;
  }
  return -1.0;
}

// Bytes a benchmark needs: base + LoRA weights, the variant's prepared copies (none when a layer it shares them
// with exists already), activations.
double bytes_needed(const pl::Config& c, const std::string& variant, int qlen, bool base_already_prepared) {
  const double E = c.experts, H = c.hidden, I = c.intermediate, r = c.rank;
  const double weights = 3.0 * E * (H * I + r * (H + I)) * 2.0;
  const double base = 3.0 * E * H * I * 2.0;
  const double copies = variant == "loop" ? base : 2.0 * base;  // oneDNN: fwd + bwd layouts; loop: transposes
  const double extra = base_already_prepared ? 0.0 : copies;
  const double R = static_cast<double>(qlen) * c.top_k;
  const double acts = R * (H * 18.0 + I * 24.0) + 6.0 * E * r * (H + I) * 4.0;
  return weights + extra + acts;
}

ConfigState& state_of(const pl::Config& cfg) { return shared().configs[cfg.name]; }

bool base_prepared_for(const ConfigState& state, const std::string& variant) {
  return std::any_of(state.layers.begin(), state.layers.end(),
                     [&](const auto& entry) { return entry.second && pl::shares_prepared_base(variant, entry.first); });
}

// Bytes the other configs' kept state holds (their weights; their layers are of the same order).
double bytes_held_by_other_configs(const pl::Config& cfg) {
  double held = 0.0;
  for (const auto& [name, state] : shared().configs)
    if (name != cfg.name && state.weights) held += static_cast<double>(state.weights->bytes());
  return held;
}

// Frees every other config's state (when this one would not fit beside it).
void release_other_configs(const pl::Config& cfg) {
  auto& configs = shared().configs;
  for (auto it = configs.begin(); it != configs.end();) it = it->first == cfg.name ? std::next(it) : configs.erase(it);
}

pl::Weights& weights_for(const pl::Config& cfg) {
  ConfigState& s = state_of(cfg);
  if (!s.weights) {
    const pb::SetupSpan span("weights");
    s.weights = std::make_unique<pl::Weights>(pl::make_weights(cfg, pl::kBenchWeightSeed));
  }
  return *s.weights;
}

pl::MoeLoraLayer& layer_for(const pl::Config& cfg, const std::string& variant, const pl::Weights& w) {
  ConfigState& s = state_of(cfg);
  auto& layer = s.layers[variant];
  if (layer) return *layer;
  const pb::SetupSpan span("layer_prepare");
  layer = variant == "onednn"   ? pl::make_onednn_layer(w)
          : variant == "fused"  ? pl::make_fused_layer(w)
          : variant == "fused2" ? pl::make_fused2_layer(w)
                                : pl::make_loop_layer(w);
  return *layer;
}

const pl::Problem& problem_for(const pl::Config& cfg, int qlen) {
  auto& m = state_of(cfg).problems;
  auto it = m.find(qlen);
  if (it == m.end()) it = m.emplace(qlen, pl::make_problem(cfg, qlen, pl::bench_problem_seed(qlen))).first;
  return it->second;
}

// The full fp64 reference for small configs; a sample of tokens (outputs and grad_input only) for
// configs too large to evaluate in double in reasonable time.
bool full_reference(const pl::Config& cfg, int qlen) {
  return static_cast<double>(qlen) * cfg.top_k * cfg.hidden * cfg.intermediate <= 4.0e9;
}

const pl::Reference& reference_for(const pl::Config& cfg, const pl::Weights& w, const pl::Problem& prob) {
  auto& m = state_of(cfg).refs;
  auto it = m.find(prob.qlen);
  if (it != m.end()) return it->second;
  const pb::SetupSpan span("reference");
  pl::Reference ref;
  if (full_reference(cfg, prob.qlen)) {
    ref = pl::reference(w, prob, {}, true);
  } else {
    std::vector<int> tokens{0};
    if (prob.qlen > 1) tokens.push_back(prob.qlen - 1);
    ref = pl::reference(w, prob, tokens, false);
  }
  return m.emplace(prob.qlen, std::move(ref)).first->second;
}

enum class Case { kForward, kBackward, kForwardBackward };
const char* case_name(Case c) {
  return c == Case::kForward ? "forward" : c == Case::kBackward ? "backward" : "forward_backward";
}

// What is wrong with the arguments, if anything.
std::optional<std::string> argument_error(const pl::ParsedConfig& parsed, const std::string& variant, int qlen,
                                          int threads) {
  if (!parsed.config) return "bad argument: " + parsed.error;
  if (auto err = pl::validate(*parsed.config, qlen)) return "bad argument: " + *err;
  if (threads <= 0) return fmt::format("bad argument: threads must be > 0 (got {})", threads);
  if (variant != "loop" && variant != "onednn" && variant != "fused" && variant != "fused2")
    return fmt::format("bad argument: unknown variant '{}' (loop, onednn, fused, fused2)", variant);
  return std::nullopt;
}

// Frees the other configs when this one would not fit beside them; skips st (false) when it cannot fit at all.
bool memory_fits(benchmark::State& st, const pl::Config& cfg, const std::string& variant, int qlen) {
  const double need = bytes_needed(cfg, variant, qlen, base_prepared_for(state_of(cfg), variant));
  double avail = mem_available_bytes();
  if (avail > 0 && need > avail * 0.9 && bytes_held_by_other_configs(cfg) > 0) {
    release_other_configs(cfg);  // rebuilt when their benchmarks come back
    avail = mem_available_bytes();
  }
  const bool have_these_weights = state_of(cfg).weights != nullptr;
  const double held = have_these_weights ? static_cast<double>(state_of(cfg).weights->bytes()) : 0.0;
  if (avail > 0 && need > (avail + held) * 0.9) {
    pb::skip(st, fmt::format("config {} needs ~{:.1f} GiB of memory, {:.1f} GiB available: needs a larger runner",
                             cfg.name, need / 1073741824.0, (avail + held) / 1073741824.0));
    return false;
  }
  return true;
}

// A large config: frees the other variants' layers before building weights/prepared copies.
void free_other_variants(ConfigState& state, const std::string& variant) {
  for (auto it = state.layers.begin(); it != state.layers.end();)
    it = it->first == variant || pl::shares_prepared_base(variant, it->first) ? std::next(it) : state.layers.erase(it);
}

// Whether this variant's layers do no LoRA gradient work (PERFGATE_LORA_SKIP_LORA=1, a measurement knob for the
// LoRA's marginal cost; moe_lora.hpp). Their results are wrong by design.
bool skips_lora(const std::string& variant) { return variant == "fused2" && pl::lora_skip_knob_on(); }

// The variant as benchmark names spell it: a variant that skips its LoRA work gets a name of its own, so that no
// baseline, gate or comparison takes it for the real one.
std::string variant_label(const std::string& variant) { return skips_lora(variant) ? variant + "_skip_lora" : variant; }

// Correctness before timing (once per variant, qlen and thread count, `key`: the oneDNN variants split experts
// into per-thread slices). Fails st (false) on a mismatch.
bool matches_reference_once(benchmark::State& st, ConfigState& state, const std::string& key, pl::MoeLoraLayer& layer,
                            const std::string& variant, const pl::Weights& w, const pl::Problem& prob, int threads) {
  const pl::Config& cfg = w.cfg;
  if (state.checked.contains(key)) return true;
  if (skips_lora(variant)) {  // its gradients are wrong by design: nothing to check them against
    fmt::print(stderr,
               "lora_backward: {} cfg {} qlen {} threads {}: reference check SKIPPED (PERFGATE_LORA_SKIP_LORA=1, "
               "no LoRA gradient work; a measurement, never a baseline)\n",
               variant, cfg.name, prob.qlen, threads);
    state.checked.insert(key);
    return true;
  }
  const pb::SetupSpan span("reference_check");
  const pl::Reference& ref = reference_for(cfg, w, prob);
  std::vector<std::pair<std::string, double>> errs;
  if (auto msg = pl::check_against_reference(layer, w, prob, ref, pl::kRelL2Bound, &errs)) {
    pb::fail(st, *msg);
    return false;
  }
  std::string line;
  for (const auto& [n, e] : errs) line += fmt::format(" {}={:.1e}", n, e);
  fmt::print(stderr, "lora_backward: {} cfg {} qlen {} threads {} matches the fp64 reference{} (bound {:.0e}{})\n",
             variant, cfg.name, prob.qlen, threads, line, pl::kRelL2Bound, ref.gA[0].empty() ? ", sampled tokens" : "");
  state.checked.insert(key);
  return true;
}

// What a timed pass writes.
struct LayerBuffers : pl::PassBuffers {
  using PassBuffers::PassBuffers;
  pl::PhaseTimes phases;
};

// One pass of the case.
void run_case(Case kase, pl::MoeLoraLayer& layer, const pl::Problem& prob, LayerBuffers& buf) {
  if (kase == Case::kForward) {
    pb::NvtxRange r("forward_only");
    layer.forward(prob, buf.out);
  } else if (kase == Case::kBackward) {
    pb::NvtxRange r("backward_only");
    layer.backward(prob.grad_out, buf.gin, buf.grads, buf.phases);
  } else {
    pb::NvtxRange r("full_train_loop");
    layer.forward(prob, buf.out);
    layer.backward(prob.grad_out, buf.gin, buf.grads, buf.phases);
  }
}

// Warm-up pass at the timed thread count, unless the call before this one ran this same benchmark (run_key):
// Google Benchmark runs the repetitions (and its iteration-count trials) back to back, and a warm-up before each
// was a large part of a process's cost (docs/lora_backward.md, "Process cost and interleaving").
void warm_up(ConfigState& state, const std::string& run_key, Case kase, pl::MoeLoraLayer& layer,
             const pl::Problem& prob, LayerBuffers& buf) {
  // A large config streams its weights from memory at every pass, so no cache stays warm between two visits
  // anyway: one warm-up per process (primitives, prepared copies) is all it needs.
  const bool warmed_once_is_enough = !state.keep_all_layers() && state.warmed.contains(run_key);
  if (shared().last_timed != run_key && !warmed_once_is_enough) {
    const pb::SetupSpan span("warmup");
    state.warmed.insert(run_key);
    layer.forward(prob, buf.out);
    if (kase != Case::kForward) layer.backward(prob.grad_out, buf.gin, buf.grads, buf.phases);
  }
}

// The timed loop; returns its seconds.
double measure(benchmark::State& st, Case kase, pl::MoeLoraLayer& layer, const pl::Problem& prob, LayerBuffers& buf) {
  std::optional<pb::SetupSpan> measure_span(std::in_place, "measure");
  pb::Stopwatch total;
  double elapsed_s = 0.0;
  for (auto _ : st) run_case(kase, layer, prob, buf);
  elapsed_s = total.elapsed_s();
  measure_span.reset();
  return elapsed_s;
}

// tokens/s, TFLOP/s, rows_per_expert, active_experts and amx_peak of a pass of `sec` seconds.
void report_layer_counters(benchmark::State& st, Case kase, const pl::MoeLoraLayer& layer, int qlen, double sec,
                           const MatmulCalibration& mm) {
  pb::set_rate(st, "tokens/s", qlen, sec);
  const pl::Work fw = layer.forward_work();
  const auto bw = layer.backward_work();
  double flops = kase == Case::kBackward ? 0.0 : fw.flops;
  if (kase != Case::kForward)
    for (const auto& wk : bw) flops += wk.flops;
  pb::set_rate(st, "TFLOP/s", flops / 1e12, sec);
  pb::set_info(st, "rows_per_expert", static_cast<double>(layer.rows()) / std::max(1, layer.active_experts()));
  pb::set_info(st, "active_experts", layer.active_experts());
  if (mm.flops_per_s > 0) pb::set_percent_of(st, "amx_peak", flops / sec, mm.flops_per_s);
}

// The backward's milliseconds per pass, all phases and the LoRA phases.
double backward_ms(const pl::PhaseTimes& phases, double iters) {
  double bwd_ms = 0.0;
  for (int p = 0; p < pl::kPhaseCount; ++p) bwd_ms += phases.ms[p] / iters;
  return bwd_ms;
}
double lora_ms(const pl::PhaseTimes& phases, double iters) { return (phases.ms[pl::D4] + phases.ms[pl::GU3]) / iters; }

// The backward's phase milliseconds, its GEMM phases' TFLOP/s and lora_share_pct.
void report_phase_counters(benchmark::State& st, const std::array<pl::Work, pl::kPhaseCount>& bw,
                           const pl::PhaseTimes& phases, double iters) {
  for (int p = 0; p < pl::kPhaseCount; ++p) pb::set_phase_ms(st, pl::kPhaseNames[p], phases.ms[p]);
  for (int p : {pl::D3, pl::D4, pl::GU1, pl::GU3}) {
    const double ms = phases.ms[p] / iters;
    pb::set_rate(st, fmt::format("{}_TFLOP/s", pl::kPhaseNames[p]), bw[p].flops / 1e12, ms / 1e3);
  }
  const double bwd_ms = backward_ms(phases, iters), lora = lora_ms(phases, iters);
  pb::set_info(st, "lora_share_pct", bwd_ms > 0 ? 100.0 * lora / bwd_ms : 0.0);
}

// Rooflines of the base GEMM phases, max(FLOPs / matmul rate, weight bytes / read bandwidth), and of the LoRA
// phases against their own floor, max(FLOPs / matmul rate, bytes read and written / copy bandwidth): they read
// their operands while they stream the fp32 gradients out (the read bandwidth when no copy bandwidth was had).
// lora_share_bound_pct: the share with the base GEMMs at their roofline too, since on a runner where both are bound
// by memory the LoRA's share cannot fall below the ratio of their bytes, however fast the LoRA pass is.
void report_roofline_counters(benchmark::State& st, const std::array<pl::Work, pl::kPhaseCount>& bw,
                              const pl::PhaseTimes& phases, double iters, double matmul_flops_per_s, double bwidth,
                              double copy_bwidth) {
  double roof_sum = 0.0, ms_sum = 0.0;
  for (int p : {pl::D3, pl::GU1}) {
    const double roof_s = pb::roofline_seconds(bw[p].flops, matmul_flops_per_s, bw[p].weight_bytes, bwidth);
    const double ms = phases.ms[p] / iters;
    pb::set_percent_of(st, fmt::format("roofline.{}", pl::kPhaseNames[p]), roof_s * 1e3, ms);
    roof_sum += roof_s * 1e3;
    ms_sum += ms;
  }
  pb::set_percent_of(st, "roofline.base", roof_sum, ms_sum);
  double lora_roof = 0.0;
  for (int p : {pl::D4, pl::GU3})
    lora_roof +=
        pb::roofline_seconds(bw[p].flops, matmul_flops_per_s, bw[p].min_bytes, copy_bwidth > 0 ? copy_bwidth : bwidth) *
        1e3;
  const double bwd_ms = backward_ms(phases, iters), lora = lora_ms(phases, iters);
  pb::set_percent_of(st, "roofline.lora", lora_roof, lora);
  pb::set_info(st, "lora_floor_share_pct", bwd_ms > 0 ? 100.0 * lora_roof / (bwd_ms - lora + lora_roof) : 0.0);
  const double bound_bwd_ms = bwd_ms - lora - ms_sum + roof_sum + lora_roof;
  pb::set_info(st, "lora_share_bound_pct", bound_bwd_ms > 0 ? 100.0 * lora_roof / bound_bwd_ms : 0.0);
}

// The fixture body once the arguments are good and the config fits.
void measure_layer(benchmark::State& st, Case kase, const std::string& variant, const pl::Config& cfg, int qlen,
                   int threads, bool have_these_weights) {
  pl::set_threads(threads);
  ConfigState& state = state_of(cfg);
  if (!(have_these_weights && state.keep_all_layers())) free_other_variants(state, variant);
  const pl::Weights& w = weights_for(cfg);
  const pl::Problem& prob = problem_for(cfg, qlen);
  pl::MoeLoraLayer& layer = layer_for(cfg, variant, w);
  const std::string key = fmt::format("{}/{}/{}", variant, qlen, threads);
  if (!matches_reference_once(st, state, key, layer, variant, w, prob, threads)) return;

  LayerBuffers buf(cfg, qlen);
  // the ceilings of the % counters, measured on the first call only (cached), before the warm-up: they
  // evict every cache
  const MatmulCalibration& mm = matmul_calibration(threads);
  const double bwidth = bandwidth_calibration(threads);
  const double copy_bwidth = copy_bandwidth_calibration(threads);
  pl::set_threads(threads);
  const std::string run_key = fmt::format("{}/{}/{}", cfg.name, case_name(kase), key);
  warm_up(state, run_key, kase, layer, prob, buf);
  shared().last_timed.clear();  // until this call's timing has finished
  buf.phases.clear();
  const double elapsed_s = measure(st, kase, layer, prob, buf);
  shared().last_timed = run_key;
  benchmark::DoNotOptimize(buf.out.data());
  benchmark::DoNotOptimize(buf.gin.data());

  const double iters = static_cast<double>(st.iterations());
  if (iters <= 0) return;
  report_layer_counters(st, kase, layer, qlen, elapsed_s / iters, mm);
  if (kase == Case::kForward) return;
  const auto bw = layer.backward_work();
  report_phase_counters(st, bw, buf.phases, iters);
  if (mm.flops_per_s > 0 && bwidth > 0)
    report_roofline_counters(st, bw, buf.phases, iters, mm.flops_per_s, bwidth, copy_bwidth);
}

void bench_layer(benchmark::State& st, Case kase, const std::string& variant, const std::string& cfg_spec, int qlen,
                 int threads) {
  const pl::ParsedConfig parsed = pl::parse_config(cfg_spec);
  if (auto err = argument_error(parsed, variant, qlen, threads)) return pb::fail(st, *err);
  if (variant != "loop" && !pl::onednn_available())
    return pb::skip(st, fmt::format("the {} variant: {}", variant, pl::onednn_unavailable_reason()));
  const pl::Config& cfg = *parsed.config;
  if (!memory_fits(st, cfg, variant, qlen)) return;
  const bool have_these_weights = state_of(cfg).weights != nullptr;
  try {
    measure_layer(st, kase, variant, cfg, qlen, threads, have_these_weights);
  } catch (const std::exception& e) {
    pb::fail(st, fmt::format("{} {} cfg {} qlen {}: {}", case_name(kase), variant, cfg.name, qlen, e.what()));
  }
}

// ---- registration ---------------------------------------------------------------------------------------
std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::string(fallback);
}

int parse_int(const std::string& s) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || v < -1000000 || v > 1000000000) return -1;
  return static_cast<int>(v);
}

int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

void register_all() {
  const int hw = hardware_threads();
  for (int t : {1, 2}) {
    benchmark::RegisterBenchmark(fmt::format("lora_backward/calibration/amx_matmul/threads:{}", t).c_str(),
                                 [t](benchmark::State& st) { bench_calib_matmul(st, t); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(fmt::format("lora_backward/calibration/memory_bandwidth/threads:{}", t).c_str(),
                                 [t](benchmark::State& st) { bench_calib_bandwidth(st, t); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(fmt::format("lora_backward/calibration/memory_copy/threads:{}", t).c_str(),
                                 [t](benchmark::State& st) { bench_calib_copy(st, t); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  const auto qlens = split(env_or("PERFGATE_LORA_QLENS", "1,16,128,512"));
  for (const std::string& cfg : split(env_or("PERFGATE_LORA_CONFIGS", "ci,deepseek-v3"))) {
    std::vector<std::string> threads = split(env_or("PERFGATE_LORA_THREADS", "1,2"));
    if (cfg == "deepseek-v3" && !std::getenv("PERFGATE_LORA_THREADS")) threads = {std::to_string(std::max(2, hw))};
    for (const std::string variant : {"loop", "onednn", "fused", "fused2"}) {
      for (const std::string& q : qlens) {
        for (Case kase : {Case::kForward, Case::kBackward, Case::kForwardBackward}) {
          for (const std::string& t : threads) {
            const int qlen = parse_int(q), nthr = parse_int(t);
            const std::string name = fmt::format("lora_backward/{}/{}/cfg:{}/qlen:{}/threads:{}", case_name(kase),
                                                 variant_label(variant), cfg, q, t);
            benchmark::RegisterBenchmark(name.c_str(),
                                         [=](benchmark::State& st) { bench_layer(st, kase, variant, cfg, qlen, nthr); })
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);
          }
        }
      }
    }
  }
}

void add_context() {
  benchmark::AddCustomContext(perfgate::context_keys::kSuite, "lora_backward");
  std::string ranges = "forward_only,backward_only,full_train_loop";
  for (const char* n : pl::kPhaseRangeNames) ranges += fmt::format(",{}", n);
  benchmark::AddCustomContext(perfgate::context_keys::kNvtxRanges, ranges);
  const double f = pl::slowdown_fraction();
  benchmark::AddCustomContext(perfgate::context_keys::kLoraSlowdown, fmt::format("{}", f));
  // One thread on one pinned CPU cannot run faster than that core: a busy neighbour (another tenant, an SMT
  // sibling) only slows a repetition, so each run is levelled by its fastest one (docs/statistics.md).
  benchmark::AddCustomContext(perfgate::context_keys::kFloorBound, "lora_backward/.*/threads:1");
  benchmark::AddCustomContext(perfgate::context_keys::kLoraFused2Products, pl::fused2_products());
  if (pl::onednn_available()) {
    benchmark::AddCustomContext(perfgate::context_keys::kOnednnVersion, pl::onednn_version());
    try {
      // the ci config at qlen 128: ~8 rows per expert
      benchmark::AddCustomContext(perfgate::context_keys::kOnednnImpl,
                                  pl::onednn_impl_summary(*pl::config_by_name("ci"), 8));
#if PERFGATE_HAVE_ONEDNN
      benchmark::AddCustomContext(perfgate::context_keys::kOnednnCalibrationImpl, CalibMatmul().impl());
#endif
    } catch (const std::exception& e) {
      benchmark::AddCustomContext(perfgate::context_keys::kOnednnImpl, fmt::format("error: {}", e.what()));
    }
  } else {
    benchmark::AddCustomContext(perfgate::context_keys::kOnednnImpl, "none: " + pl::onednn_unavailable_reason());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* s = std::getenv("PERFGATE_LORA_SLOWDOWN")) {
    char* end = nullptr;
    const double f = std::strtod(s, &end);
    if (end == s || *end != '\0' || !(f >= 0.0) || f > 100.0) {
      fmt::print(stderr, "error: PERFGATE_LORA_SLOWDOWN='{}' is not a fraction >= 0\n", s);
      return 2;
    }
    const char* phase = std::getenv("PERFGATE_LORA_SLOWDOWN_PHASE");
    std::string only = phase ? phase : "";
    if (!only.empty() && std::find_if(pl::kPhaseNames.begin(), pl::kPhaseNames.end(),
                                      [&](const char* n) { return only == n; }) == pl::kPhaseNames.end()) {
      fmt::print(stderr, "error: PERFGATE_LORA_SLOWDOWN_PHASE='{}' is not one of D0..D4, A1, GU0..GU3\n", only);
      return 2;
    }
    pl::set_slowdown(f, only);
  }
  register_all();
  pb::add_context_hook(add_context);
  return pb::run_main(argc, argv);
}
