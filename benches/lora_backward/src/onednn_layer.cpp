// `onednn` variant: every GEMM, the LoRA gradients included, through oneDNN matmul (bf16 in, fp32
// accumulation; AMX where the CPU has it, else AVX-512 BF16). Base weights are reordered once into
// the layout the matmul implementation prefers, for the forward and for the backward, and cached.
// One primitive per (GEMM kind, rows of an expert), created on first use; experts run in parallel
// with each primitive single-threaded (oneDNN runs sequentially inside an OpenMP parallel region).
#include <stdexcept>

#include "layer_base.hpp"

#if PERFGATE_HAVE_ONEDNN
#include <cstdlib>
#include <map>
#include <set>

#include <dnnl.hpp>
#include <fmt/format.h>
#if defined(_OPENMP)
#include <omp.h>
#endif
#endif

namespace perfgate::lora {

#if PERFGATE_HAVE_ONEDNN
namespace {

using dnnl::memory;
using dt = memory::data_type;
using dims = memory::dims;

struct AlignedBuffer {
  void* ptr = nullptr;
  std::size_t size = 0;
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t n) : size(n) {
    ptr = std::aligned_alloc(64, (n + 63) / 64 * 64);
    if (!ptr) throw std::bad_alloc();
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept : ptr(o.ptr), size(o.size) { o.ptr = nullptr; o.size = 0; }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(ptr, o.ptr);
    std::swap(size, o.size);
    return *this;
  }
  ~AlignedBuffer() { std::free(ptr); }
  std::uint8_t* bytes() const { return static_cast<std::uint8_t*>(ptr); }
};

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
  kFU, kFGU, kFGUL, kFDU, kFD, kFDL,  // forward
  kD3, kDL1, kDL2, kDL3, kDL4,        // backward down
  kGU1, kGL1, kGL2, kGL3, kGL4,       // backward gate/up
  kKindCount
};
constexpr std::array<const char*, kKindCount> kKindNames = {
    "fwd.U_gate_up", "fwd.gate_up", "fwd.gate_up_lora", "fwd.U_down", "fwd.down", "fwd.down_lora",
    "D3", "D4.grad_B", "D4.G_B", "D4.dx", "D4.grad_A",
    "GU1", "GU3.grad_B", "GU3.G_B", "GU3.dx", "GU3.grad_A"};

struct Prim {
  dnnl::matmul prim;
  memory::desc src, wei, dst;
  std::size_t scratch = 0;
  std::string impl;
};

class OnednnLayer final : public LayerBase {
 public:
  // with_weights = false: descriptors only (implementation probe), nothing prepared.
  explicit OnednnLayer(const Weights& w, bool with_weights = true) : LayerBase(w), eng_(dnnl::engine::kind::cpu, 0) {
    // Blocked layouts the implementation wants for the four prepared base-weight matrices.
    const memory::dim H = H_, I = I_;
    blk_fgu_ = preferred_layout(H, 2 * I);  // forward gate|up: K = H, N = 2I
    blk_fd_ = preferred_layout(I, H);       // forward down:    K = I, N = H
    blk_d3_ = preferred_layout(H, I);       // backward down:   K = H, N = I
    blk_gu1_ = preferred_layout(2 * I, H);  // backward gate/up: K = 2I, N = H
    if (!with_weights) return;
    // forward weights: prepared once here
    fwd_gu_ = prepare(blk_fgu_, [&](int e, std::vector<bf16>& tmp) {
      // [Wg; Wu] is [2I][H]: as K x N = H x 2I it is the transpose (strides 1, H)
      concat2(w_.w(kGate, e), w_.w(kUp, e), static_cast<std::size_t>(I) * H, tmp);
      return md2(H, 2 * I, dt::bf16, 1, H);
    });
    fwd_d_ = prepare(blk_fd_, [&](int e, std::vector<bf16>& tmp) {
      tmp.assign(w_.w(kDown, e), w_.w(kDown, e) + static_cast<std::size_t>(H) * I);
      return md2(I, H, dt::bf16, 1, I);  // Wd [H][I] as K x N = I x H
    });
  }

  std::string variant() const override { return "onednn"; }

  // Creates the primitives of every kind for `m` rows per expert and returns impl_info().
  std::string probe(int m) {
    for (int k = 0; k < kKindCount; ++k) prim(k, m);
    return impl_info();
  }

