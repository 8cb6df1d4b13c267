// Configs, parameters, routing, the shared layer driver, slowdown injection and the fp64 reference.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "layer_base.hpp"
#include "perfgate/bench/check.hpp"
#include "perfgate/bench/nvtx.hpp"
#include "perfgate/bench/splitmix64.hpp"
#include "perfgate/bench/timer.hpp"

namespace perfgate::lora_backward {

// ---- configs ------------------------------------------------------------------------------------------
std::optional<Config> config_by_name(std::string_view name) {
  if (name == "ci") return Config{"ci", 64, 1024, 512, 4, 16, 32.0f};
  if (name == "deepseek-v3") return Config{"deepseek-v3", 256, 7168, 2048, 8, 16, 32.0f};
  if (name == "tiny") return Config{"tiny", 8, 128, 64, 2, 8, 16.0f};
  return std::nullopt;
}

ParsedConfig parse_config(std::string_view spec) {
  ParsedConfig out;
  const auto plus = spec.find('+');
  const std::string_view name = spec.substr(0, plus);
  auto cfg = config_by_name(name);
  if (!cfg) {
    out.error = fmt::format("unknown config '{}' (known: ci, deepseek-v3, tiny)", name);
    return out;
  }
  std::string_view rest = plus == std::string_view::npos ? std::string_view{} : spec.substr(plus + 1);
  while (!rest.empty()) {
    const auto next = rest.find('+');
    const std::string_view item = rest.substr(0, next);
    rest = next == std::string_view::npos ? std::string_view{} : rest.substr(next + 1);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) {
      out.error = fmt::format("config override '{}' is not key=value", item);
      return out;
    }
    const std::string key(item.substr(0, eq)), value(item.substr(eq + 1));
    if (key == "grads") {
      if (value != "fp32" && value != "bf16") {
        out.error = fmt::format("config override 'grads': '{}' is not a gradient type (fp32, bf16)", value);
        return out;
      }
      cfg->bf16_grads = value == "bf16";
      continue;
    }
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || end == nullptr || *end != '\0' || !std::isfinite(v)) {
      out.error = fmt::format("config override '{}': '{}' is not a number", key, value);
      return out;
    }
    const int iv = v >= -1e9 && v <= 1e9 ? static_cast<int>(v) : -1;
    if (key == "experts") cfg->experts = iv;
    else if (key == "hidden") cfg->hidden = iv;
    else if (key == "intermediate") cfg->intermediate = iv;
    else if (key == "top_k") cfg->top_k = iv;
    else if (key == "rank") cfg->rank = iv;
    else if (key == "alpha") cfg->alpha = static_cast<float>(v);
    else {
      out.error =
          fmt::format("unknown config key '{}' (experts, hidden, intermediate, top_k, rank, alpha, grads)", key);
      return out;
    }
  }
  cfg->name = std::string(spec);
  out.config = cfg;
  return out;
}

std::optional<std::string> validate(const Config& c, int qlen) {
  if (c.experts <= 0) return fmt::format("config {}: experts must be > 0 (got {})", c.name, c.experts);
  if (c.hidden <= 0 || c.intermediate <= 0)
    return fmt::format("config {}: hidden and intermediate must be > 0 (got {}, {})", c.name, c.hidden, c.intermediate);
  if (c.rank <= 0) return fmt::format("config {}: LoRA rank must be > 0 (got {})", c.name, c.rank);
  if (c.top_k <= 0) return fmt::format("config {}: top-k must be > 0 (got {})", c.name, c.top_k);
  if (c.top_k > c.experts)
    return fmt::format("config {}: top-k {} exceeds the number of experts {}", c.name, c.top_k, c.experts);
  if (!(c.alpha > 0.0f) || !std::isfinite(c.alpha)) return fmt::format("config {}: alpha must be > 0", c.name);
  if (qlen <= 0) return fmt::format("qlen must be > 0 (got {})", qlen);
  if (static_cast<long long>(qlen) * c.top_k > (1LL << 30)) return fmt::format("qlen {} too large", qlen);
  return std::nullopt;
}

