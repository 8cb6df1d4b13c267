// `onednn` variant: every GEMM, the LoRA gradients included, through oneDNN matmul (bf16 in, fp32
// accumulation; AMX where the CPU has it, else AVX-512 BF16). Base weights are reordered once into
// the layout the matmul implementation prefers, for the forward and for the backward, and cached.
// One primitive per (GEMM kind, rows of an expert), created on first use; experts run in parallel
// with each primitive single-threaded (oneDNN runs sequentially inside an OpenMP parallel region).
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fused_lora.hpp"
#include "layer_base.hpp"

#if PERFGATE_HAVE_ONEDNN
#include <algorithm>
#include <array>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string_view>
#include <tuple>

#include <dnnl.hpp>
#include <fmt/format.h>
#if defined(_OPENMP)
#include <omp.h>
#endif
#endif

namespace perfgate::lora_backward {
namespace {

// An experiment knob: the environment variable `name` is "1".
bool knob_on(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string_view(v) == "1";
}

// fused2's per-expert LoRA work: products on AMX tiles where the CPU has AMX, else vdpbf16ps
// (PERFGATE_LORA_FUSED2_VDPBF16=1: vdpbf16ps everywhere; PERFGATE_LORA_FUSED2_AMX_NO_PREFETCH=1: AMX without the
// software prefetches; experiment knobs).
using GradsDxFn = void (*)(std::span<const LoraPassArgs>, bf16*, const DxSink&, std::span<const LoraPassArgs>);
GradsDxFn fused2_grads_dx() {
  if (knob_on("PERFGATE_LORA_FUSED2_VDPBF16")) return lora_grads_dx_fused2;
  if (knob_on("PERFGATE_LORA_FUSED2_AMX_NO_PREFETCH")) return lora_grads_dx_fused2_amx_unprefetched;
  return lora_grads_dx_fused2_amx;
}

}  // namespace

std::string fused2_products() {
  if (fused2_grads_dx() != lora_grads_dx_fused2 && lora_fused2_amx_usable()) return "amx";
  return lora_fused_vectorised(16, 16, 16) ? "vdpbf16ps" : "generic";
}

#if PERFGATE_HAVE_ONEDNN
namespace {

using dnnl::memory;
using dt = memory::data_type;
using dims = memory::dims;

using AlignedBuffer = perfgate::bench::PrefaultedVector<std::uint8_t>;  // 64-byte or page aligned

dnnl::matmul::primitive_desc make_pd(const dnnl::engine& eng, const memory::desc& a, const memory::desc& b,
                                     const memory::desc& c, const dnnl::primitive_attr& attr) {
#if DNNL_VERSION_MAJOR >= 3
  return dnnl::matmul::primitive_desc(eng, a, b, c, attr);
#else
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, eng);
#endif
}

// dst = scale * (a x b) [+ dst]
dnnl::primitive_attr make_attr(float scale, bool sum) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::post_ops po;
  if (scale != 1.0f) {
#if DNNL_VERSION_MAJOR >= 3
    po.append_eltwise(dnnl::algorithm::eltwise_linear, scale, 0.0f);
#else
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, scale, 0.0f);
#endif
  }
  if (sum) po.append_sum(1.0f);
  attr.set_post_ops(po);
  return attr;
}

// A 2-D matrix as a memory descriptor with explicit strides (rows, cols, row stride, col stride).
memory::desc md2(memory::dim rows, memory::dim cols, dt type, memory::dim rs, memory::dim cs) {
  return memory::desc(dims{rows, cols}, type, dims{rs, cs});
}

enum Kind : int {
  kFUgu,
  kFUd,
  kFG,
  kFGL,
  kFD,
  kFDL,  // forward
  kD3,
  kDL1,
  kDL2,
  kDL3,
  kDL4,  // backward down
  kGU1a,
  kGU1b,
  kGL1,
  kGL2,
  kGL3,
  kGL4,  // backward gate/up
  // batched over all experts, rows padded to the largest expert (m = that row count)
  kBD1,
  kBD2,
  kBD3,
  kBD4,
  kBG1,
  kBG2,
  kBG3,
  kBG3s,
  kBG4,
  kKindCount
};
constexpr int kFirstBatched = kBD1;
constexpr std::array<const char*, kKindCount> kKindNames = {"fwd.U_gate_up",
                                                            "fwd.U_down",
                                                            "fwd.gate_up",
                                                            "fwd.gate_up_lora",
                                                            "fwd.down",
                                                            "fwd.down_lora",
                                                            "D3",
                                                            "D4.grad_B",
                                                            "D4.G_B",
                                                            "D4.dx",
                                                            "D4.grad_A",
                                                            "GU1.gate",
                                                            "GU1.up",
                                                            "GU3.grad_B",
                                                            "GU3.G_B",
                                                            "GU3.dx",
                                                            "GU3.grad_A",
                                                            "D4.batched.grad_B",
                                                            "D4.batched.G_B",
                                                            "D4.batched.dx",
                                                            "D4.batched.grad_A",
                                                            "GU3.batched.grad_B",
                                                            "GU3.batched.G_B",
                                                            "GU3.batched.dx",
                                                            "GU3.batched.dx+sum",
                                                            "GU3.batched.grad_A"};

struct Prim {
  dnnl::matmul prim;
  memory::desc src, wei, dst;
  std::size_t scratch = 0;
  std::string impl;
};

// The base weights in the blocked layouts oneDNN picks, [E] x layout size per projection. The onednn and fused
// variants of one Weights share them: they are twice the weights (22.5 GB x 2 at deepseek-v3), and a gate process
// that alternates the two variants under random interleaving re-reordered them at every switch when each layer
// owned its copy (docs/lora_backward.md, "Cost of a gate process").
struct PreparedBase {
  std::array<AlignedBuffer, 3> fwd, bwd;
};

// The one PreparedBase of `w` while any layer of it lives.
std::shared_ptr<PreparedBase> prepared_base_of(const Weights& w) {
  static std::mutex mutex;
  static std::map<const Weights*, std::weak_ptr<PreparedBase>> registry;
  const std::lock_guard lock(mutex);
  std::erase_if(registry, [](const auto& entry) { return entry.second.expired(); });
  std::weak_ptr<PreparedBase>& slot = registry[&w];
  std::shared_ptr<PreparedBase> base = slot.lock();
  if (!base) {
    base = std::make_shared<PreparedBase>();
    slot = base;
  }
  return base;
}

