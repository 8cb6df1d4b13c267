#pragma once
// Weight-streaming model description and argument validation (seed 002: prefetch_distance,
// max_cached_layers). Pure C++: no CUDA here, so the validation is testable on any machine.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace perfgate::streaming_prefetch {

// A LLaMA-like decoder stack. Per layer, bf16 weights, stored row-major [out, in]:
//   Wqkv [3*hidden, hidden]   Wo [hidden, hidden]   Wgu [2*intermediate, hidden] (gate rows, then up rows)
//   Wd   [hidden, intermediate]
// One step runs every layer once over `tokens` tokens (a prefill chunk or a batch of decode tokens).
struct ModelShape {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int intermediate = 0;
  int tokens = 0;

  // Element offsets of the four matrices inside one layer's packed buffer; every matrix starts on a
  // 256-byte boundary so that a cache slot and the resident copy give cuBLAS the same alignment.
  struct Layout {
    std::size_t qkv = 0, o = 0, gu = 0, down = 0;
    std::size_t elements = 0;  // padded total
  };
  Layout layout() const;
  std::size_t params_per_layer() const;  // unpadded
  std::size_t bytes_per_layer() const;   // padded, what one H2D copy moves
  double flops_per_layer() const;        // 2 * tokens * params (the four GEMMs)
};

struct StreamConfig {
  int prefetch_distance = 1;  // layers i+1..i+distance are fetched while layer i computes
  int max_cached_layers = 2;  // GPU cache slots, each holds one layer
  // Device bytes granted to the cache; 0 means "max_cached_layers whole layers". When set it must
  // hold at least one layer and at least max_cached_layers layers.
  std::size_t cache_bytes = 0;
};

// Throws std::invalid_argument with a message naming the offending argument when:
//   the model has zero (or negative) layers, or a non-positive hidden/intermediate/tokens;
//   the cache cannot hold one layer (zero slots, or cache_bytes < one layer);
//   cache_bytes is smaller than max_cached_layers layers;
//   prefetch_distance < 0, or prefetch_distance >= max_cached_layers (the layer being computed
//   and the `distance` layers ahead each need their own slot).
void validate(const ModelShape& model, const StreamConfig& config);
void validate(const ModelShape& model);

// Planted slowdown (PERFGATE_GPU_SLOWDOWN, docs/streaming_prefetch.md): every layer's compute runs each
// of its four GEMMs a second time over the first n' of its n output features (the first n' rows of the
// weight matrix, the same input rows), into a scratch buffer. n' = fraction x n rounded to a multiple of
// 8 (cuBLAS alignment), so the extra GEMM FLOPs are about fraction x the layer's GEMM FLOPs and the extra
// weight reads about fraction x its weights. fraction 0 plans nothing.
struct PlantedGemms {
  std::size_t qkv = 0, o = 0, gu = 0, down = 0;  // output features of the second GEMMs
  double flop_share = 0.0;                       // their FLOPs over the layer's GEMM FLOPs
  bool any() const { return qkv + o + gu + down > 0; }
  std::size_t widest() const;  // the scratch's row width
};
PlantedGemms plan_planted_gemms(const ModelShape& model, double fraction);

// Presets used by the suite and the tests: "tiny", "balanced", "compute_bound".
ModelShape model_preset(std::string_view name);
std::vector<std::string> model_preset_names();

}  // namespace perfgate::streaming_prefetch