// ---- random parameters ------------------------------------------------------------------------------------
namespace {

// Value i of a stream is splitmix64's output for the state seed + (i + 1) * gamma (what the sequential
// generator would return; bench::splitmix64 adds the last gamma). Stateless, so a fill loop carries no dependency.
inline std::uint64_t splitmix64_at(std::uint64_t seed, std::uint64_t i) {
  return bench::splitmix64(seed + i * 0x9e3779b97f4a7c15ULL);
}

// sign * U[0.1, 1] * scale: never zero.
inline float nonzero_uniform(std::uint64_t r, float scale) {
  const float u = static_cast<float>(static_cast<std::uint32_t>(r >> 40)) * (1.0f / 16777216.0f);
  const float mag = 0.1f + 0.9f * u;
  return ((r & 1u) ? -mag : mag) * scale;
}

constexpr std::size_t kFillChunk = 1 << 16;

void fill_floats(std::vector<float>& v, std::size_t n, std::uint64_t seed, float scale) {
  v.resize(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = nonzero_uniform(splitmix64_at(seed, i), scale);
}

// to_bf16 of the same values without its NaN branch (every value is finite), cloned for AVX-512 so the
// 64-bit multiplies vectorise: the ci config's 100 M weights cost 0.8 s of every bench process's start
// through the scalar loop.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v4", "default")))
#endif
void fill_bf16_range(bf16* out, std::size_t begin, std::size_t end, std::uint64_t seed, float scale) {
  for (std::size_t i = begin; i < end; ++i) {
    std::uint32_t bits = std::bit_cast<std::uint32_t>(nonzero_uniform(splitmix64_at(seed, i), scale));
    bits += 0x7fffu + ((bits >> 16) & 1u);
    out[i] = static_cast<bf16>(bits >> 16);
  }
}

template <typename Vec>
void fill_bf16(Vec& v, std::size_t n, std::uint64_t seed, float scale) {
  v.resize(n);
  const int chunks = static_cast<int>((n + kFillChunk - 1) / kFillChunk);
  parallel_for_static(chunks, [&](int c) {
    const std::size_t begin = static_cast<std::size_t>(c) * kFillChunk;
    fill_bf16_range(v.data(), begin, std::min(n, begin + kFillChunk), seed, scale);
  });
}

}  // namespace

std::size_t Weights::bytes() const {
  std::size_t b = 0;
  for (int p = 0; p < 3; ++p) b += (W[p].size() + A[p].size() + B[p].size()) * sizeof(bf16);
  return b;
}

Weights make_weights(const Config& cfg, std::uint64_t seed) {
  Weights w;
  w.cfg = cfg;
  const auto E = static_cast<std::size_t>(cfg.experts);
  const auto r = static_cast<std::size_t>(cfg.rank);
  for (int p = 0; p < 3; ++p) {
    const auto in = static_cast<std::size_t>(proj_in(cfg, p));
    const auto out = static_cast<std::size_t>(proj_out(cfg, p));
    const float fan_in = 1.0f / std::sqrt(static_cast<float>(in));
    const std::uint64_t base = seed * 1000003ULL + static_cast<std::uint64_t>(p) * 17ULL;
    fill_bf16(w.W[p], E * out * in, base + 1, fan_in);
    fill_bf16(w.A[p], E * r * in, base + 2, fan_in);
    fill_bf16(w.B[p], E * out * r, base + 3, 1.0f / std::sqrt(static_cast<float>(r)));
  }
  return w;
}

Problem make_problem(const Config& cfg, int qlen, std::uint64_t seed) {
  Problem p;
  p.qlen = qlen;
  const auto T = static_cast<std::size_t>(qlen);
  fill_bf16(p.x, T * cfg.hidden, seed * 7919ULL + 11, 1.0f);
  fill_floats(p.logits, T * cfg.experts, seed * 7919ULL + 12, 1.0f);
  fill_floats(p.grad_out, T * cfg.hidden, seed * 7919ULL + 13, 1.0f);
  return p;
}

void LoraGrads::resize(const Config& cfg) {
  bf16_grads = cfg.bf16_grads;
  for (int p = 0; p < 3; ++p) {
    const std::size_t a = static_cast<std::size_t>(cfg.experts) * cfg.rank * proj_in(cfg, p),
                      b = static_cast<std::size_t>(cfg.experts) * proj_out(cfg, p) * cfg.rank;
    A[p].assign(a, 0.0f);
    B[p].assign(b, 0.0f);
    A16[p].assign(bf16_grads ? a : 0, bf16{});
    B16[p].assign(bf16_grads ? b : 0, bf16{});
  }
}

void LoraGrads::round_experts(const Config& cfg, int p, int e0, int n) {
  if (!bf16_grads) return;
  auto round = [](const AlignedFloats& from, perfgate::bench::HugePageVector<bf16>& to, std::size_t per_expert,
                  int first, int count) {
    const std::size_t begin = static_cast<std::size_t>(first) * per_expert;
    const std::size_t end = begin + static_cast<std::size_t>(count) * per_expert;
    for (std::size_t i = begin; i < end; ++i) to[i] = to_bf16(from[i]);
  };
  round(A[p], A16[p], static_cast<std::size_t>(cfg.rank) * proj_in(cfg, p), e0, n);
  round(B[p], B16[p], static_cast<std::size_t>(proj_out(cfg, p)) * cfg.rank, e0, n);
}

PassBuffers::PassBuffers(const Config& cfg, int qlen)
    : out(static_cast<std::size_t>(qlen) * cfg.hidden), gin(static_cast<std::size_t>(qlen) * cfg.hidden) {
  grads.resize(cfg);
}

// ---- threads and slowdown ---------------------------------------------------------------------------------
void set_threads(int threads) {
#if defined(_OPENMP)
  if (threads > 0) omp_set_num_threads(threads);
#else
  (void)threads;
#endif
}

int max_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

namespace {
std::atomic<double> g_slowdown{0.0};
std::string g_slowdown_phase;  // set before any run; read-only afterwards
}  // namespace

void set_slowdown(double fraction, std::string only_phase) {
  g_slowdown = fraction > 0.0 ? fraction : 0.0;
  g_slowdown_phase = std::move(only_phase);
}
double slowdown_fraction() { return g_slowdown; }

double slowdown_for_phase(int phase) {
  const double f = g_slowdown;
  if (f <= 0.0) return 0.0;
  if (g_slowdown_phase.empty()) return f;
  if (phase < 0) return 0.0;
  return g_slowdown_phase == kPhaseNames[phase] ? f : 0.0;
}

void burn_ms(double ms) {
  if (ms <= 0.0) return;
  bench::Stopwatch sw;
  volatile double sink = 1.0;
  double acc = sink;
  while (sw.elapsed_ms() < ms) {
    for (int i = 0; i < 256; ++i) acc = acc * 1.0000001 + 1e-9;
  }
  sink = acc;
}

// ---- routing ----------------------------------------------------------------------------------------------
namespace {

// One token's top-k of its E logits (larger logit first, ties to the lower index) into sel, and the softmax of
// the selected logits into wt.
void top_k_softmax(const float* l, int E, int k, int* sel, float* wt) {
  // insertion top-k: larger logit first, ties to the lower index
  int n = 0;
  for (int e = 0; e < E; ++e) {
    if (n == k && !(l[e] > l[sel[k - 1]])) continue;
    int pos = n < k ? n++ : k - 1;
    while (pos > 0 && l[e] > l[sel[pos - 1]]) {
      sel[pos] = sel[pos - 1];
      --pos;
    }
    sel[pos] = e;
  }
  float mx = l[sel[0]], sum = 0.0f;
  for (int j = 0; j < k; ++j) sum += (wt[j] = std::exp(l[sel[j]] - mx));
  for (int j = 0; j < k; ++j) wt[j] /= sum;
}

// The (token, slot) rows sorted by expert: offsets, row_token, row_weight, token_rows and active.
void sort_rows_by_expert(int T, int E, int k, const std::vector<int>& expert_of, const std::vector<float>& weight_of,
                         Routing& rt) {
  rt.offsets.assign(static_cast<std::size_t>(E) + 1, 0);
  for (int i = 0; i < T * k; ++i) ++rt.offsets[static_cast<std::size_t>(expert_of[i]) + 1];
  for (int e = 0; e < E; ++e) rt.offsets[e + 1] += rt.offsets[e];
  const int R = T * k;
  rt.row_token.resize(R);
  rt.row_weight.resize(R);
  rt.token_rows.resize(R);
  std::vector<int> fill_pos(rt.offsets.begin(), rt.offsets.end() - 1);
  for (int t = 0; t < T; ++t) {
    for (int j = 0; j < k; ++j) {
      const int e = expert_of[t * k + j];
      const int row = fill_pos[e]++;
      rt.row_token[row] = t;
      rt.row_weight[row] = weight_of[t * k + j];
      rt.token_rows[t * k + j] = row;
    }
  }
  rt.active.clear();
  for (int e = 0; e < E; ++e)
    if (rt.offsets[e + 1] > rt.offsets[e]) rt.active.push_back(e);
}

}  // namespace

void route(const Config& cfg, const Problem& problem, Routing& rt) {
  const int T = problem.qlen, E = cfg.experts, k = cfg.top_k;
  rt.qlen = T;
  std::vector<int> expert_of(static_cast<std::size_t>(T) * k);
  std::vector<float> weight_of(static_cast<std::size_t>(T) * k);
  parallel_for_static(T, [&](int t) {
    top_k_softmax(problem.logits.data() + static_cast<std::size_t>(t) * E, E, k,
                  expert_of.data() + static_cast<std::size_t>(t) * k,
                  weight_of.data() + static_cast<std::size_t>(t) * k);
  });
  sort_rows_by_expert(T, E, k, expert_of, weight_of, rt);
}

// ---- the shared driver -----------------------------------------------------------------------------------
namespace {

// Times one phase, adds its NVTX range and (when asked) the injected slowdown.
class PhaseScope {
 public:
  PhaseScope(PhaseTimes& t, int phase) : t_(t), phase_(phase), range_(kPhaseRangeNames[phase]) {}
  ~PhaseScope() {
    burn_ms(sw_.elapsed_ms() * slowdown_for_phase(phase_));
    t_.ms[phase_] += sw_.elapsed_ms();
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  PhaseTimes& t_;
  int phase_;
  bench::NvtxRange range_;
  bench::Stopwatch sw_;
};

// Forward steps: NVTX range + injected slowdown (no phase counters).
class StepScope {
 public:
  explicit StepScope(const char* name) : range_(name) {}
  ~StepScope() { burn_ms(sw_.elapsed_ms() * slowdown_for_phase(-1)); }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  bench::NvtxRange range_;
  bench::Stopwatch sw_;
};

template <typename T>
void ensure_size(std::vector<T>& v, std::size_t n) {
  if (v.size() != n) v.resize(n);
}

}  // namespace

LayerBase::LayerBase(const Weights& w)
    : w_(w), cfg_(w.cfg), s_(w.cfg.scaling()), H_(w.cfg.hidden), I_(w.cfg.intermediate), r_(w.cfg.rank) {}

void LayerBase::forward(const Problem& problem, std::span<float> out) {
  if (problem.x.size() != static_cast<std::size_t>(problem.qlen) * H_ ||
      problem.logits.size() != static_cast<std::size_t>(problem.qlen) * cfg_.experts ||
      out.size() != static_cast<std::size_t>(problem.qlen) * H_)
    throw std::invalid_argument("forward: problem/output sizes do not match the config");
  {
    StepScope s("expert_routing");
    route(cfg_, problem, rt_);
  }
  size_forward_buffers(problem.qlen);
  begin_forward();
  const int nact = static_cast<int>(rt_.active.size());
  scatter_input(problem);
  {
    StepScope s("gate_up_gemm+lora");
    parallel_for(nact, [&](int i) { fwd_gate_up(rt_.active[i]); });
  }
  activation_forward();
  {
    StepScope s("down_gemm+lora");
    parallel_for(nact, [&](int i) { fwd_down(rt_.active[i]); });
  }
  merge_outputs(problem.qlen, out);
}

void LayerBase::size_forward_buffers(int qlen) {
  R_ = qlen * cfg_.top_k;
  const auto R = static_cast<std::size_t>(R_);
  ensure_size(xs_, R * H_);
  for (auto& v : pre_) ensure_size(v, R * I_);
  for (auto& v : U_) ensure_size(v, R * r_);
  ensure_size(z_, R * I_);
  ensure_size(ys_, R * H_);
}

void LayerBase::scatter_input(const Problem& problem) {
  StepScope s("copy_input");
  const int H = H_;
  parallel_for_static(R_, [&](int row) {
    std::memcpy(xs_.data() + static_cast<std::size_t>(row) * H,
                problem.x.data() + static_cast<std::size_t>(rt_.row_token[row]) * H, sizeof(bf16) * H);
  });
}

void LayerBase::activation_forward() {
  StepScope s("activation");
  const int I = I_;
  // a scalar pass: its speed must not depend on the AVX-512 code before it
  parallel_for_static_scalar(R_, [&](int row) {
    const float* g = pre_[kGate].data() + static_cast<std::size_t>(row) * I;
    const float* u = pre_[kUp].data() + static_cast<std::size_t>(row) * I;
    bf16* z = z_.data() + static_cast<std::size_t>(row) * I;
    for (int i = 0; i < I; ++i) {
      const float sig = 1.0f / (1.0f + std::exp(-g[i]));
      z[i] = to_bf16(g[i] * sig * u[i]);
    }
  });
}

void LayerBase::merge_outputs(int qlen, std::span<float> out) {
  StepScope s("weighted_merge");
  const int H = H_, k = cfg_.top_k;
  parallel_for_static(qlen, [&](int t) {
    float* o = out.data() + static_cast<std::size_t>(t) * H;
    for (int h = 0; h < H; ++h) o[h] = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int row = rt_.token_rows[t * k + j];
      const float wt = rt_.row_weight[row];
      const float* y = ys_.data() + static_cast<std::size_t>(row) * H;
      for (int h = 0; h < H; ++h) o[h] += wt * y[h];
    }
  });
}

void LayerBase::backward(std::span<const float> grad_out, std::span<float> grad_input, LoraGrads& grads,
                         PhaseTimes& phases) {
  if (R_ == 0) throw std::logic_error("backward before forward");
  if (grad_out.size() != static_cast<std::size_t>(rt_.qlen) * H_ ||
      grad_input.size() != static_cast<std::size_t>(rt_.qlen) * H_)
    throw std::invalid_argument("backward: gradient sizes do not match the last forward");
  size_backward_buffers(grads);
  backward_down(grad_out, grads, phases);
  backward_activation(phases);
  backward_gate_up(grad_input, grads, phases);
}

void LayerBase::size_backward_buffers(LoraGrads& grads) {
  const auto R = static_cast<std::size_t>(R_);
  ensure_size(dysf_, R * H_);
  ensure_size(dys_, R * H_);
  ensure_size(gz_, R * I_);
  for (auto& v : dpre_) ensure_size(v, R * I_);
  ensure_size(gx_, R * H_);
  if (grads.A[0].size() != static_cast<std::size_t>(cfg_.experts) * r_ * H_ || grads.bf16_grads != cfg_.bf16_grads)
    grads.resize(cfg_);
}

// backward_down: D0 to D4.
void LayerBase::backward_down(std::span<const float> grad_out, LoraGrads& grads, PhaseTimes& phases) {
  const int H = H_;
  {
    PhaseScope ps(phases, D0);
    prepare_down_backward();
    if (lora_grads_need_zeroing()) {
      for (int p = 0; p < 3; ++p) {
        std::fill(grads.A[p].begin(), grads.A[p].end(), 0.0f);
        std::fill(grads.B[p].begin(), grads.B[p].end(), 0.0f);
        std::fill(grads.A16[p].begin(), grads.A16[p].end(), bf16{});
        std::fill(grads.B16[p].begin(), grads.B16[p].end(), bf16{});
      }
    }
    std::fill(gz_.begin(), gz_.end(), 0.0f);
  }
  {
    PhaseScope ps(phases, D1);
    parallel_for_static(R_, [&](int row) {
      const float* g = grad_out.data() + static_cast<std::size_t>(rt_.row_token[row]) * H;
      float* d = dysf_.data() + static_cast<std::size_t>(row) * H;
      const float wt = rt_.row_weight[row];
      for (int h = 0; h < H; ++h) d[h] = g[h] * wt;
    });
  }
  {
    PhaseScope ps(phases, D2);
    parallel_for_static(R_, [&](int row) {
      const float* s = dysf_.data() + static_cast<std::size_t>(row) * H;
      bf16* d = dys_.data() + static_cast<std::size_t>(row) * H;
      for (int h = 0; h < H; ++h) d[h] = to_bf16(s[h]);
    });
  }
  {
    PhaseScope ps(phases, D3);
    down_base_all(grads);
  }
  PhaseScope ps(phases, D4);
  down_lora_all(grads);
}

// backward_activation: A1.
void LayerBase::backward_activation(PhaseTimes& phases) {
  PhaseScope ps(phases, A1);
  const int I = I_;
  parallel_for_static_scalar(R_, [&](int row) {  // as in activation_forward
    const std::size_t off = static_cast<std::size_t>(row) * I;
    const float* g = pre_[kGate].data() + off;
    const float* u = pre_[kUp].data() + off;
    const float* dz = gz_.data() + off;
    bf16* dg = dpre_[kGate].data() + off;
    bf16* du = dpre_[kUp].data() + off;
    for (int i = 0; i < I; ++i) {
      const float sig = 1.0f / (1.0f + std::exp(-g[i]));
      dg[i] = to_bf16(dz[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig)));
      du[i] = to_bf16(dz[i] * g[i] * sig);
    }
  });
}

