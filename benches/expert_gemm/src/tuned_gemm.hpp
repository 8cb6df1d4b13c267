#pragma once
// cuBLASLt batched GEMMs over pointer arrays whose algorithm is chosen by timing. cuBLAS picks one algorithm per
// call by its heuristic; here every candidate the heuristic offers for a shape (and the plain cublasGemmBatchedEx
// call itself) is timed on the real operands once, and the fastest is kept for that shape.
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace perfgate::expert_gemm {

// One batched GEMM as the bucketed variants call it: for each i < batch, column-major
// C_i(m x n) = A_i^T(m x k) B_i(k x n), with A_i stored k x m (lda = k), B_i k x n (ldb = k), C_i ldc = m; a, b
// and c are device arrays of batch device pointers; bf16 operands, fp32 accumulation.
struct BatchedGemm {
  int m = 0, n = 0, k = 0, batch = 0;
  const void* const* a = nullptr;
  const void* const* b = nullptr;
  void** c = nullptr;
};

// What tuning found for one shape: the plain call's time, the chosen one's, and how many candidates were timed.
struct TunedChoice {
  int m = 0, n = 0, k = 0, batch = 0;
  float plain_us = 0.0f;
  float best_us = 0.0f;
  int candidates = 0;
  bool lt = false;  // false: the plain cublasGemmBatchedEx call was the fastest
};

class TunedBatchedGemms {
 public:
  // Calls go to `stream` with `cublas` (the plain call) or a cuBLASLt handle of its own; sm_count_target > 0 is
  // passed to both, as cublasSetSmCountTarget does for the plain call. lt_only: the fastest cuBLASLt candidate is
  // kept even where the plain call is faster.
  TunedBatchedGemms(cublasHandle_t cublas, cudaStream_t stream, void* workspace, std::size_t workspace_bytes,
                    int sm_count_target, bool lt_only);
  ~TunedBatchedGemms();
  TunedBatchedGemms(const TunedBatchedGemms&) = delete;
  TunedBatchedGemms& operator=(const TunedBatchedGemms&) = delete;

  // Times the candidates of g's shape on g's operands (which it overwrites) and keeps the fastest. Not while
  // the stream is being captured.
  void tune(const BatchedGemm& g);
  // Enqueues g with the algorithm tune() chose for its shape (the plain call for a shape never tuned).
  void run(const BatchedGemm& g);
  const std::vector<TunedChoice>& choices() const { return choices_; }

 private:
  using Shape = std::tuple<int, int, int, int>;
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool lt = false;
  };
  Plan make_plan(const BatchedGemm& g) const;
  void run_plain(const BatchedGemm& g) const;
  void run_lt(const Plan& p, const BatchedGemm& g) const;
  template <class F>
  float time_us(F&& enqueue) const;

  cublasHandle_t cublas_;
  cublasLtHandle_t lt_ = nullptr;
  cudaStream_t stream_;
  void* workspace_;
  std::size_t workspace_bytes_;
  int sm_count_target_;
  bool lt_only_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::map<Shape, Plan> plans_;
  std::vector<TunedChoice> choices_;
};

}  // namespace perfgate::expert_gemm
