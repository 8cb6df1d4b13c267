# ctest unit.example_install_package: cmake --install this build into a fresh prefix, then configure,
# build and run examples/user_project against it, as a user would.
#   -DPERFGATE_BUILD_DIR=<this build>  -DEXAMPLE_SOURCE_DIR=<examples/user_project>  -DWORK_DIR=<scratch>
#   [-DDEPENDENCY_PREFIXES=a|b]  where the build found its dependencies ('|'-separated)
cmake_minimum_required(VERSION 3.25)
foreach(v PERFGATE_BUILD_DIR EXAMPLE_SOURCE_DIR WORK_DIR)
  if(NOT ${v})
    message(FATAL_ERROR "test_install_package: -D${v}= is required")
  endif()
endforeach()
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step '${name}' failed (${rc}):\n${ARGN}\n--- stdout\n${out}\n--- stderr\n${err}")
  endif()
  message(STATUS "ok: ${name}")
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

step(install ${CMAKE_COMMAND} --install ${PERFGATE_BUILD_DIR} --prefix ${prefix} --component perfgate)
foreach(f lib/cmake/perfgate/perfgateConfig.cmake lib/cmake/perfgate/PerfgateSuite.cmake bin/perfgate
          include/perfgate/bench/main.hpp include/perfgate/model.hpp share/doc/perfgate/statistics.md)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install is missing ${f}")
  endif()
endforeach()

string(REPLACE "|" ";" search_path "${prefix}|${DEPENDENCY_PREFIXES}")
step(configure ${CMAKE_COMMAND} -S ${EXAMPLE_SOURCE_DIR} -B ${WORK_DIR}/build
     "-DCMAKE_PREFIX_PATH=${search_path}" -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE})
step(build ${CMAKE_COMMAND} --build ${WORK_DIR}/build --parallel 2)

# The suite's tests are registered with the labels perfgate_add_suite gives them.
step(list ${CMAKE_CTEST_COMMAND} --test-dir ${WORK_DIR}/build -N -L perf)
if(NOT step_output MATCHES "perf\\.user_saxpy")
  message(FATAL_ERROR "perf.user_saxpy is not registered:\n${step_output}")
endif()
step(smoke ${CMAKE_CTEST_COMMAND} --test-dir ${WORK_DIR}/build -L smoke --output-on-failure)

# The installed CLI runs the user's bench end to end (no baseline: record only).
step(run ${prefix}/bin/perfgate run --bench ${WORK_DIR}/build/bin/bench_user_saxpy --record-only
     --rounds 1 --repetitions 2 --min-time 0.01 --report-dir ${WORK_DIR}/reports)
if(NOT EXISTS ${WORK_DIR}/reports/perf-report.md OR NOT EXISTS ${WORK_DIR}/reports/perf-report.json)
  message(FATAL_ERROR "perfgate run wrote no report into ${WORK_DIR}/reports")
endif()
# Its reports link the installed glossary, from where they lie.
file(GLOB run_files ${WORK_DIR}/reports/runs/*.current.json)
list(GET run_files 0 run_file)
execute_process(COMMAND ${prefix}/bin/perfgate compare ${run_file} ${run_file} -q --markdown ${WORK_DIR}/cmp/report.md)
file(READ ${WORK_DIR}/cmp/report.md report)
if(NOT report MATCHES "\\(\\.\\./prefix/share/doc/perfgate/statistics\\.md#glossary\\)")
  message(FATAL_ERROR "the report does not link the installed glossary:\n${report}")
endif()
message(STATUS "installed package works: ${prefix}")
