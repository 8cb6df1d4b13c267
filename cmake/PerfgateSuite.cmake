# perfgate_add_suite(NAME <suite>
#                    SOURCES <files...>
#                    [LIBRARIES <targets...>]
#                    [LABELS <labels...>]        e.g. cpu, gpu, amx
#                    [GPUS <n>]                  GPUs the perf test needs (ctest RESOURCE_GROUPS)
#                    [TIMEOUT <seconds>]         perf test timeout (default 1800)
#                    [SMOKE_FILTER <regex>]      registers smoke.<suite>: one quick, correctness-checked pass
#                    [RUN_ARGS <args...>])       extra arguments for `perfgate run`
#
# Builds the Google Benchmark binary bench_<suite> (into <build>/bin) and registers
#   perf.<suite>   `perfgate run` against baselines/<machine-class>/<suite>.json   (label perf)
#   smoke.<suite>  the binary once with a tiny min time; exits 3 on a failed check  (label smoke)
# Both carry SKIP_RETURN_CODE 77, so missing hardware reads as a skip in ctest.
include_guard(GLOBAL)

if(NOT DEFINED PERFGATE_BASELINE_DIR)
  set(PERFGATE_BASELINE_DIR "${PROJECT_SOURCE_DIR}/baselines" CACHE PATH "Root of baselines/<machine-class>/")
endif()

function(perfgate_add_suite)
  cmake_parse_arguments(PARSE_ARGV 0 S "" "NAME;GPUS;TIMEOUT;SMOKE_FILTER" "SOURCES;LIBRARIES;LABELS;RUN_ARGS")
  if(NOT S_NAME OR NOT S_SOURCES)
    message(FATAL_ERROR "perfgate_add_suite: NAME and SOURCES are required")
  endif()
  if(NOT S_GPUS)
    set(S_GPUS 0)
  endif()
  if(NOT S_TIMEOUT)
    set(S_TIMEOUT 1800)
  endif()

  set(bench bench_${S_NAME})
  add_executable(${bench} ${S_SOURCES})
  target_link_libraries(${bench} PRIVATE perfgate::bench_support ${S_LIBRARIES})
  if(COMMAND perfgate_target_warnings)
    perfgate_target_warnings(${bench})
  endif()
  set_target_properties(${bench} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)

  set(resource_args)
  if(S_GPUS GREATER 0)
    set(resource_args RESOURCE_GROUPS "${S_GPUS},gpus:1")
  endif()

  add_test(NAME perf.${S_NAME}
           COMMAND perfgate::cli run --suite ${S_NAME} --bench $<TARGET_FILE:${bench}>
                   --baseline-dir ${PERFGATE_BASELINE_DIR}
                   --report-dir ${CMAKE_BINARY_DIR}/reports ${S_RUN_ARGS})
  set_tests_properties(perf.${S_NAME} PROPERTIES
    LABELS "perf;${S_LABELS}" SKIP_RETURN_CODE 77 TIMEOUT ${S_TIMEOUT} RUN_SERIAL TRUE ${resource_args})

  if(S_SMOKE_FILTER)
    add_test(NAME smoke.${S_NAME}
             COMMAND ${bench} --benchmark_filter=${S_SMOKE_FILTER} --benchmark_min_time=0.01
                     --benchmark_repetitions=1
                     --benchmark_out=${CMAKE_BINARY_DIR}/reports/smoke.${S_NAME}.json
                     --benchmark_out_format=json)
    set_tests_properties(smoke.${S_NAME} PROPERTIES
      LABELS "smoke;${S_LABELS}" SKIP_RETURN_CODE 77 TIMEOUT 600 ${resource_args})
  endif()
  file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/reports)
endfunction()
