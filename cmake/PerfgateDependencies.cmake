# Finds every third-party dependency once, so the subdirectories only link targets.
find_package(benchmark REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(simdjson REQUIRED)
find_package(Threads REQUIRED)
if(PERFGATE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# Google Benchmark changed flags and skip APIs in 1.8; the bench support code adapts at compile time.
set(PERFGATE_GBENCH_VERSION "${benchmark_VERSION}")
if(NOT PERFGATE_GBENCH_VERSION)
  set(PERFGATE_GBENCH_VERSION "1.7.1")
endif()

# ---- CUDA ---------------------------------------------------------------------------------------
set(PERFGATE_HAVE_CUDA OFF)
if(NOT PERFGATE_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)  # Hopper: H100 / H200
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 does not know nvcc 13 speaks C++20
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(PERFGATE_HAVE_CUDA ON)
    # NCCL has no CMake package; the CUDA 13 toolkit ships it beside cuBLAS.
    find_library(PERFGATE_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_path(PERFGATE_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(PERFGATE_NCCL_LIBRARY AND PERFGATE_NCCL_INCLUDE)
      set(PERFGATE_HAVE_NCCL ON)
    else()
      set(PERFGATE_HAVE_NCCL OFF)
      message(STATUS "perfgate: NCCL not found, NCCL transfer cases are left out")
    endif()
  elseif(PERFGATE_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PERFGATE_WITH_CUDA=ON but no CUDA compiler was found")
  endif()
endif()

# ---- oneDNN -------------------------------------------------------------------------------------
set(PERFGATE_HAVE_ONEDNN OFF)
if(NOT PERFGATE_WITH_ONEDNN STREQUAL "OFF")
  # Debian's dnnl-config.cmake find_package()s OpenCL as REQUIRED (a fatal error even under QUIET), and
  # apt's --no-install-recommends leaves the OpenCL headers out: look first, so AUTO degrades to a skip.
  find_package(OpenCL QUIET)
  if(OpenCL_FOUND)
    find_package(dnnl CONFIG QUIET)
  else()
    message(STATUS "perfgate: OpenCL headers/library (ocl-icd-opencl-dev) not found; Debian's oneDNN "
                   "package config needs them, so oneDNN is treated as absent")
  endif()
  if(dnnl_FOUND)
    set(PERFGATE_HAVE_ONEDNN ON)
  elseif(PERFGATE_WITH_ONEDNN STREQUAL "ON")
    message(FATAL_ERROR "PERFGATE_WITH_ONEDNN=ON but oneDNN (libdnnl-dev) was not found")
  else()
    message(STATUS "perfgate: oneDNN not found, the oneDNN variants will be left out")
  endif()
endif()

# ---- results history backends (harness/src/history) ---------------------------------------------
# Both optional, so that a machine without them still builds the gate: the history then names what is
# missing when a URL of that kind is opened. ci/setup.sh installs libsqlite3-dev and libpq-dev.
find_package(SQLite3 QUIET)
find_package(PostgreSQL QUIET)
# Plain ON/OFF: perfgateConfig.cmake.in substitutes them into if().
set(PERFGATE_HAVE_SQLITE OFF)
set(PERFGATE_HAVE_LIBPQ OFF)
if(SQLite3_FOUND)
  set(PERFGATE_HAVE_SQLITE ON)
endif()
if(PostgreSQL_FOUND)
  set(PERFGATE_HAVE_LIBPQ ON)
endif()
if(NOT PERFGATE_HAVE_SQLITE)
  message(STATUS "perfgate: SQLite (libsqlite3-dev) not found, the history has no SQLite backend")
endif()
if(NOT PERFGATE_HAVE_LIBPQ)
  message(STATUS "perfgate: libpq (libpq-dev) not found, the history has no PostgreSQL backend")
endif()
