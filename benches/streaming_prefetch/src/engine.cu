#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "perfgate/bench/cuda.hpp"
#include "perfgate/bench/nvtx.hpp"
#include "perfgate/bench/splitmix64.hpp"
#include "perfgate/streaming_prefetch/engine.hpp"

namespace perfgate::streaming_prefetch {
namespace {

using perfgate::bench::CudaError;
using perfgate::bench::NvtxRange;

void cublas_check(cublasStatus_t status, const char* expr) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw CudaError(
        fmt::format("cuBLAS error {} ({}) in {}", static_cast<int>(status), cublasGetStatusString(status), expr));
}
#define STREAMING_CUBLAS(expr) cublas_check((expr), #expr)

// ---- kernels --------------------------------------------------------------------------------------

// Grid-stride loops: this thread's first index, and the step to its next.
__device__ __forceinline__ std::size_t grid_first() {
  return blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ std::size_t grid_stride() { return static_cast<std::size_t>(gridDim.x) * blockDim.x; }

// For element i of a [tokens, width] output whose input is [tokens, parts * width] row-major (`parts`
// blocks of `width` columns side by side): the input element in the first block; block p is p * width on.
__device__ __forceinline__ const __nv_bfloat16* first_block_element(const __nv_bfloat16* in, std::size_t i,
                                                                    std::size_t width, std::size_t parts) {
  const std::size_t t = i / width;
  return in + t * parts * width + (i - t * width);
}

// Uniform in [-scale, scale), a pure function of (seed, index): the same on every run and device.
__global__ void fill_uniform(__nv_bfloat16* out, std::size_t n, std::uint64_t seed, float scale) {
  for (std::size_t i = grid_first(); i < n; i += grid_stride()) {
    const std::uint64_t r = perfgate::bench::splitmix64(seed * 0x100000001B3ull + i);
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    out[i] = __float2bfloat16((2.0f * u - 1.0f) * scale);
  }
}

// RMSNorm without a gain (LLaMA's pre-norm): out[t, :] = x[t, :] / sqrt(mean(x[t, :]^2) + eps). One block
// per token row; the block reduction runs in a fixed order, so the result is the same on every run.
__global__ void rms_norm(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ out, std::size_t hidden) {
  __shared__ float partial[256];
  const __nv_bfloat16* row = x + blockIdx.x * hidden;
  __nv_bfloat16* orow = out + blockIdx.x * hidden;
  float sum = 0.0f;
  for (std::size_t j = threadIdx.x; j < hidden; j += blockDim.x) {
    const float v = __bfloat162float(row[j]);
    sum += v * v;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const float scale = rsqrtf(partial[0] / static_cast<float>(hidden) + 1e-6f);
  for (std::size_t j = threadIdx.x; j < hidden; j += blockDim.x)
    orow[j] = __float2bfloat16(__bfloat162float(row[j]) * scale);
}

// Stand-in for the attention core (which reads no weights): out = v * sigmoid(q * k) per element.
// qkv is [tokens, 3*hidden] row-major (q | k | v), out is [tokens, hidden].
__global__ void attention_mix(const __nv_bfloat16* __restrict__ qkv, __nv_bfloat16* __restrict__ out,
                              std::size_t tokens, std::size_t hidden) {
  const std::size_t n = tokens * hidden;
  for (std::size_t i = grid_first(); i < n; i += grid_stride()) {
    const __nv_bfloat16* e = first_block_element(qkv, i, hidden, 3);
    const float q = __bfloat162float(e[0]);
    const float k = __bfloat162float(e[hidden]);
    const float v = __bfloat162float(e[2 * hidden]);
    out[i] = __float2bfloat16(v / (1.0f + __expf(-q * k)));
  }
}

// SwiGLU: act = silu(gate) * up; gu is [tokens, 2*inter] row-major (gate | up), act is [tokens, inter].
__global__ void silu_mul(const __nv_bfloat16* __restrict__ gu, __nv_bfloat16* __restrict__ act, std::size_t tokens,
                         std::size_t inter) {
  const std::size_t n = tokens * inter;
  for (std::size_t i = grid_first(); i < n; i += grid_stride()) {
    const __nv_bfloat16* e = first_block_element(gu, i, inter, 2);
    const float g = __bfloat162float(e[0]);
    const float u = __bfloat162float(e[inter]);
    act[i] = __float2bfloat16(g / (1.0f + __expf(-g)) * u);
  }
}

unsigned grid_for(std::size_t n, int sms) {
  const std::size_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(std::min<std::size_t>(blocks, static_cast<std::size_t>(sms) * 8));
}

std::size_t sz(int v) { return static_cast<std::size_t>(v); }

constexpr int kBanks = 2;  // event banks by step parity: step k+1's prefetches are recorded during step k

}  // namespace

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::resident: return "resident";
    case Mode::serial: return "serial";
    case Mode::streamed: return "streamed";
    case Mode::transfer_only: return "transfer_only";
  }
  return "?";
}

