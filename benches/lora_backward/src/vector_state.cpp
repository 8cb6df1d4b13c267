#include "vector_state.hpp"

namespace perfgate::lora_backward {

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

__attribute__((target("avx512f"))) void zero_zmm16_31_and_upper() {
  asm volatile(
      "vpxord %%zmm16,%%zmm16,%%zmm16\n vpxord %%zmm17,%%zmm17,%%zmm17\n vpxord %%zmm18,%%zmm18,%%zmm18\n"
      "vpxord %%zmm19,%%zmm19,%%zmm19\n vpxord %%zmm20,%%zmm20,%%zmm20\n vpxord %%zmm21,%%zmm21,%%zmm21\n"
      "vpxord %%zmm22,%%zmm22,%%zmm22\n vpxord %%zmm23,%%zmm23,%%zmm23\n vpxord %%zmm24,%%zmm24,%%zmm24\n"
      "vpxord %%zmm25,%%zmm25,%%zmm25\n vpxord %%zmm26,%%zmm26,%%zmm26\n vpxord %%zmm27,%%zmm27,%%zmm27\n"
      "vpxord %%zmm28,%%zmm28,%%zmm28\n vpxord %%zmm29,%%zmm29,%%zmm29\n vpxord %%zmm30,%%zmm30,%%zmm30\n"
      "vpxord %%zmm31,%%zmm31,%%zmm31\n vzeroupper" ::
          : "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27",
            "xmm28", "xmm29", "xmm30", "xmm31");
}

}  // namespace

void clean_upper_vector_state() {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) zero_zmm16_31_and_upper();
}
#else
void clean_upper_vector_state() {}
#endif

}  // namespace perfgate::lora_backward