// One matmul's descriptors (A x B -> C) and attributes: C = scale A B (+ C when sum).
struct MatmulDescs {
  memory::desc a, b, c;
  float scale = 1.0f;
  bool sum = false;
};

// LoRA backward of a projection, step 1 to 4, for m rows of one expert: dy [m][out] (ld ldy), U (ld ldu),
// x [m][in] (ld ldx), dx (ld lddx).
struct LoraShape {
  memory::dim out, in, ldy, ldu, ldx, lddx;
};
MatmulDescs lora_backward_descs(int step, memory::dim M, memory::dim r, float s, const LoraShape& sh) {
  switch (step) {
    case 1:  // grad_B [out][r] = s dy^T U
      return {md2(sh.out, M, dt::bf16, 1, sh.ldy), md2(M, r, dt::bf16, sh.ldu, 1), md2(sh.out, r, dt::f32, r, 1), s};
    case 2:  // G_B [m][r] = dy B     (B [out][r])
      return {md2(M, sh.out, dt::bf16, sh.ldy, 1), md2(sh.out, r, dt::bf16, r, 1), md2(M, r, dt::bf16, r, 1)};
    case 3:  // dx += s G_B A         (A [r][in])
      return {md2(M, r, dt::bf16, r, 1), md2(r, sh.in, dt::bf16, sh.in, 1), md2(M, sh.in, dt::f32, sh.lddx, 1), s,
              true};
    default:  // grad_A [r][in] = s G_B^T x
      return {md2(r, M, dt::bf16, 1, r), md2(M, sh.in, dt::bf16, sh.ldx, 1), md2(r, sh.in, dt::f32, sh.in, 1), s};
  }
}

// LoRA forward of a projection, first half: u [m][r] = x [m][in] A^T   (A [r][in])
MatmulDescs lora_forward_down_descs(memory::dim M, memory::dim r, memory::dim in) {
  return {md2(M, in, dt::bf16, in, 1), md2(in, r, dt::bf16, 1, in), md2(M, r, dt::bf16, r, 1)};
}
// ... second half: y [m][out] += s u B^T   (B [out][r])
MatmulDescs lora_forward_up_descs(memory::dim M, memory::dim r, float s, memory::dim out) {
  return {md2(M, r, dt::bf16, r, 1), md2(r, out, dt::bf16, 1, r), md2(M, out, dt::f32, out, 1), s, true};
}

// The batched LoRA kinds (kBD1 and after): over E experts, M = padded rows per expert.
MatmulDescs batched_lora_descs(int kind, memory::dim M, memory::dim E, memory::dim H, memory::dim I, memory::dim r,
                               float s) {
  const bool down = kind <= kBD4;
  const memory::dim out = down ? H : I, in = down ? I : H;
  const int step = down ? kind - kBD1 + 1 : (kind == kBG1 ? 1 : kind == kBG2 ? 2 : kind == kBG4 ? 4 : 3);
  auto md3 = [](memory::dim b0, memory::dim rows, memory::dim cols, dt type, memory::dim rs, memory::dim cs) {
    return memory::desc(dims{b0, rows, cols}, type, dims{rows * cols, rs, cs});
  };
  switch (step) {
    case 1:  // grad_B [E][out][r] = s dy^T U
      return {md3(E, out, M, dt::bf16, 1, out), md3(E, M, r, dt::bf16, r, 1), md3(E, out, r, dt::f32, r, 1), s};
    case 2:  // G_B [E][M][r] = dy B
      return {md3(E, M, out, dt::bf16, out, 1), md3(E, out, r, dt::bf16, r, 1), md3(E, M, r, dt::bf16, r, 1)};
    case 3:  // dx [E][M][in] (+)= s G_B A
      return {md3(E, M, r, dt::bf16, r, 1), md3(E, r, in, dt::bf16, in, 1), md3(E, M, in, dt::f32, in, 1), s,
              kind == kBG3s};
    default:  // grad_A [E][r][in] = s G_B^T x
      return {md3(E, r, M, dt::bf16, 1, r), md3(E, M, in, dt::bf16, in, 1), md3(E, r, in, dt::f32, in, 1), s};
  }
}

class OnednnLayer final : public LayerBase {
 public:
  // with_weights = false: descriptors only (implementation probe), nothing prepared.
  // fused = true: the LoRA phases use the fused two-pass kernel (fused_lora.cpp) instead of oneDNN;
  // fused2 = true as well: its sequential-stream version (fused2_lora.cpp), the `fused2` variant.
  explicit OnednnLayer(const Weights& w, bool with_weights = true, bool fused = false, bool fused2 = false)
      : LayerBase(w),
        eng_(dnnl::engine::kind::cpu, 0),
        fused_(fused || fused2),
        fused2_(fused2),
        grads_fn_(fused2 ? lora_grads_fused2 : lora_grads_fused),
        dx_fn_(fused2 ? lora_dx_fused2 : lora_dx_fused),
        split_(fused2 && knob_on("PERFGATE_LORA_FUSED2_SPLIT")),
        sliced_(fused2 && !split_ && knob_on("PERFGATE_LORA_FUSED2_SLICED")),
        interleave_(fused2 && !split_ && !sliced_ && knob_on("PERFGATE_LORA_FUSED2_INTERLEAVE")),
        skip_lora_(fused2 && lora_skip_knob_on()),
        grads_dx_fn_(fused2_grads_dx()) {
    if (fused_) batched_lora_ = false;
    // Blocked layouts the implementation wants for the prepared base weights (K x N).
    const memory::dim H = H_, I = I_;
    blk_hi_ = preferred_layout(H, I);  // forward gate/up, backward down
    blk_ih_ = preferred_layout(I, H);  // forward down, backward gate/up
    if (!with_weights) return;
    base_ = prepared_base_of(w);
    // forward weights: prepared once per Weights.  W [out][in] used as K x N = in x out (strides 1, in)
    for (int p = 0; p < 3; ++p) {
      if (!base_->fwd[p].empty()) continue;
      const memory::dim in = proj_in(cfg_, p), out = proj_out(cfg_, p);
      base_->fwd[p] = prepare(p, p == kDown ? blk_ih_ : blk_hi_, md2(in, out, dt::bf16, 1, in));
    }
  }

