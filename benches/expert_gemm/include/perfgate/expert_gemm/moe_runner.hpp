#pragma once
// The MoE expert FFN forward on the GPU, from router logits to the combined output, in several GEMM
// variants. One MoeFfn holds the buffers, the routing plan and (optionally) a CUDA graph of one forward
// pass, and times its stages with CUDA events.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "perfgate/expert_gemm/light_gemm.hpp"
#include "perfgate/expert_gemm/moe_problem.hpp"

namespace perfgate::expert_gemm {

enum class Variant {
  per_expert,        // one cublasGemmEx per expert and projection (gate, up, down)
  grouped,           // cublasGemmGroupedBatchedEx: one group per expert (gate and up as a batch of 2)
  strided_batched,   // cublasGemmStridedBatchedEx over all experts, each padded to the largest row count
  bucketed,          // merged gate+up; experts bucketed by padded row count, one cublasGemmBatchedEx per bucket
  bucketed_streams,  // bucketed, with compute-bound buckets on a second stream beside the memory-bound ones
  overlap,           // heavy experts through bucketed cuBLAS, light ones (<= light_rows) at the same time through
                     // a persistent hand-written skinny GEMM on light_ctas SMs (light_gemm.cu)
  overlap_tma,       // overlap with the light kernel's TMA-fed form (6) on fewer light CTAs (variant_options)
};
const char* variant_name(Variant variant);
// The variants that run the light kernel beside cuBLAS.
inline bool is_overlap(Variant variant) { return variant == Variant::overlap || variant == Variant::overlap_tma; }
const std::vector<Variant>& all_variants();

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), count_(other.count_) {
    other.data_ = nullptr;
    other.count_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

// A host array copied into a new buffer on the current device (int, float, std::uint16_t and void* elements).
template <typename T>
DeviceBuffer<T> to_device(std::span<const T> host);
template <typename T>
DeviceBuffer<T> to_device(const std::vector<T>& host) {
  return to_device(std::span<const T>(host));
}

// Expert weights of one shape on the device: gate_up [E, 2I, H] (gate rows, then up rows, per expert)
// and down [E, H, I], bf16, random non-zero, scaled by 1/sqrt(fan-in).
class ExpertWeights {
 public:
  ExpertWeights(const Shape& shape, std::uint64_t seed);
  const Shape& shape() const { return shape_; }
  std::uint64_t seed() const { return seed_; }  // the weights' values follow from (shape, seed)
  const std::uint16_t* gate_up() const { return gate_up_.get(); }
  const std::uint16_t* down() const { return down_.get(); }
  // Expert e's weights: its merged gate+up matrix ([2I, H], gate first) and its down matrix ([H, I]).
  std::size_t gate_up_elements() const { return static_cast<std::size_t>(2) * shape_.intermediate * shape_.hidden; }
  std::size_t down_elements() const { return static_cast<std::size_t>(shape_.hidden) * shape_.intermediate; }
  const std::uint16_t* gate_up(int e) const { return gate_up() + static_cast<std::size_t>(e) * gate_up_elements(); }
  const std::uint16_t* down(int e) const { return down() + static_cast<std::size_t>(e) * down_elements(); }
  std::vector<std::uint16_t> gate_up_host() const;
  std::vector<std::uint16_t> down_host() const;

 private:
  Shape shape_;
  std::uint64_t seed_;
  DeviceBuffer<std::uint16_t> gate_up_;
  DeviceBuffer<std::uint16_t> down_;
};

// Throws perfgate::bench::CudaError on a cuBLAS failure.
void check_cublas(cublasStatus_t status, const char* expr);

struct FfnOptions {
  double ridge_rows = 204.0;  // rows per expert above which an expert GEMM is compute-bound (dense rate / copy BW)
  int heavy_sms = 0;          // bucketed_streams: SMs for the compute-bound stream; 0 = from a cost model
  bool graph = false;         // replay a captured CUDA graph instead of enqueuing kernel by kernel
  // Bucketed variants. Defaults: the fastest granule (uniform routing) and piece size (Zipf routing) of
  // the H200 sweep in docs/expert_gemm.md, "Measured on the lent H200".
  int granule = 16;      // row padding granule of experts with <= 256 rows
  int chunk_rows = 512;  // > 0 cuts experts into pieces of this many rows (plus a padded remainder)
  // overlap: experts with <= light_rows rows (at most kLightMaxRows) go to the light kernel, which runs on
  // light_ctas persistent CTAs beside the cuBLAS calls of the heavy experts (heavy_sms: 0 = cuBLAS SM
  // target of SMs - light_ctas, -1 = none, N = N SMs). overlap_serial runs the two one after another on
  // one stream (to time each part alone).
  // Defaults: the best concurrent settings of the H200 sweeps (the expert_gemm notebook); light_ctas and
  // light_form per variant (variant_options).
  int light_rows = 64;
  int light_ctas = 0;  // 0: the variant's default (variant_options)
  bool overlap_serial = false;
  // overlap: the last tail_buckets cuBLAS buckets of each stage wait for the light kernel and run with no SM target,
  // so the SMs the light kernel leaves when it ends first are not idle for the heavy part's tail. 0: none; -1: the
  // variant's default (variant_options).
  int tail_buckets = -1;
  int light_form = 0;  // 0: the variant's form (variant_options); else a light-kernel form to try (light_gemm.hpp)
  // SiLU(gate) * up in the light kernel's gate_up epilogue (form 6 only), so the activation kernel covers the heavy
  // experts' rows alone; their regions then come first in the row layout.
  bool light_swiglu = false;
  bool light_pow2_x_boxes = false;  // form 6 reads expert rows in power-of-two boxes (LightGemmArgs::pow2_x_boxes)
  // Planted timeline regression (PERFGATE_EXPERT_GEMM_HOST_SYNC_US): > 0 makes the host wait for the stream
  // after the gate|up GEMMs and then work this many microseconds before it queues the rest, as a host read of a
  // device value would; no kernel changes. Direct launches only (a captured graph has no host in between).
  int host_sync_us = 0;
  // Planted slowdown (PERFGATE_GPU_SLOWDOWN, docs/expert_gemm.md): > 0 runs the gate|up and down GEMMs of
  // the experts choose_planted_experts() picks a second time, one cublasGemmEx each on the pass's stream
  // at the end of its GEMM stage, into scratch buffers (the output does not change). 0: no extra work.
  double planted_fraction = 0.0;
};

// `options` with the variant's defaults filled in where they are 0 (tail_buckets: -1): `overlap` runs the light
// kernel's default form on 52 CTAs and no tail, `overlap_tma` its form 6 on 40 and two tail buckets (the best
// settings of their H200 measurements, docs/expert_gemm.md).
FfnOptions variant_options(Variant variant, FfnOptions options);

inline constexpr int kStageCount = 6;
inline constexpr std::array<const char*, kStageCount> kStageNames = {"routing",    "permute", "gate_up",
                                                                     "activation", "down",    "combine"};

class MoeFfn {
 public:
  // `plan` is the host routing of `logits` (route_cpu): the GEMM launches use its row counts, and
  // verify_routing() checks that the device routing produced the same counts.
  MoeFfn(const ExpertWeights& weights, int tokens, Variant variant, std::span<const float> logits,
         const RoutingResult& plan, const FfnOptions& options);
  ~MoeFfn();
  MoeFfn(const MoeFfn&) = delete;
  MoeFfn& operator=(const MoeFfn&) = delete;

  void fill_random_input(std::uint64_t seed);
  void poison();         // NaN into every buffer a stage writes
  void clear_scratch();  // zeros into the permuted / intermediate buffers (clean padding rows)

  // One forward pass on stream(), with NVTX ranges and stage events. Replays the graph when one was
  // captured (capture_graph()).
  void run();
  // Captures one forward pass into a CUDA graph; returns false (and runs uncaptured) when capture fails.
  bool capture_graph();
  bool uses_graph() const { return graph_exec_ != nullptr; }

  // After run(): waits for the pass and returns the milliseconds of each stage and the total.
  std::array<float, kStageCount> stage_ms();
  float total_ms();

  std::optional<std::string> verify_routing();  // device counts == plan counts
  std::vector<std::uint16_t> output_host();
  std::vector<std::uint16_t> input_host();

  cudaStream_t stream() const { return stream_; }
  // The device input x [tokens, H] and output y [tokens, H] (bf16), for a caller that fills x itself
  // (expert_parallel writes the rows it received) and reads y on the device.
  std::uint16_t* input_device() { return x_.get(); }
  const std::uint16_t* output_device() const { return y_.get(); }
  std::int64_t computed_rows() const { return layout_rows_; }  // rows the GEMMs run over, padding included
  int heavy_sms() const { return heavy_sms_; }
  int gemm_launches() const { return gemm_launches_; }
  // overlap: light experts, their rows, and the milliseconds of the light kernel and of the heavy cuBLAS
  // calls in the last direct (non-graph) pass, per GEMM stage (gate_up, down); -1 where not timed.
  int light_experts() const { return static_cast<int>(light_items_host_.size() / 4); }
  std::int64_t light_rows_total() const { return light_rows_total_; }
  int light_max_rows() const { return light_max_rows_; }
  bool light_swiglu() const { return fused_swiglu_; }
  // overlap: the cuBLAS buckets of each stage that run after the light kernel on every SM (FfnOptions::tail_buckets).
  int tail_buckets() const { return static_cast<int>(buckets_.size() - first_tail_bucket(false)); }
  const FfnOptions& options() const { return options_; }
  std::array<float, 4> overlap_parts_ms();  // light gate_up, heavy gate_up, light down, heavy down
  // Planted slowdown: the experts whose GEMMs run twice (empty without one), and after a pass whether
  // the duplicated results in scratch equal the pass's own rows of those experts (nullopt when they do).
  const PlantedExperts& planted() const { return planted_; }
  std::optional<std::string> verify_planted();

 private:
  // The layout's first rows, those whose gate|up result is stored for the activation kernel: all of them, or with
  // the light kernel's SwiGLU epilogue the heavy experts' rows alone (they come first).
  std::int64_t gate_up_rows_stored() const { return fused_swiglu_ ? heavy_rows_ : layout_rows_; }
  // Expert e's rows in the permuted activations: the first one, and how many.
  std::size_t first_row(int e) const {
    return static_cast<std::size_t>(layout_.slot_base[static_cast<std::size_t>(e)]);
  }
  int row_count(int e) const { return plan_.counts[static_cast<std::size_t>(e)]; }
  // The constructor's steps.
  void plan_layout();
  void plan_overlap_layout();
  void create_stream_and_handle();
  void allocate_buffers(std::span<const float> logits);
  void build_grouped_tables();
  void build_bucket_tables();
  int choose_heavy_sms(int sms) const;
  void create_side_stream();
  void set_up_bucketed_streams();
  void set_up_overlap();
  void set_up_planted();

  void enqueue(bool capturing);
  // One GEMM stage, gate_up or down, by the variant's method; then the planted slowdown's rerun of it.
  void enqueue_linear(bool down, bool capturing);
  void enqueue_gate_up();
  void enqueue_down();
  void record(int index, bool capturing);
  void enqueue_overlap(bool down, bool capturing);
  LightGemmArgs light_gemm_args(bool down) const;
  void enqueue_planted(bool down);
  // The device pointer tables of one phase (gate_up or down) and its GEMM shape per expert: C (m x rows) =
  // A^T B with A m x k; k is the leading dimension of A and B, m that of C.
  struct PhaseTables {
    int m;
    int k;
    const void** a;
    const void** b;
    void** c;
  };
  PhaseTables phase_tables(bool down);
  // Host copies of the pointer tables (A, B and C of each expert's or piece's GEMM), uploaded together.
  struct HostTables {
    std::vector<const void*> gu_a, gu_b, dn_a, dn_b;
    std::vector<void*> gu_c, dn_c;
  };
  void upload_tables(const HostTables& t);
  // strided_batched: C = A^T B for every expert at once, each padded to pad_rows_ rows; A is m x k (leading
  // dimension k, `stride_a` elements from one expert's to the next), B pad_rows_ x k, C leading dimension ldc.
  void strided_gemm(int m, int k, const std::uint16_t* a, std::size_t stride_a, const std::uint16_t* b,
                    std::uint16_t* c, int ldc);
  void fork_side_stream();  // the side stream waits for what stream_ has queued so far
  void join_side_stream();  // stream_ waits for what the side stream has queued so far
  std::size_t first_tail_bucket(bool serial) const;
  void release_sms_for_tail();
  void gemm_bucket(cublasHandle_t handle, std::size_t i, const PhaseTables& t);  // one batched GEMM: bucket i
  void enqueue_buckets(const PhaseTables& t);
  void enqueue_grouped(const std::vector<int>& m, const std::vector<int>& k, const std::vector<int>& ld_ab,
                       const std::vector<int>& ldc, const std::vector<int>& group_size, const PhaseTables& t);
  void gemm(cublasHandle_t handle, int m, int n, int k, const std::uint16_t* a, int lda, const std::uint16_t* b,
            int ldb, std::uint16_t* c, int ldc);

  const ExpertWeights& weights_;
  Shape shape_;
  int tokens_;
  Variant variant_;
  FfnOptions options_;
  RoutingResult plan_;
  RowLayout layout_;
  std::vector<Bucket> buckets_;
  std::vector<int> active_;  // experts with rows, ascending
  int pad_rows_ = 0;         // strided_batched
  std::int64_t layout_rows_ = 0;
  int heavy_sms_ = 0;
  int gemm_launches_ = 0;
  bool compact_ = true;  // slot bases from the device scan (true) or from the uploaded layout

  cudaStream_t stream_ = nullptr;
  cudaStream_t side_stream_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  cublasHandle_t side_handle_ = nullptr;
  DeviceBuffer<std::uint8_t> workspace_, side_workspace_;
  std::array<cudaEvent_t, kStageCount + 1> events_{};
  cudaEvent_t fork_ = nullptr;
  cudaEvent_t join_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t graph_exec_ = nullptr;

  DeviceBuffer<float> logits_;
  DeviceBuffer<std::uint16_t> x_, x_perm_, gate_up_out_, act_, expert_out_, y_;
  DeviceBuffer<int> topk_expert_, counts_, offsets_, cursor_, slot_of_, layout_base_;
  DeviceBuffer<float> topk_weight_;
  // Device pointer tables for the batched / grouped calls.
  DeviceBuffer<const void*> gu_a_, gu_b_, dn_a_, dn_b_;
  DeviceBuffer<void*> gu_c_, dn_c_;
  // Host metadata of the grouped call.
  std::vector<int> group_m_gu_, group_n_, group_k_gu_, group_lda_gu_, group_ldc_gu_, group_size_gu_;
  std::vector<int> group_m_dn_, group_k_dn_, group_lda_dn_, group_ldc_dn_, group_size_dn_;
  std::vector<cublasOperation_t> group_ta_, group_tb_;
  std::vector<float> group_alpha_, group_beta_;
  // Offsets of each bucket's pointers in the tables.
  std::vector<int> bucket_first_;
  // overlap: {expert, row base, rows, 0} per light expert, heaviest first; part-timing events.
  std::vector<int> light_items_host_;
  DeviceBuffer<int> light_items_;
  int light_max_rows_ = 0;
  std::array<LightGemm, 2> light_gemm_;  // gate_up, down (set_up_overlap)
  bool fused_swiglu_ = false;    // the light kernel applies SwiGLU (FfnOptions::light_swiglu, where form 6 runs)
  std::int64_t heavy_rows_ = 0;  // with light_swiglu: the heavy experts' rows, which come first in the layout
  int light_ctas_ = 0;           // CTAs of the light kernel (set_up_overlap: every SM when there is no heavy bucket)
  std::int64_t light_rows_total_ = 0;
  std::array<cudaEvent_t, 8> part_events_{};  // per stage: fork, light end, heavy end (+ spare)
  bool parts_timed_ = false;
  // Planted slowdown: its own cuBLAS handle (no SM-count target, unlike handle_ in some variants) on
  // stream_, and scratch for the duplicated outputs: gate|up [rows, 2I] then down [rows, H].
  PlantedExperts planted_;
  std::vector<std::int64_t> planted_row_offset_;  // per chosen expert, into the scratch
  cublasHandle_t planted_handle_ = nullptr;
  DeviceBuffer<std::uint8_t> planted_workspace_;
  DeviceBuffer<std::uint16_t> planted_gate_up_, planted_down_;
};

// Runs `variant` on the small shape against the fp64 CPU reference: fresh random inputs and routing,
// every output poisoned first, the routing counts compared exactly, y by relative L2 error (bound
// 1e-2; bf16 operands). With `graph`, checks the graph replay as well. nullopt when right.
// `options` sets the bucket granule / chunking under test (its ridge is replaced by a low one, so that
// the side stream of bucketed_streams gets work on the small shape).
// `tokens` 96 puts experts of <= 12 rows on the overlap variant's light kernel (both paths get work);
// the token counts of kLightCheckTokens put experts of up to 64 / 96 / 128 / kLightMaxRows rows on it,
// so that every tile height of every light-kernel form the GPU runs is exercised (light_gemm.cu).
inline constexpr std::array<int, 4> kLightCheckTokens = {256, 512, 768, 1024};
std::optional<std::string> check_variant(Variant variant, const ExpertWeights& small_weights, Routing routing,
                                         std::uint64_t seed, bool graph, FfnOptions options = {}, int tokens = 96);

}  // namespace perfgate::expert_gemm
