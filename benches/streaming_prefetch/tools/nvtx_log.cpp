// NVTX injection library: load with NVTX_INJECTION64_PATH=/path/libperfgate_nvtx_log.so and every
// nvtxRangePushA/Pop of the process is logged, one line per push: "<depth> <name>", into the file
// named by PERFGATE_NVTX_LOG (default: stderr). Lets a run prove that its NVTX ranges exist and
// nest as intended on machines where nsys cannot produce a report.
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace {

std::FILE* out = nullptr;
std::mutex mu;
thread_local int depth = 0;

int NVTX_API push_a(const char* message) {
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(out, "%d %s\n", depth, message ? message : "(null)");
  return depth++;
}

int NVTX_API pop() {
  if (depth > 0) --depth;
  return depth;
}

}  // namespace

extern "C" NVTX_DYNAMIC_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  const char* path = std::getenv("PERFGATE_NVTX_LOG");
  out = path ? std::fopen(path, "w") : stderr;
  if (!out) return 0;
  std::setvbuf(out, nullptr, _IOLBF, 0);
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || !table) return 0;
  if (size <= NVTX_CBID_CORE_RangePop) return 0;
  *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&push_a);
  *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&pop);
  return 1;
}
