# perfgate_add_suite(NAME <suite>
#                    [SOURCES <files...>]        the bench's sources (default: bench_<suite>.cpp, the layout of
#                                                every suite under benches/)
#                    [LIBRARIES <targets...>]
#                    [LABELS <labels...>]        e.g. cpu, gpu, amx ("gpu" is added when GPUS > 0)
#                    [GPUS <n>]                  GPUs the tests need (ctest RESOURCE_GROUPS: n groups of gpus:1)
#                    [TIMEOUT <seconds>]         perf test timeout (default 1800)
#                    [SMOKE_FILTER <regex>]      registers smoke.<suite>: one quick, correctness-checked pass
#                    [GATE_FILTER <regex>]       the benchmarks perf.<suite> and ci/perf.sh gate and baselines hold
#                                                (default: cases/gate.txt beside the suite's CMakeLists.txt, else
#                                                all); anchor it with the suite name, e.g. "^x/(a|b)/"
#                    [RELATIVE_FILTER <regex>]   the benchmarks gated against a reference build when no stored
#                                                baseline fits: both builds are measured, so a main job that must
#                                                stay short keeps the most valuable ones (default:
#                                                cases/relative.txt, else the gate filter)
#                    [RUN_ARGS <args...>])       extra arguments for `perfgate run` (e.g. --rounds 5)
#
# Builds the Google Benchmark binary bench_<suite> (into <build>/bin) and registers
#   perf.<suite>   `perfgate run --bench bench_<suite>` against baselines/<machine-class>/<suite>.json, or,
#                  when none fits, against a reference revision built here (the merge base by default)
#                  (labels perf + LABELS; RUN_SERIAL; reports in <build>/reports/)
#   smoke.<suite>  the binary once with a tiny min time; exits 3 on a failed check  (labels smoke + LABELS)
# Both carry SKIP_RETURN_CODE 77, so missing hardware, or neither a baseline nor a reference revision, reads
# as a skip in ctest.
# GPU tests carry RESOURCE_GROUPS; give ctest the machine's GPUs with
#   ci/gpu-resource-spec.sh > gpus.json && ctest --resource-spec-file gpus.json ...
# `perfgate run` maps the GPUs ctest allots (CTEST_RESOURCE_GROUP_<i>_GPUS) to CUDA_VISIBLE_DEVICES.
# Works in this build and, after `find_package(perfgate)`, in a user's project (see examples/).
#
# Case lists are data: cases/gate.txt (and cases/relative.txt) hold one pattern a line, a benchmark name
# below "<suite>/" or a short regex; '#' starts a comment, blank lines are skipped. The lines are joined
# into ^<suite>/(line|line|...)(/|$), so a line matches whole name components.
include_guard(GLOBAL)

# perfgate_cases_filter(<file> <suite> <out-var>): the regex of a case list (above). Reconfigures when the
# file changes. A list without a pattern is an error: it would gate nothing.
function(perfgate_cases_filter file suite out_var)
  if(NOT CMAKE_SCRIPT_MODE_FILE)  # (cmake -P: the unit test of this function)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${file})
  endif()
  file(STRINGS ${file} lines)
  set(patterns)
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "#.*$" "" line "${line}")
    string(STRIP "${line}" line)
    if(NOT line STREQUAL "")
      list(APPEND patterns "${line}")
    endif()
  endforeach()
  if(NOT patterns)
    message(FATAL_ERROR "perfgate_add_suite(${suite}): ${file} lists no case")
  endif()
  list(JOIN patterns "|" joined)
  set(${out_var} "^${suite}/(${joined})(/|$)" PARENT_SCOPE)
endfunction()

if(NOT DEFINED PERFGATE_BASELINE_DIR)
  set(PERFGATE_BASELINE_DIR "${PROJECT_SOURCE_DIR}/baselines" CACHE PATH "Root of baselines/<machine-class>/")
endif()

