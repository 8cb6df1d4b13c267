#pragma once
// Large host buffers whose pages are all present before first use.
//
// Why: on the project's 2-vCPU VM (a PVM guest) a first-touch page fault costs ~6 us, so a bench process
// that builds 1-2 GiB of weights, prepared copies and calibration buffers spent most of its 8-9 s start
// in the fault handler. Mapping with MAP_POPULATE faults the whole range in one system call: filling
// 1 GiB took seconds through faults and a fraction of that populated. Transparent huge pages were
// measured too and are slower (compaction). Figures: docs/writing-a-bench.md, "The conventions".
// Shorter bench processes are what make many interleaved A/B rounds affordable.
#include <cstddef>
#include <new>
#include <vector>

namespace perfgate::bench {

// Allocations at least this large are mapped populated; smaller ones come from operator new.
inline constexpr std::size_t kPrefaultMinBytes = std::size_t{1} << 20;

// At least 64-byte aligned (page aligned when mapped). Throws std::bad_alloc.
void* allocate_prefaulted(std::size_t bytes);
void free_prefaulted(void* p, std::size_t bytes) noexcept;

// Transparent huge pages where the kernel grants them, for buffers that streams write across many pages: in 4 KiB
// pages every few lines of such a stream cross into a page the TLB does not hold. Mapped at a 2 MiB boundary, asked
// MADV_HUGEPAGE before the first touch (the THP mode `madvise` wants that), then populated; where THP is off or the
// kernel has no huge page free, the pages are 4 KiB ones, as allocate_prefaulted's. Every allocation takes whole 2 MiB
// units. Throws std::bad_alloc.
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;
void* allocate_huge_prefaulted(std::size_t bytes);
void free_huge_prefaulted(void* p, std::size_t bytes) noexcept;

// Where a MappedAllocator takes its memory from.
struct PrefaultedPages {
  static void* allocate(std::size_t bytes) { return allocate_prefaulted(bytes); }
  static void free(void* p, std::size_t bytes) noexcept { free_prefaulted(p, bytes); }
};
struct HugePages {
  static void* allocate(std::size_t bytes) { return allocate_huge_prefaulted(bytes); }
  static void free(void* p, std::size_t bytes) noexcept { free_huge_prefaulted(p, bytes); }
};

// A std allocator over one of the page sources above. Elements are default-initialised, not value-initialised:
// `resize(n)` does not write n zeros over freshly mapped (already zero) pages, so callers write every
// element they read.
template <typename T, typename Pages>
struct MappedAllocator {
  using value_type = T;
  MappedAllocator() = default;
  template <typename U>
  MappedAllocator(const MappedAllocator<U, Pages>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(Pages::allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { Pages::free(p, n * sizeof(T)); }
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(static_cast<Args&&>(args)...);
  }
  template <typename U>
  bool operator==(const MappedAllocator<U, Pages>&) const noexcept {
    return true;
  }
};

template <typename T>
using PrefaultedAllocator = MappedAllocator<T, PrefaultedPages>;
template <typename T>
using PrefaultedVector = std::vector<T, PrefaultedAllocator<T>>;
template <typename T>
using HugePageAllocator = MappedAllocator<T, HugePages>;
template <typename T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace perfgate::bench
