// Probe: cuDNN's MoE grouped matmul (backend API) on the expert FFN's shapes, every engine the graph offers,
// checked against an fp64 reference on sampled outputs before it is timed.
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define CK(x)                                                                                             \
  do {                                                                                                    \
    cudnnStatus_t s_ = (x);                                                                               \
    if (s_ != CUDNN_STATUS_SUCCESS) {                                                                     \
      char msg_[1024];                                                                                    \
      cudnnGetLastErrorString(msg_, sizeof msg_);                                                         \
      std::fprintf(stderr, "%s:%d %s: %s | %s\n", __FILE__, __LINE__, #x, cudnnGetErrorString(s_), msg_); \
      throw s_;                                                                                           \
    }                                                                                                     \
  } while (0)
#define CU(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

using Desc = cudnnBackendDescriptor_t;

static Desc tensor(int64_t uid, cudnnDataType_t dt, std::vector<int64_t> dims, std::vector<int64_t> strides) {
  Desc t;
  CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t));
  CK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
  CK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, (int64_t)dims.size(), dims.data()));
  CK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, (int64_t)strides.size(), strides.data()));
  CK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  int64_t align = 16;
  CK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
  CK(cudnnBackendFinalize(t));
  return t;
}

struct Problem {
  const char* name;
  int64_t rows_in, rows_out, k, n, experts;
  bool gather;
};

struct Plan {
  Desc plan;
  int64_t workspace;
  int64_t engine;
};

static Desc op_graph(cudnnHandle_t h, const Problem& p) {
  Desc token = tensor(1, CUDNN_DATA_BFLOAT16, {1, p.rows_in, p.k}, {p.rows_in * p.k, p.k, 1});
  // K-contiguous weights by default; PROBE_N_MAJOR=1 gives N-contiguous ones.
  const bool n_major = std::getenv("PROBE_N_MAJOR") != nullptr;
  Desc weight = tensor(2, CUDNN_DATA_BFLOAT16, {p.experts, p.k, p.n},
                       n_major ? std::vector<int64_t>{p.k * p.n, p.n, 1} : std::vector<int64_t>{p.k * p.n, 1, p.k});
  Desc fto = tensor(3, CUDNN_DATA_INT32, {p.experts, 1, 1}, {1, 1, 1});
  Desc out = tensor(4, CUDNN_DATA_BFLOAT16, {1, p.rows_out, p.n}, {p.rows_out * p.n, p.n, 1});
  Desc op;
  CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_DESCRIPTOR, &op));
  cudnnMoeGroupedMatmulMode_t mode =
      p.gather ? CUDNN_MOE_GROUPED_MATMUL_MODE_GATHER : CUDNN_MOE_GROUPED_MATMUL_MODE_NONE;
  CK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_MODE, CUDNN_TYPE_MOE_GROUPED_MATMUL_MODE, 1,
                              &mode));
  cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  CK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec));
  CK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_TOKEN_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                              &token));
  CK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_WEIGHT_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                              &weight));
  CK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_FIRST_TOKEN_OFFSET_DESC,
                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &fto));
  CK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_OUTPUT_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                              &out));
  if (p.gather) {
    Desc idx = tensor(5, CUDNN_DATA_INT32, {1, p.rows_out, 1}, {p.rows_out, 1, 1});
    CK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_TOKEN_INDEX_DESC,
                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &idx));
  }
  CK(cudnnBackendFinalize(op));
  Desc g;
  CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g));
  CK(cudnnBackendSetAttribute(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
  CK(cudnnBackendSetAttribute(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  CK(cudnnBackendFinalize(g));
  return g;
}

static std::vector<Plan> plans(cudnnHandle_t h, Desc g) {
  int64_t count = 0, got = 0;
  CK(cudnnBackendGetAttribute(g, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1, &got, &count));
  std::printf("  engines in the graph: %lld\n", (long long)count);
  std::vector<Plan> out;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B}) {
    try {
      Desc heur;
      CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
      CK(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g));
      CK(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
      CK(cudnnBackendFinalize(heur));
      int64_t n = 0;
      CK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, nullptr));
      std::vector<Desc> cfgs(n);
      for (auto& c : cfgs) CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &c));
      CK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &n,
                                  cfgs.data()));
      std::printf("  heuristics %d: %lld configs\n", (int)mode, (long long)n);
      for (int64_t j = 0; j < n; ++j) {
        try {
          Desc plan;
          CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan));
          CK(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
          CK(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                      &cfgs[j]));
          CK(cudnnBackendFinalize(plan));
          int64_t ws = 0;
          CK(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, &ws));
          char json[4096] = {0};
          int64_t jl = 0;
          cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, sizeof json,
                                   &jl, json);
          std::printf("  heuristic config %lld: %s\n", (long long)j, json);
          out.push_back({plan, ws, 100 * (int)mode + j});
        } catch (cudnnStatus_t) { std::printf("  heuristic config %lld: plan refused\n", (long long)j); }
      }
    } catch (cudnnStatus_t) { std::printf("  heuristics %d refused\n", (int)mode); }
  }
  for (int64_t i = 0; i < count; ++i) {
    try {
      Desc e, cfg, plan;
      CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &e));
      CK(cudnnBackendSetAttribute(e, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g));
      CK(cudnnBackendSetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &i));
      CK(cudnnBackendFinalize(e));
      CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg));
      CK(cudnnBackendSetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &e));
      CK(cudnnBackendFinalize(cfg));
      CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan));
      CK(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
      CK(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                  &cfg));
      CK(cudnnBackendFinalize(plan));
      int64_t ws = 0;
      CK(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, &ws));
      out.push_back({plan, ws, i});
      std::printf("  engine %lld: plan built, workspace %lld bytes\n", (long long)i, (long long)ws);
    } catch (cudnnStatus_t) { std::printf("  engine %lld: not supported here\n", (long long)i); }
  }
  return out;
}