  std::string impl_info() const override {
    std::map<std::string, std::set<std::string>> by_kind;
    for (const auto& [key, p] : prims_) by_kind[kKindNames[key.first]].insert(p.impl);
    std::string s;
    for (const auto& [kind, impls] : by_kind) {
      for (const auto& impl : impls) s += fmt::format("{}{}={}", s.empty() ? "" : ",", kind, impl);
    }
    return s;
  }

 protected:
  void begin_forward() override {
    std::set<int> ms;
    for (int e : rt_.active) ms.insert(count(e));
    std::size_t scratch = 0;
    for (int m : ms)
      for (int k = 0; k < kKindCount; ++k) scratch = std::max(scratch, prim(k, m).scratch);
    const int nthr = max_threads();
    if (static_cast<int>(streams_.size()) < nthr) {
      for (int t = static_cast<int>(streams_.size()); t < nthr; ++t) streams_.emplace_back(eng_);
      scratch_.resize(nthr);
    }
    for (auto& s : scratch_)
      if (s.size < scratch) s = AlignedBuffer(scratch);
    gb_.resize(static_cast<std::size_t>(R_) * r_);
  }

  void fwd_gate_up(int e) override {
    const int r0 = row0(e), m = count(e);
    const auto R0 = static_cast<std::size_t>(r0);
    bf16* x = xs_.data() + R0 * H_;
    for (int p : {kGate, kUp}) exec(kFU, m, x, w_.a(p, e), ugu_.data() + R0 * 2 * r_ + p * r_);
    exec(kFGU, m, x, fwd_gu_.bytes() + e * blk_fgu_.get_size(), gu_.data() + R0 * 2 * I_);
    for (int p : {kGate, kUp})
      exec(kFGUL, m, ugu_.data() + R0 * 2 * r_ + p * r_, w_.b(p, e), gu_.data() + R0 * 2 * I_ + p * I_);
  }

  void fwd_down(int e) override {
    const int r0 = row0(e), m = count(e);
    const auto R0 = static_cast<std::size_t>(r0);
    bf16* z = z_.data() + R0 * I_;
    exec(kFDU, m, z, w_.a(kDown, e), ud_.data() + R0 * r_);
    exec(kFD, m, z, fwd_d_.bytes() + e * blk_fd_.get_size(), ys_.data() + R0 * H_);
    exec(kFDL, m, ud_.data() + R0 * r_, w_.b(kDown, e), ys_.data() + R0 * H_);
  }

  // Backward weights: prepared on the first call, cached afterwards.
  void prepare_down_backward() override {
    if (bwd_d_.ptr) return;
    const memory::dim H = H_, I = I_;
    bwd_d_ = prepare(blk_d3_, [&](int e, std::vector<bf16>& tmp) {
      tmp.assign(w_.w(kDown, e), w_.w(kDown, e) + static_cast<std::size_t>(H) * I);
      return md2(H, I, dt::bf16, I, 1);  // Wd [H][I] is K x N = H x I
    });
  }

  void down_base(int e) override {
    const auto R0 = static_cast<std::size_t>(row0(e));
    exec(kD3, count(e), dys_.data() + R0 * H_, bwd_d_.bytes() + e * blk_d3_.get_size(), gz_.data() + R0 * I_);
  }

  void down_lora(int e, LoraGrads& grads) override {
    const int m = count(e);
    const auto R0 = static_cast<std::size_t>(row0(e));
    bf16* dy = dys_.data() + R0 * H_;
    bf16* gb = gb_.data() + R0 * r_;
    exec(kDL1, m, dy, ud_.data() + R0 * r_, grads.B[kDown].data() + static_cast<std::size_t>(e) * H_ * r_);
    exec(kDL2, m, dy, w_.b(kDown, e), gb);
    exec(kDL3, m, gb, w_.a(kDown, e), gz_.data() + R0 * I_);
    exec(kDL4, m, gb, z_.data() + R0 * I_, grads.A[kDown].data() + static_cast<std::size_t>(e) * r_ * I_);
  }