  std::string variant() const override { return fused2_ ? "fused2" : fused_ ? "fused" : "onednn"; }

  bool used(int k) const {
    const bool per_expert_lora = (k >= kDL1 && k <= kDL4) || (k >= kGL1 && k <= kGL4);
    if (k >= kFirstBatched) return batched_lora_;
    return per_expert_lora ? !batched_lora_ && !fused_ : true;
  }

  // Creates the primitives of every kind for `m` rows per expert and returns impl_info().
  std::string probe(int m) {
    for (int k = 0; k < kKindCount; ++k)
      if (used(k)) prim(k, m, k >= kFirstBatched ? std::max(1, cfg_.experts / 2) : 0);
    return impl_info();
  }

  std::string impl_info() const override {
    std::map<std::string, std::set<std::string>> by_kind;
    for (const auto& [key, p] : prims_) by_kind[kKindNames[std::get<0>(key)]].insert(p.impl);
    std::string s;
    for (const auto& [kind, impls] : by_kind) {
      for (const auto& impl : impls) s += fmt::format("{}{}={}", s.empty() ? "" : ",", kind, impl);
    }
    return s;
  }

 protected:
  void begin_forward() override {
    const int nthr = max_threads();
    std::size_t scratch = create_per_expert_prims();
    if (batched_lora_) scratch = std::max(scratch, prepare_batched_lora(nthr));
    size_thread_scratch(nthr, scratch);
    gb_.resize(static_cast<std::size_t>(R_) * r_);
    if (fused_) fused_gb_.resize(2 * static_cast<std::size_t>(R_) * r_);
    if (sliced_) part_.resize(static_cast<std::size_t>(feature_slices()) * part_stride());
  }

  // The per-expert primitives of every active expert's row count; sets mx_; returns the largest scratchpad.
  std::size_t create_per_expert_prims() {
    std::set<int> ms;
    mx_ = 0;
    for (int e : rt_.active) {
      ms.insert(count(e));
      mx_ = std::max(mx_, count(e));
    }
    std::size_t scratch = 0;
    for (int m : ms)
      for (int k = 0; k < kFirstBatched; ++k)
        if (used(k)) scratch = std::max(scratch, prim(k, m).scratch);
    return scratch;
  }

  // The batched LoRA primitives of each thread's slice of experts, and the padded buffers; returns the largest
  // scratchpad.
  std::size_t prepare_batched_lora(int nthr) {
    std::size_t scratch = 0;
    slice_ = (cfg_.experts + nthr - 1) / nthr;
    for (int c = 0; c * slice_ < cfg_.experts; ++c) {
      const int nb = std::min(slice_, cfg_.experts - c * slice_);
      for (int k = kFirstBatched; k < kKindCount; ++k) scratch = std::max(scratch, prim(k, mx_, nb).scratch);
    }
    const auto E = static_cast<std::size_t>(cfg_.experts), Mx = static_cast<std::size_t>(mx_);
    p_dy_.resize(E * Mx * std::max(H_, I_));
    p_du_.resize(E * Mx * I_);
    p_x_.resize(E * Mx * std::max(H_, I_));
    for (auto& v : p_u_) v.resize(E * Mx * r_);
    p_gb_.resize(E * Mx * r_);
    p_dx_.resize(E * Mx * std::max(H_, I_));
    return scratch;
  }

  // A stream and a scratchpad of `scratch` bytes per thread.
  void size_thread_scratch(int nthr, std::size_t scratch) {
    if (static_cast<int>(streams_.size()) < nthr) {
      for (int t = static_cast<int>(streams_.size()); t < nthr; ++t) streams_.emplace_back(eng_);
      scratch_.resize(nthr);
      bound_.resize(nthr);
    }
    for (int t = 0; t < static_cast<int>(scratch_.size()); ++t) {
      if (scratch_[t].size() < scratch) {
        scratch_[t] = AlignedBuffer(scratch);
        bound_[t].clear();  // cached scratchpad memory objects point at the old buffer
      }
    }
  }

  void fwd_gate_up(int e) override {
    const int m = count(e);
    const auto R0 = static_cast<std::size_t>(row0(e));
    bf16* x = xs_.data() + R0 * H_;
    for (int p : {kGate, kUp}) {
      bf16* u = U_[p].data() + R0 * r_;
      float* pre = pre_[p].data() + R0 * I_;
      exec(kFUgu, m, x, w_.a(p, e), u);
      exec(kFG, m, x, base_->fwd[p].data() + e * blk_hi_.get_size(), pre);
      exec(kFGL, m, u, w_.b(p, e), pre);
    }
  }

  void fwd_down(int e) override {
    const int m = count(e);
    const auto R0 = static_cast<std::size_t>(row0(e));
    bf16* z = z_.data() + R0 * I_;
    bf16* u = U_[kDown].data() + R0 * r_;
    exec(kFUd, m, z, w_.a(kDown, e), u);
    exec(kFD, m, z, base_->fwd[kDown].data() + e * blk_ih_.get_size(), ys_.data() + R0 * H_);
    exec(kFDL, m, u, w_.b(kDown, e), ys_.data() + R0 * H_);
  }

  // Backward weights: prepared on the first call, cached afterwards.  W [out][in] is K x N = out x in.
  void prepare_backward(int p) {
    if (!base_->bwd[p].empty()) return;
    const memory::dim in = proj_in(cfg_, p), out = proj_out(cfg_, p);
    base_->bwd[p] = prepare(p, p == kDown ? blk_hi_ : blk_ih_, md2(out, in, dt::bf16, in, 1));
  }
  void prepare_down_backward() override { prepare_backward(kDown); }

  void down_base(int e) override {
    const auto R0 = static_cast<std::size_t>(row0(e));
    exec(kD3, count(e), dys_.data() + R0 * H_, base_->bwd[kDown].data() + e * blk_hi_.get_size(), gz_.data() + R0 * I_);
  }

