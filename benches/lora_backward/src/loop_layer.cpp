// `loop` variant: portable C++, seed-faithful. LoRA gradients are the seed's plain for-loops
// (sft_moe.hpp:2099-2145 style: for out, for rank, for token), backward weights are transposed
// ("prepare_backward_weights") for the activated experts on every call, base GEMMs are a simple
// dot-product kernel (no AMX, no library), so this variant builds and runs everywhere.
#include <algorithm>

#include "layer_base.hpp"

namespace perfgate::lora_backward {
namespace {

// sum_i a[i] * b[i] with 16 independent lanes, so the compiler can vectorise without -ffast-math.
inline float dot_f32_bf16(const float* a, const bf16* b, int n) {
  float lane[16] = {};
  int i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) lane[l] += a[i + l] * to_float(b[i + l]);
  float acc = 0.0f;
  for (; i < n; ++i) acc += a[i] * to_float(b[i]);
  for (float v : lane) acc += v;
  return acc;
}

thread_local std::vector<float> t_row;

// C[m][n] (+)= sum_k A[m][k] * B[n][k]   (A, B bf16 row-major with leading dims, C fp32)
void gemm_nt(int m, int n, int k, const bf16* a, int lda, const bf16* b, int ldb, float* c, int ldc, bool accumulate) {
  t_row.resize(static_cast<std::size_t>(k));
  for (int i = 0; i < m; ++i) {
    const bf16* ar = a + static_cast<std::size_t>(i) * lda;
    for (int q = 0; q < k; ++q) t_row[q] = to_float(ar[q]);
    float* cr = c + static_cast<std::size_t>(i) * ldc;
    for (int j = 0; j < n; ++j) {
      const float v = dot_f32_bf16(t_row.data(), b + static_cast<std::size_t>(j) * ldb, k);
      cr[j] = accumulate ? cr[j] + v : v;
    }
  }
}

// The steps of the seed's LoRA pass (LoopLayer::lora_pass), as plain loops, for m rows of one expert and
// projection (in, out) of rank `rank`.
// Step 2: grad_B [out][rank] += s * dy^T U  (for-loop, as the seed)
void lora_grad_B(float* gB, const float* dy, int ldy, const bf16* U, int ldu, int m, int out, int rank, float s) {
  for (int o = 0; o < out; ++o) {
    for (int q = 0; q < rank; ++q) {
      float sum = 0.0f;
      for (int t = 0; t < m; ++t)
        sum += dy[static_cast<std::size_t>(t) * ldy + o] * to_float(U[static_cast<std::size_t>(t) * ldu + q]);
      const float current = gB[static_cast<std::size_t>(o) * rank + q];
      gB[static_cast<std::size_t>(o) * rank + q] = current + sum * s;
    }
  }
}
// Step 3 + 4: G_B [m][rank] = dy B, quantised to bf16
void lora_G_B(bf16* gb, const float* dy, int ldy, const bf16* B, int m, int out, int rank) {
  for (int t = 0; t < m; ++t) {
    for (int q = 0; q < rank; ++q) {
      float sum = 0.0f;
      for (int o = 0; o < out; ++o)
        sum += dy[static_cast<std::size_t>(t) * ldy + o] * to_float(B[static_cast<std::size_t>(o) * rank + q]);
      gb[static_cast<std::size_t>(t) * rank + q] = to_bf16(sum);
    }
  }
}
// Step 5: dx [m][in] (ld ldx2) += s * G_B A
void lora_dx(float* dx, int ldx2, const bf16* gb, const bf16* A, int m, int rank, int in, float s) {
  for (int t = 0; t < m; ++t) {
    float* d = dx + static_cast<std::size_t>(t) * ldx2;
    for (int q = 0; q < rank; ++q) {
      const float g = s * to_float(gb[static_cast<std::size_t>(t) * rank + q]);
      const bf16* a = A + static_cast<std::size_t>(q) * in;
      for (int i = 0; i < in; ++i) d[i] += g * to_float(a[i]);
    }
  }
}
// Step 6: grad_A [rank][in] += s * G_B^T x  (for-loop, as the seed)
void lora_grad_A(float* gA, const bf16* gb, const float* x, int ldx, int m, int rank, int in, float s) {
  for (int q = 0; q < rank; ++q) {
    for (int i = 0; i < in; ++i) {
      float sum = 0.0f;
      for (int t = 0; t < m; ++t)
        sum += to_float(gb[static_cast<std::size_t>(t) * rank + q]) * x[static_cast<std::size_t>(t) * ldx + i];
      const float current = gA[static_cast<std::size_t>(q) * in + i];
      gA[static_cast<std::size_t>(q) * in + i] = current + sum * s;
    }
  }
}

class LoopLayer final : public LayerBase {
 public:
  explicit LoopLayer(const Weights& w) : LayerBase(w) {}
  std::string variant() const override { return "loop"; }