struct StreamingEngine::Impl {
  ModelShape model;
  ModelShape::Layout layout;
  std::size_t layer_elems = 0;
  std::size_t layer_bytes = 0;
  int device = 0;
  int sms = 0;

  __nv_bfloat16* host_weights = nullptr;      // pinned, layers * layer_elems
  __nv_bfloat16* resident_weights = nullptr;  // device, layers * layer_elems
  std::vector<__nv_bfloat16*> slots;          // device cache slots (pool, grows on demand)
  __nv_bfloat16* x0 = nullptr;                // input [T, h]
  __nv_bfloat16* x = nullptr;                 // hidden state [T, h]
  __nv_bfloat16* xn = nullptr;                // normalised hidden state [T, h]
  __nv_bfloat16* qkv = nullptr;               // [T, 3h]
  __nv_bfloat16* attn = nullptr;              // [T, h]
  __nv_bfloat16* gu = nullptr;                // [T, 2I]
  __nv_bfloat16* act = nullptr;               // [T, I]
  void* cublas_workspace = nullptr;
  PlantedGemms planted;                  // planted slowdown: the second GEMMs of each layer
  __nv_bfloat16* planted_out = nullptr;  // their scratch output, [T, planted_capacity]
  std::size_t planted_capacity = 0;
  std::size_t cublas_workspace_bytes = 32u << 20;

  cudaStream_t compute = nullptr;
  cudaStream_t copy = nullptr;
  cublasHandle_t cublas = nullptr;

  // Timed events, [bank][layer].
  std::array<std::vector<cudaEvent_t>, kBanks> ev_reach, ev_wait_end, ev_done, ev_copy_begin, ev_copy_end;
  std::array<std::vector<bool>, kBanks> copied;
  std::array<cudaEvent_t, kBanks> ev_step_end{};
  cudaEvent_t ev_first_begin = nullptr;
  // Ordering-only events (no timing), per slot.
  std::vector<cudaEvent_t> slot_loaded, slot_free;

  // Cache state (streamed).
  Mode mode = Mode::resident;
  StreamConfig config;
  int num_slots = 1;
  std::vector<int> slot_of_layer;  // -1 when not cached (or on its way)
  std::vector<int> layer_in_slot;  // -1 when empty
  int next_slot = 0;               // ring: the slot loaded longest ago is evicted next
  std::int64_t step_index = 0;     // steps since configure()

  ~Impl() { release(); }

  void release() {
    if (compute) cudaStreamSynchronize(compute);
    if (copy) cudaStreamSynchronize(copy);
    for (auto* bank : {&ev_reach, &ev_wait_end, &ev_done, &ev_copy_begin, &ev_copy_end})
      for (auto& v : *bank)
        for (cudaEvent_t e : v) cudaEventDestroy(e);
    for (cudaEvent_t e : ev_step_end)
      if (e) cudaEventDestroy(e);
    if (ev_first_begin) cudaEventDestroy(ev_first_begin);
    for (cudaEvent_t e : slot_loaded) cudaEventDestroy(e);
    for (cudaEvent_t e : slot_free) cudaEventDestroy(e);
    for (auto* p : slots) cudaFree(p);
    for (void* p : {static_cast<void*>(resident_weights), static_cast<void*>(x0), static_cast<void*>(x),
                    static_cast<void*>(qkv), static_cast<void*>(attn), static_cast<void*>(gu), static_cast<void*>(act),
                    cublas_workspace, static_cast<void*>(planted_out)})
      if (p) cudaFree(p);
    if (host_weights) cudaFreeHost(host_weights);
    if (cublas) cublasDestroy(cublas);
    if (compute) cudaStreamDestroy(compute);
    if (copy) cudaStreamDestroy(copy);
  }