  void down_lora(int e, LoraGrads& grads) override {
    const int m = count(e);
    const auto R0 = static_cast<std::size_t>(row0(e));
    bf16* dy = dys_.data() + R0 * H_;
    bf16* gb = gb_.data() + R0 * r_;
    exec(kDL1, m, dy, U_[kDown].data() + R0 * r_, grads.B[kDown].data() + static_cast<std::size_t>(e) * H_ * r_);
    exec(kDL2, m, dy, w_.b(kDown, e), gb);
    exec(kDL3, m, gb, w_.a(kDown, e), gz_.data() + R0 * I_);
    exec(kDL4, m, gb, z_.data() + R0 * I_, grads.A[kDown].data() + static_cast<std::size_t>(e) * r_ * I_);
  }

  // ---- LoRA gradients batched over all experts: pack rows into [E][Mx][dim] (zero padded), one
  // oneDNN call per GEMM for the whole layer, add the input gradient back into the compact rows.
  template <typename T>
  void pack(const T* src, int dim, T* dst, int e0, int nb) {
    const auto d = static_cast<std::size_t>(dim);
    for (int e = e0; e < e0 + nb; ++e) {
      const std::size_t m = static_cast<std::size_t>(count(e));
      T* out = dst + static_cast<std::size_t>(e) * mx_ * d;
      if (m > 0) std::memcpy(out, src + static_cast<std::size_t>(row0(e)) * d, sizeof(T) * m * d);
      std::memset(static_cast<void*>(out + m * d), 0, sizeof(T) * (static_cast<std::size_t>(mx_) - m) * d);
    }
  }
  void unpack_add(const float* src, int dim, float* dst, int e0, int nb) {
    for (int e = e0; e < e0 + nb; ++e) {
      const std::size_t n = static_cast<std::size_t>(count(e)) * dim;
      const float* in = src + static_cast<std::size_t>(e) * mx_ * dim;
      float* out = dst + static_cast<std::size_t>(row0(e)) * dim;
      for (std::size_t j = 0; j < n; ++j) out[j] += in[j];
    }
  }
  // One parallel region per LoRA phase: each thread takes a contiguous slice of experts, packs it
  // and runs the batched GEMMs on it (single-threaded inside the region), so the phase has one
  // synchronisation point instead of one per GEMM.
  template <typename F>
  void over_slices(F&& f) {
    const int chunks = (cfg_.experts + slice_ - 1) / slice_;
    parallel_for_static(chunks, [&](int c) { f(c * slice_, std::min(slice_, cfg_.experts - c * slice_)); });
  }
  std::size_t at(int e, int rows, int dim) const {
    return static_cast<std::size_t>(e) * static_cast<std::size_t>(rows) * static_cast<std::size_t>(dim);
  }

  // the batched LoRA GEMMs write the gradients of every expert (zeros for experts without rows)
  bool lora_grads_need_zeroing() const override { return !batched_lora_ && !fused_; }

  // fused: per expert, the gradient pass of each projection in one kernel (gate and up together),
  // G_B kept in fused_gb_ ([R][2][r]: expert e's rows at 2 r row0(e)) for the input-gradient pass
  LoraPassArgs fused_args(int p, int e, LoraGrads& grads) {
    const auto R0 = static_cast<std::size_t>(row0(e));
    LoraPassArgs a;
    a.m = count(e);
    a.in = proj_in(cfg_, p);
    a.out = proj_out(cfg_, p);
    a.r = r_;
    a.s = s_;
    a.dy = p == kDown ? dys_.data() + R0 * H_ : dpre_[p].data() + R0 * I_;
    a.ldy = a.out;
    a.x = p == kDown ? z_.data() + R0 * I_ : xs_.data() + R0 * H_;
    a.ldx = a.in;
    a.U = U_[p].data() + R0 * r_;
    a.ldu = r_;
    a.A = w_.a(p, e);
    a.B = w_.b(p, e);
    a.gA = grads.A[p].data() + static_cast<std::size_t>(e) * r_ * a.in;
    a.gB = grads.B[p].data() + static_cast<std::size_t>(e) * a.out * r_;
    if (grads.bf16_grads) {
      a.gA16 = grads.A16[p].data() + static_cast<std::size_t>(e) * r_ * a.in;
      a.gB16 = grads.B16[p].data() + static_cast<std::size_t>(e) * a.out * r_;
    }
    return a;
  }
  // Every LoRA path but fused2's per-expert kernels (lora_grads_dx_fused2*, which store bf16 themselves) writes
  // fp32 gradients: with bf16 gradients they are rounded into grads.A16 / B16 after the phase's work.
  void round_phase_grads(LoraGrads& grads, std::initializer_list<int> projs) {
    if (!grads.bf16_grads) return;
    for (int p : projs) parallel_for_static(cfg_.experts, [&](int e) { grads.round_experts(cfg_, p, e, 1); });
  }
  bf16* fused_gb(int e) { return fused_gb_.data() + 2 * static_cast<std::size_t>(row0(e)) * r_; }

  // fused2 sliced: the vector path applies to this projection's shapes (checked on an active expert)
  bool sliced(int p, LoraGrads& grads) {
    if (!sliced_ || rt_.active.empty()) return false;
    const int e = rt_.active.front();
    if (p == kDown) {
      const LoraPassArgs a = fused_args(kDown, e, grads);
      return lora_split_fused2({&a, 1});
    }
    const std::array<LoraPassArgs, 2> args{fused_args(kGate, e, grads), fused_args(kUp, e, grads)};
    return lora_split_fused2(args);
  }
  // Slices of [0, n) in 16-feature granules, one per thread (the same count in both stages, which share the
  // partials); [c0, c1) of slice s of S.
  int feature_slices() const { return std::max(1, std::min({max_threads(), H_ / 16, I_ / 16})); }
  static std::pair<int, int> slice_range(int n, int s, int S) {
    const int granules = n / 16;
    return {16 * (granules * s / S), 16 * (granules * (s + 1) / S)};
  }
  float* fused_part(int s, int e) {
    return part_.data() + static_cast<std::size_t>(s) * part_stride() + 2 * static_cast<std::size_t>(row0(e)) * r_;
  }
  std::size_t part_stride() const { return 2 * static_cast<std::size_t>(R_) * r_; }

