#pragma once
// Shared driver of the MoE LoRA layer: routing, scatter, activation, merge, phase timing. The
// variants (loop, onednn) implement the per-expert GEMM steps as hooks.
#include <atomic>
#include <utility>
#include <vector>

#include "perfgate/lora_backward/moe_lora.hpp"
#include "vector_state.hpp"

namespace perfgate::lora_backward {

// Tokens routed to experts; "rows" are (token, slot) pairs sorted by expert.
struct Routing {
  int qlen = 0;
  std::vector<int> offsets;       // [E + 1] first row of each expert
  std::vector<int> row_token;     // [R]
  std::vector<float> row_weight;  // [R] routing weight (softmax over the token's top-k logits)
  std::vector<int> token_rows;    // [qlen][k] row of each (token, slot)
  std::vector<int> active;        // experts with at least one row
};
// Top-k over each token's logits (ties: lower expert index), softmax of the selected logits.
void route(const Config& cfg, const Problem& problem, Routing& out);

// OpenMP parallel loop over [0, n) with dynamic scheduling (serial without OpenMP).
template <typename F>
void parallel_for(int n, F&& f) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 1)
  for (int i = 0; i < n; ++i) f(i);
#else
  for (int i = 0; i < n; ++i) f(i);
#endif
}
// Dynamic scheduling that tells each call which index the same thread runs next (-1: none), so it can
// prefetch that one's inputs: every thread claims its next index before it runs the current one.
template <typename F>
void parallel_for_lookahead(int n, F&& f) {
  std::atomic<int> counter{0};
#if defined(_OPENMP)
#pragma omp parallel
#endif
  {
    int cur = counter.fetch_add(1);
    while (cur < n) {
      const int next = counter.fetch_add(1);
      f(cur, next < n ? next : -1);
      cur = next;
    }
  }
}
// Static schedule for even row-wise work.
template <typename F>
void parallel_for_static(int n, F&& f) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i) f(i);
#else
  for (int i = 0; i < n; ++i) f(i);
#endif
}

// parallel_for_static for a scalar (SSE-encoded) pass: each thread first clears the upper vector state that
// AVX-512 code left behind (vector_state.hpp), once per thread, since nothing between its rows dirties it again.
template <typename F>
void parallel_for_static_scalar(int n, F&& f) {
#if defined(_OPENMP)
#pragma omp parallel
  {
    clean_upper_vector_state();
#pragma omp for schedule(static)
    for (int i = 0; i < n; ++i) f(i);
  }
#else
  clean_upper_vector_state();
  for (int i = 0; i < n; ++i) f(i);
#endif
}

// Busy work for `ms` milliseconds (slowdown injection).
void burn_ms(double ms);
// Fraction of extra work for a phase (0 when the slowdown is off or restricted to another phase);
// phase < 0: a forward step.
double slowdown_for_phase(int phase);

class LayerBase : public MoeLoraLayer {
 public:
  explicit LayerBase(const Weights& w);
  void forward(const Problem& problem, std::span<float> out) override;
  void backward(std::span<const float> grad_out, std::span<float> grad_input, LoraGrads& grads,
                PhaseTimes& phases) override;
  std::array<Work, kPhaseCount> backward_work() const override;
  Work forward_work() const override;
  int rows() const override { return R_; }
  int active_experts() const override { return static_cast<int>(rt_.active.size()); }

 protected:
  // Called after routing, before any hook, outside parallel regions (e.g. to create GEMM primitives).
  virtual void begin_forward() {}
  // xs_ -> pre_[gate], pre_[up] and U_[gate], U_[up]
  virtual void fwd_gate_up(int e) = 0;
  // z_ -> ys_ and U_[down]
  virtual void fwd_down(int e) = 0;
  virtual void prepare_down_backward() = 0;  // D0 (weights for the backward)
  virtual void down_base(int e) = 0;         // D3: gz_ = dys_ W_down
  // Whole D3 phase; default: down_base() for every active expert in parallel. `grads`: for a layer that runs
  // an expert's D4 work right after its D3 (each needs only that expert's rows of gz_).
  virtual void down_base_all(LoraGrads& grads);
  virtual void down_lora(int e, LoraGrads& grads) = 0;  // D4: LoRA grads of down, gz_ += s G_B A
  // Whole D4 phase; default: down_lora() for every active expert in parallel.
  virtual void down_lora_all(LoraGrads& grads);
  virtual void prepare_gate_up_backward() = 0;  // GU0
  virtual void gate_up_base(int e) = 0;         // GU1: gx_ = dg W_gate + du W_up
  // Whole GU1 phase; default: gate_up_base() for every active expert in parallel (grads: as in down_base_all).
  virtual void gate_up_base_all(LoraGrads& grads);
  virtual void reconvert_for_lora() {}  // GU2
  // Whether D0 must zero the LoRA gradient buffers (false when D4/GU3 overwrite every expert's grads).
  virtual bool lora_grads_need_zeroing() const { return true; }
  virtual void gate_up_lora(int e, LoraGrads& grads) = 0;  // GU3: LoRA grads of gate and up, gx_ += ...
  // Whole GU3 LoRA part (before the accumulation into grad_input); default: per expert in parallel.
  virtual void gate_up_lora_all(LoraGrads& grads);
  // Whole GU3 phase: the LoRA part, then each token's k rows of gx_ summed into grad_input.
  virtual void gate_up_lora_phase(LoraGrads& grads, std::span<float> grad_input);
  // grad_input[t] += the gx_ rows of token t's k experts
  void add_token_rows(std::span<float> grad_input);

  int row0(int e) const { return rt_.offsets[e]; }
  int count(int e) const { return rt_.offsets[e + 1] - rt_.offsets[e]; }

  const Weights& w_;
  Config cfg_;
  float s_;
  int H_, I_, r_;
  Routing rt_;
  int R_ = 0;
  // forward cache (every buffer dense, rows sorted by expert)
  std::vector<bf16> xs_;                   // [R][H]  scattered input
  std::array<std::vector<float>, 2> pre_;  // [R][I]  gate and up pre-activations (g, u)
  std::array<std::vector<bf16>, 3> U_;     // [R][r]  U = x A^T of gate, up, down
  std::vector<bf16> z_;                    // [R][I]  SiLU(g) * u
  std::vector<float> ys_;                  // [R][H]  expert outputs
  // backward buffers
  std::vector<float> dysf_;                // [R][H]  D1: grad_out * routing weight
  std::vector<bf16> dys_;                  // [R][H]  D2: bf16 of the above
  std::vector<float> gz_;                  // [R][I]  D3/D4: grad of z
  std::array<std::vector<bf16>, 2> dpre_;  // [R][I]  A1: grad of g, grad of u
  std::vector<float> gx_;                  // [R][H]  GU1/GU3: grad of the scattered input

 private:
  // forward steps
  void size_forward_buffers(int qlen);
  void scatter_input(const Problem& problem);          // xs_ from the problem's rows
  void activation_forward();                           // z_ from pre_
  void merge_outputs(int qlen, std::span<float> out);  // each token's k rows of ys_, weighted
  // backward groups of phases
  void size_backward_buffers(LoraGrads& grads);
  void backward_down(std::span<const float> grad_out, LoraGrads& grads, PhaseTimes& phases);  // D0-D4
  void backward_activation(PhaseTimes& phases);                                               // A1
  void backward_gate_up(std::span<float> grad_input, LoraGrads& grads, PhaseTimes& phases);   // GU0-GU3
};

}  // namespace perfgate::lora_backward