  void prepare_gate_up_backward() override {
    if (bwd_gu_.ptr) return;
    const memory::dim H = H_, I = I_;
    bwd_gu_ = prepare(blk_gu1_, [&](int e, std::vector<bf16>& tmp) {
      concat2(w_.w(kGate, e), w_.w(kUp, e), static_cast<std::size_t>(I) * H, tmp);
      return md2(2 * I, H, dt::bf16, H, 1);  // [Wg; Wu] [2I][H] is K x N = 2I x H
    });
  }

  void gate_up_base(int e) override {
    const auto R0 = static_cast<std::size_t>(row0(e));
    exec(kGU1, count(e), dgu_.data() + R0 * 2 * I_, bwd_gu_.bytes() + e * blk_gu1_.get_size(), gx_.data() + R0 * H_);
  }

  void gate_up_lora(int e, LoraGrads& grads) override {
    const int m = count(e);
    const auto R0 = static_cast<std::size_t>(row0(e));
    bf16* gb = gb_.data() + R0 * r_;
    for (int p : {kGate, kUp}) {
      bf16* dy = dgu_.data() + R0 * 2 * I_ + p * I_;
      exec(kGL1, m, dy, ugu_.data() + R0 * 2 * r_ + p * r_,
           grads.B[p].data() + static_cast<std::size_t>(e) * I_ * r_);
      exec(kGL2, m, dy, w_.b(p, e), gb);
      exec(kGL3, m, gb, w_.a(p, e), gx_.data() + R0 * H_);
      exec(kGL4, m, gb, xs_.data() + R0 * H_, grads.A[p].data() + static_cast<std::size_t>(e) * r_ * H_);
    }
  }

 private:
  static void concat2(const bf16* a, const bf16* b, std::size_t n, std::vector<bf16>& tmp) {
    tmp.resize(2 * n);
    std::copy(a, a + n, tmp.begin());
    std::copy(b, b + n, tmp.begin() + static_cast<std::ptrdiff_t>(n));
  }

  memory::desc preferred_layout(memory::dim K, memory::dim N) {
    constexpr memory::dim kRefRows = 16;
    auto pd = make_pd(eng_, md2(kRefRows, K, dt::bf16, K, 1), memory::desc(dims{K, N}, dt::bf16, memory::format_tag::any),
                      md2(kRefRows, N, dt::f32, N, 1), make_attr(1.0f, false));
    return pd.weights_desc();
  }

  // Reorders every expert's matrix (given by `source`: fills tmp, returns its plain descriptor) into `blk`.
  template <typename Source>
  AlignedBuffer prepare(const memory::desc& blk, Source source) {
    const std::size_t per = blk.get_size();
    AlignedBuffer buf(per * cfg_.experts);
    parallel_for(cfg_.experts, [&](int e) {
      std::vector<bf16> tmp;
      const memory::desc plain = source(e, tmp);
      dnnl::stream s(eng_);
      memory src(plain, eng_, tmp.data());
      memory dst(blk, eng_, buf.bytes() + per * e);
      dnnl::reorder(src, dst).execute(s, src, dst);
      s.wait();
    });
    return buf;
  }