  // fused2 sliced, for one projection group (down, or gate with up): stage 1 per output slice, then stage 2
  // per input slice; `args(e)` gives expert e's passes, `sink(e)` where its input gradient goes.
  template <typename Args, typename Sink>
  void lora_sliced(int in, int out, Args&& args, Sink&& sink) {
    const int S = feature_slices();
    parallel_for_static(S, [&](int s) {
      const auto [o0, o1] = slice_range(out, s, S);
      for (int e = 0; e < cfg_.experts; ++e) {
        const auto a = args(e);
        lora_pass1_slice_fused2(a, o0, o1, fused_part(s, e));
      }
    });
    parallel_for_static(S, [&](int s) {
      const auto [c0, c1] = slice_range(in, s, S);
      for (int e = 0; e < cfg_.experts; ++e) {
        const auto a = args(e);
        lora_grad_a_dx_slice_fused2(a, fused_part(0, e), part_stride(), S, sink(e), c0, c1);
      }
    });
  }

  // fused2's D4 work for expert e (grads of down, gz_ += s G_B A into e's rows), the next expert's inputs
  // prefetched while e streams its gradients out.
  void down_lora_fused2(int e, int next, LoraGrads& grads) {
    const LoraPassArgs a = fused_args(kDown, e, grads);
    const LoraPassArgs b = next >= 0 ? fused_args(kDown, next, grads) : LoraPassArgs{};
    grads_dx_fn_({&a, 1}, fused_gb(e), DxSink{gz_.data() + static_cast<std::size_t>(row0(e)) * I_, I_},
                 {&b, next >= 0 && b.m > 0 ? 1u : 0u});
  }

  // fused2 interleaved (PERFGATE_LORA_FUSED2_INTERLEAVE=1, experiment knob): each expert's D4 work right after its
  // D3 GEMM, in one loop. D4(e) needs only D3(e)'s rows of gz_. The idea: a thread streaming out one expert's
  // gradients runs beside a thread reading another's base weights, instead of every thread doing one kind of
  // traffic per phase. Experts without rows run too: their LoRA gradients are written as zeros.
  void down_base_all(LoraGrads& grads) override {
    if (!interleave_) return LayerBase::down_base_all(grads);
    over_experts_with_next([&](int e, int next) {
      if (count(e) > 0) down_base(e);
      if (!skip_lora_) down_lora_fused2(e, next, grads);
    });
  }

  void down_lora_all(LoraGrads& grads) override {
    if (skip_lora_ || interleave_) return;  // nothing, or done in D3
    if (sliced(kDown, grads)) {
      lora_sliced(
          I_, H_, [&](int e) { return std::array<LoraPassArgs, 1>{fused_args(kDown, e, grads)}; },
          [&](int e) {
            return DxSink{gz_.data() + static_cast<std::size_t>(row0(e)) * I_, I_};
          });
      return round_phase_grads(grads, {kDown});
    }
    if (fused2_ && !sliced_) return over_experts_with_next([&](int e, int next) { down_lora_fused2(e, next, grads); });
    if (fused_) {
      parallel_for(cfg_.experts, [&](int e) {
        const LoraPassArgs a = fused_args(kDown, e, grads);
        grads_fn_({&a, 1}, fused_gb(e));
        dx_fn_({&a, 1}, fused_gb(e), DxSink{gz_.data() + static_cast<std::size_t>(row0(e)) * I_, I_}, 0, I_);
      });
      return round_phase_grads(grads, {kDown});
    }
    if (!batched_lora_) {
      LayerBase::down_lora_all(grads);
      return round_phase_grads(grads, {kDown});
    }
    over_slices([&](int e0, int nb) {
      pack(dys_.data(), H_, p_dy_.data(), e0, nb);
      pack(U_[kDown].data(), r_, p_u_[kDown].data(), e0, nb);
      pack(z_.data(), I_, p_x_.data(), e0, nb);
      exec(kBD1, mx_, p_dy_.data() + at(e0, mx_, H_), p_u_[kDown].data() + at(e0, mx_, r_),
           grads.B[kDown].data() + at(e0, H_, r_), nb);
      exec(kBD2, mx_, p_dy_.data() + at(e0, mx_, H_), w_.B[kDown].data() + at(e0, H_, r_),
           p_gb_.data() + at(e0, mx_, r_), nb);
      exec(kBD3, mx_, p_gb_.data() + at(e0, mx_, r_), w_.A[kDown].data() + at(e0, r_, I_),
           p_dx_.data() + at(e0, mx_, I_), nb);
      exec(kBD4, mx_, p_gb_.data() + at(e0, mx_, r_), p_x_.data() + at(e0, mx_, I_),
           grads.A[kDown].data() + at(e0, r_, I_), nb);
      unpack_add(p_dx_.data(), I_, gz_.data(), e0, nb);
    });
    round_phase_grads(grads, {kDown});
  }

  // Every expert, those with the most rows first, so the threads end on the small ones, close together.
  std::vector<int> largest_first() const {
    std::vector<int> order(static_cast<std::size_t>(cfg_.experts));
    for (int e = 0; e < cfg_.experts; ++e) order[static_cast<std::size_t>(e)] = e;
    std::stable_sort(order.begin(), order.end(), [this](int a, int b) { return count(a) > count(b); });
    return order;
  }

  // f(e, next) for every expert e, largest first, dynamically over the threads; `next` is the expert the same
  // thread runs after e (-1: none), whose inputs f may prefetch.
  template <typename F>
  void over_experts_with_next(F&& f) {
    const std::vector<int> order = largest_first();
    parallel_for_lookahead(cfg_.experts, [&](int i, int j) { f(order[i], j >= 0 ? order[j] : -1); });
  }

  // fused2: both passes per expert, the input gradient added in place to the expert's rows of gx_ (rows
  // of different experts are distinct, so no two threads write one element), then each token's rows summed
  // into grad_input. The gradient pass is bound by its streaming writes and the input-gradient pass by its
  // reads; one expert after the other in each thread, they run side by side instead of one phase after the
  // other.
  void gate_up_lora_in_place(LoraGrads& grads, std::span<float> grad_input) {
    over_experts_with_next([&](int e, int next) { gate_up_lora_fused2(e, next, grads); });
    add_token_rows(grad_input);
  }
  // fused2's GU3 LoRA work for expert e: grads of gate and up, s G_B A added in place into e's rows of gx_.
  void gate_up_lora_fused2(int e, int next, LoraGrads& grads) {
    const std::array<LoraPassArgs, 2> args{fused_args(kGate, e, grads), fused_args(kUp, e, grads)};
    std::array<LoraPassArgs, 2> ahead{};
    if (next >= 0) ahead = {fused_args(kGate, next, grads), fused_args(kUp, next, grads)};
    grads_dx_fn_(args, fused_gb(e), DxSink{gx_.data() + static_cast<std::size_t>(row0(e)) * H_, H_},
                 std::span<const LoraPassArgs>(ahead.data(), next >= 0 && ahead[0].m > 0 ? 2u : 0u));
  }

