#pragma once
// MoE layer with LoRA on all three expert projections (gate, up, down), forward + backward, as
// profiled in an AMX SFT MoE kernel (docs/lora_backward.md). bf16 weights and activations, fp32
// accumulation. Two implementations of the same math:
//   loop   - portable C++; LoRA gradients as the seed's plain for-loops; backward weights prepared
//            (transposed) on every call, as the seed measured;
//   onednn - every GEMM (LoRA gradients included) through oneDNN matmul; backward weights prepared
//            (reordered into the primitive's blocked layout) once and cached.
// plus a straightforward fp64 reference used by the bench (before timing) and the unit test.
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "perfgate/bench/prefaulted.hpp"

namespace perfgate::lora_backward {

// ---- bf16 -----------------------------------------------------------------------------------------
using bf16 = std::uint16_t;  // bit pattern of a bfloat16 (the layout oneDNN's bf16 uses)

inline float to_float(bf16 v) {
  const std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline bf16 to_bf16(float f) {  // round to nearest even; NaN stays NaN
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) return static_cast<bf16>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<bf16>(bits >> 16);
}

// ---- configuration ----------------------------------------------------------------------------------
struct Config {
  std::string name;
  int experts = 0;
  int hidden = 0;
  int intermediate = 0;
  int top_k = 0;
  int rank = 0;
  float alpha = 0.0f;
  // LoRA gradients stored as bf16 (config key grads=bf16: kt-kernel's SFT MoE hands its LoRA gradients to PyTorch
  // in bf16) instead of fp32. The math is the same to the store: each gradient is its fp32 value rounded once.
  bool bf16_grads = false;
  float scaling() const { return alpha / static_cast<float>(rank); }
  double grad_bytes() const { return bf16_grads ? 2.0 : 4.0; }
};

// "ci" (64 experts, hidden 1024, intermediate 512, top-4, rank 16, alpha 32),
// "deepseek-v3" (256 / 7168 / 2048 / top-8, rank 16, alpha 32) and "tiny" (unit tests).
std::optional<Config> config_by_name(std::string_view name);
// A name plus optional overrides: "ci", "ci+rank=8+top_k=2" (keys experts, hidden, intermediate,
// top_k, rank, alpha; grads=fp32|bf16). Returns the config or a one-line error (unknown name or key, bad value).
struct ParsedConfig {
  std::optional<Config> config;
  std::string error;
};
ParsedConfig parse_config(std::string_view spec);
// nullopt when usable; else a one-line reason (rank 0, top-k > experts, qlen 0, ...).
std::optional<std::string> validate(const Config& cfg, int qlen);

enum Proj : int { kGate = 0, kUp = 1, kDown = 2 };
inline constexpr std::array<const char*, 3> kProjNames = {"gate", "up", "down"};
inline int proj_in(const Config& c, int p) { return p == kDown ? c.intermediate : c.hidden; }
inline int proj_out(const Config& c, int p) { return p == kDown ? c.hidden : c.intermediate; }

// ---- parameters and a problem instance -------------------------------------------------------------
// Per projection p, row-major, expert-major:  W[p] [E][out][in],  A[p] [E][rank][in],  B[p] [E][out][rank].
// A linear is y = x W^T + s (x A^T) B^T with s = alpha / rank.
struct Weights {
  Config cfg;
  // populated mappings: the weights are written once, at start-up, where page faults used to dominate; the LoRA
  // weights in huge pages, as the gradients (LoraGrads)
  std::array<perfgate::bench::PrefaultedVector<bf16>, 3> W;
  std::array<perfgate::bench::HugePageVector<bf16>, 3> A, B;
  const bf16* w(int p, int e) const {
    return W[p].data() + static_cast<std::size_t>(e) * proj_out(cfg, p) * proj_in(cfg, p);
  }
  const bf16* a(int p, int e) const { return A[p].data() + static_cast<std::size_t>(e) * cfg.rank * proj_in(cfg, p); }
  const bf16* b(int p, int e) const { return B[p].data() + static_cast<std::size_t>(e) * proj_out(cfg, p) * cfg.rank; }
  std::size_t bytes() const;
};

// Random non-zero values (|v| in [0.1, 1] times a fan-in scale), reproducible from `seed`.
Weights make_weights(const Config& cfg, std::uint64_t seed);
// The seeds bench_lora_backward makes its weights and problems from; tools that measure the same case use them too.
inline constexpr std::uint64_t kBenchWeightSeed = 20261122;
inline constexpr std::uint64_t bench_problem_seed(int qlen) { return 4004 + static_cast<std::uint64_t>(qlen); }

struct Problem {
  int qlen = 0;
  std::vector<bf16> x;          // [qlen][hidden]
  std::vector<float> logits;    // [qlen][experts]   router logits
  std::vector<float> grad_out;  // [qlen][hidden]    upstream gradient
};
Problem make_problem(const Config& cfg, int qlen, std::uint64_t seed);

// Gradients of all LoRA parameters, same layouts as Weights::A / Weights::B, fp32 (A, B) and, for a config with
// bf16_grads, bf16 (A16, B16): there A16 and B16 are the result, and A and B what the kernels that compute in fp32
// first write, before they round it into A16 and B16 (the fused2 kernels write bf16 directly). In transparent huge
// pages where
// the kernel grants them (prefaulted.hpp), 2 MiB aligned, so kernels may write whole cache lines with streaming
// stores: a grad_A row is 4 KiB at hidden 1024, so in 4 KiB pages the stores of one expert's grad_A rows touch a page
// each.
using AlignedFloats = perfgate::bench::HugePageVector<float>;

struct LoraGrads {
  std::array<AlignedFloats, 3> A, B;
  std::array<perfgate::bench::HugePageVector<bf16>, 3> A16, B16;
  bool bf16_grads = false;
  void resize(const Config& cfg);
  // A[p] and B[p] of experts [e0, e0 + n) rounded into A16[p] and B16[p] (nothing without bf16).
  void round_experts(const Config& cfg, int p, int e0, int n);
};

// What a timed forward + backward pass writes: the layer's output, grad_input and the LoRA gradients.
struct PassBuffers {
  PassBuffers(const Config& cfg, int qlen);
  std::vector<float> out, gin;  // [qlen][hidden]
  LoraGrads grads;
};

// ---- timing of the backward phases (the seed's names) -------------------------------------------------
enum Phase : int { D0, D1, D2, D3, D4, A1, GU0, GU1, GU2, GU3, kPhaseCount };
inline constexpr std::array<const char*, kPhaseCount> kPhaseNames = {"D0", "D1",  "D2",  "D3",  "D4",
                                                                     "A1", "GU0", "GU1", "GU2", "GU3"};
// NVTX range names of the phases, as the seed's timer macros print them.
inline constexpr std::array<const char*, kPhaseCount> kPhaseRangeNames = {"D0_prepare+memset",
                                                                          "D1_scatter",
                                                                          "D2_quantize",
                                                                          "D3_gemm",
                                                                          "D4_lora_grad",
                                                                          "silu_backward",
                                                                          "GU0_prepare+memset",
                                                                          "GU1_base_passes_total",
                                                                          "GU2_requantize_for_lora",
                                                                          "GU3_lora_passes_total"};
struct PhaseTimes {
  std::array<double, kPhaseCount> ms{};
  void clear() { ms.fill(0.0); }
};

// Floating-point work per phase, for TFLOP/s counters and rooflines (multiply-add = 2 FLOPs).
struct Work {
  double flops = 0.0;         // GEMM FLOPs
  double weight_bytes = 0.0;  // bf16 weight bytes the phase must read at least once
  // Minimum memory traffic of the phase: weights plus, for the LoRA phases, the fp32 gradients written
  // and the activations read/updated (what a perfect kernel still moves).
  double min_bytes = 0.0;
};
struct Routing;  // defined in the implementation

// ---- the layer -----------------------------------------------------------------------------------------
class MoeLoraLayer {
 public:
  virtual ~MoeLoraLayer() = default;
  virtual std::string variant() const = 0;
  // Implementation names chosen by the GEMM library (oneDNN's impl_info_str), "" for plain C++.
  virtual std::string impl_info() const { return {}; }