// backward_gate_up: GU0 to GU3.
void LayerBase::backward_gate_up(std::span<float> grad_input, LoraGrads& grads, PhaseTimes& phases) {
  {
    PhaseScope ps(phases, GU0);
    prepare_gate_up_backward();
    std::fill(grad_input.begin(), grad_input.end(), 0.0f);
  }
  {
    PhaseScope ps(phases, GU1);
    gate_up_base_all(grads);
  }
  {
    PhaseScope ps(phases, GU2);
    reconvert_for_lora();
  }
  PhaseScope ps(phases, GU3);
  gate_up_lora_phase(grads, grad_input);
}

void LayerBase::gate_up_lora_phase(LoraGrads& grads, std::span<float> grad_input) {
  gate_up_lora_all(grads);
  // the seed's LoRA pass writes grad_input
  add_token_rows(grad_input);
}

void LayerBase::add_token_rows(std::span<float> grad_input) {
  const int H = H_, k = cfg_.top_k;
  parallel_for_static(rt_.qlen, [&](int t) {
    float* gi = grad_input.data() + static_cast<std::size_t>(t) * H;
    for (int j = 0; j < k; ++j) {
      const float* gr = gx_.data() + static_cast<std::size_t>(rt_.token_rows[t * k + j]) * H;
      for (int h = 0; h < H; ++h) gi[h] += gr[h];
    }
  });
}