static float bf(const __nv_bfloat16& v) { return __bfloat162float(v); }

// A value from the element's index, so the host reference can recompute any element without a copy.
__host__ __device__ inline float hashed(uint64_t i, uint64_t seed, float scale) {
  uint64_t x = (i + seed) * 2654435761ull;
  return (float)((int)(x % 2001) - 1000) / 1000.f * scale;
}

__global__ void fill(__nv_bfloat16* p, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = __float2bfloat16(hashed(i, seed, scale));
}

static float host_value(uint64_t i, uint64_t seed, float scale) { return bf(__float2bfloat16(hashed(i, seed, scale))); }

int main(int argc, char** argv) {
  int64_t tokens = argc > 1 ? std::atoll(argv[1]) : 4096;
  const int64_t experts = argc > 2 ? std::atoll(argv[2]) : 256;
  const int only = argc > 3 ? std::atoi(argv[3]) : -1;
  const int64_t topk = 8, hidden = 7168, inter = 2048;
  std::printf("cuDNN backend %zu, compiled against %d\n", cudnnGetVersion(), CUDNN_VERSION);
  cudaDeviceProp prop;
  CU(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, sm_%d%d\n", prop.name, prop.major, prop.minor);
  cudnnHandle_t h;
  CK(cudnnCreate(&h));

  // Uniform routing: every token picks topk distinct experts; rows sorted by expert.
  std::mt19937 rng(42);
  std::vector<std::vector<int32_t>> by_expert(experts);
  std::vector<int> perm(experts);
  for (int64_t t = 0; t < tokens; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    for (int64_t j = 0; j < topk; ++j) {
      std::swap(perm[j], perm[j + rng() % (experts - j)]);
      by_expert[perm[j]].push_back((int32_t)t);
    }
  }
  const int64_t rows = tokens * topk;
  std::vector<int32_t> token_index, fto(experts), expert_of_row;
  for (int64_t e = 0; e < experts; ++e) {
    fto[e] = (int32_t)token_index.size();
    for (int32_t t : by_expert[e]) {
      token_index.push_back(t);
      expert_of_row.push_back((int32_t)e);
    }
  }

  Problem probs[] = {
      {"gate_up gather", tokens, rows, hidden, 2 * inter, experts, true},
      {"gate_up none", rows, rows, hidden, 2 * inter, experts, false},
      {"down none", rows, rows, inter, hidden, experts, false},
  };
  int32_t *d_fto, *d_idx;
  CU(cudaMalloc(&d_fto, experts * 4));
  CU(cudaMalloc(&d_idx, rows * 4));
  CU(cudaMemcpy(d_fto, fto.data(), experts * 4, cudaMemcpyHostToDevice));
  CU(cudaMemcpy(d_idx, token_index.data(), rows * 4, cudaMemcpyHostToDevice));
  cudaStream_t stream;
  CU(cudaStreamCreate(&stream));
  CK(cudnnSetStream(h, stream));

  for (int pi = 0; pi < 3; ++pi) {
    const Problem& p = probs[pi];
    if (only >= 0 && pi != only) continue;
    std::printf("%s: rows in %lld, rows out %lld, K %lld, N %lld\n", p.name, (long long)p.rows_in,
                (long long)p.rows_out, (long long)p.k, (long long)p.n);
    size_t wcount = (size_t)p.experts * p.k * p.n;
    __nv_bfloat16 *d_a, *d_w, *d_o;
    CU(cudaMalloc(&d_a, (size_t)p.rows_in * p.k * 2));
    CU(cudaMalloc(&d_w, wcount * 2));
    CU(cudaMalloc(&d_o, (size_t)p.rows_out * p.n * 2));
    fill<<<4096, 256>>>(d_a, (size_t)p.rows_in * p.k, 7, 1.f);
    fill<<<4096, 256>>>(d_w, wcount, 11, 0.05f);
    CU(cudaDeviceSynchronize());
    Desc g;
    std::vector<Plan> ps;
    try {
      g = op_graph(h, p);
      ps = plans(h, g);
    } catch (cudnnStatus_t) {
      std::printf("  graph refused\n");
      continue;
    }
    double bytes = (double)wcount * 2 + (double)p.rows_out * p.k * 2 + (double)p.rows_out * p.n * 2;
    double flops = 2.0 * p.rows_out * p.k * p.n;
    for (const Plan& pl : ps) {
      void* ws = nullptr;
      if (pl.workspace) CU(cudaMalloc(&ws, pl.workspace));
      int64_t uids[] = {1, 2, 3, 4, 5};
      void* ptrs[] = {d_a, d_w, d_fto, d_o, d_idx};
      Desc vp;
      CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
      int64_t n = p.gather ? 5 : 4;
      CK(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids));
      CK(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs));
      CK(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws));
      CK(cudnnBackendFinalize(vp));
      CU(cudaMemset(d_o, 0, (size_t)p.rows_out * p.n * 2));
      try {
        CK(cudnnBackendExecute(h, pl.plan, vp));
      } catch (cudnnStatus_t) {
        std::printf("  engine %lld: execute failed\n", (long long)pl.engine);
        continue;
      }
      CU(cudaStreamSynchronize(stream));
      // Check 256 sampled outputs against the fp64 reference.
      double worst = 0, ref_scale = 0;
      std::vector<__nv_bfloat16> orow(p.n);
      for (int s = 0; s < 256; ++s) {
        int64_t r = rng() % p.rows_out, c = rng() % p.n;
        int64_t e = expert_of_row[r];
        int64_t src = p.gather ? token_index[r] : r;
        __nv_bfloat16 got;
        CU(cudaMemcpy(&got, d_o + r * p.n + c, 2, cudaMemcpyDeviceToHost));
        double ref = 0;
        for (int64_t kk = 0; kk < p.k; ++kk) {
          const bool n_major = std::getenv("PROBE_N_MAJOR") != nullptr;
          float wv = host_value(e * p.k * p.n + (n_major ? kk * p.n + c : c * p.k + kk), 11, 0.05f);
          ref += (double)host_value(src * p.k + kk, 7, 1.f) * wv;
        }
        worst = std::max(worst, std::fabs(ref - bf(got)));
        ref_scale = std::max(ref_scale, std::fabs(ref));
      }
      cudaEvent_t t0, t1;
      CU(cudaEventCreate(&t0));
      CU(cudaEventCreate(&t1));
      for (int i = 0; i < 3; ++i) CK(cudnnBackendExecute(h, pl.plan, vp));
      const int iters = 20;
      CU(cudaEventRecord(t0, stream));
      for (int i = 0; i < iters; ++i) CK(cudnnBackendExecute(h, pl.plan, vp));
      CU(cudaEventRecord(t1, stream));
      CU(cudaEventSynchronize(t1));
      float ms = 0;
      CU(cudaEventElapsedTime(&ms, t0, t1));
      ms /= iters;
      std::printf("  engine %lld: %.3f ms, %.2f TB/s, %.0f TFLOP/s; max |err| %.4f of max |ref| %.3f %s\n",
                  (long long)pl.engine, ms, bytes / ms / 1e9, flops / ms / 1e9, worst, ref_scale,
                  worst <= 0.01 * ref_scale + 0.02 ? "ok" : "WRONG");
      if (ws) CU(cudaFree(ws));
    }
    CU(cudaFree(d_a));
    CU(cudaFree(d_w));
    CU(cudaFree(d_o));
  }
  return 0;
}
