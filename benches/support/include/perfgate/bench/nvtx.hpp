#pragma once
// NVTX ranges with the seeds' names (Expert_Forward, ensure_layer_X, backward_only, ...), so an
// nsys/ncu capture of any bench shows the landmarks the profiling guides use. NVTX3 is header-only;
// without the CUDA toolkit the ranges compile to nothing.
#include <string>

#if defined(PERFGATE_HAVE_NVTX)
#include <nvtx3/nvToolsExt.h>
#endif

namespace perfgate::bench {

// Told of every push (the range's name) and pop (nullptr) while the timeline recorder runs (timeline.hpp);
// null otherwise.
using RangeObserver = void (*)(const char* name);
inline RangeObserver range_observer = nullptr;

class NvtxRange {
 public:
  explicit NvtxRange(const char* name) { push(name); }
  explicit NvtxRange(const std::string& name) { push(name.c_str()); }
  ~NvtxRange() {
    if (range_observer != nullptr) range_observer(nullptr);
#if defined(PERFGATE_HAVE_NVTX)
    nvtxRangePop();
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
  static void push([[maybe_unused]] const char* name) {
    if (range_observer != nullptr) range_observer(name);
#if defined(PERFGATE_HAVE_NVTX)
    nvtxRangePushA(name);
#endif
  }
};

}  // namespace perfgate::bench
