#include "perfgate/bench/prefaulted.hpp"

#include <sys/mman.h>

namespace perfgate::bench {

namespace {
constexpr std::align_val_t kSmallAlign{64};
}

void* allocate_prefaulted(std::size_t bytes) {
  if (bytes < kPrefaultMinBytes) return ::operator new(bytes == 0 ? 1 : bytes, kSmallAlign);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

void free_prefaulted(void* p, std::size_t bytes) noexcept {
  if (!p) return;
  if (bytes < kPrefaultMinBytes) {
    ::operator delete(p, kSmallAlign);
    return;
  }
  ::munmap(p, bytes);
}

}  // namespace perfgate::bench