function(perfgate_add_suite)
  cmake_parse_arguments(PARSE_ARGV 0 S "" "NAME;GPUS;TIMEOUT;SMOKE_FILTER;GATE_FILTER;RELATIVE_FILTER"
                        "SOURCES;LIBRARIES;LABELS;RUN_ARGS")
  if(NOT S_NAME)
    message(FATAL_ERROR "perfgate_add_suite: NAME is required")
  endif()
  if(NOT S_NAME MATCHES "^[A-Za-z0-9_.-]+$")
    message(FATAL_ERROR "perfgate_add_suite: NAME '${S_NAME}' must match [A-Za-z0-9_.-]+ (it names files)")
  endif()
  if(NOT S_SOURCES)
    set(S_SOURCES bench_${S_NAME}.cpp)
  endif()
  if(NOT S_GPUS)
    set(S_GPUS 0)
  endif()
  if(NOT S_TIMEOUT)
    set(S_TIMEOUT 1800)
  endif()
  set(labels ${S_LABELS})
  if(S_GPUS GREATER 0 AND NOT "gpu" IN_LIST labels)
    list(APPEND labels gpu)
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

  # ci/perf.sh runs every suite in one `perfgate run` and joins these filters (names start with the suite).
  if(NOT S_GATE_FILTER AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/cases/gate.txt)
    perfgate_cases_filter(${CMAKE_CURRENT_SOURCE_DIR}/cases/gate.txt ${S_NAME} S_GATE_FILTER)
  elseif(NOT S_GATE_FILTER)
    set(S_GATE_FILTER "^${S_NAME}/")
  endif()
  if(NOT S_RELATIVE_FILTER AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/cases/relative.txt)
    perfgate_cases_filter(${CMAKE_CURRENT_SOURCE_DIR}/cases/relative.txt ${S_NAME} S_RELATIVE_FILTER)
  elseif(NOT S_RELATIVE_FILTER)
    set(S_RELATIVE_FILTER "${S_GATE_FILTER}")
  endif()
  set(gate_args --filter "${S_GATE_FILTER}" --relative-filter "${S_RELATIVE_FILTER}")
  file(WRITE ${CMAKE_BINARY_DIR}/suites/${S_NAME}.gate_filter "${S_GATE_FILTER}")
  file(WRITE ${CMAKE_BINARY_DIR}/suites/${S_NAME}.relative_filter "${S_RELATIVE_FILTER}")

  # perfgate run reads it before measuring: a suite that needs more GPUs than the machine has is not
  # built or measured for a reference revision.
  file(WRITE ${CMAKE_BINARY_DIR}/suites/${S_NAME}.gpus "${S_GPUS}")

  add_test(NAME perf.${S_NAME}
           COMMAND perfgate::cli run --bench $<TARGET_FILE:${bench}>
                   --baseline-dir ${PERFGATE_BASELINE_DIR}
                   --report-dir ${CMAKE_BINARY_DIR}/reports ${gate_args} ${S_RUN_ARGS})
  set_tests_properties(perf.${S_NAME} PROPERTIES
    LABELS "perf;${labels}" SKIP_RETURN_CODE 77 TIMEOUT ${S_TIMEOUT} RUN_SERIAL TRUE ${resource_args})

  if(S_SMOKE_FILTER)
    add_test(NAME smoke.${S_NAME}
             COMMAND ${bench} --benchmark_filter=${S_SMOKE_FILTER} --benchmark_min_time=0.01
                     --benchmark_repetitions=1
                     --benchmark_out=${CMAKE_BINARY_DIR}/reports/smoke.${S_NAME}.json
                     --benchmark_out_format=json)
    set_tests_properties(smoke.${S_NAME} PROPERTIES
      LABELS "smoke;${labels}" SKIP_RETURN_CODE 77 TIMEOUT 600 ${resource_args})
  endif()
  file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/reports)
endfunction()