  // fused2 interleaved: each expert's GU3 LoRA work right after its GU1 GEMMs (as down_base_all). GU2
  // (reconvert_for_lora) does nothing in this layer, so the LoRA work waits for nothing but the expert's gx_
  // rows; only the token sum into grad_input, which needs every expert's rows, is left to GU3.
  void gate_up_base_all(LoraGrads& grads) override {
    if (!interleave_) return LayerBase::gate_up_base_all(grads);
    over_experts_with_next([&](int e, int next) {
      if (count(e) > 0) gate_up_base(e);
      if (!skip_lora_) gate_up_lora_fused2(e, next, grads);
    });
  }

  // fused: the gradient pass per expert, then the input-gradient pass over column slices of grad_input,
  // each slice adding every expert's rows (base gradient from GU1 + LoRA term) to its own columns, so
  // no two threads write one element and gx_ is not written and read back by a separate token sum.
  void gate_up_lora_phase(LoraGrads& grads, std::span<float> grad_input) override {
    if (!fused_) return LayerBase::gate_up_lora_phase(grads, grad_input);
    if (skip_lora_ || interleave_) return add_token_rows(grad_input);  // LoRA work skipped, or done in GU1
    if (fused2_ && !split_ && !sliced_) return gate_up_lora_in_place(grads, grad_input);
    if (sliced(kGate, grads)) {
      lora_sliced(
          H_, I_,
          [&](int e) {
            return std::array<LoraPassArgs, 2>{fused_args(kGate, e, grads), fused_args(kUp, e, grads)};
          },
          [&](int e) {
            const auto R0 = static_cast<std::size_t>(row0(e));
            return DxSink{grad_input.data(), H_, rt_.row_token.data() + R0, gx_.data() + R0 * H_, H_};
          });
      return round_phase_grads(grads, {kGate, kUp});
    }
    // fused2 split (PERFGATE_LORA_FUSED2_SPLIT=1): pass 1 here, grad_A with the input gradient per column slice
    parallel_for(cfg_.experts, [&](int e) {
      const std::array<LoraPassArgs, 2> args{fused_args(kGate, e, grads), fused_args(kUp, e, grads)};
      if (split_ && lora_split_fused2(args)) return lora_pass1_fused2(args, fused_gb(e));
      grads_fn_(args, fused_gb(e));
    });
    // one slice per thread (16-column granules), so each thread walks the experts' rows as few times as possible
    const int granules = (H_ + 15) / 16, slices = std::min(granules, max_threads());
    parallel_for_static(slices, [&](int slice) {
      const int c0 = std::min(H_, 16 * (granules * slice / slices)),
                c1 = std::min(H_, 16 * (granules * (slice + 1) / slices));
      for (int e : rt_.active) {
        const auto R0 = static_cast<std::size_t>(row0(e));
        const std::array<LoraPassArgs, 2> args{fused_args(kGate, e, grads), fused_args(kUp, e, grads)};
        const DxSink sink{grad_input.data(), H_, rt_.row_token.data() + R0, gx_.data() + R0 * H_, H_};
        if (split_ && lora_split_fused2(args)) {
          lora_grad_a_dx_fused2(args, fused_gb(e), sink, c0, c1);
          continue;
        }
        dx_fn_(args, fused_gb(e), sink, c0, c1);
      }
    });
    round_phase_grads(grads, {kGate, kUp});
  }

  void gate_up_lora_all(LoraGrads& grads) override {
    if (!batched_lora_) {
      LayerBase::gate_up_lora_all(grads);
      return round_phase_grads(grads, {kGate, kUp});
    }
    over_slices([&](int e0, int nb) {
      pack(xs_.data(), H_, p_x_.data(), e0, nb);
      bf16* gb = p_gb_.data() + at(e0, mx_, r_);
      bf16* dy[2] = {p_dy_.data() + at(e0, mx_, I_), p_du_.data() + at(e0, mx_, I_)};
      for (int p : {kGate, kUp}) {
        pack(dpre_[p].data(), I_, p == kGate ? p_dy_.data() : p_du_.data(), e0, nb);
        pack(U_[p].data(), r_, p_u_[p].data(), e0, nb);
        exec(kBG1, mx_, dy[p], p_u_[p].data() + at(e0, mx_, r_), grads.B[p].data() + at(e0, I_, r_), nb);
        exec(kBG2, mx_, dy[p], w_.B[p].data() + at(e0, I_, r_), gb, nb);
        exec(p == kGate ? kBG3 : kBG3s, mx_, gb, w_.A[p].data() + at(e0, r_, H_), p_dx_.data() + at(e0, mx_, H_), nb);
        exec(kBG4, mx_, gb, p_x_.data() + at(e0, mx_, H_), grads.A[p].data() + at(e0, r_, H_), nb);
      }
      unpack_add(p_dx_.data(), H_, gx_.data(), e0, nb);
    });
    round_phase_grads(grads, {kGate, kUp});
  }

  void prepare_gate_up_backward() override {
    prepare_backward(kGate);
    prepare_backward(kUp);
  }

  void gate_up_base(int e) override {
    const int m = count(e);
    const auto R0 = static_cast<std::size_t>(row0(e));
    float* gx = gx_.data() + R0 * H_;
    exec(kGU1a, m, dpre_[kGate].data() + R0 * I_, base_->bwd[kGate].data() + e * blk_ih_.get_size(),
         gx);  // base_pass(gate)
    exec(kGU1b, m, dpre_[kUp].data() + R0 * I_, base_->bwd[kUp].data() + e * blk_ih_.get_size(), gx);  // base_pass(up)
  }

