// The CUPTI Activity API recorder behind PERFGATE_TIMELINE (perfgate/bench/timeline.hpp). libcupti is
// opened with dlopen so that a binary runs where it is missing; its header gives the record layouts.
#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <cupti.h>
#include <fmt/format.h>

#include "perfgate/bench/main.hpp"
#include "perfgate/bench/nvtx.hpp"
#include "perfgate/bench/timeline.hpp"

// The newest record versions of the CUPTI this is compiled against; the fields read here are in all of them.
#if CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
#else
using KernelRecord = CUpti_ActivityKernel9;
using MemcpyRecord = CUpti_ActivityMemcpy5;
#endif
using MemsetRecord = CUpti_ActivityMemset4;

namespace perfgate::bench {
namespace {

// More than any repetition of the fixtures needs many times over; beyond it records are counted as dropped.
constexpr std::size_t kMaxRecords = 2'000'000;
constexpr std::size_t kBufferBytes = std::size_t{8} << 20;

struct Cupti {
  void* library = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiGetTimestamp) timestamp = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiGetCallbackName) callback_name = nullptr;  // optional: API calls are named by number without it
};

template <typename F>
void resolve(void* library, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(library, name));
}

// The library by its soname first (LD_LIBRARY_PATH, the loader's cache), then where the toolkit puts it.
void* open_cupti(std::string& tried) {
  std::vector<std::string> candidates = {"libcupti.so", "libcupti.so.13", "libcupti.so.12"};
  for (const char* root : {static_cast<const char*>(std::getenv("CUDA_HOME")), "/usr/local/cuda"}) {
    if (root == nullptr) continue;
    candidates.push_back(std::string(root) + "/lib64/libcupti.so");
    candidates.push_back(std::string(root) + "/extras/CUPTI/lib64/libcupti.so");
  }
  for (const auto& c : candidates) {
    if (void* lib = dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL)) return lib;
    tried += (tried.empty() ? "" : ", ") + c;
  }
  return nullptr;
}

struct Activity {
  const char* kind;
  std::string name;
  std::uint32_t stream, correlation;
  std::uint64_t start, end, bytes;
};
struct Call {
  std::string name;
  std::uint64_t start, end;
  std::uint32_t correlation;
};
struct Range {
  std::string name;
  std::uint64_t start, end;
  int depth;
};

class Recorder {
 public:
  Cupti cupti;
  std::string path;
  std::mutex mutex;  // CUPTI hands over completed buffers on a thread of its own
  std::vector<Activity> activities;
  std::vector<Call> calls;
  std::vector<Range> ranges;
  std::vector<Range> open;  // the range stack (the fixtures launch from one thread)
  std::uint64_t dropped = 0;
  std::map<std::pair<int, std::uint32_t>, std::string> call_names;

  std::string result(CUptiResult r) const {
    const char* text = nullptr;
    if (cupti.result_string != nullptr) cupti.result_string(r, &text);
    return text != nullptr ? text : fmt::format("CUPTI error {}", static_cast<int>(r));
  }
  std::uint64_t now() const {
    std::uint64_t t = 0;
    cupti.timestamp(&t);
    return t;
  }
  bool room() {
    if (activities.size() + calls.size() < kMaxRecords) return true;
    ++dropped;
    return false;
  }
  std::string call_name(CUpti_CallbackDomain domain, std::uint32_t cbid);
  void take(const CUpti_Activity* record);
};

Recorder* recorder = nullptr;

std::string demangle(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = status == 0 && out != nullptr ? out : name;
  std::free(out);
  return s;
}

// "cudaStreamSynchronize_v3020" -> "cudaStreamSynchronize"
std::string without_version(std::string name) {
  const auto v = name.rfind("_v");
  if (v != std::string::npos && v + 2 < name.size() && name.find_first_not_of("0123456789", v + 2) == std::string::npos)
    name.resize(v);
  return name;
}

std::string Recorder::call_name(CUpti_CallbackDomain domain, std::uint32_t cbid) {
  auto [it, added] = call_names.try_emplace({static_cast<int>(domain), cbid});
  if (!added) return it->second;
  const char* name = nullptr;
  if (cupti.callback_name != nullptr && cupti.callback_name(domain, cbid, &name) == CUPTI_SUCCESS && name != nullptr)
    it->second = without_version(name);
  else it->second = fmt::format("{}#{}", domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime" : "driver", cbid);
  return it->second;
}

const char* copy_name(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
    default: return "memcpy";
  }
}

void Recorder::take(const CUpti_Activity* record) {
  if (!room()) return;
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const KernelRecord*>(record);
      activities.push_back({"kernel", demangle(k->name), k->streamId, k->correlationId, k->start, k->end, 0});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const MemcpyRecord*>(record);
      activities.push_back(
          {"memcpy", copy_name(m->copyKind), m->streamId, m->correlationId, m->start, m->end, m->bytes});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const MemsetRecord*>(record);
      activities.push_back({"memset", "memset", m->streamId, m->correlationId, m->start, m->end, m->bytes});
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      const auto domain =
          record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
      calls.push_back({call_name(domain, a->cbid), a->start, a->end, a->correlationId});
      break;
    }
    default: break;
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  if (recorder != nullptr && buffer != nullptr) {
    const std::lock_guard<std::mutex> lock(recorder->mutex);
    CUpti_Activity* record = nullptr;
    while (recorder->cupti.next_record(buffer, valid, &record) == CUPTI_SUCCESS) recorder->take(record);
  }
  std::free(buffer);
}