void LayerBase::down_base_all(LoraGrads&) {
  parallel_for(static_cast<int>(rt_.active.size()), [&](int i) { down_base(rt_.active[i]); });
}
void LayerBase::gate_up_base_all(LoraGrads&) {
  parallel_for(static_cast<int>(rt_.active.size()), [&](int i) { gate_up_base(rt_.active[i]); });
}
void LayerBase::down_lora_all(LoraGrads& grads) {
  parallel_for(static_cast<int>(rt_.active.size()), [&](int i) { down_lora(rt_.active[i], grads); });
}
void LayerBase::gate_up_lora_all(LoraGrads& grads) {
  parallel_for(static_cast<int>(rt_.active.size()), [&](int i) { gate_up_lora(rt_.active[i], grads); });
}

std::array<Work, kPhaseCount> LayerBase::backward_work() const {
  std::array<Work, kPhaseCount> w{};
  const double R = R_, H = H_, I = I_, r = r_, A = static_cast<double>(rt_.active.size());
  // LoRA of one projection (in, out): A, B read (bf16), grad_A, grad_B written (fp32, or bf16 with bf16_grads),
  // dy and x read (bf16), the input gradient read and written (fp32)
  const double gbytes = cfg_.grad_bytes();
  auto lora_bytes = [&](double in, double out) {
    return A * r * (in + out) * (2.0 + gbytes) + R * (in + out) * 2.0 + R * in * 8.0;
  };
  w[D3] = {2.0 * R * H * I, A * H * I * 2.0, A * H * I * 2.0};
  w[D4] = {4.0 * R * r * (H + I), A * r * (H + I) * 2.0, lora_bytes(I, H)};
  w[GU1] = {2.0 * R * 2.0 * I * H, A * 2.0 * I * H * 2.0, A * 2.0 * I * H * 2.0};
  w[GU3] = {2.0 * 4.0 * R * r * (H + I), 2.0 * A * r * (H + I) * 2.0, 2.0 * lora_bytes(H, I)};
  w[D0] = {0.0, A * H * I * 2.0, 0.0};
  w[GU0] = {0.0, A * 2.0 * H * I * 2.0, 0.0};
  return w;
}

