# ctest driver for the loader fuzzer: a fresh work corpus each time, so that every run is the same
# (fixed seed, fixed number of runs, the committed seed corpus).
# Variables: FUZZER, SEEDS, DICT, WORK, RUNS.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
execute_process(
  COMMAND "${FUZZER}" -seed=1 -runs=${RUNS} -max_len=16384 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
          "-dict=${DICT}" "${WORK}" "${SEEDS}"
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out)
string(LENGTH "${out}" n)
if(n GREATER 4000)
  math(EXPR start "${n} - 4000")
  string(SUBSTRING "${out}" ${start} -1 out)
endif()
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "loader fuzzer failed (exit ${rc}); crash input, if any, is in the working folder")
endif()
