#pragma once
// The hand-written grouped GEMM of the overlap variants (light_gemm.cu): for every light expert e
// (at most kLightMaxRows rows), C[rows of e, :] = X[rows of e, :] W_e^T, with W_e = [n, k] row-major,
// X [rows, k] and C [rows, n] row-major bf16, fp32 accumulation. A persistent grid of `ctas` CTAs
// (one per SM) walks the (expert, 128-column tile) items; each weight tile is read from HBM once.
#include <cstddef>
#include <cstdint>
#include <memory>

#include <cuda_runtime.h>

namespace perfgate::expert_gemm {

inline constexpr int kLightMaxRows = 192;

// One grouped launch. items[i] = {expert, first row in X / C, rows, 0}, heaviest first; `max_rows` = the largest
// rows. Requires n % 256 == 0 (n % 128 == 0 where the 128-row-tile form 3 runs: see light_gemm.cu) and k % 64 == 0.
struct LightGemmArgs {
  const std::uint16_t* w = nullptr;  // [experts][n][k]
  std::size_t w_expert_stride = 0;   // elements from one expert's weights to the next (n * k when packed)
  int experts = 0;                   // experts in w (the TMA form's tensor bounds)
  const std::uint16_t* x = nullptr;  // [x_rows][k], each light expert's rows contiguous
  std::size_t x_rows = 0;            // rows of the X buffer (the TMA form's tensor bounds)
  std::uint16_t* c = nullptr;        // [x_rows][n]
  int n = 0;
  int k = 0;
  const int4* items = nullptr;
  int n_items = 0;
  int max_rows = 0;
  int ctas = 0;
  // 0: the default form for max_rows; 1 or 2: an mma.sync form; 6: the TMA-fed wgmma form, where it runs
  // (compute capability 9.0, a build for sm_90a, max_rows <= 192). A form that cannot run falls back to the default.
  int form = 0;
  // gate_up only, form 6 only: c = SiLU(gate) * up ([x_rows][n / 2]), with W = [n / 2 gate rows | n / 2 up rows],
  // instead of c = [gate | up] for a separate activation kernel.
  bool swiglu = false;
  // Form 6 only: read each expert's rows in the smallest box of 16, 32, 64, 128 or 192 rows that covers them,
  // instead of the smallest multiple of 16 (the form's first boxes; kept to compare).
  bool pow2_x_boxes = false;
};
// A grouped launch prepared once for fixed operands and enqueued every pass: the constructor checks the operands,
// picks the form and, for form 6, has the driver encode its tensor maps, host work that a pass then does not repeat.
class LightGemm {
 public:
  LightGemm();
  explicit LightGemm(const LightGemmArgs& args);  // throws std::invalid_argument on operands no form takes
  ~LightGemm();
  LightGemm(LightGemm&&) noexcept;
  LightGemm& operator=(LightGemm&&) noexcept;
  void launch(cudaStream_t stream) const;  // nothing without items

 private:
  struct Tma;  // form 6's kernel parameters (light_gemm.cu)
  LightGemmArgs args_;
  int form_ = 0;
  std::unique_ptr<Tma> tma_;
};
std::size_t light_gemm_smem_bytes(int max_rows, int requested = 0);
// Whether LightGemm can apply SwiGLU in the epilogue (LightGemmArgs::swiglu) for these rows and form.
bool light_gemm_fuses_swiglu(int max_rows, int requested);
// The kernel form LightGemm uses for this tallest expert and requested form (LightGemmArgs::form;
// light_gemm.cu: 1-3 mma.sync, 4-5 wgmma, 6 wgmma fed by TMA).
int light_gemm_form(int max_rows, int requested = 0);

}  // namespace perfgate::expert_gemm