  void gate_up_lora(int e, LoraGrads& grads) override {
    const int m = count(e);
    const auto R0 = static_cast<std::size_t>(row0(e));
    bf16* gb = gb_.data() + R0 * r_;
    for (int p : {kGate, kUp}) {
      bf16* dy = dpre_[p].data() + R0 * I_;
      exec(kGL1, m, dy, U_[p].data() + R0 * r_, grads.B[p].data() + static_cast<std::size_t>(e) * I_ * r_);
      exec(kGL2, m, dy, w_.b(p, e), gb);
      exec(kGL3, m, gb, w_.a(p, e), gx_.data() + R0 * H_);
      exec(kGL4, m, gb, xs_.data() + R0 * H_, grads.A[p].data() + static_cast<std::size_t>(e) * r_ * H_);
    }
  }

 private:
  memory::desc preferred_layout(memory::dim K, memory::dim N) {
    constexpr memory::dim kRefRows = 16;
    auto pd =
        make_pd(eng_, md2(kRefRows, K, dt::bf16, K, 1), memory::desc(dims{K, N}, dt::bf16, memory::format_tag::any),
                md2(kRefRows, N, dt::f32, N, 1), make_attr(1.0f, false));
    return pd.weights_desc();
  }

  // Reorders every expert's matrix of projection p, read in place through `plain`, into `blk`.
  AlignedBuffer prepare(int p, const memory::desc& blk, const memory::desc& plain) {
    const std::size_t per = blk.get_size();
    AlignedBuffer buf(per * cfg_.experts);
    parallel_for(cfg_.experts, [&](int e) {
      dnnl::stream s(eng_);
      // oneDNN only reads a reorder's source: the const_cast lends it the weights without a copy
      memory src(plain, eng_, const_cast<bf16*>(w_.w(p, e)));
      memory dst(blk, eng_, buf.data() + per * e);
      dnnl::reorder(src, dst).execute(s, src, dst);
      s.wait();
    });
    return buf;
  }

  // Descriptors of each kind for `m` rows of one expert.
  MatmulDescs descs(int kind, int m, int batch) const {
    const memory::dim M = m, H = H_, I = I_, r = r_;
    switch (kind) {
      case kFUgu: return lora_forward_down_descs(M, r, H);
      case kFUd: return lora_forward_down_descs(M, r, I);
      case kFG:
      case kD3:  // [M][H] x [H][I]: the forward's gate/up projection and the backward's dz through down
        return {md2(M, H, dt::bf16, H, 1), blk_hi_, md2(M, I, dt::f32, I, 1)};
      case kFGL: return lora_forward_up_descs(M, r, s_, I);
      case kFD:
      case kGU1a:
      case kGU1b:  // [M][I] x [I][H]: the forward's down and the backward's dx through gate, then up (adds)
        return {md2(M, I, dt::bf16, I, 1), blk_ih_, md2(M, H, dt::f32, H, 1), 1.0f, kind == kGU1b};
      case kFDL: return lora_forward_up_descs(M, r, s_, H);
      case kDL1:
      case kDL2:
      case kDL3:
      case kDL4: return lora_backward_descs(kind - kDL1 + 1, M, r, s_, {H, I, H, r, I, I});
      case kGL1:
      case kGL2:
      case kGL3:
      case kGL4: return lora_backward_descs(kind - kGL1 + 1, M, r, s_, {I, H, I, r, H, H});
      default: return batched_lora_descs(kind, M, batch, H, I, r, s_);
    }
  }

  Prim create(int kind, int m, int batch) {
    const MatmulDescs d = descs(kind, m, batch);
    auto pd = make_pd(eng_, d.a, d.b, d.c, make_attr(d.scale, d.sum));
    Prim p{dnnl::matmul(pd),  pd.src_desc(), pd.weights_desc(), pd.dst_desc(), pd.scratchpad_desc().get_size(),
           pd.impl_info_str()};
    return p;
  }

  const Prim& prim(int kind, int m, int batch = 0) {
    const Key key{kind, m, batch};
    auto it = prims_.find(key);
    if (it == prims_.end()) it = prims_.emplace(key, create(kind, m, batch)).first;
    return it->second;
  }

  // Runs a primitive created in begin_forward (read-only lookup: safe from parallel threads).
  void exec(int kind, int m, const void* a, const void* b, void* c, int batch = 0) {
#if defined(_OPENMP)
    const int tid = omp_get_thread_num();
#else
    const int tid = 0;
#endif
    // memory objects and argument maps are cached per thread and re-pointed: creating them on every
    // call cost more than the small LoRA GEMMs themselves
    auto& cache = bound_[tid];
    const Key key{kind, m, batch};
    auto it = cache.find(key);
    if (it == cache.end()) {
      const Prim& p = prims_.at(key);
      Bound bd;
      bd.args.emplace(DNNL_ARG_SRC, memory(p.src, eng_, nullptr));
      bd.args.emplace(DNNL_ARG_WEIGHTS, memory(p.wei, eng_, nullptr));
      bd.args.emplace(DNNL_ARG_DST, memory(p.dst, eng_, nullptr));
      if (p.scratch > 0)
        bd.args.emplace(DNNL_ARG_SCRATCHPAD,
                        memory(memory::desc(dims{static_cast<memory::dim>(p.scratch)}, dt::u8, memory::format_tag::a),
                               eng_, scratch_[tid].data()));
      bd.prim = &p.prim;
      it = cache.emplace(key, std::move(bd)).first;
    }
    Bound& bd = it->second;
    bd.args.at(DNNL_ARG_SRC).set_data_handle(const_cast<void*>(a));
    bd.args.at(DNNL_ARG_WEIGHTS).set_data_handle(const_cast<void*>(b));
    bd.args.at(DNNL_ARG_DST).set_data_handle(c);
    bd.prim->execute(streams_[tid], bd.args);
    streams_[tid].wait();
  }

  struct Bound {
    const dnnl::matmul* prim = nullptr;
    std::unordered_map<int, memory> args;
  };

