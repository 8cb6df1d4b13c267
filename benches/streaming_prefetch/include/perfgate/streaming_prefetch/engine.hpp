#pragma once
// The weight-streaming engine of seed 002 on CUDA: layer weights in pinned host memory, a GPU cache of
// `max_cached_layers` slots, a copy stream that prefetches layers i+1..i+prefetch_distance while the
// compute stream runs layer i (attention-like GEMMs + an FFN, cuBLAS bf16). The two streams are ordered
// with events only (cudaStreamWaitEvent); the one host wait is at the end of a step, on an event.
//
// Shared by bench_streaming_prefetch and the unit test. CUDA failures throw
// perfgate::bench::CudaError; bad arguments throw std::invalid_argument (see config.hpp).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "perfgate/streaming_prefetch/config.hpp"

namespace perfgate::streaming_prefetch {

enum class Mode {
  resident,       // every layer already on the GPU: the compute-only floor
  serial,         // copy a layer on the compute stream, then compute it: no overlap
  streamed,       // the prefetching cache
  transfer_only,  // the copies alone, back to back on the copy stream: the IO floor
};

const char* mode_name(Mode mode);

// One step, read from CUDA events after the step's end event completed (no host clock).
struct StepStats {
  double step_ms = 0;      // previous step's end -> this step's end (compute stream; copy stream for transfer_only)
  double compute_ms = 0;   // sum over layers: weights available -> layer done (compute stream)
  double wait_ms = 0;      // sum over layers: compute stream reached the layer -> its weights were there
  double transfer_ms = 0;  // sum of the H2D copy spans of this step's layers (copy stream)
  std::size_t h2d_bytes = 0;
  int ensures = 0;  // ensure_layer calls (streamed) = layers per step
  int hits = 0;     // ensure found the layer in the cache or already on its way (prefetched)
  int ready = 0;    // ... and its copy had already finished when the compute stream got there
};

class StreamingEngine {
 public:
  // Allocates and fills (deterministically; `seed` picks the weights, the input is fixed) the pinned host
  // weights, a resident device copy (for the resident floor and the reference), the input and the
  // activations. Validates the model first (std::invalid_argument).
  explicit StreamingEngine(const ModelShape& model, std::uint64_t seed = 1, int device = 0);
  ~StreamingEngine();
  StreamingEngine(const StreamingEngine&) = delete;
  StreamingEngine& operator=(const StreamingEngine&) = delete;

  const ModelShape& model() const;

  // Selects what step() runs. Drains both streams and empties the cache (a cold start); for streamed,
  // validates `config` first (std::invalid_argument). transfer_only uses max(1, max_cached_layers)
  // slots round robin, serial a single slot, resident none.
  void configure(Mode mode, const StreamConfig& config = {});

  // Enqueues one step (every layer once, input reset from the same x0), waits on its end event and
  // returns its event timings. With streamed, the prefetches of the next step's first layers are issued
  // during this step's last layers and keep running: consecutive steps form one pipeline.
  StepStats step();

  // Planted slowdown (plan_planted_gemms): from the next step on, every layer's compute also runs the
  // planned second GEMMs into scratch (the output does not change). 0 removes them. Returns the plan.
  PlantedGemms set_planted(double fraction);

  // The hidden state after the last step, as raw bf16 bits ([tokens, hidden], row-major).
  std::vector<std::uint16_t> output() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace perfgate::streaming_prefetch
