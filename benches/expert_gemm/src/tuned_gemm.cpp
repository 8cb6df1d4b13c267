#include "tuned_gemm.hpp"

#include <algorithm>
#include <array>

#include "perfgate/bench/cuda.hpp"
#include "perfgate/expert_gemm/moe_runner.hpp"

namespace perfgate::expert_gemm {
namespace {

#define TG_CUBLAS(expr) ::perfgate::expert_gemm::check_cublas((expr), #expr)

constexpr int kCandidates = 16;  // heuristic results asked for per shape
// A candidate is timed over back-to-back runs of at least kSettleMs, after as many untimed ones: a power-capped GPU
// lowers its clock within milliseconds of a power-hungry kernel starting, so a few runs timed alone favour the
// algorithms that draw the most power, which then run at a lower clock in the pass.
constexpr float kSettleMs = 25.0f;
constexpr int kMinRuns = 5;
constexpr int kMaxRuns = 4000;

template <class T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, T value) {
  TG_CUBLAS(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

cublasLtMatrixLayout_t pointer_array_layout(int rows, int cols, int ld, int batch) {
  cublasLtMatrixLayout_t layout = nullptr;
  TG_CUBLAS(cublasLtMatrixLayoutCreate(&layout, CUDA_R_16BF, static_cast<std::uint64_t>(rows),
                                       static_cast<std::uint64_t>(cols), ld));
  const std::int32_t count = batch;
  const auto mode = static_cast<std::uint32_t>(CUBLASLT_BATCH_MODE_POINTER_ARRAY);
  TG_CUBLAS(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  TG_CUBLAS(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode, sizeof(mode)));
  return layout;
}

}  // namespace

TunedBatchedGemms::TunedBatchedGemms(cublasHandle_t cublas, cudaStream_t stream, void* workspace,
                                     std::size_t workspace_bytes, int sm_count_target, bool lt_only)
    : cublas_(cublas),
      stream_(stream),
      workspace_(workspace),
      workspace_bytes_(workspace_bytes),
      sm_count_target_(sm_count_target),
      lt_only_(lt_only) {
  TG_CUBLAS(cublasLtCreate(&lt_));
  PERFGATE_CUDA_CHECK(cudaEventCreate(&start_));
  PERFGATE_CUDA_CHECK(cudaEventCreate(&stop_));
}

TunedBatchedGemms::~TunedBatchedGemms() {
  for (auto& [shape, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.la);
    cublasLtMatrixLayoutDestroy(p.lb);
    cublasLtMatrixLayoutDestroy(p.lc);
    cublasLtMatmulDescDestroy(p.desc);
  }
  if (start_) cudaEventDestroy(start_);
  if (stop_) cudaEventDestroy(stop_);
  if (lt_) cublasLtDestroy(lt_);
}

TunedBatchedGemms::Plan TunedBatchedGemms::make_plan(const BatchedGemm& g) const {
  Plan p;
  TG_CUBLAS(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  if (sm_count_target_ > 0) set_desc(p.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, std::int32_t{sm_count_target_});
  p.la = pointer_array_layout(g.k, g.m, g.k, g.batch);
  p.lb = pointer_array_layout(g.k, g.n, g.k, g.batch);
  p.lc = pointer_array_layout(g.m, g.n, g.m, g.batch);
  return p;
}

void TunedBatchedGemms::run_plain(const BatchedGemm& g) const {
  const float alpha = 1.0f;
  const float beta = 0.0f;
  TG_CUBLAS(cublasGemmBatchedEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, g.m, g.n, g.k, &alpha, g.a, CUDA_R_16BF, g.k, g.b,
                                CUDA_R_16BF, g.k, &beta, g.c, CUDA_R_16BF, g.m, g.batch, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
}

void TunedBatchedGemms::run_lt(const Plan& p, const BatchedGemm& g) const {
  const float alpha = 1.0f;
  const float beta = 0.0f;
  TG_CUBLAS(cublasLtMatmul(lt_, p.desc, &alpha, g.a, p.la, g.b, p.lb, &beta, g.c, p.lc, g.c, p.lc, &p.algo, workspace_,
                           workspace_bytes_, stream_));
}

template <class F>
float TunedBatchedGemms::time_us(F&& enqueue) const {
  const auto elapsed_ms = [&](int runs) {
    PERFGATE_CUDA_CHECK(cudaEventRecord(start_, stream_));
    for (int i = 0; i < runs; ++i) enqueue();
    PERFGATE_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    PERFGATE_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    PERFGATE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  };
  const float once_ms = std::max(elapsed_ms(1), 1e-3f);
  const int runs = std::clamp(static_cast<int>(kSettleMs / once_ms) + 1, kMinRuns, kMaxRuns);
  elapsed_ms(runs);  // the clock settles under this algorithm's power draw
  return elapsed_ms(runs) * 1000.0f / static_cast<float>(runs);
}

void TunedBatchedGemms::tune(const BatchedGemm& g) {
  const Shape shape{g.m, g.n, g.k, g.batch};
  if (plans_.count(shape) != 0) return;
  Plan p = make_plan(g);
  cublasLtMatmulPreference_t pref = nullptr;
  TG_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  const std::uint64_t ws = workspace_bytes_;
  TG_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  std::array<cublasLtMatmulHeuristicResult_t, kCandidates> found{};
  int returned = 0;
  const cublasStatus_t heuristic =
      cublasLtMatmulAlgoGetHeuristic(lt_, p.desc, p.la, p.lb, p.lc, p.lc, pref, kCandidates, found.data(), &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  TunedChoice choice{g.m, g.n, g.k, g.batch};
  choice.plain_us = time_us([&] { run_plain(g); });
  choice.best_us = choice.plain_us;
  for (int i = 0; heuristic == CUBLAS_STATUS_SUCCESS && i < returned; ++i) {
    if (found[static_cast<std::size_t>(i)].state != CUBLAS_STATUS_SUCCESS) continue;
    Plan candidate = p;
    candidate.algo = found[static_cast<std::size_t>(i)].algo;
    const float us = time_us([&] { run_lt(candidate, g); });
    ++choice.candidates;
    if (us < choice.best_us || (lt_only_ && !p.lt)) {
      choice.best_us = us;
      p.algo = candidate.algo;
      p.lt = true;
    }
  }
  choice.lt = p.lt;
  plans_.emplace(shape, p);
  choices_.push_back(choice);
}

void TunedBatchedGemms::run(const BatchedGemm& g) {
  const auto it = plans_.find(Shape{g.m, g.n, g.k, g.batch});
  if (it == plans_.end() || !it->second.lt) return run_plain(g);
  run_lt(it->second, g);
}

}  // namespace perfgate::expert_gemm