Work LayerBase::forward_work() const {
  const double R = R_, H = H_, I = I_, r = r_, A = static_cast<double>(rt_.active.size());
  return {6.0 * R * H * I + 6.0 * R * r * (H + I), 3.0 * A * (H * I + r * (H + I)) * 2.0};
}

// ---- fp64 reference -----------------------------------------------------------------------------------------
namespace {

// y[o] = sum_i M[o][i] x[i]   (M bf16 [out][in])
// Eight partial sums per row: one running sum is a chain of dependent adds that cannot vectorise, and
// made the ci config's reference cost ~1 s of every bench process's start.
void matvec(const bf16* M, int out, int in, const double* x, double* y) {
  constexpr int kLanes = 8;
  for (int o = 0; o < out; ++o) {
    const bf16* m = M + static_cast<std::size_t>(o) * in;
    double lane[kLanes] = {};
    int i = 0;
    for (; i + kLanes <= in; i += kLanes)
      for (int l = 0; l < kLanes; ++l) lane[l] += static_cast<double>(to_float(m[i + l])) * x[i + l];
    double acc = 0.0;
    for (double v : lane) acc += v;
    for (; i < in; ++i) acc += static_cast<double>(to_float(m[i])) * x[i];
    y[o] = acc;
  }
}
// y[i] += sum_o M[o][i] x[o] * scale  (transpose)
void matvec_t_add(const bf16* M, int out, int in, const double* x, double scale, double* y) {
  for (int o = 0; o < out; ++o) {
    const bf16* m = M + static_cast<std::size_t>(o) * in;
    const double xo = x[o] * scale;
    for (int i = 0; i < in; ++i) y[i] += static_cast<double>(to_float(m[i])) * xo;
  }
}

struct RowCache {  // what the LoRA gradients need per (token, slot)
  int expert = 0;
  std::array<std::vector<double>, 3> x, dy, ax, gb;  // per projection: input, output grad, A x, B^T dy
};

// Top-k in double: same ordering rule as the layer (larger first, ties to lower index); the softmax of the
// selected logits into wt.
std::vector<int> reference_top_k(const float* l, int E, int k, std::vector<double>& wt) {
  std::vector<int> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
  wt.assign(k, 0.0);
  double sum = 0.0;
  for (int j = 0; j < k; ++j) sum += (wt[j] = std::exp(static_cast<double>(l[order[j]]) - l[order[0]]));
  for (int j = 0; j < k; ++j) wt[j] /= sum;
  return order;
}

// One expert's projections in fp64.
struct ExpertLinear {
  const Weights& w;
  int e;
  double s;
  // forward: linear(p, in) = W in + s B (A in); A in into axv
  void forward(int p, const double* in, double* outv, double* axv) const {
    const Config& c = w.cfg;
    const int din = proj_in(c, p), dout = proj_out(c, p), r = c.rank;
    matvec(w.w(p, e), dout, din, in, outv);
    matvec(w.a(p, e), r, din, in, axv);
    std::vector<double> lo(dout);
    matvec(w.b(p, e), dout, r, axv, lo.data());
    for (int o = 0; o < dout; ++o) outv[o] += s * lo[o];
  }
  // backward of linear: grad_in += W^T dyv + s A^T (B^T dyv); B^T dyv into gbv
  void backward(int p, const double* dyv, double* gin_v, double* gbv) const {
    const Config& c = w.cfg;
    const int din = proj_in(c, p), dout = proj_out(c, p), r = c.rank;
    matvec_t_add(w.w(p, e), dout, din, dyv, 1.0, gin_v);
    for (int q = 0; q < r; ++q) gbv[q] = 0.0;
    matvec_t_add(w.b(p, e), dout, r, dyv, 1.0, gbv);
    matvec_t_add(w.a(p, e), r, din, gbv, s, gin_v);
  }
};

// One token's vectors, reused over its k slots.
struct TokenVectors {
  TokenVectors(int H, int I) : x(H), g(I), u(I), z(I), y(H), dy(H), dz(I), dg(I), du(I) {}
  std::vector<double> x, g, u, z, y, dy, dz, dg, du;
};

std::array<std::vector<double>, 3> rank_vectors(int r) {
  return {std::vector<double>(r), std::vector<double>(r), std::vector<double>(r)};
}

// One (token, slot) through expert lin.e: its output times wt added to out, its input gradient to gin; what the
// LoRA gradients need into rc (when not null). grad_out: the token's output gradient.
void reference_slot(const ExpertLinear& lin, double wt, const float* grad_out, TokenVectors& v, double* out,
                    double* gin, RowCache* rc) {
  const Config& c = lin.w.cfg;
  const int H = c.hidden, I = c.intermediate;
  auto axs = rank_vectors(c.rank);
  lin.forward(kGate, v.x.data(), v.g.data(), axs[kGate].data());
  lin.forward(kUp, v.x.data(), v.u.data(), axs[kUp].data());
  for (int i = 0; i < I; ++i) v.z[i] = v.g[i] / (1.0 + std::exp(-v.g[i])) * v.u[i];
  lin.forward(kDown, v.z.data(), v.y.data(), axs[kDown].data());
  for (int h = 0; h < H; ++h) out[h] += wt * v.y[h];

  for (int h = 0; h < H; ++h) v.dy[h] = wt * grad_out[h];
  std::fill(v.dz.begin(), v.dz.end(), 0.0);
  auto gbs = rank_vectors(c.rank);
  lin.backward(kDown, v.dy.data(), v.dz.data(), gbs[kDown].data());
  for (int i = 0; i < I; ++i) {
    const double sig = 1.0 / (1.0 + std::exp(-v.g[i]));
    v.dg[i] = v.dz[i] * v.u[i] * sig * (1.0 + v.g[i] * (1.0 - sig));
    v.du[i] = v.dz[i] * v.g[i] * sig;
  }
  lin.backward(kGate, v.dg.data(), gin, gbs[kGate].data());
  lin.backward(kUp, v.du.data(), gin, gbs[kUp].data());
  if (rc) {
    rc->expert = lin.e;
    rc->x = {v.x, v.x, v.z};
    rc->dy = {v.dg, v.du, v.dy};
    rc->ax = axs;
    rc->gb = gbs;
  }
}

// Token t's k slots; rows: its k RowCaches, or null.
void reference_token(const Weights& w, const Problem& problem, int t, double* out, double* gin, RowCache* rows) {
  const Config& c = w.cfg;
  const int H = c.hidden;
  std::vector<double> wt;
  const std::vector<int> order =
      reference_top_k(problem.logits.data() + static_cast<std::size_t>(t) * c.experts, c.experts, c.top_k, wt);
  TokenVectors v(H, c.intermediate);
  for (int h = 0; h < H; ++h) v.x[h] = to_float(problem.x[static_cast<std::size_t>(t) * H + h]);
  const double s = static_cast<double>(c.alpha) / c.rank;
  for (int j = 0; j < c.top_k; ++j) {
    reference_slot(ExpertLinear{w, order[j], s}, wt[j], problem.grad_out.data() + static_cast<std::size_t>(t) * H, v,
                   out, gin, rows ? rows + j : nullptr);
  }
}

// The LoRA gradients from every row's cache: grad_B = s dy (A x)^T ; grad_A = s (B^T dy) x^T
void reference_lora_grads(const Config& c, const std::vector<RowCache>& rows, Reference& ref) {
  const int E = c.experts, r = c.rank;
  const double s = static_cast<double>(c.alpha) / r;
  for (int p = 0; p < 3; ++p) {
    ref.gA[p].assign(static_cast<std::size_t>(E) * r * proj_in(c, p), 0.0);
    ref.gB[p].assign(static_cast<std::size_t>(E) * proj_out(c, p) * r, 0.0);
  }
  std::vector<std::vector<int>> by_expert(E);
  for (int i = 0; i < static_cast<int>(rows.size()); ++i) by_expert[rows[i].expert].push_back(i);
  parallel_for(E, [&](int e) {
    for (int p = 0; p < 3; ++p) {
      const int din = proj_in(c, p), dout = proj_out(c, p);
      double* gA = ref.gA[p].data() + static_cast<std::size_t>(e) * r * din;
      double* gB = ref.gB[p].data() + static_cast<std::size_t>(e) * dout * r;
      for (int idx : by_expert[e]) {
        const RowCache& rc = rows[idx];
        for (int o = 0; o < dout; ++o)
          for (int q = 0; q < r; ++q) gB[static_cast<std::size_t>(o) * r + q] += s * rc.dy[p][o] * rc.ax[p][q];
        for (int q = 0; q < r; ++q)
          for (int i = 0; i < din; ++i) gA[static_cast<std::size_t>(q) * din + i] += s * rc.gb[p][q] * rc.x[p][i];
      }
    }
  });
}

}  // namespace