void observe_range(const char* name) {
  Recorder& r = *recorder;
  const std::uint64_t t = r.now();
  const std::lock_guard<std::mutex> lock(r.mutex);
  if (name != nullptr) {
    r.open.push_back({name, t, 0, static_cast<int>(r.open.size())});
  } else if (!r.open.empty()) {
    r.open.back().end = t;
    r.ranges.push_back(std::move(r.open.back()));
    r.open.pop_back();
  }
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += {'\\', c};
    else if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<int>(c));
    else out += c;
  }
  return out + "\"";
}

void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out) {
      std::fprintf(stderr, "perfgate: cannot write the timeline to %s\n", tmp.c_str());
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::fprintf(stderr, "perfgate: cannot write the timeline to %s: %s\n", path.c_str(), ec.message().c_str());
}

void write_unavailable(const std::string& path, const std::string& reason) {
  std::fprintf(stderr, "perfgate: no GPU timeline recorded: %s\n", reason.c_str());
  write_atomically(path, fmt::format("{{\"perfgate_timeline\": 1, \"status\": \"unavailable\", \"reason\": {}}}\n",
                                     json_string(reason)));
}

std::string recording_json(const Recorder& r) {
  std::string out = fmt::format("{{\"perfgate_timeline\": 1, \"status\": \"recorded\", \"dropped\": {},\n", r.dropped);
  out += "\"activities\": [";
  for (std::size_t i = 0; i < r.activities.size(); ++i) {
    const Activity& a = r.activities[i];
    out += fmt::format(
        "{}\n{{\"kind\":\"{}\",\"name\":{},\"stream\":{},\"start\":{},\"end\":{},\"correlation\":{},"
        "\"bytes\":{}}}",
        i == 0 ? "" : ",", a.kind, json_string(a.name), a.stream, a.start, a.end, a.correlation, a.bytes);
  }
  out += "],\n\"api\": [";
  for (std::size_t i = 0; i < r.calls.size(); ++i) {
    const Call& c = r.calls[i];
    out += fmt::format("{}\n{{\"name\":{},\"start\":{},\"end\":{},\"correlation\":{}}}", i == 0 ? "" : ",",
                       json_string(c.name), c.start, c.end, c.correlation);
  }
  out += "],\n\"ranges\": [";
  for (std::size_t i = 0; i < r.ranges.size(); ++i) {
    const Range& x = r.ranges[i];
    out += fmt::format("{}\n{{\"name\":{},\"start\":{},\"end\":{},\"depth\":{}}}", i == 0 ? "" : ",",
                       json_string(x.name), x.start, x.end, x.depth);
  }
  return out + "]}\n";
}

void finish_recording() {
  if (recorder == nullptr) return;
  range_observer = nullptr;
  recorder->cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  const std::lock_guard<std::mutex> lock(recorder->mutex);
  if (recorder->dropped > 0)
    std::fprintf(stderr, "perfgate: timeline: %llu record(s) beyond %zu dropped\n",
                 static_cast<unsigned long long>(recorder->dropped), kMaxRecords);
  write_atomically(recorder->path, recording_json(*recorder));
}

// Empty when every entry point was found, else what is missing.
std::string resolve_all(Cupti& c) {
  resolve(c.library, "cuptiActivityEnable", c.enable);
  resolve(c.library, "cuptiActivityRegisterCallbacks", c.register_callbacks);
  resolve(c.library, "cuptiActivityFlushAll", c.flush_all);
  resolve(c.library, "cuptiActivityGetNextRecord", c.next_record);
  resolve(c.library, "cuptiGetTimestamp", c.timestamp);
  resolve(c.library, "cuptiGetResultString", c.result_string);
  resolve(c.library, "cuptiGetCallbackName", c.callback_name);
  if (c.enable == nullptr || c.register_callbacks == nullptr || c.flush_all == nullptr || c.next_record == nullptr ||
      c.timestamp == nullptr)
    return "libcupti lacks the Activity API entry points (cuptiActivityEnable, ...)";
  return "";
}

// Empty on success, else why tracing could not start (not permitted, another profiler attached, ...).
std::string enable_tracing(Recorder& r) {
  const CUptiResult reg = r.cupti.register_callbacks(buffer_requested, buffer_completed);
  if (reg != CUPTI_SUCCESS) return "cuptiActivityRegisterCallbacks: " + r.result(reg);
  const std::pair<CUpti_ActivityKind, const char*> kinds[] = {
      {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"},
      {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY"},
      {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET"},
      {CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME"},
      {CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER"}};
  for (const auto& [kind, name] : kinds) {
    const CUptiResult res = r.cupti.enable(kind);
    if (res != CUPTI_SUCCESS)
      return fmt::format("cuptiActivityEnable(CUPTI_ACTIVITY_KIND_{}): {}", name, r.result(res));
  }
  return "";
}

}  // namespace

void start_timeline_from_environment() {
  const char* path = std::getenv(kTimelineVar);
  if (path == nullptr || *path == '\0' || recorder != nullptr) return;
  auto r = std::make_unique<Recorder>();
  r->path = path;
  std::string tried;
  r->cupti.library = open_cupti(tried);
  if (r->cupti.library == nullptr) return write_unavailable(path, "libcupti not found (tried " + tried + ")");
  if (const std::string missing = resolve_all(r->cupti); !missing.empty()) return write_unavailable(path, missing);
  recorder = r.release();  // lives to the end of the process: CUPTI may call back until then
  if (const std::string failed = enable_tracing(*recorder); !failed.empty()) {
    recorder = nullptr;
    return write_unavailable(path, failed);
  }
  range_observer = &observe_range;
  add_finish_hook(&finish_recording);
}

}  // namespace perfgate::bench
