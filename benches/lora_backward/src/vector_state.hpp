// The upper vector state that AVX-512 code leaves behind, and the scalar (SSE) code after it.
#pragma once

namespace perfgate::lora_backward {

// Zeroes zmm16-31 and the upper halves of zmm0-15 on the calling thread; a no-op where the CPU has no AVX-512.
// vzeroupper, which compilers put at the end of AVX functions, leaves zmm16-31 alone. While any of them is
// dirty, SSE-encoded code (the SiLU passes call expf on scalars) runs several times slower on some CPUs, and
// whether a process hits it depends on which AVX-512 code (oneDNN's JIT kernels included) ran before on the
// thread. So scalar phases call this first: their time then does not depend on what a process ran before them.
void clean_upper_vector_state();

}  // namespace perfgate::lora_backward