 protected:
  void begin_forward() override {
    const auto R = static_cast<std::size_t>(R_);
    gb_.resize(R * r_);
  }

  // x [m][in] -> out (ld ldo) = x W^T + s (x A^T) B^T ; U (bf16, ld ldu)
  void linear(int p, int e, int m, const bf16* x, float* out, int ldo, bf16* u, int ldu) {
    const int in = proj_in(cfg_, p), outd = proj_out(cfg_, p);
    t_row.resize(static_cast<std::size_t>(in));
    const bf16* A = w_.a(p, e);
    const bf16* B = w_.b(p, e);
    for (int n = 0; n < m; ++n) {
      const bf16* xr = x + static_cast<std::size_t>(n) * in;
      for (int i = 0; i < in; ++i) t_row[i] = to_float(xr[i]);
      for (int q = 0; q < r_; ++q) {
        u[static_cast<std::size_t>(n) * ldu + q] =
            to_bf16(dot_f32_bf16(t_row.data(), A + static_cast<std::size_t>(q) * in, in));
      }
    }
    gemm_nt(m, outd, in, x, in, w_.w(p, e), in, out, ldo, false);
    for (int n = 0; n < m; ++n) {
      const bf16* ur = u + static_cast<std::size_t>(n) * ldu;
      float* o = out + static_cast<std::size_t>(n) * ldo;
      for (int j = 0; j < outd; ++j) {
        float acc = 0.0f;
        for (int q = 0; q < r_; ++q) acc += to_float(ur[q]) * to_float(B[static_cast<std::size_t>(j) * r_ + q]);
        o[j] += s_ * acc;
      }
    }
  }

  void fwd_gate_up(int e) override {
    const int r0 = row0(e), m = count(e);
    const bf16* x = xs_.data() + static_cast<std::size_t>(r0) * H_;
    for (int p : {kGate, kUp})
      linear(p, e, m, x, pre_[p].data() + static_cast<std::size_t>(r0) * I_, I_,
             U_[p].data() + static_cast<std::size_t>(r0) * r_, r_);
  }

  void fwd_down(int e) override {
    const int r0 = row0(e), m = count(e);
    linear(kDown, e, m, z_.data() + static_cast<std::size_t>(r0) * I_, ys_.data() + static_cast<std::size_t>(r0) * H_,
           H_, U_[kDown].data() + static_cast<std::size_t>(r0) * r_, r_);
  }

  // prepare_backward_weights(): transpose W [out][in] -> W^T [in][out] for the activated experts.
  void transpose_weights(int p, std::vector<bf16>& dst) {
    const int in = proj_in(cfg_, p), out = proj_out(cfg_, p);
    const std::size_t per = static_cast<std::size_t>(in) * out;
    if (dst.size() != per * cfg_.experts) dst.resize(per * cfg_.experts);
    const int nact = static_cast<int>(rt_.active.size());
    parallel_for(nact, [&](int i) {
      const int e = rt_.active[i];
      const bf16* src = w_.w(p, e);
      bf16* d = dst.data() + per * e;
      constexpr int kB = 32;
      for (int o0 = 0; o0 < out; o0 += kB)
        for (int i0 = 0; i0 < in; i0 += kB)
          for (int o = o0; o < std::min(out, o0 + kB); ++o)
            for (int ii = i0; ii < std::min(in, i0 + kB); ++ii)
              d[static_cast<std::size_t>(ii) * out + o] = src[static_cast<std::size_t>(o) * in + ii];
    });
  }
  const bf16* wt(const std::vector<bf16>& v, int p, int e) const {
    return v.data() + static_cast<std::size_t>(e) * proj_in(cfg_, p) * proj_out(cfg_, p);
  }

  void prepare_down_backward() override { transpose_weights(kDown, wdT_); }

  void down_base(int e) override {
    const int r0 = row0(e), m = count(e);
    // gz [m][I] = dy [m][H] * Wd [H][I] = dy . (Wd^T rows)
    gemm_nt(m, I_, H_, dys_.data() + static_cast<std::size_t>(r0) * H_, H_, wt(wdT_, kDown, e), H_,
            gz_.data() + static_cast<std::size_t>(r0) * I_, I_, false);
  }