  // Descriptors of each kind for `m` rows of one expert.
  Prim create(int kind, int m) {
    const memory::dim M = m, H = H_, I = I_, r = r_;
    const float s = s_;
    memory::desc a, b, c;
    float scale = 1.0f;
    bool sum = false;
    // LoRA backward of a projection: dy [m][out] (ld ldy), U (ld ldu), x [m][in] (ld ldx), dx (ld lddx)
    auto lora = [&](int step, memory::dim out, memory::dim in, memory::dim ldy, memory::dim ldu, memory::dim ldx,
                    memory::dim lddx) {
      switch (step) {
        case 1:  // grad_B [out][r] = s dy^T U
          a = md2(out, M, dt::bf16, 1, ldy); b = md2(M, r, dt::bf16, ldu, 1); c = md2(out, r, dt::f32, r, 1);
          scale = s; break;
        case 2:  // G_B [m][r] = dy B     (B [out][r])
          a = md2(M, out, dt::bf16, ldy, 1); b = md2(out, r, dt::bf16, r, 1); c = md2(M, r, dt::bf16, r, 1); break;
        case 3:  // dx += s G_B A         (A [r][in])
          a = md2(M, r, dt::bf16, r, 1); b = md2(r, in, dt::bf16, in, 1); c = md2(M, in, dt::f32, lddx, 1);
          scale = s; sum = true; break;
        default:  // grad_A [r][in] = s G_B^T x
          a = md2(r, M, dt::bf16, 1, r); b = md2(M, in, dt::bf16, ldx, 1); c = md2(r, in, dt::f32, in, 1);
          scale = s; break;
      }
    };
    switch (kind) {
      case kFU: a = md2(M, H, dt::bf16, H, 1); b = md2(H, r, dt::bf16, 1, H); c = md2(M, r, dt::bf16, 2 * r, 1); break;
      case kFGU: a = md2(M, H, dt::bf16, H, 1); b = blk_fgu_; c = md2(M, 2 * I, dt::f32, 2 * I, 1); break;
      case kFGUL:
        a = md2(M, r, dt::bf16, 2 * r, 1); b = md2(r, I, dt::bf16, 1, r); c = md2(M, I, dt::f32, 2 * I, 1);
        scale = s; sum = true; break;
      case kFDU: a = md2(M, I, dt::bf16, I, 1); b = md2(I, r, dt::bf16, 1, I); c = md2(M, r, dt::bf16, r, 1); break;
      case kFD: a = md2(M, I, dt::bf16, I, 1); b = blk_fd_; c = md2(M, H, dt::f32, H, 1); break;
      case kFDL:
        a = md2(M, r, dt::bf16, r, 1); b = md2(r, H, dt::bf16, 1, r); c = md2(M, H, dt::f32, H, 1);
        scale = s; sum = true; break;
      case kD3: a = md2(M, H, dt::bf16, H, 1); b = blk_d3_; c = md2(M, I, dt::f32, I, 1); break;
      case kDL1: case kDL2: case kDL3: case kDL4: lora(kind - kDL1 + 1, H, I, H, r, I, I); break;
      case kGU1: a = md2(M, 2 * I, dt::bf16, 2 * I, 1); b = blk_gu1_; c = md2(M, H, dt::f32, H, 1); break;
      default: lora(kind - kGL1 + 1, I, H, 2 * I, 2 * r, H, H); break;
    }
    auto pd = make_pd(eng_, a, b, c, make_attr(scale, sum));
    Prim p{dnnl::matmul(pd), pd.src_desc(), pd.weights_desc(), pd.dst_desc(), pd.scratchpad_desc().get_size(),
           pd.impl_info_str()};
    return p;
  }

  const Prim& prim(int kind, int m) {
    auto key = std::make_pair(kind, m);
    auto it = prims_.find(key);
    if (it == prims_.end()) it = prims_.emplace(key, create(kind, m)).first;
    return it->second;
  }

  // Runs a primitive created in begin_forward (read-only lookup: safe from parallel threads).
  void exec(int kind, int m, const void* a, const void* b, void* c) {
    const Prim& p = prims_.at(std::make_pair(kind, m));
#if defined(_OPENMP)
    const int tid = omp_get_thread_num();
#else
    const int tid = 0;
#endif
    memory ma(p.src, eng_, const_cast<void*>(a));
    memory mb(p.wei, eng_, const_cast<void*>(b));
    memory mc(p.dst, eng_, c);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    if (p.scratch > 0) args.emplace(DNNL_ARG_SCRATCHPAD, memory(dnnl::memory::desc(dims{static_cast<memory::dim>(p.scratch)}, dt::u8, memory::format_tag::a), eng_, scratch_[tid].ptr));
    p.prim.execute(streams_[tid], args);
    streams_[tid].wait();
  }

  dnnl::engine eng_;
  memory::desc blk_fgu_, blk_fd_, blk_d3_, blk_gu1_;
  AlignedBuffer fwd_gu_, fwd_d_, bwd_d_, bwd_gu_;
  std::map<std::pair<int, int>, Prim> prims_;
  std::vector<dnnl::stream> streams_;
  std::vector<AlignedBuffer> scratch_;
  std::vector<bf16> gb_;  // [R][r] G_B
};

}  // namespace

bool onednn_available() { return true; }
std::unique_ptr<MoeLoraLayer> make_onednn_layer(const Weights& weights) {
  return std::make_unique<OnednnLayer>(weights);
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
bool onednn_available() { return false; }
std::unique_ptr<MoeLoraLayer> make_onednn_layer(const Weights&) {
  throw std::runtime_error("oneDNN was not found when this binary was built (PERFGATE_HAVE_ONEDNN off)");
}
#endif

}  // namespace perfgate::lora