  // Forward; caches what the backward needs (routing, scattered input, U = x A^T, pre-activations).
  // out: [qlen][hidden].
  virtual void forward(const Problem& problem, std::span<float> out) = 0;
  // Backward of the last forward. grad_input: [qlen][hidden]. Adds the phase times to `phases`.
  virtual void backward(std::span<const float> grad_out, std::span<float> grad_input, LoraGrads& grads,
                        PhaseTimes& phases) = 0;

  // Work of each backward phase of the last forward's routing (same for all variants).
  virtual std::array<Work, kPhaseCount> backward_work() const = 0;
  virtual Work forward_work() const = 0;
  // Rows (token, expert pairs) and activated experts of the last forward.
  virtual int rows() const = 0;
  virtual int active_experts() const = 0;
};

std::unique_ptr<MoeLoraLayer> make_loop_layer(const Weights& weights);
// Throws std::runtime_error with onednn_unavailable_reason() when the variant cannot run here.
std::unique_ptr<MoeLoraLayer> make_onednn_layer(const Weights& weights);
// "" when the oneDNN variants can run: oneDNN built in and a bf16 matmul available on this CPU
// (oneDNN 2.x needs AVX-512 or AMX); else why not, for the skip message.
std::string onednn_unavailable_reason();
bool onednn_available();
// `fused` variant: base GEMMs as `onednn`, each expert's LoRA backward as one fused two-pass kernel
// (AVX-512 when the CPU has it) with one synchronisation per phase. Needs oneDNN like `onednn`.
std::unique_ptr<MoeLoraLayer> make_fused_layer(const Weights& weights);
// `fused2` variant: as `fused`, with the fused passes walking every operand front to back (a few sequential
// streams instead of one per row: fused2_lora.cpp).
std::unique_ptr<MoeLoraLayer> make_fused2_layer(const Weights& weights);
// A `fused2` layer made with experiment knobs set, (name, value) pairs: the layer reads its knobs from the
// environment when it is made, so they are set for that moment and the environment is restored after.
using KnobSetting = std::pair<std::string, std::string>;
std::unique_ptr<MoeLoraLayer> make_fused2_layer_with(const Weights& weights, std::span<const KnobSetting> knobs);
// Whether the layers of two variants ("loop", "onednn", "fused", "fused2") built from one Weights share their prepared
// base weights, so that the second costs little memory beside the first.
bool shares_prepared_base(std::string_view variant, std::string_view other);
// PERFGATE_LORA_SKIP_LORA=1, a measurement knob: a `fused2` layer made while it is set does no LoRA gradient work
// (D4 and GU3's LoRA part skipped; grad_input lacks the LoRA term, the LoRA gradients are left as they were), so
// that backward(with LoRA) - backward(skipped) is what the LoRA costs the user. Its results are wrong by design:
// the bench names such benchmarks `fused2_skip_lora` (no baseline or gate knows that name) and skips their
// reference check, and the unit tests fail if it is set when they run. Never for baselines or gates.
bool lora_skip_knob_on();
// "kind=impl,..." of every oneDNN GEMM of the onednn variant for `cfg` with `rows_per_expert` rows
// (descriptors only, no weights); "" without oneDNN.
std::string onednn_impl_summary(const Config& cfg, int rows_per_expert);
std::string onednn_version();  // "2.6.3"; "" without oneDNN
// What `fused2`'s LoRA products run on, on this CPU and with the knobs as they are now: "amx" (tile products),
// "vdpbf16ps" (AVX-512 BF16), or "generic" (C++; no AVX-512 BF16).
std::string fused2_products();

// Injectable slowdown (gate testing): every backward/forward phase busy-works for `fraction` of its
// own duration afterwards, so the whole pass and each phase get (1 + fraction) times slower.
// `only_phase` (e.g. "D3") restricts it to one backward phase. Read from PERFGATE_LORA_SLOWDOWN
// and PERFGATE_LORA_SLOWDOWN_PHASE by the bench.
void set_slowdown(double fraction, std::string only_phase = {});
double slowdown_fraction();

void set_threads(int threads);  // omp_set_num_threads when built with OpenMP
int max_threads();

// The result gradients of projection p, grad_A (a) or grad_B, as floats: A or B, or A16 or B16 widened.
std::vector<float> grad_values(const LoraGrads& grads, int p, bool a);

// ---- fp64 reference ----------------------------------------------------------------------------------
struct Reference {
  std::vector<double> out;                    // [qlen][hidden]  (rows of `tokens` only when a subset was asked)
  std::vector<double> grad_input;             // [qlen][hidden]
  std::array<std::vector<double>, 3> gA, gB;  // empty unless lora_grads
  std::vector<int> tokens;                    // tokens computed
};
// Straightforward per-token evaluation in double of the same bf16 parameters and inputs.
// `tokens` empty = all tokens; lora_grads needs all tokens.
Reference reference(const Weights& w, const Problem& problem, std::span<const int> tokens, bool lora_grads);

// Relative-L2 bound for bf16 storage of activations/intermediates with fp32 accumulation: each
// bf16 rounding adds up to 2^-9 relative error and the backward chains about five of them (x, z,
// dy, dg/du, G_B). Observed: ~3e-3 on ci (all eight quantities, every variant); on the tiny config
// typical 3e-3, worst 8.6e-3 over 300 seeds x 4 qlens (small ranks have a heavier tail: a
// near-cancelling G_B entry). 2e-2 keeps > 2x margin over that worst case, while real mistakes (a
// missing LoRA term, a wrong transpose, a dropped expert, a 10% scale) give 5e-2 .. 1.
inline constexpr double kRelL2Bound = 2e-2;

// Runs forward + backward on `layer` and compares out, grad_input and all six LoRA gradients with the
// reference. Returns nullopt when all are within `bound`, else a message naming the first failure.
// `report` (optional) receives "name=error" pairs.
std::optional<std::string> check_against_reference(MoeLoraLayer& layer, const Weights& w, const Problem& problem,
                                                   const Reference& ref, double bound = kRelL2Bound,
                                                   std::vector<std::pair<std::string, double>>* report = nullptr);

}  // namespace perfgate::lora_backward
