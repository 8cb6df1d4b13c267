#include "perfgate/expert_gemm/moe_runner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "perfgate/bench/check.hpp"
#include "perfgate/bench/cuda.hpp"
#include "perfgate/bench/nvtx.hpp"
#include "perfgate/expert_gemm/light_gemm.hpp"
#include "perfgate/expert_gemm/moe_kernels.hpp"

namespace perfgate::expert_gemm {

using perfgate::bench::CudaError;
using perfgate::bench::NvtxRange;

#define EG_CUBLAS(expr) ::perfgate::expert_gemm::check_cublas((expr), #expr)

const char* variant_name(Variant variant) {
  switch (variant) {
    case Variant::per_expert: return "per_expert";
    case Variant::grouped: return "grouped";
    case Variant::strided_batched: return "strided_batched";
    case Variant::bucketed: return "bucketed";
    case Variant::bucketed_streams: return "bucketed_streams";
    case Variant::overlap: return "overlap";
    case Variant::overlap_tma: return "overlap_tma";
  }
  return "?";
}

const std::vector<Variant>& all_variants() {
  static const std::vector<Variant> v = {Variant::per_expert, Variant::grouped,          Variant::strided_batched,
                                         Variant::bucketed,   Variant::bucketed_streams, Variant::overlap,
                                         Variant::overlap_tma};
  return v;
}

FfnOptions variant_options(Variant variant, FfnOptions options) {
  const bool tma = variant == Variant::overlap_tma;
  if (options.light_ctas == 0) options.light_ctas = tma ? 40 : 52;
  if (options.light_form == 0 && tma) options.light_form = 6;
  if (options.tail_buckets < 0) options.tail_buckets = tma ? 2 : 0;
  return options;
}

void check_cublas(cublasStatus_t status, const char* expr) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw CudaError(
        fmt::format("cuBLAS error {} ({}): {}", static_cast<int>(status), cublasGetStatusString(status), expr));
}

template <typename T>
DeviceBuffer<T>::DeviceBuffer(std::size_t count) : count_(count) {
  if (count > 0) {
    void* p = nullptr;
    PERFGATE_CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
    data_ = static_cast<T*>(p);
  }
}

template <typename T>
DeviceBuffer<T>::~DeviceBuffer() {
  if (data_) cudaFree(const_cast<void*>(static_cast<const void*>(data_)));
}

template <typename T>
DeviceBuffer<T>& DeviceBuffer<T>::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(const_cast<void*>(static_cast<const void*>(data_)));
    data_ = other.data_;
    count_ = other.count_;
    other.data_ = nullptr;
    other.count_ = 0;
  }
  return *this;
}

template class DeviceBuffer<std::uint8_t>;
template class DeviceBuffer<std::uint16_t>;
template class DeviceBuffer<int>;
template class DeviceBuffer<float>;
template class DeviceBuffer<const void*>;
template class DeviceBuffer<void*>;

