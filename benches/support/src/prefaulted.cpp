#include "perfgate/bench/prefaulted.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "perfgate/bench/hardware.hpp"

namespace perfgate::bench {

namespace {
constexpr std::align_val_t kSmallAlign{64};
// Above this, the pages are populated by several threads: one MAP_POPULATE call zeroes pages on one core,
// which for the tens of GB of a deepseek-v3 layer took longer than the work it prepares.
constexpr std::size_t kParallelPopulateMinBytes = std::size_t{256} << 20;
constexpr int kMaxPopulateThreads = 16;

// Faults in [begin, begin + bytes) writable: one madvise where the kernel has MADV_POPULATE_WRITE (5.14+),
// else a write to every page.
void populate_slice(char* begin, std::size_t bytes, std::size_t page) {
#ifdef MADV_POPULATE_WRITE
  if (::madvise(begin, bytes, MADV_POPULATE_WRITE) == 0) return;
#endif
  for (std::size_t off = 0; off < bytes; off += page) begin[off] = 0;
}

void populate_in_parallel(char* base, std::size_t bytes) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  // The CPUs this process may run on (a pinned bench process gets fewer than the machine has).
  const auto threads = static_cast<unsigned>(std::clamp(cpu_info().logical_cores, 1, kMaxPopulateThreads));
  const std::size_t pages = (bytes + page - 1) / page;
  const std::size_t per_thread = (pages + threads - 1) / threads * page;
  std::vector<std::thread> workers;
  for (std::size_t off = 0; off < bytes; off += per_thread)
    workers.emplace_back(populate_slice, base + off, std::min(per_thread, bytes - off), page);
  for (std::thread& t : workers) t.join();
}

// Faults a fresh mapping in, on several threads where it is large.
void populate(char* base, std::size_t bytes) {
  if (bytes >= kParallelPopulateMinBytes) return populate_in_parallel(base, bytes);
  populate_slice(base, bytes, static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)));
}
}  // namespace

void* allocate_prefaulted(std::size_t bytes) {
  if (bytes < kPrefaultMinBytes) return ::operator new(bytes == 0 ? 1 : bytes, kSmallAlign);
  const bool parallel = bytes >= kParallelPopulateMinBytes;
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (parallel ? 0 : MAP_POPULATE);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  if (parallel) populate_in_parallel(static_cast<char*>(p), bytes);
  return p;
}

namespace {
std::uintptr_t round_up(std::uintptr_t n, std::size_t unit) { return (n + unit - 1) / unit * unit; }
std::size_t huge_units(std::size_t bytes) { return round_up(std::max<std::size_t>(bytes, 1), kHugePageBytes); }
}  // namespace

void* allocate_huge_prefaulted(std::size_t bytes) {
  const std::size_t size = huge_units(bytes);
  // One huge page more than needed, so that a 2 MiB boundary lies inside; the slack on both sides is unmapped.
  void* raw = ::mmap(nullptr, size + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto at = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = round_up(at, kHugePageBytes);
  if (aligned > at) ::munmap(raw, aligned - at);
  if (aligned < at + kHugePageBytes) ::munmap(reinterpret_cast<void*>(aligned + size), at + kHugePageBytes - aligned);
  char* p = reinterpret_cast<char*>(aligned);
#ifdef MADV_HUGEPAGE
  ::madvise(p, size, MADV_HUGEPAGE);  // advice: refused or without effect, the pages stay 4 KiB ones
#endif
  populate(p, size);
  return p;
}

void free_huge_prefaulted(void* p, std::size_t bytes) noexcept {
  if (p) ::munmap(p, huge_units(bytes));
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