  // The seed's LoRA pass for one expert and projection, as plain loops.
  //  dy: grad of the projection output [m][out] (fp32, ld ldy), x: its input [m][in] (fp32, ld ldx),
  //  U: x A^T [m][r] (bf16, ld ldu), dx: grad of the input [m][in] (fp32, ld ldx2), accumulated.
  void lora_pass(int p, int e, int m, const float* dy, int ldy, const float* x, int ldx, const bf16* U, int ldu,
                 float* dx, int ldx2, LoraGrads& grads, bf16* gb) {
    const int in = proj_in(cfg_, p), out = proj_out(cfg_, p), rank = r_;
    const float s = s_;
    const bf16* A = w_.a(p, e);
    const bf16* B = w_.b(p, e);
    float* gA = grads.A[p].data() + static_cast<std::size_t>(e) * rank * in;
    float* gB = grads.B[p].data() + static_cast<std::size_t>(e) * out * rank;
    lora_grad_B(gB, dy, ldy, U, ldu, m, out, rank, s);
    lora_G_B(gb, dy, ldy, B, m, out, rank);
    lora_dx(dx, ldx2, gb, A, m, rank, in, s);
    lora_grad_A(gA, gb, x, ldx, m, rank, in, s);
    grads.round_experts(cfg_, p, e, 1);
  }

  void down_lora(int e, LoraGrads& grads) override {
    const int r0 = row0(e), m = count(e);
    // the input of down (z) as fp32 for the loops
    std::vector<float> zf(static_cast<std::size_t>(m) * I_);
    for (std::size_t i = 0; i < zf.size(); ++i) zf[i] = to_float(z_[static_cast<std::size_t>(r0) * I_ + i]);
    lora_pass(kDown, e, m, dysf_.data() + static_cast<std::size_t>(r0) * H_, H_, zf.data(), I_,
              U_[kDown].data() + static_cast<std::size_t>(r0) * r_, r_, gz_.data() + static_cast<std::size_t>(r0) * I_,
              I_, grads, gb_.data() + static_cast<std::size_t>(r0) * r_);
  }

  void prepare_gate_up_backward() override {
    transpose_weights(kGate, wgT_);
    transpose_weights(kUp, wuT_);
  }

  void gate_up_base(int e) override {
    const int r0 = row0(e), m = count(e);
    const std::size_t off = static_cast<std::size_t>(r0) * I_;
    float* gx = gx_.data() + static_cast<std::size_t>(r0) * H_;
    gemm_nt(m, H_, I_, dpre_[kGate].data() + off, I_, wt(wgT_, kGate, e), I_, gx, H_, false);  // base_pass(gate)
    gemm_nt(m, H_, I_, dpre_[kUp].data() + off, I_, wt(wuT_, kUp, e), I_, gx, H_, true);       // base_pass(up)
  }

  // GU2: the LoRA loops read fp32 operands: convert grad of g|u and the expert input.
  void reconvert_for_lora() override {
    const auto R = static_cast<std::size_t>(R_);
    for (auto& v : dpref_) v.resize(R * I_);
    xsf_.resize(R * H_);
    parallel_for_static(R_, [&](int row) {
      const std::size_t a = static_cast<std::size_t>(row) * I_, b = static_cast<std::size_t>(row) * H_;
      for (int p : {kGate, kUp})
        for (int i = 0; i < I_; ++i) dpref_[p][a + i] = to_float(dpre_[p][a + i]);
      for (int h = 0; h < H_; ++h) xsf_[b + h] = to_float(xs_[b + h]);
    });
  }

  void gate_up_lora(int e, LoraGrads& grads) override {
    const int r0 = row0(e), m = count(e);
    for (int p : {kGate, kUp}) {  // lora_pass(gate), lora_pass(up)
      lora_pass(p, e, m, dpref_[p].data() + static_cast<std::size_t>(r0) * I_, I_,
                xsf_.data() + static_cast<std::size_t>(r0) * H_, H_, U_[p].data() + static_cast<std::size_t>(r0) * r_,
                r_, gx_.data() + static_cast<std::size_t>(r0) * H_, H_, grads,
                gb_.data() + static_cast<std::size_t>(r0) * r_);
    }
  }

 private:
  std::vector<bf16> wdT_, wgT_, wuT_;        // transposed weights, rebuilt every backward
  std::vector<bf16> gb_;                     // [R][r] G_B (bf16)
  std::array<std::vector<float>, 2> dpref_;  // GU2 fp32 copies of dg, du
  std::vector<float> xsf_;                   // GU2 fp32 copy of the expert input
};

}  // namespace

std::unique_ptr<MoeLoraLayer> make_loop_layer(const Weights& weights) { return std::make_unique<LoopLayer>(weights); }

}  // namespace perfgate::lora_backward