template <typename T>
DeviceBuffer<T> to_device(std::span<const T> host) {
  DeviceBuffer<T> d(host.size());
  if (!host.empty()) PERFGATE_CUDA_CHECK(cudaMemcpy(d.get(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
  return d;
}
template DeviceBuffer<int> to_device(std::span<const int>);
template DeviceBuffer<float> to_device(std::span<const float>);
template DeviceBuffer<std::uint16_t> to_device(std::span<const std::uint16_t>);
template DeviceBuffer<void*> to_device(std::span<void* const>);

namespace {

// The planted host sync (FfnOptions::host_sync_us): wait for the stream, then keep the host busy.
void host_sync_gap(cudaStream_t stream, int us) {
  PERFGATE_CUDA_CHECK(cudaStreamSynchronize(stream));
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {}
}

template <typename T>
void upload(DeviceBuffer<T>& dst, std::span<const T> src) {
  dst = to_device(src);
}

template <typename T>
std::vector<T> download(const T* src, std::size_t count) {
  std::vector<T> out(count);
  if (count > 0) PERFGATE_CUDA_CHECK(cudaMemcpy(out.data(), src, count * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

constexpr std::uint16_t kBf16NaN = 0x7FC0;
constexpr std::size_t kWorkspaceBytes = 32u << 20;

// The heavy experts' regions first, then the light ones', so that the rows the activation kernel still covers
// when the light kernel applies SwiGLU itself are one range from row 0, `heavy_rows` long.
struct HeavyFirstLayout {
  RowLayout layout;
  std::int64_t heavy_rows = 0;
};
HeavyFirstLayout heavy_first_layout(const std::vector<int>& heavy, const std::vector<Bucket>& heavy_buckets,
                                    const std::vector<int>& light, const std::vector<Bucket>& light_buckets) {
  HeavyFirstLayout out{bucket_layout(heavy, heavy_buckets), 0};
  const RowLayout light_layout = bucket_layout(light, light_buckets);
  out.heavy_rows = out.layout.total_rows;
  for (std::size_t e = 0; e < light.size(); ++e)
    if (light[e] > 0) out.layout.slot_base[e] = static_cast<int>(out.heavy_rows + light_layout.slot_base[e]);
  out.layout.total_rows += light_layout.total_rows;
  return out;
}

int sm_count() {
  int device = 0;
  int sms = 0;
  PERFGATE_CUDA_CHECK(cudaGetDevice(&device));
  PERFGATE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

}  // namespace

ExpertWeights::ExpertWeights(const Shape& shape, std::uint64_t seed)
    : shape_(shape),
      seed_(seed),
      gate_up_(static_cast<std::size_t>(shape.experts) * 2 * shape.intermediate * shape.hidden),
      down_(static_cast<std::size_t>(shape.experts) * shape.hidden * shape.intermediate) {
  launch_fill_random_bf16(gate_up_.get(), gate_up_.size(), seed, 1.0f / std::sqrt(static_cast<float>(shape.hidden)),
                          nullptr);
  launch_fill_random_bf16(down_.get(), down_.size(), seed + 1, 1.0f / std::sqrt(static_cast<float>(shape.intermediate)),
                          nullptr);
  PERFGATE_CUDA_CHECK(cudaDeviceSynchronize());
}

std::vector<std::uint16_t> ExpertWeights::gate_up_host() const { return download(gate_up_.get(), gate_up_.size()); }
std::vector<std::uint16_t> ExpertWeights::down_host() const { return download(down_.get(), down_.size()); }

MoeFfn::MoeFfn(const ExpertWeights& weights, int tokens, Variant variant, std::span<const float> logits,
               const RoutingResult& plan, const FfnOptions& options)
    : weights_(weights),
      shape_(weights.shape()),
      tokens_(tokens),
      variant_(variant),
      options_(variant_options(variant, options)),
      plan_(plan) {
  if (shape_.top_k > kMaxTopK) throw std::invalid_argument("top_k above kMaxTopK");
  if (shape_.hidden % 8 != 0 || shape_.intermediate % 8 != 0)
    throw std::invalid_argument("hidden and intermediate must be multiples of 8");
  if (logits.size() != static_cast<std::size_t>(tokens) * shape_.experts) throw std::invalid_argument("logits size");

  for (int e = 0; e < shape_.experts; ++e)
    if (row_count(e) > 0) active_.push_back(e);
  plan_layout();
  create_stream_and_handle();
  allocate_buffers(logits);
  if (variant_ == Variant::grouped) build_grouped_tables();
  if (variant_ == Variant::bucketed || variant_ == Variant::bucketed_streams || is_overlap(variant_))
    build_bucket_tables();
  if (variant_ == Variant::bucketed_streams) set_up_bucketed_streams();
  if (is_overlap(variant_)) set_up_overlap();
  if (options_.planted_fraction > 0.0) set_up_planted();
  clear_scratch();
  PERFGATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

// Where each expert's rows go in the permuted buffers, by the variant's method.
void MoeFfn::plan_layout() {
  switch (variant_) {
    case Variant::per_expert:
    case Variant::grouped:
      layout_ = compact_layout(plan_.counts);
      compact_ = true;
      break;
    case Variant::strided_batched:
      pad_rows_ = std::max(1, routing_stats(plan_.counts).max_rows);
      layout_ = padded_layout(plan_.counts, pad_rows_);
      compact_ = false;
      break;
    case Variant::bucketed:
    case Variant::bucketed_streams:
      buckets_ = plan_buckets(plan_.counts, BucketOptions{options_.granule, options_.chunk_rows});
      layout_ = bucket_layout(plan_.counts, buckets_);
      compact_ = false;
      break;
    case Variant::overlap:
    case Variant::overlap_tma: plan_overlap_layout(); break;
  }
  layout_rows_ = std::max<std::int64_t>(layout_.total_rows, 1);
}

// overlap: light experts (<= light_rows) go to the hand-written kernel, whole; the rest are bucketed for
// cuBLAS as in `bucketed`. The layout gives light experts their rows padded to 16.
void MoeFfn::plan_overlap_layout() {
  const int light_max = std::clamp(options_.light_rows, 0, kLightMaxRows);
  std::vector<int> heavy = plan_.counts;
  std::vector<int> light(plan_.counts.size(), 0);
  for (std::size_t e = 0; e < heavy.size(); ++e) {
    if (heavy[e] > 0 && heavy[e] <= light_max) {
      light[e] = heavy[e];
      heavy[e] = 0;
    }
  }
  buckets_ = plan_buckets(heavy, BucketOptions{options_.granule, options_.chunk_rows});
  const std::vector<Bucket> light_buckets = plan_buckets(light, BucketOptions{16, 0});
  if (options_.light_swiglu) {
    HeavyFirstLayout heavy_first = heavy_first_layout(heavy, buckets_, light, light_buckets);
    layout_ = std::move(heavy_first.layout);
    heavy_rows_ = heavy_first.heavy_rows;
  } else {
    std::vector<Bucket> all = buckets_;
    all.insert(all.end(), light_buckets.begin(), light_buckets.end());
    layout_ = bucket_layout(plan_.counts, all);
  }
  compact_ = false;
  std::vector<int> order;
  for (int e = 0; e < shape_.experts; ++e)
    if (light[static_cast<std::size_t>(e)] > 0) order.push_back(e);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return light[static_cast<std::size_t>(a)] > light[static_cast<std::size_t>(b)];
  });
  for (int e : order) {
    const int rows = light[static_cast<std::size_t>(e)];
    light_items_host_.insert(light_items_host_.end(), {e, layout_.slot_base[static_cast<std::size_t>(e)], rows, 0});
    light_max_rows_ = std::max(light_max_rows_, rows);
    light_rows_total_ += rows;
  }
  fused_swiglu_ =
      options_.light_swiglu && !order.empty() && light_gemm_fuses_swiglu(light_max_rows_, options_.light_form);
}

void MoeFfn::create_stream_and_handle() {
  PERFGATE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  for (auto& ev : events_) PERFGATE_CUDA_CHECK(cudaEventCreate(&ev));
  EG_CUBLAS(cublasCreate(&handle_));
  workspace_ = DeviceBuffer<std::uint8_t>(kWorkspaceBytes);
  EG_CUBLAS(cublasSetWorkspace(handle_, workspace_.get(), workspace_.bytes()));
  EG_CUBLAS(cublasSetStream(handle_, stream_));
}

void MoeFfn::allocate_buffers(std::span<const float> logits) {
  const int h = shape_.hidden;
  const int inter = shape_.intermediate;
  const auto tokens = static_cast<std::size_t>(tokens_);
  const auto k = static_cast<std::size_t>(shape_.top_k);
  const auto experts = static_cast<std::size_t>(shape_.experts);
  const auto rows = static_cast<std::size_t>(layout_rows_);
  upload(logits_, logits);
  x_ = DeviceBuffer<std::uint16_t>(tokens * h);
  y_ = DeviceBuffer<std::uint16_t>(tokens * h);
  x_perm_ = DeviceBuffer<std::uint16_t>(rows * h);
  gate_up_out_ = DeviceBuffer<std::uint16_t>(rows * 2 * inter);
  act_ = DeviceBuffer<std::uint16_t>(rows * inter);
  expert_out_ = DeviceBuffer<std::uint16_t>(rows * h);
  topk_expert_ = DeviceBuffer<int>(tokens * k);
  topk_weight_ = DeviceBuffer<float>(tokens * k);
  slot_of_ = DeviceBuffer<int>(tokens * k);
  counts_ = DeviceBuffer<int>(experts);
  offsets_ = DeviceBuffer<int>(experts);
  cursor_ = DeviceBuffer<int>(experts);
  upload(layout_base_, std::span<const int>(layout_.slot_base));
}

// grouped: one group per active expert, two GEMMs (gate, up) in the first phase and one (down) in the second.
void MoeFfn::build_grouped_tables() {
  const int h = shape_.hidden;
  const int inter = shape_.intermediate;
  HostTables t;
  for (int e : active_) {
    const std::size_t b = first_row(e);
    const int n = row_count(e);
    t.gu_a.push_back(weights_.gate_up(e));                                        // gate
    t.gu_a.push_back(weights_.gate_up(e) + static_cast<std::size_t>(inter) * h);  // up
    t.gu_b.push_back(x_perm_.get() + b * h);
    t.gu_b.push_back(x_perm_.get() + b * h);
    t.gu_c.push_back(gate_up_out_.get() + b * 2 * inter);
    t.gu_c.push_back(gate_up_out_.get() + b * 2 * inter + inter);
    t.dn_a.push_back(weights_.down(e));
    t.dn_b.push_back(act_.get() + b * inter);
    t.dn_c.push_back(expert_out_.get() + b * h);
    group_n_.push_back(n);
    group_m_gu_.push_back(inter);
    group_k_gu_.push_back(h);
    group_lda_gu_.push_back(h);
    group_ldc_gu_.push_back(2 * inter);
    group_size_gu_.push_back(2);
    group_m_dn_.push_back(h);
    group_k_dn_.push_back(inter);
    group_lda_dn_.push_back(inter);
    group_ldc_dn_.push_back(h);
    group_size_dn_.push_back(1);
  }
  group_ta_.assign(active_.size(), CUBLAS_OP_T);
  group_tb_.assign(active_.size(), CUBLAS_OP_N);
  group_alpha_.assign(active_.size(), 1.0f);
  group_beta_.assign(active_.size(), 0.0f);
  upload_tables(t);
}

// bucketed, bucketed_streams, overlap: one table entry per expert (or piece) of every bucket, in bucket order.
void MoeFfn::build_bucket_tables() {
  const int h = shape_.hidden;
  const int inter = shape_.intermediate;
  HostTables t;
  for (const Bucket& bucket : buckets_) {
    bucket_first_.push_back(static_cast<int>(t.gu_a.size()));
    for (std::size_t i = 0; i < bucket.experts.size(); ++i) {
      const int e = bucket.experts[i];
      const std::size_t b = first_row(e) + static_cast<std::size_t>(bucket.row_offset[i]);
      t.gu_a.push_back(weights_.gate_up(e));  // merged gate+up: one [2I, H] matrix
      t.gu_b.push_back(x_perm_.get() + b * h);
      t.gu_c.push_back(gate_up_out_.get() + b * 2 * inter);
      t.dn_a.push_back(weights_.down(e));
      t.dn_b.push_back(act_.get() + b * inter);
      t.dn_c.push_back(expert_out_.get() + b * h);
    }
  }
  upload_tables(t);
}

// bucketed_streams: compute-bound buckets (padded rows above the ridge) run on a side stream with `heavy_sms`
// SMs while the memory-bound ones stream weights on the rest. Cost model for the split: the heavy part scales
// with its SMs; the light part is bandwidth-bound and saturates HBM with about half the SMs.
int MoeFfn::choose_heavy_sms(int sms) const {
  const int h = shape_.hidden;
  const int inter = shape_.intermediate;
  double heavy_flops = 0;
  double light_bytes = 0;
  for (const Bucket& bucket : buckets_) {
    const double per_expert_flops = 2.0 * bucket.pad_rows * (3.0 * inter) * h;
    const double per_expert_bytes = 2.0 * 3.0 * inter * h;
    if (bucket.pad_rows > options_.ridge_rows) {
      heavy_flops += per_expert_flops * static_cast<double>(bucket.experts.size());
    } else {
      light_bytes += per_expert_bytes * static_cast<double>(bucket.experts.size());
    }
  }
  // Nothing to overlap, or asked for no SM split: no SM targets (the two streams still run concurrently).
  if (options_.heavy_sms < 0 || heavy_flops == 0.0 || light_bytes == 0.0) return 0;
  if (options_.heavy_sms > 0) return std::clamp(options_.heavy_sms, 1, sms - 1);
  // Relative units are enough: compute time ~ flops / ridge, memory time ~ bytes.
  const double th = heavy_flops / std::max(options_.ridge_rows, 1.0);
  const double tl = light_bytes;
  double best = INFINITY;
  int chosen = sms / 2;
  for (int s = 8; s <= sms - 8; ++s) {
    const double heavy_t = th * sms / s;
    const double light_t = tl * std::max(1.0, (sms / 2.0) / (sms - s));
    const double t = std::max(heavy_t, light_t);
    if (t < best) {
      best = t;
      chosen = s;
    }
  }
  return chosen > 0 ? std::clamp(chosen, 1, sms - 1) : 0;
}

void MoeFfn::create_side_stream() {
  PERFGATE_CUDA_CHECK(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking));
  PERFGATE_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  PERFGATE_CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
}

void MoeFfn::set_up_bucketed_streams() {
  const int sms = sm_count();
  heavy_sms_ = choose_heavy_sms(sms);
  create_side_stream();
  EG_CUBLAS(cublasCreate(&side_handle_));
  side_workspace_ = DeviceBuffer<std::uint8_t>(kWorkspaceBytes);
  EG_CUBLAS(cublasSetWorkspace(side_handle_, side_workspace_.get(), side_workspace_.bytes()));
  EG_CUBLAS(cublasSetStream(side_handle_, side_stream_));
  if (heavy_sms_ > 0) {
    EG_CUBLAS(cublasSetSmCountTarget(side_handle_, heavy_sms_));
    EG_CUBLAS(cublasSetSmCountTarget(handle_, sms - heavy_sms_));
  }
}

void MoeFfn::set_up_overlap() {
  upload(light_items_, std::span<const int>(light_items_host_));
  const int sms = sm_count();
  const int light_ctas = std::clamp(options_.light_ctas, 1, sms);
  light_ctas_ = buckets_.empty() ? sms : light_ctas;
  // cuBLAS is told how many SMs the light kernel leaves it, unless asked otherwise.
  heavy_sms_ = options_.heavy_sms < 0   ? 0
               : options_.heavy_sms > 0 ? std::min(options_.heavy_sms, sms)
                                        : std::max(1, sms - light_ctas);
  if (light_items_host_.empty() || buckets_.empty() || options_.overlap_serial) heavy_sms_ = 0;
  if (heavy_sms_ > 0) EG_CUBLAS(cublasSetSmCountTarget(handle_, heavy_sms_));
  create_side_stream();
  for (auto& ev : part_events_) PERFGATE_CUDA_CHECK(cudaEventCreate(&ev));
  // Once, not per pass: the form choice and form 6's tensor maps depend only on these fixed operands.
  light_gemm_ = {LightGemm(light_gemm_args(false)), LightGemm(light_gemm_args(true))};
}

// The planted slowdown: scratch for the duplicated GEMMs of the chosen experts, and a handle of their own.
void MoeFfn::set_up_planted() {
  planted_ = choose_planted_experts(plan_.counts, options_.planted_fraction);
  std::int64_t offset = 0;
  for (int e : planted_.experts) {
    planted_row_offset_.push_back(offset);
    offset += row_count(e);
  }
  const auto planted_rows = static_cast<std::size_t>(std::max<std::int64_t>(offset, 1));
  planted_gate_up_ = DeviceBuffer<std::uint16_t>(planted_rows * 2 * shape_.intermediate);
  planted_down_ = DeviceBuffer<std::uint16_t>(planted_rows * shape_.hidden);
  EG_CUBLAS(cublasCreate(&planted_handle_));
  planted_workspace_ = DeviceBuffer<std::uint8_t>(kWorkspaceBytes);
  EG_CUBLAS(cublasSetWorkspace(planted_handle_, planted_workspace_.get(), planted_workspace_.bytes()));
  EG_CUBLAS(cublasSetStream(planted_handle_, stream_));
}

MoeFfn::~MoeFfn() {
  if (stream_) cudaStreamSynchronize(stream_);
  if (side_stream_) cudaStreamSynchronize(side_stream_);
  if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
  if (graph_) cudaGraphDestroy(graph_);
  if (handle_) cublasDestroy(handle_);
  if (side_handle_) cublasDestroy(side_handle_);
  if (planted_handle_) cublasDestroy(planted_handle_);
  for (auto& ev : events_)
    if (ev) cudaEventDestroy(ev);
  for (auto& ev : part_events_)
    if (ev) cudaEventDestroy(ev);
  if (fork_) cudaEventDestroy(fork_);
  if (join_) cudaEventDestroy(join_);
  if (side_stream_) cudaStreamDestroy(side_stream_);
  if (stream_) cudaStreamDestroy(stream_);
}

void MoeFfn::fill_random_input(std::uint64_t seed) {
  launch_fill_random_bf16(x_.get(), x_.size(), seed, 1.0f, stream_);
  PERFGATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void MoeFfn::poison() {
  for (auto* buf : {&x_perm_, &gate_up_out_, &act_, &expert_out_, &y_, &planted_gate_up_, &planted_down_})
    if (buf->size() > 0) launch_fill_bf16(buf->get(), buf->size(), kBf16NaN, stream_);
  PERFGATE_CUDA_CHECK(cudaMemsetAsync(topk_expert_.get(), 0xFF, topk_expert_.bytes(), stream_));
  PERFGATE_CUDA_CHECK(cudaMemsetAsync(slot_of_.get(), 0xFF, slot_of_.bytes(), stream_));
  PERFGATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void MoeFfn::clear_scratch() {
  for (auto* buf : {&x_perm_, &gate_up_out_, &act_, &expert_out_, &y_})
    PERFGATE_CUDA_CHECK(cudaMemsetAsync(buf->get(), 0, buf->bytes(), stream_));
  PERFGATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void MoeFfn::record(int index, bool capturing) {
  cudaEvent_t ev = events_[static_cast<std::size_t>(index)];
  if (capturing) {
    PERFGATE_CUDA_CHECK(cudaEventRecordWithFlags(ev, stream_, cudaEventRecordExternal));
  } else {
    PERFGATE_CUDA_CHECK(cudaEventRecord(ev, stream_));
  }
}

void MoeFfn::gemm(cublasHandle_t handle, int m, int n, int k, const std::uint16_t* a, int lda, const std::uint16_t* b,
                  int ldb, std::uint16_t* c, int ldc) {
  // Row-major C[n, m] = B[n, k] * A[m, k]^T, i.e. column-major C(m x n) = A^T(m x k) * B(k x n).
  const float alpha = 1.0f;
  const float beta = 0.0f;
  EG_CUBLAS(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb,
                         &beta, c, CUDA_R_16BF, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  ++gemm_launches_;
}

void MoeFfn::strided_gemm(int m, int k, const std::uint16_t* a, std::size_t stride_a, const std::uint16_t* b,
                          std::uint16_t* c, int ldc) {
  const float alpha = 1.0f;
  const float beta = 0.0f;
  EG_CUBLAS(cublasGemmStridedBatchedEx(
      handle_, CUBLAS_OP_T, CUBLAS_OP_N, m, pad_rows_, k, &alpha, a, CUDA_R_16BF, k, static_cast<long long>(stride_a),
      b, CUDA_R_16BF, k, static_cast<long long>(pad_rows_) * k, &beta, c, CUDA_R_16BF, ldc,
      static_cast<long long>(pad_rows_) * ldc, shape_.experts, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  ++gemm_launches_;
}

void MoeFfn::upload_tables(const HostTables& t) {
  upload(gu_a_, std::span<const void* const>(t.gu_a));
  upload(gu_b_, std::span<const void* const>(t.gu_b));
  upload(gu_c_, std::span<void* const>(t.gu_c));
  upload(dn_a_, std::span<const void* const>(t.dn_a));
  upload(dn_b_, std::span<const void* const>(t.dn_b));
  upload(dn_c_, std::span<void* const>(t.dn_c));
}

void MoeFfn::fork_side_stream() {
  PERFGATE_CUDA_CHECK(cudaEventRecord(fork_, stream_));
  PERFGATE_CUDA_CHECK(cudaStreamWaitEvent(side_stream_, fork_, 0));
}

void MoeFfn::join_side_stream() {
  PERFGATE_CUDA_CHECK(cudaEventRecord(join_, side_stream_));
  PERFGATE_CUDA_CHECK(cudaStreamWaitEvent(stream_, join_, 0));
}

MoeFfn::PhaseTables MoeFfn::phase_tables(bool down) {
  const int h = shape_.hidden;
  const int inter = shape_.intermediate;
  if (down) return {h, inter, dn_a_.get(), dn_b_.get(), dn_c_.get()};
  return {2 * inter, h, gu_a_.get(), gu_b_.get(), gu_c_.get()};
}

void MoeFfn::gemm_bucket(cublasHandle_t handle, std::size_t i, const PhaseTables& t) {
  const float alpha = 1.0f;
  const float beta = 0.0f;
  const Bucket& bucket = buckets_[i];
  const auto first = static_cast<std::size_t>(bucket_first_[i]);
  EG_CUBLAS(cublasGemmBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, t.m, bucket.pad_rows, t.k, &alpha, t.a + first,
                                CUDA_R_16BF, t.k, t.b + first, CUDA_R_16BF, t.k, &beta, t.c + first, CUDA_R_16BF, t.m,
                                static_cast<int>(bucket.experts.size()), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  ++gemm_launches_;
}

void MoeFfn::enqueue_buckets(const PhaseTables& t) {
  // bucketed_streams: buckets above the ridge go to the side stream, to run beside the small ones.
  const bool split = variant_ == Variant::bucketed_streams;
  if (split) fork_side_stream();
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    const bool heavy = buckets_[i].pad_rows > options_.ridge_rows;
    gemm_bucket(split && heavy ? side_handle_ : handle_, i, t);
  }
  if (split) join_side_stream();
}

void MoeFfn::enqueue_grouped(const std::vector<int>& m, const std::vector<int>& k, const std::vector<int>& ld_ab,
                             const std::vector<int>& ldc, const std::vector<int>& group_size, const PhaseTables& t) {
  if (active_.empty()) return;
  EG_CUBLAS(cublasGemmGroupedBatchedEx(handle_, group_ta_.data(), group_tb_.data(), m.data(), group_n_.data(), k.data(),
                                       group_alpha_.data(), t.a, CUDA_R_16BF, ld_ab.data(), t.b, CUDA_R_16BF,
                                       ld_ab.data(), group_beta_.data(), t.c, CUDA_R_16BF, ldc.data(),
                                       static_cast<int>(active_.size()), group_size.data(), CUBLAS_COMPUTE_32F));
  ++gemm_launches_;
}

void MoeFfn::enqueue_linear(bool down, bool capturing) {
  if (is_overlap(variant_)) {
    enqueue_overlap(down, capturing);
  } else if (down) {
    enqueue_down();
  } else {
    enqueue_gate_up();
  }
  if (!planted_.experts.empty()) enqueue_planted(down);
}

void MoeFfn::enqueue_gate_up() {
  const int h = shape_.hidden;
  const int inter = shape_.intermediate;
  switch (variant_) {
    case Variant::per_expert:
      for (int e : active_) {
        const std::size_t b = first_row(e);
        const int n = row_count(e);
        const std::uint16_t* w = weights_.gate_up(e);
        gemm(handle_, inter, n, h, w, h, x_perm_.get() + b * h, h, gate_up_out_.get() + b * 2 * inter, 2 * inter);
        gemm(handle_, inter, n, h, w + static_cast<std::size_t>(inter) * h, h, x_perm_.get() + b * h, h,
             gate_up_out_.get() + b * 2 * inter + inter, 2 * inter);
      }
      break;
    case Variant::grouped:
      enqueue_grouped(group_m_gu_, group_k_gu_, group_lda_gu_, group_ldc_gu_, group_size_gu_, phase_tables(false));
      break;
    case Variant::strided_batched:
      for (int half = 0; half < 2; ++half) {  // gate, then up
        strided_gemm(inter, h, weights_.gate_up() + static_cast<std::size_t>(half) * inter * h,
                     weights_.gate_up_elements(), x_perm_.get(),
                     gate_up_out_.get() + static_cast<std::size_t>(half) * inter, 2 * inter);
      }
      break;
    case Variant::bucketed:
    case Variant::bucketed_streams: enqueue_buckets(phase_tables(false)); break;
    case Variant::overlap:
    case Variant::overlap_tma: break;  // enqueue_overlap
  }
}

void MoeFfn::enqueue_down() {
  const int h = shape_.hidden;
  const int inter = shape_.intermediate;
  switch (variant_) {
    case Variant::per_expert:
      for (int e : active_) {
        const std::size_t b = first_row(e);
        const int n = row_count(e);
        gemm(handle_, h, n, inter, weights_.down(e), inter, act_.get() + b * inter, inter, expert_out_.get() + b * h,
             h);
      }
      break;
    case Variant::grouped:
      enqueue_grouped(group_m_dn_, group_k_dn_, group_lda_dn_, group_ldc_dn_, group_size_dn_, phase_tables(true));
      break;
    case Variant::strided_batched:
      strided_gemm(h, inter, weights_.down(), weights_.down_elements(), act_.get(), expert_out_.get(), h);
      break;
    case Variant::bucketed:
    case Variant::bucketed_streams: enqueue_buckets(phase_tables(true)); break;
    case Variant::overlap:
    case Variant::overlap_tma: break;  // enqueue_overlap
  }
}

// The light kernel's operands for one GEMM stage: gate_up reads the permuted rows, down the activation.
LightGemmArgs MoeFfn::light_gemm_args(bool down) const {
  const int h = shape_.hidden;
  const int inter = shape_.intermediate;
  LightGemmArgs args;
  args.w = down ? weights_.down() : weights_.gate_up();
  args.w_expert_stride = down ? weights_.down_elements() : weights_.gate_up_elements();
  args.experts = shape_.experts;
  args.x = down ? act_.get() : x_perm_.get();
  args.x_rows = static_cast<std::size_t>(layout_rows_);
  args.c = down ? expert_out_.get() : fused_swiglu_ ? act_.get() : gate_up_out_.get();
  args.n = down ? h : 2 * inter;
  args.k = down ? inter : h;
  args.items = reinterpret_cast<const int4*>(light_items_.get());
  args.n_items = light_experts();
  args.max_rows = light_max_rows_;
  args.ctas = light_ctas_;
  args.form = options_.light_form;
  args.swiglu = !down && fused_swiglu_;
  args.pow2_x_boxes = options_.light_pow2_x_boxes;
  return args;
}

// One GEMM stage of `overlap`: the light kernel on the side stream (launched first, so that its
// persistent CTAs take their SMs), the heavy buckets on the main stream through cuBLAS, then a join.
void MoeFfn::enqueue_overlap(bool down, bool capturing) {
  const bool timed = !capturing;
  cudaEvent_t* ev = part_events_.data() + (down ? 4 : 0);
  const bool serial = options_.overlap_serial;
  cudaStream_t light_stream = serial ? stream_ : side_stream_;
  if (timed) PERFGATE_CUDA_CHECK(cudaEventRecord(ev[0], stream_));
  if (!serial) fork_side_stream();
  if (light_experts() > 0) {
    light_gemm_[down ? 1 : 0].launch(light_stream);
    ++gemm_launches_;
  }
  if (timed) PERFGATE_CUDA_CHECK(cudaEventRecord(ev[1], light_stream));
  const PhaseTables tables = phase_tables(down);
  const std::size_t tail_from = first_tail_bucket(serial);
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    if (i == tail_from) release_sms_for_tail();
    gemm_bucket(handle_, i, tables);
  }
  if (tail_from < buckets_.size()) EG_CUBLAS(cublasSetSmCountTarget(handle_, heavy_sms_));
  if (timed) PERFGATE_CUDA_CHECK(cudaEventRecord(ev[2], stream_));
  if (!serial) join_side_stream();
  parts_timed_ = timed;
}

// The first bucket of the stage's tail (FfnOptions::tail_buckets); buckets_.size(): no tail (none asked, the parts
// serial, or no SM split to lift).
std::size_t MoeFfn::first_tail_bucket(bool serial) const {
  const auto tail = static_cast<std::size_t>(options_.tail_buckets);  // >= 0: variant_options filled the default
  if (serial || heavy_sms_ == 0 || light_experts() == 0 || tail == 0) return buckets_.size();
  return buckets_.size() - std::min(tail, buckets_.size());
}

// The tail's buckets start once the light kernel has ended, on every SM: stream_ waits for the side stream, and the
// handle's SM target is lifted for the calls that follow (enqueue_overlap sets it again after the stage).
void MoeFfn::release_sms_for_tail() {
  join_side_stream();
  EG_CUBLAS(cublasSetSmCountTarget(handle_, 0));
}

// The planted slowdown's second run of the chosen experts' GEMMs of one stage: the same operands as the
// pass's own (permuted rows, weights), results into scratch. On stream_ after the stage's own GEMMs (the
// side streams have joined it), so it lengthens the stage by its own time in every variant.
void MoeFfn::enqueue_planted(bool down) {
  const int h = shape_.hidden;
  const int inter = shape_.intermediate;
  const float alpha = 1.0f;
  const float beta = 0.0f;
  for (std::size_t i = 0; i < planted_.experts.size(); ++i) {
    const int e = planted_.experts[i];
    const int n = row_count(e);
    const std::size_t b = first_row(e);
    const auto o = static_cast<std::size_t>(planted_row_offset_[i]);
    if (down) {
      EG_CUBLAS(cublasGemmEx(planted_handle_, CUBLAS_OP_T, CUBLAS_OP_N, h, n, inter, &alpha, weights_.down(e),
                             CUDA_R_16BF, inter, act_.get() + b * inter, CUDA_R_16BF, inter, &beta,
                             planted_down_.get() + o * h, CUDA_R_16BF, h, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    } else {
      EG_CUBLAS(cublasGemmEx(planted_handle_, CUBLAS_OP_T, CUBLAS_OP_N, 2 * inter, n, h, &alpha, weights_.gate_up(e),
                             CUDA_R_16BF, h, x_perm_.get() + b * h, CUDA_R_16BF, h, &beta,
                             planted_gate_up_.get() + o * 2 * inter, CUDA_R_16BF, 2 * inter, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT));
    }
  }
}

std::optional<std::string> MoeFfn::verify_planted() {
  if (planted_.experts.empty()) return std::nullopt;
  PERFGATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const int h = shape_.hidden;
  const int inter = shape_.intermediate;
  const auto gu_all = download(gate_up_out_.get(), gate_up_out_.size());
  const auto dn_all = download(expert_out_.get(), expert_out_.size());
  const auto gu_dup = download(planted_gate_up_.get(), planted_gate_up_.size());
  const auto dn_dup = download(planted_down_.get(), planted_down_.size());
  // The pass's rows of the chosen experts, in the scratch's order, against the duplicates.
  std::vector<float> dup_gu, dup_dn;
  std::vector<double> own_gu, own_dn;
  for (std::size_t i = 0; i < planted_.experts.size(); ++i) {
    const int e = planted_.experts[i];
    const auto n = static_cast<std::size_t>(row_count(e));
    const std::size_t b = first_row(e);
    const auto o = static_cast<std::size_t>(planted_row_offset_[i]);
    const std::size_t gu_w = 2 * static_cast<std::size_t>(inter);
    const std::size_t dn_w = static_cast<std::size_t>(h);
    // With SwiGLU in the light kernel's epilogue, a light expert's gate|up rows go straight into the activation:
    // the pass stores none to compare with (its down duplicates still check the activation).
    const bool gate_up_stored = b < static_cast<std::size_t>(gate_up_rows_stored());
    for (std::size_t j = 0; gate_up_stored && j < n * gu_w; ++j) {
      dup_gu.push_back(bf16_to_float(gu_dup[o * gu_w + j]));
      own_gu.push_back(bf16_to_float(gu_all[b * gu_w + j]));
    }
    for (std::size_t j = 0; j < n * dn_w; ++j) {
      dup_dn.push_back(bf16_to_float(dn_dup[o * dn_w + j]));
      own_dn.push_back(bf16_to_float(dn_all[b * dn_w + j]));
    }
  }
  if (auto err =
          perfgate::bench::check_relative_l2("planted gate|up duplicates vs the pass's own rows",
                                             std::span<const float>(dup_gu), std::span<const double>(own_gu), 1e-2))
    return err;
  return perfgate::bench::check_relative_l2("planted down duplicates vs the pass's own rows",
                                            std::span<const float>(dup_dn), std::span<const double>(own_dn), 1e-2);
}

std::array<float, 4> MoeFfn::overlap_parts_ms() {
  std::array<float, 4> out{-1.0f, -1.0f, -1.0f, -1.0f};
  if (!is_overlap(variant_) || !parts_timed_) return out;
  PERFGATE_CUDA_CHECK(cudaEventSynchronize(events_[kStageCount]));
  for (int stage = 0; stage < 2; ++stage) {
    cudaEvent_t* ev = part_events_.data() + stage * 4;
    PERFGATE_CUDA_CHECK(cudaEventElapsedTime(&out[static_cast<std::size_t>(stage) * 2], ev[0], ev[1]));
    // Heavy part: from the fork (serial: from the end of the light kernel) to the last cuBLAS call.
    PERFGATE_CUDA_CHECK(cudaEventElapsedTime(&out[static_cast<std::size_t>(stage) * 2 + 1],
                                             options_.overlap_serial ? ev[1] : ev[0], ev[2]));
  }
  return out;
}

void MoeFfn::enqueue(bool capturing) {
  const int h = shape_.hidden;
  const int inter = shape_.intermediate;
  const int k = shape_.top_k;
  gemm_launches_ = 0;
  record(0, capturing);
  {
    NvtxRange range("Routing");
    PERFGATE_CUDA_CHECK(cudaMemsetAsync(counts_.get(), 0, counts_.bytes(), stream_));
    PERFGATE_CUDA_CHECK(cudaMemsetAsync(cursor_.get(), 0, cursor_.bytes(), stream_));
    launch_topk(logits_.get(), tokens_, shape_.experts, k, topk_expert_.get(), topk_weight_.get(), counts_.get(),
                stream_);
    launch_scan(counts_.get(), shape_.experts, offsets_.get(), stream_);
  }
  record(1, capturing);
  {
    NvtxRange range("Permute");
    launch_permute(x_.get(), tokens_, h, k, topk_expert_.get(), compact_ ? offsets_.get() : layout_base_.get(),
                   cursor_.get(), slot_of_.get(), x_perm_.get(), stream_);
  }
  record(2, capturing);
  {
    NvtxRange range("Linear1_Computation");
    enqueue_linear(false, capturing);
  }
  if (options_.host_sync_us > 0 && !capturing) host_sync_gap(stream_, options_.host_sync_us);
  record(3, capturing);
  {
    NvtxRange range("Activation");
    // With the light kernel's SwiGLU epilogue, only the heavy experts' rows (the layout's first) are left.
    const std::int64_t rows = gate_up_rows_stored();
    if (rows > 0) launch_swiglu(gate_up_out_.get(), rows, inter, act_.get(), stream_);
  }
  record(4, capturing);
  {
    NvtxRange range("Linear2_Computation");
    enqueue_linear(true, capturing);
  }
  record(5, capturing);
  {
    NvtxRange range("Combine");
    launch_combine(expert_out_.get(), tokens_, h, k, slot_of_.get(), topk_weight_.get(), y_.get(), stream_);
  }
  record(6, capturing);
}

void MoeFfn::run() {
  NvtxRange range("Expert_Forward");
  if (graph_exec_) {
    PERFGATE_CUDA_CHECK(cudaGraphLaunch(graph_exec_, stream_));
  } else {
    enqueue(false);
  }
}

bool MoeFfn::capture_graph() {
  if (graph_exec_) return true;
  PERFGATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  PERFGATE_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  bool ok = true;
  try {
    enqueue(true);
  } catch (const std::exception&) { ok = false; }
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (!ok || end != cudaSuccess || graph == nullptr) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    return false;
  }
  if (cudaGraphInstantiate(&graph_exec_, graph, 0) != cudaSuccess) {
    cudaGraphDestroy(graph);
    graph_exec_ = nullptr;
    cudaGetLastError();
    return false;
  }
  graph_ = graph;
  PERFGATE_CUDA_CHECK(cudaGraphUpload(graph_exec_, stream_));
  PERFGATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return true;
}

std::array<float, kStageCount> MoeFfn::stage_ms() {
  PERFGATE_CUDA_CHECK(cudaEventSynchronize(events_[kStageCount]));
  std::array<float, kStageCount> out{};
  for (int i = 0; i < kStageCount; ++i) {
    PERFGATE_CUDA_CHECK(cudaEventElapsedTime(&out[static_cast<std::size_t>(i)], events_[static_cast<std::size_t>(i)],
                                             events_[static_cast<std::size_t>(i) + 1]));
  }
  return out;
}

float MoeFfn::total_ms() {
  PERFGATE_CUDA_CHECK(cudaEventSynchronize(events_[kStageCount]));
  float ms = 0.0f;
  PERFGATE_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[0], events_[kStageCount]));
  return ms;
}

std::optional<std::string> MoeFfn::verify_routing() {
  PERFGATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const auto counts = download(counts_.get(), counts_.size());
  for (std::size_t e = 0; e < counts.size(); ++e) {
    if (counts[e] != plan_.counts[e])
      return fmt::format("wrong result: device routing sent {} tokens to expert {}, the CPU routing {}", counts[e], e,
                         plan_.counts[e]);
  }
  const auto experts = download(topk_expert_.get(), topk_expert_.size());
  if (experts != plan_.expert) return std::string("wrong result: device top-k experts differ from the CPU routing");
  return std::nullopt;
}

std::vector<std::uint16_t> MoeFfn::output_host() {
  PERFGATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return download(y_.get(), y_.size());
}

std::vector<std::uint16_t> MoeFfn::input_host() {
  PERFGATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return download(x_.get(), x_.size());
}

namespace {

// The fp64 reference of one check problem. Logits, routing and input follow from (weights, routing, seed,
// tokens) alone, so every variant checked with the same seed shares one reference: a process that runs
// several variants computes it once.
const std::vector<double>& cached_reference(const ExpertWeights& weights, Routing routing, std::uint64_t seed,
                                            int tokens, MoeFfn& ffn, const RoutingResult& plan) {
  // The weights by their shape and seed, not their address: a later object may reuse a freed one's.
  static std::map<std::string, std::vector<double>> cache;
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  const Shape& s = weights.shape();
  const std::string key = fmt::format("{} {}x{}x{}x{} weights {} {} seed {} tokens {}", s.name, s.experts, s.hidden,
                                      s.intermediate, s.top_k, weights.seed(), routing_name(routing), seed, tokens);
  auto it = cache.find(key);
  if (it == cache.end()) {
    const auto x = ffn.input_host();
    it =
        cache.emplace(key, reference_ffn(weights.shape(), tokens, x, weights.gate_up_host(), weights.down_host(), plan))
            .first;
  }
  return it->second;
}

}  // namespace

std::optional<std::string> check_variant(Variant variant, const ExpertWeights& small_weights, Routing routing,
                                         std::uint64_t seed, bool graph, FfnOptions options, int tokens) {
  const Shape& shape = small_weights.shape();
  // 96 tokens over 64 experts (top-4): 6 rows per expert on average; Zipf routing gives a few dozen on
  // the popular ones, so several buckets exist, and a low ridge puts some of them on the side stream.
  const auto logits = make_router_logits(shape, tokens, routing, seed);
  const auto plan = route_cpu(shape, tokens, logits);
  options.ridge_rows = 40.0;
  options.light_rows = tokens <= 96    ? 12
                       : tokens <= 256 ? 64
                       : tokens <= 512 ? 96
                       : tokens <= 768 ? 128
                                       : kLightMaxRows;
  options.graph = false;
  MoeFfn ffn(small_weights, tokens, variant, logits, plan, options);
  ffn.fill_random_input(seed + 17);
  const std::vector<double>& ref = cached_reference(small_weights, routing, seed, tokens, ffn, plan);

  auto check_once = [&](const char* how) -> std::optional<std::string> {
    ffn.poison();
    ffn.run();
    PERFGATE_CUDA_CHECK(cudaStreamSynchronize(ffn.stream()));
    PERFGATE_CUDA_CHECK(cudaGetLastError());
    if (auto err = ffn.verify_routing()) return fmt::format("{} ({}, {})", *err, variant_name(variant), how);
    const auto y16 = ffn.output_host();
    std::vector<float> y(y16.size());
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = bf16_to_float(y16[i]);
    if (auto err = perfgate::bench::check_relative_l2(
            fmt::format("{} {} output vs fp64 CPU reference ({} routing, {})", variant_name(variant), shape.name,
                        routing_name(routing), how),
            std::span<const float>(y), std::span<const double>(ref), 1e-2))
      return err;
    if (auto err = ffn.verify_planted()) return fmt::format("{} ({}, {})", *err, variant_name(variant), how);
    return std::nullopt;
  };
  if (auto err = check_once("direct launches")) return err;
  // Where capture is not possible the benchmarks fall back to direct launches, so only a graph that
  // was captured needs checking.
  if (graph && ffn.capture_graph()) {
    if (auto err = check_once("graph replay")) return err;
  }
  return std::nullopt;
}

}  // namespace perfgate::expert_gemm