  template <typename T>
  void dmalloc(T** p, std::size_t elems) {
    PERFGATE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(p), elems * sizeof(T)));
  }

  void init(const ModelShape& m, std::uint64_t seed, int dev) {
    validate(m);
    model = m;
    layout = m.layout();
    layer_elems = layout.elements;
    layer_bytes = layer_elems * sizeof(__nv_bfloat16);
    device = dev;
    PERFGATE_CUDA_CHECK(cudaSetDevice(device));
    PERFGATE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    create_streams_and_cublas();
    allocate_buffers();
    fill_weights_and_input(seed);
    create_step_events();
    slot_of_layer.assign(sz(model.layers), -1);
  }

  void create_streams_and_cublas() {
    PERFGATE_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    PERFGATE_CUDA_CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    STREAMING_CUBLAS(cublasCreate(&cublas));
    // cublasSetStream resets the workspace, so the stream first; an explicit workspace keeps the
    // choice of kernels (and so the bits of the result) independent of the default pool.
    STREAMING_CUBLAS(cublasSetStream(cublas, compute));
    PERFGATE_CUDA_CHECK(cudaMalloc(&cublas_workspace, cublas_workspace_bytes));
    STREAMING_CUBLAS(cublasSetWorkspace(cublas, cublas_workspace, cublas_workspace_bytes));
  }

  void allocate_buffers() {
    const std::size_t L = sz(model.layers), T = sz(model.tokens), h = sz(model.hidden), I = sz(model.intermediate);
    dmalloc(&resident_weights, L * layer_elems);
    dmalloc(&x0, T * h);
    dmalloc(&x, T * h);
    dmalloc(&xn, T * h);
    dmalloc(&qkv, T * 3 * h);
    dmalloc(&attn, T * h);
    dmalloc(&gu, T * 2 * I);
    dmalloc(&act, T * I);
    PERFGATE_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_weights), L * layer_bytes, cudaHostAllocDefault));
  }

  // Weights: uniform with variance 1/fan_in, so every sublayer adds O(1) to the residual stream (after the
  // pre-norm) and each layer's weights visibly change the output bits. The input does not depend on `seed`.
  // The host copy of the weights from the device's.
  void fill_weights_and_input(std::uint64_t seed) {
    const std::size_t L = sz(model.layers), T = sz(model.tokens), h = sz(model.hidden), I = sz(model.intermediate);
    PERFGATE_CUDA_CHECK(cudaMemsetAsync(resident_weights, 0, L * layer_bytes, compute));  // padding
    for (std::size_t l = 0; l < L; ++l) {
      __nv_bfloat16* base = resident_weights + l * layer_elems;
      struct Part {
        std::size_t off, n, fan_in;
      } parts[] = {
          {layout.qkv, 3 * h * h, h}, {layout.o, h * h, h}, {layout.gu, 2 * I * h, h}, {layout.down, h * I, I}};
      for (std::size_t p = 0; p < 4; ++p) {
        const float scale = std::sqrt(3.0f / static_cast<float>(parts[p].fan_in));
        fill_uniform<<<grid_for(parts[p].n, sms), 256, 0, compute>>>(base + parts[p].off, parts[p].n,
                                                                     seed * 1000003u + l * 4 + p + 1, scale);
      }
    }
    fill_uniform<<<grid_for(T * h, sms), 256, 0, compute>>>(x0, T * h, 7919u, 1.0f);
    PERFGATE_CUDA_CHECK(cudaGetLastError());
    PERFGATE_CUDA_CHECK(
        cudaMemcpyAsync(host_weights, resident_weights, L * layer_bytes, cudaMemcpyDeviceToHost, compute));
    PERFGATE_CUDA_CHECK(cudaStreamSynchronize(compute));
  }

  // The timed events of both banks.
  void create_step_events() {
    const std::size_t L = sz(model.layers);
    for (int b = 0; b < kBanks; ++b) {
      for (auto* bank : {&ev_reach, &ev_wait_end, &ev_done, &ev_copy_begin, &ev_copy_end}) {
        auto& v = (*bank)[b];
        v.resize(L);
        for (auto& e : v) PERFGATE_CUDA_CHECK(cudaEventCreate(&e));
      }
      copied[b].assign(L, false);
      PERFGATE_CUDA_CHECK(cudaEventCreate(&ev_step_end[b]));
    }
    PERFGATE_CUDA_CHECK(cudaEventCreate(&ev_first_begin));
  }

  void ensure_slots(int n) {
    while (static_cast<int>(slots.size()) < n) {
      __nv_bfloat16* p = nullptr;
      dmalloc(&p, layer_elems);
      slots.push_back(p);
      cudaEvent_t loaded = nullptr, freed = nullptr;
      PERFGATE_CUDA_CHECK(cudaEventCreateWithFlags(&loaded, cudaEventDisableTiming));
      PERFGATE_CUDA_CHECK(cudaEventCreateWithFlags(&freed, cudaEventDisableTiming));
      slot_loaded.push_back(loaded);
      slot_free.push_back(freed);
    }
  }

  void configure(Mode m, const StreamConfig& c) {
    if (m == Mode::streamed) validate(model, c);
    PERFGATE_CUDA_CHECK(cudaSetDevice(device));
    PERFGATE_CUDA_CHECK(cudaStreamSynchronize(compute));
    PERFGATE_CUDA_CHECK(cudaStreamSynchronize(copy));
    mode = m;
    config = c;
    num_slots = std::max(1, c.max_cached_layers);
    if (m == Mode::serial) num_slots = 1;
    if (m != Mode::resident) ensure_slots(num_slots);
    recreate_slot_events();
    std::fill(slot_of_layer.begin(), slot_of_layer.end(), -1);
    layer_in_slot.assign(sz(num_slots), -1);
    next_slot = 0;
    step_index = 0;
    for (auto& c2 : copied) std::fill(c2.begin(), c2.end(), false);
  }

  // Re-creates the slot events so that no wait refers to a record from an earlier configuration.
  void recreate_slot_events() {
    for (std::size_t s = 0; s < slot_loaded.size(); ++s) {
      PERFGATE_CUDA_CHECK(cudaEventDestroy(slot_loaded[s]));
      PERFGATE_CUDA_CHECK(cudaEventDestroy(slot_free[s]));
      PERFGATE_CUDA_CHECK(cudaEventCreateWithFlags(&slot_loaded[s], cudaEventDisableTiming));
      PERFGATE_CUDA_CHECK(cudaEventCreateWithFlags(&slot_free[s], cudaEventDisableTiming));
    }
  }

  // y[T, N] = x[T, K] * W[N, K]^T (+ y when accumulate): column-major y^T = W^T(op T of a [K,N] view) * x^T.
  void gemm(const __nv_bfloat16* w, const __nv_bfloat16* in, __nv_bfloat16* out, std::size_t n, std::size_t k,
            bool accumulate) {
    const float alpha = 1.0f;
    const float beta = accumulate ? 1.0f : 0.0f;
    STREAMING_CUBLAS(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), model.tokens,
                                  static_cast<int>(k), &alpha, w, CUDA_R_16BF, static_cast<int>(k), in, CUDA_R_16BF,
                                  static_cast<int>(k), &beta, out, CUDA_R_16BF, static_cast<int>(n), CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
  }

  void compute_layer(int l, const __nv_bfloat16* w) {
    const std::size_t T = sz(model.tokens), h = sz(model.hidden), I = sz(model.intermediate);
    char name[64];
    {
      std::snprintf(name, sizeof(name), "layer_%d_attention", l);
      NvtxRange range(name);
      rms_norm<<<static_cast<unsigned>(T), 256, 0, compute>>>(x, xn, h);
      gemm(w + layout.qkv, xn, qkv, 3 * h, h, false);
      attention_mix<<<grid_for(T * h, sms), 256, 0, compute>>>(qkv, attn, T, h);
      PERFGATE_CUDA_CHECK(cudaGetLastError());
      gemm(w + layout.o, attn, x, h, h, true);  // residual: x += attn Wo^T
    }
    {
      std::snprintf(name, sizeof(name), "layer_%d_ffn", l);
      NvtxRange range(name);
      rms_norm<<<static_cast<unsigned>(T), 256, 0, compute>>>(x, xn, h);
      gemm(w + layout.gu, xn, gu, 2 * I, h, false);
      silu_mul<<<grid_for(T * I, sms), 256, 0, compute>>>(gu, act, T, I);
      PERFGATE_CUDA_CHECK(cudaGetLastError());
      gemm(w + layout.down, act, x, h, I, true);  // residual: x += act Wd^T
    }
    if (planted.any()) {
      // The same kind of work again on the layer's own weights and activations, into scratch.
      std::snprintf(name, sizeof(name), "layer_%d_planted", l);
      NvtxRange range(name);
      if (planted.qkv) gemm(w + layout.qkv, xn, planted_out, planted.qkv, h, false);
      if (planted.o) gemm(w + layout.o, attn, planted_out, planted.o, h, false);
      if (planted.gu) gemm(w + layout.gu, xn, planted_out, planted.gu, h, false);
      if (planted.down) gemm(w + layout.down, act, planted_out, planted.down, I, false);
    }
  }

  PlantedGemms set_planted(double fraction) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(device));
    PERFGATE_CUDA_CHECK(cudaStreamSynchronize(compute));
    const PlantedGemms p = plan_planted_gemms(model, fraction);
    const std::size_t width = p.widest();
    if (width > planted_capacity) {
      if (planted_out) PERFGATE_CUDA_CHECK(cudaFree(planted_out));
      planted_out = nullptr;
      dmalloc(&planted_out, sz(model.tokens) * width);
      planted_capacity = width;
    }
    planted = p;
    return p;
  }

  const __nv_bfloat16* host_layer(int l) const { return host_weights + sz(l) * layer_elems; }

  // Issues the H2D copy of global sequence position g (layer g % L) into the ring's next slot. The copy
  // stream first waits for `gate` (the compute stream reaching the layer that the prefetch distance ties
  // this copy to) and for the slot's previous occupant to finish computing.
  void issue_transfer(std::int64_t g, cudaEvent_t gate) {
    const int L = model.layers;
    const int l = static_cast<int>(g % L);
    const int b = static_cast<int>((g / L) % kBanks);
    char name[64];
    std::snprintf(name, sizeof(name), "h2d_transfer_layer_%d", l);
    NvtxRange range(name);
    const int s = next_slot;
    next_slot = (next_slot + 1) % num_slots;
    if (layer_in_slot[sz(s)] >= 0) slot_of_layer[sz(layer_in_slot[sz(s)])] = -1;  // evict
    PERFGATE_CUDA_CHECK(cudaStreamWaitEvent(copy, gate, 0));
    PERFGATE_CUDA_CHECK(cudaStreamWaitEvent(copy, slot_free[sz(s)], 0));
    PERFGATE_CUDA_CHECK(cudaEventRecord(ev_copy_begin[b][sz(l)], copy));
    PERFGATE_CUDA_CHECK(cudaMemcpyAsync(slots[sz(s)], host_layer(l), layer_bytes, cudaMemcpyHostToDevice, copy));
    PERFGATE_CUDA_CHECK(cudaEventRecord(ev_copy_end[b][sz(l)], copy));
    PERFGATE_CUDA_CHECK(cudaEventRecord(slot_loaded[sz(s)], copy));
    copied[b][sz(l)] = true;
    slot_of_layer[sz(l)] = s;
    layer_in_slot[sz(s)] = l;
  }

  void streamed_layer(std::int64_t g, StepStats& st) {
    const int L = model.layers;
    const int l = static_cast<int>(g % L);
    const int b = static_cast<int>((g / L) % kBanks);
    char name[64];
    cudaEvent_t reach = ev_reach[b][sz(l)];
    {
      std::snprintf(name, sizeof(name), "ensure_layer_%d", l);
      NvtxRange range(name);
      PERFGATE_CUDA_CHECK(cudaEventRecord(reach, compute));
      ++st.ensures;
      if (slot_of_layer[sz(l)] >= 0) {
        ++st.hits;
      } else {
        issue_transfer(g, reach);  // a miss: fetched on demand, the compute stream waits for all of it
      }
      PERFGATE_CUDA_CHECK(cudaStreamWaitEvent(compute, slot_loaded[sz(slot_of_layer[sz(l)])], 0));
      PERFGATE_CUDA_CHECK(cudaEventRecord(ev_wait_end[b][sz(l)], compute));
    }
    const int d = config.prefetch_distance;
    if (d > 0) {
      std::snprintf(name, sizeof(name), "prefetch_layers_[%d,%d]", static_cast<int>((g + 1) % L),
                    static_cast<int>((g + d) % L));
      NvtxRange range(name);
      for (int j = 1; j <= d; ++j) {
        const int lj = static_cast<int>((g + j) % L);
        if (slot_of_layer[sz(lj)] < 0) issue_transfer(g + j, reach);
      }
    }
    const int s = slot_of_layer[sz(l)];
    compute_layer(l, slots[sz(s)]);
    PERFGATE_CUDA_CHECK(cudaEventRecord(slot_free[sz(s)], compute));
    PERFGATE_CUDA_CHECK(cudaEventRecord(ev_done[b][sz(l)], compute));
  }

  void serial_layer(int l, int b) {
    char name[64];
    {
      std::snprintf(name, sizeof(name), "ensure_layer_%d", l);
      NvtxRange range(name);
      PERFGATE_CUDA_CHECK(cudaEventRecord(ev_reach[b][sz(l)], compute));
      std::snprintf(name, sizeof(name), "h2d_transfer_layer_%d", l);
      NvtxRange copy_range(name);
      PERFGATE_CUDA_CHECK(cudaEventRecord(ev_copy_begin[b][sz(l)], compute));
      PERFGATE_CUDA_CHECK(cudaMemcpyAsync(slots[0], host_layer(l), layer_bytes, cudaMemcpyHostToDevice, compute));
      PERFGATE_CUDA_CHECK(cudaEventRecord(ev_copy_end[b][sz(l)], compute));
      PERFGATE_CUDA_CHECK(cudaEventRecord(ev_wait_end[b][sz(l)], compute));
      copied[b][sz(l)] = true;
    }
    compute_layer(l, slots[0]);
    PERFGATE_CUDA_CHECK(cudaEventRecord(ev_done[b][sz(l)], compute));
  }

  void resident_layer(int l, int b) {
    PERFGATE_CUDA_CHECK(cudaEventRecord(ev_reach[b][sz(l)], compute));
    PERFGATE_CUDA_CHECK(cudaEventRecord(ev_wait_end[b][sz(l)], compute));
    compute_layer(l, resident_weights + sz(l) * layer_elems);
    PERFGATE_CUDA_CHECK(cudaEventRecord(ev_done[b][sz(l)], compute));
  }

  void transfer_layer(int l, int b) {
    char name[64];
    std::snprintf(name, sizeof(name), "h2d_transfer_layer_%d", l);
    NvtxRange range(name);
    const int s = static_cast<int>(step_index * model.layers + l) % num_slots;
    PERFGATE_CUDA_CHECK(cudaEventRecord(ev_copy_begin[b][sz(l)], copy));
    PERFGATE_CUDA_CHECK(cudaMemcpyAsync(slots[sz(s)], host_layer(l), layer_bytes, cudaMemcpyHostToDevice, copy));
    PERFGATE_CUDA_CHECK(cudaEventRecord(ev_copy_end[b][sz(l)], copy));
    copied[b][sz(l)] = true;
  }

  static float elapsed(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0.0f;
    PERFGATE_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
  }

  StepStats step() {
    PERFGATE_CUDA_CHECK(cudaSetDevice(device));
    const int b = static_cast<int>(step_index % kBanks);
    StepStats st;
    issue_step(b, st);
    collect_step_stats(b, st);
    ++step_index;
    return st;
  }

  // The stream that a step's begin and end are recorded on.
  cudaStream_t timeline() const { return mode == Mode::transfer_only ? copy : compute; }

  // Issues every layer of the step into bank b and waits for its end.
  void issue_step(int b, StepStats& st) {
    const int L = model.layers;
    if (step_index == 0) PERFGATE_CUDA_CHECK(cudaEventRecord(ev_first_begin, timeline()));
    if (mode != Mode::transfer_only) {
      // Every step starts from the same input, so every step's output can be checked.
      PERFGATE_CUDA_CHECK(cudaMemcpyAsync(x, x0, sz(model.tokens) * sz(model.hidden) * sizeof(__nv_bfloat16),
                                          cudaMemcpyDeviceToDevice, compute));
    }
    for (int l = 0; l < L; ++l) {
      switch (mode) {
        case Mode::resident: resident_layer(l, b); break;
        case Mode::serial: serial_layer(l, b); break;
        case Mode::streamed: streamed_layer(step_index * L + l, st); break;
        case Mode::transfer_only: transfer_layer(l, b); break;
      }
    }
    PERFGATE_CUDA_CHECK(cudaEventRecord(ev_step_end[b], timeline()));
    PERFGATE_CUDA_CHECK(cudaEventSynchronize(ev_step_end[b]));
  }

  // The finished step's times from bank b's events.
  void collect_step_stats(int b, StepStats& st) {
    cudaEvent_t begin = step_index == 0 ? ev_first_begin : ev_step_end[(b + 1) % kBanks];
    st.step_ms = elapsed(begin, ev_step_end[b]);
    for (int l = 0; l < model.layers; ++l) add_layer_stats(b, sz(l), st);
  }

  void add_layer_stats(int b, std::size_t li, StepStats& st) {
    if (mode != Mode::transfer_only) {
      st.wait_ms += elapsed(ev_reach[b][li], ev_wait_end[b][li]);
      st.compute_ms += elapsed(ev_wait_end[b][li], ev_done[b][li]);
    }
    if (copied[b][li]) {
      st.transfer_ms += elapsed(ev_copy_begin[b][li], ev_copy_end[b][li]);
      st.h2d_bytes += layer_bytes;
      // The copy had finished before the compute stream reached the layer: the weights were waiting.
      // Both are measured from the configure()-time origin, so no negative interval is needed.
      if (mode == Mode::streamed &&
          elapsed(ev_first_begin, ev_copy_end[b][li]) <= elapsed(ev_first_begin, ev_reach[b][li]))
        ++st.ready;
      copied[b][li] = false;
    } else if (mode == Mode::streamed) {
      ++st.ready;  // still cached from an earlier step: no copy at all
    }
  }
};

StreamingEngine::StreamingEngine(const ModelShape& model, std::uint64_t seed, int device)
    : impl_(std::make_unique<Impl>()) {
  impl_->init(model, seed, device);
}

StreamingEngine::~StreamingEngine() = default;

const ModelShape& StreamingEngine::model() const { return impl_->model; }

void StreamingEngine::configure(Mode mode, const StreamConfig& config) { impl_->configure(mode, config); }

StepStats StreamingEngine::step() { return impl_->step(); }

PlantedGemms StreamingEngine::set_planted(double fraction) { return impl_->set_planted(fraction); }

std::vector<std::uint16_t> StreamingEngine::output() const {
  const std::size_t n = sz(impl_->model.tokens) * sz(impl_->model.hidden);
  std::vector<std::uint16_t> out(n);
  PERFGATE_CUDA_CHECK(cudaSetDevice(impl_->device));
  PERFGATE_CUDA_CHECK(cudaStreamSynchronize(impl_->compute));
  PERFGATE_CUDA_CHECK(cudaMemcpy(out.data(), impl_->x, n * sizeof(std::uint16_t), cudaMemcpyDeviceToHost));
  return out;
}

}  // namespace perfgate::streaming_prefetch
