# Strict warnings for every perfgate target, C++ and CUDA alike.
function(perfgate_target_warnings target)
  set(cxx_flags -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    # GCC 12 reports false -Wrestrict overlaps inside std::string concatenation (GCC PR 105329).
    list(APPEND cxx_flags -Wno-restrict)
  endif()
  set(cuda_host_flags -Wall,-Wextra)
  if(PERFGATE_WARNINGS_AS_ERRORS)
    list(APPEND cxx_flags -Werror)
    set(cuda_host_flags "${cuda_host_flags},-Werror")
    set(cuda_werror -Werror=all-warnings)
  endif()
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${cxx_flags}>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${cuda_host_flags} ${cuda_werror}>)
endfunction()