std::vector<float> grad_values(const LoraGrads& grads, int p, bool a) {
  if (!grads.bf16_grads) {
    const AlignedFloats& v = a ? grads.A[p] : grads.B[p];
    return {v.begin(), v.end()};
  }
  const auto& v = a ? grads.A16[p] : grads.B16[p];
  std::vector<float> out(v.size());
  std::transform(v.begin(), v.end(), out.begin(), to_float);
  return out;
}

Reference reference(const Weights& w, const Problem& problem, std::span<const int> tokens_in, bool lora_grads) {
  const Config& c = w.cfg;
  const int T = problem.qlen, k = c.top_k, H = c.hidden;
  Reference ref;
  if (tokens_in.empty()) {
    ref.tokens.resize(T);
    std::iota(ref.tokens.begin(), ref.tokens.end(), 0);
  } else {
    ref.tokens.assign(tokens_in.begin(), tokens_in.end());
  }
  if (lora_grads && static_cast<int>(ref.tokens.size()) != T)
    throw std::invalid_argument("reference: LoRA gradients need all tokens");
  const int nt = static_cast<int>(ref.tokens.size());
  ref.out.assign(static_cast<std::size_t>(nt) * H, 0.0);
  ref.grad_input.assign(static_cast<std::size_t>(nt) * H, 0.0);
  std::vector<RowCache> rows(lora_grads ? static_cast<std::size_t>(nt) * k : 0);
  parallel_for(nt, [&](int ti) {
    reference_token(w, problem, ref.tokens[ti], ref.out.data() + static_cast<std::size_t>(ti) * H,
                    ref.grad_input.data() + static_cast<std::size_t>(ti) * H,
                    lora_grads ? rows.data() + static_cast<std::size_t>(ti) * k : nullptr);
  });
  if (lora_grads) reference_lora_grads(c, rows, ref);
  return ref;
}

