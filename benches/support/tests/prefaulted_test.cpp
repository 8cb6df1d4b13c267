// perfgate/bench/prefaulted.hpp: large buffers arrive with every page present, small ones aligned.
#include "perfgate/bench/prefaulted.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace pb = perfgate::bench;

namespace {

// Pages of [p, p + bytes) that are resident, per mincore(2).
std::size_t resident_pages(const void* p, std::size_t bytes) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((bytes + page - 1) / page);
  EXPECT_EQ(::mincore(const_cast<void*>(p), bytes, in_core.data()), 0);
  std::size_t n = 0;
  for (unsigned char c : in_core) n += c & 1u;
  return n;
}

}  // namespace

TEST(Prefaulted, LargeBufferIsResidentZeroedAndPageAligned) {
  constexpr std::size_t kBytes = std::size_t{8} << 20;
  void* p = pb::allocate_prefaulted(kBytes);
  ASSERT_NE(p, nullptr);
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % page, 0u);
  // before a single write: the point of the mapping is that no first-touch fault is left
  EXPECT_EQ(resident_pages(p, kBytes), kBytes / page);
  const auto* words = static_cast<const std::uint64_t*>(p);
  for (std::size_t i = 0; i < kBytes / sizeof(std::uint64_t); i += 4096) ASSERT_EQ(words[i], 0u);
  pb::free_prefaulted(p, kBytes);
}

// Above 256 MiB the pages are populated by several threads: every page must still be present and zero.
TEST(Prefaulted, HugeBufferIsPopulatedInParallelAndZeroed) {
  constexpr std::size_t kBytes = (std::size_t{256} << 20) + 12345;  // not a whole number of pages or slices
  void* p = pb::allocate_prefaulted(kBytes);
  ASSERT_NE(p, nullptr);
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(resident_pages(p, kBytes), (kBytes + page - 1) / page);
  const auto* bytes = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < kBytes; i += page / 2) ASSERT_EQ(bytes[i], 0u) << "at byte " << i;
  EXPECT_EQ(bytes[kBytes - 1], 0u);
  pb::free_prefaulted(p, kBytes);
}

TEST(Prefaulted, SmallBufferIsCacheLineAligned) {
  for (std::size_t bytes : {std::size_t{1}, std::size_t{100}, pb::kPrefaultMinBytes - 1}) {
    void* p = pb::allocate_prefaulted(bytes);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u) << bytes;
    pb::free_prefaulted(p, bytes);
  }
  pb::free_prefaulted(nullptr, 0);  // a no-op, like free(nullptr)
}

TEST(Prefaulted, VectorKeepsWhatIsWrittenAcrossGrowth) {
  pb::PrefaultedVector<std::uint32_t> v;
  v.resize(1000);  // operator new path
  for (std::uint32_t i = 0; i < v.size(); ++i) v[i] = i * 3u;
  v.resize(std::size_t{1} << 20);  // 4 MiB: moves into a populated mapping
  for (std::uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(v[i], i * 3u);
  EXPECT_EQ(resident_pages(v.data(), v.size() * sizeof(std::uint32_t)),
            v.size() * sizeof(std::uint32_t) / static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)));
}

TEST(Prefaulted, ImpossibleSizeThrowsBadAlloc) {
  pb::PrefaultedAllocator<std::uint64_t> a;
  EXPECT_THROW((void)a.allocate(static_cast<std::size_t>(-1) / 4), std::bad_alloc);
  EXPECT_THROW((void)pb::allocate_prefaulted(std::size_t{1} << 62), std::bad_alloc);
}

// Huge-page buffers: whole 2 MiB units at a 2 MiB boundary, every page present and zero before the first write,
// whatever the kernel made of the MADV_HUGEPAGE advice (it may have no huge page free).
TEST(Prefaulted, HugePageBufferIsTwoMiBAlignedResidentAndZeroed) {
  for (std::size_t bytes : {std::size_t{1}, pb::kHugePageBytes, (std::size_t{3} << 20) + 5}) {
    void* p = pb::allocate_huge_prefaulted(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % pb::kHugePageBytes, 0u) << bytes;
    const std::size_t units = (bytes + pb::kHugePageBytes - 1) / pb::kHugePageBytes * pb::kHugePageBytes;
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    EXPECT_EQ(resident_pages(p, units), units / page) << bytes;
    auto* b = static_cast<unsigned char*>(p);
    for (std::size_t i = 0; i < units; i += page / 2) ASSERT_EQ(b[i], 0u) << "at byte " << i;
    b[units - 1] = 7;  // the whole unit is writable
    EXPECT_EQ(b[units - 1], 7u);
    pb::free_huge_prefaulted(p, bytes);
  }
  pb::free_huge_prefaulted(nullptr, 0);
}

TEST(Prefaulted, HugePageVectorKeepsWhatIsWrittenAcrossGrowth) {
  pb::HugePageVector<std::uint32_t> v(1000);
  for (std::uint32_t i = 0; i < v.size(); ++i) v[i] = i * 5u;
  v.resize(std::size_t{3} << 20);  // 12 MiB: a larger mapping
  for (std::uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(v[i], i * 5u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v.data()) % pb::kHugePageBytes, 0u);
  pb::HugePageAllocator<std::uint64_t> a;
  EXPECT_THROW((void)a.allocate(static_cast<std::size_t>(-1) / 4), std::bad_alloc);
}