  dnnl::engine eng_;
  memory::desc blk_hi_, blk_ih_;          // blocked K x N layouts: (H x I) and (I x H)
  std::shared_ptr<PreparedBase> base_;    // shared with the other oneDNN layer; null in a probe (no weights)
  using Key = std::tuple<int, int, int>;  // kind, rows, batch (batched kinds only)
  std::map<Key, Prim> prims_;
  std::vector<dnnl::stream> streams_;
  std::vector<AlignedBuffer> scratch_;
  std::vector<std::map<Key, Bound>> bound_;  // per thread
  std::vector<bf16> gb_;                     // [R][r] G_B
  // batched LoRA (default; PERFGATE_LORA_ONEDNN_PER_EXPERT=1 runs the LoRA GEMMs per expert instead)
  bool fused_ = false;
  bool fused2_ = false;
  // the fused kernels' two passes: fused_lora.cpp's, or fused2's
  void (*grads_fn_)(std::span<const LoraPassArgs>, bf16*) = lora_grads_fused;
  void (*dx_fn_)(std::span<const LoraPassArgs>, const bf16*, const DxSink&, int, int) = lora_dx_fused;
  // fused2 only: GU3's grad_A in the column-slice pass with the input gradient (experiment knob)
  bool split_ = false;
  // fused2 only: the LoRA phases sliced by features across the threads, every thread over every expert
  // (PERFGATE_LORA_FUSED2_SLICED=1, experiment knob; slower on the 2-vCPU runner, see the notebook)
  bool sliced_ = false;
  // fused2 only: each expert's LoRA work in the base phase right after its base GEMM (D3 then D4, GU1 then GU3's
  // LoRA part; PERFGATE_LORA_FUSED2_INTERLEAVE=1, experiment knob)
  bool interleave_ = false;
  // fused2 only: no LoRA gradient work at all (PERFGATE_LORA_SKIP_LORA=1, measurement knob: lora_skip_knob_on)
  bool skip_lora_ = false;
  // fused2's per-expert LoRA work (fused2_grads_dx)
  GradsDxFn grads_dx_fn_ = nullptr;
  std::vector<float> part_;     // [slices][R][2][r] fp32 partials of G_B (fused2 sliced)
  std::vector<bf16> fused_gb_;  // [R][2][r] G_B of the fused passes
  bool batched_lora_ = std::getenv("PERFGATE_LORA_ONEDNN_PER_EXPERT") == nullptr;
  int mx_ = 0;     // rows of the largest expert
  int slice_ = 1;  // experts per thread in the batched LoRA phases
  std::vector<bf16> p_dy_, p_du_, p_x_, p_gb_;
  std::array<std::vector<bf16>, 3> p_u_;
  std::vector<float> p_dx_;
};

}  // namespace

// oneDNN 2.x has bf16 matmul only from AVX-512 (avx512_core) up; on an AVX2-only CPU the primitive
// descriptor cannot be created. Probe once with a small bf16 matmul so both variants skip with the
// reason instead of failing (the fused kernel's AVX-512 code needs the same CPUs).
std::string onednn_unavailable_reason() {
  static const std::string reason = [] {
    try {
      const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
      const memory::desc a({16, 32}, dt::bf16, memory::format_tag::ab);
      const memory::desc b({32, 16}, dt::bf16, memory::format_tag::ab);
      const memory::desc c({16, 16}, dt::f32, memory::format_tag::ab);
      (void)make_pd(eng, a, b, c, dnnl::primitive_attr());
      return std::string();
    } catch (const std::exception& e) {
      const dnnl_version_t* v = dnnl_version();
      return fmt::format(
          "oneDNN {}.{}.{} has no bf16 matmul on this CPU ({}): it needs AVX-512 (avx512_core) "
          "or AMX",
          v->major, v->minor, v->patch, e.what());
    }
  }();
  return reason;
}
std::unique_ptr<MoeLoraLayer> make_onednn_layer(const Weights& weights) {
  if (const std::string why = onednn_unavailable_reason(); !why.empty()) throw std::runtime_error(why);
  return std::make_unique<OnednnLayer>(weights);
}
std::unique_ptr<MoeLoraLayer> make_fused_layer(const Weights& weights) {
  if (const std::string why = onednn_unavailable_reason(); !why.empty()) throw std::runtime_error(why);
  return std::make_unique<OnednnLayer>(weights, true, true);
}
std::unique_ptr<MoeLoraLayer> make_fused2_layer(const Weights& weights) {
  if (const std::string why = onednn_unavailable_reason(); !why.empty()) throw std::runtime_error(why);
  return std::make_unique<OnednnLayer>(weights, true, false, true);
}
std::string onednn_impl_summary(const Config& cfg, int rows_per_expert) {
  Weights empty;
  empty.cfg = cfg;
  OnednnLayer layer(empty, false);
  return layer.probe(rows_per_expert);
}
std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
}
#else
std::string onednn_impl_summary(const Config&, int) { return {}; }
std::string onednn_version() { return {}; }
std::string onednn_unavailable_reason() {
  return "oneDNN not built (PERFGATE_HAVE_ONEDNN off): the variant needs libdnnl";
}
std::unique_ptr<MoeLoraLayer> make_onednn_layer(const Weights&) {
  throw std::runtime_error(onednn_unavailable_reason());
}
std::unique_ptr<MoeLoraLayer> make_fused_layer(const Weights&) {
  throw std::runtime_error(onednn_unavailable_reason());
}
std::unique_ptr<MoeLoraLayer> make_fused2_layer(const Weights&) {
  throw std::runtime_error(onednn_unavailable_reason());
}
#endif

std::unique_ptr<MoeLoraLayer> make_fused2_layer_with(const Weights& weights, std::span<const KnobSetting> knobs) {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  for (const auto& [name, value] : knobs) {
    const char* old = std::getenv(name.c_str());
    saved.emplace_back(name, old != nullptr ? std::optional<std::string>(old) : std::nullopt);
    setenv(name.c_str(), value.c_str(), 1);
  }
  struct Restore {  // the environment as it was, also when making the layer throws
    decltype(saved)& s;
    ~Restore() {
      for (auto it = s.rbegin(); it != s.rend(); ++it)
        it->second ? setenv(it->first.c_str(), it->second->c_str(), 1) : unsetenv(it->first.c_str());
    }
  } restore{saved};
  return make_fused2_layer(weights);
}

bool onednn_available() { return onednn_unavailable_reason().empty(); }

bool lora_skip_knob_on() { return knob_on("PERFGATE_LORA_SKIP_LORA"); }

bool shares_prepared_base(std::string_view variant, std::string_view other) {
  // make_onednn_layer and make_fused_layer take one PreparedBase per Weights (prepared_base_of); the loop
  // layer keeps transposes of its own.
  return variant != "loop" && other != "loop";
}

}  // namespace perfgate::lora_backward