std::optional<std::string> check_against_reference(MoeLoraLayer& layer, const Weights& w, const Problem& problem,
                                                   const Reference& ref, double bound,
                                                   std::vector<std::pair<std::string, double>>* report) {
  const Config& c = w.cfg;
  const std::size_t TH = static_cast<std::size_t>(problem.qlen) * c.hidden;
  std::vector<float> out(TH), gin(TH);
  LoraGrads grads;
  grads.resize(c);
  // stale values in every output buffer: a variant must overwrite (or zero) all of them
  for (int p = 0; p < 3; ++p) {
    std::fill(grads.A[p].begin(), grads.A[p].end(), 1e3f);
    std::fill(grads.B[p].begin(), grads.B[p].end(), -1e3f);
    std::fill(grads.A16[p].begin(), grads.A16[p].end(), to_bf16(1e3f));
    std::fill(grads.B16[p].begin(), grads.B16[p].end(), to_bf16(-1e3f));
  }
  std::fill(out.begin(), out.end(), 1e3f);
  std::fill(gin.begin(), gin.end(), -1e3f);
  PhaseTimes pt;
  layer.forward(problem, out);
  layer.backward(problem.grad_out, gin, grads, pt);

  std::optional<std::string> first;
  auto check = [&](const std::string& what, std::span<const float> got, std::span<const double> want) {
    const double err = bench::relative_l2_error(got, want);
    if (report) report->emplace_back(what, err);
    if (!first) {
      if (auto msg = bench::check_relative_l2(
              fmt::format("{} ({} variant, cfg {}, qlen {})", what, layer.variant(), c.name, problem.qlen), got, want,
              bound))
        first = msg;
    }
  };
  // rows of the tokens the reference computed
  std::vector<float> out_sel, gin_sel;
  for (int t : ref.tokens) {
    out_sel.insert(out_sel.end(), out.begin() + static_cast<std::ptrdiff_t>(t) * c.hidden,
                   out.begin() + static_cast<std::ptrdiff_t>(t + 1) * c.hidden);
    gin_sel.insert(gin_sel.end(), gin.begin() + static_cast<std::ptrdiff_t>(t) * c.hidden,
                   gin.begin() + static_cast<std::ptrdiff_t>(t + 1) * c.hidden);
  }
  check("output", out_sel, ref.out);
  check("grad_input", gin_sel, ref.grad_input);
  if (!ref.gA[0].empty()) {
    for (int p = 0; p < 3; ++p) {
      check(fmt::format("grad_A.{}", kProjNames[p]), grad_values(grads, p, true), ref.gA[p]);
      check(fmt::format("grad_B.{}", kProjNames[p]), grad_values(grads, p, false), ref.gB[p]);
    }
  }
  return first;
}

}  // namespace perfgate::lora_backward
