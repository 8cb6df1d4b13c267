# Developer targets for the project's habits (docs/architecture.md, "Habits"):
#   format        clang-format -i over every C++/CUDA file git tracks (.clang-format)
#   format-check  the same as a check: fails and names the files that are not formatted
#   lint          clang-tidy (.clang-tidy) over harness/, from this build's compile_commands.json, and the
#                 function-size check over benches/ and examples/; fails on any finding
#   lint-benches  that function-size check alone (clang-tidy for C++, tools/check_function_size.py for CUDA)
# Each target exists only when its tool is installed (Debian: clang-format, clang-tidy; ci/setup.sh).
find_program(PERFGATE_CLANG_FORMAT NAMES clang-format)
find_program(PERFGATE_RUN_CLANG_TIDY NAMES run-clang-tidy)
find_program(PERFGATE_GIT NAMES git)
find_package(Python3 COMPONENTS Interpreter)

if(PERFGATE_CLANG_FORMAT AND PERFGATE_GIT)
  # The file list comes from git when the target runs, so new files need no reconfigure.
  set(perfgate_format_files
      "${PERFGATE_GIT} -C ${PROJECT_SOURCE_DIR} ls-files -z -- '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh'")
  add_custom_target(format
    COMMAND sh -c "${perfgate_format_files} | (cd ${PROJECT_SOURCE_DIR} && xargs -0 ${PERFGATE_CLANG_FORMAT} -i)"
    COMMENT "clang-format: formatting the tracked C++ and CUDA files"
    VERBATIM)
  add_custom_target(format-check
    COMMAND sh -c
            "${perfgate_format_files} | (cd ${PROJECT_SOURCE_DIR} && xargs -0 ${PERFGATE_CLANG_FORMAT} --dry-run -Werror)"
    COMMENT "clang-format: checking the tracked C++ and CUDA files"
    VERBATIM)
endif()

# benches/ and examples/ under the function-size habit: clang-tidy's readability-function-size over their C++
# sources, and tools/check_function_size.py over their CUDA sources, which clang-tidy cannot read from this build
# (nvcc's command lines; clang parses CUDA only up to older toolkits than the one the suites need), so the
# clang-tidy part selects the .cpp entries of compile_commands.json only.
set(PERFGATE_BENCHES_TIDY_ARGS -quiet -p ${CMAKE_BINARY_DIR} -extra-arg=-Wno-unknown-warning-option
    -checks=-*,readability-function-size -header-filter=.*/benches/.*
    "^${PROJECT_SOURCE_DIR}/(benches|examples)/.*\\.cpp$")
set(PERFGATE_BENCHES_SIZE_SCRIPT ${PROJECT_SOURCE_DIR}/tools/check_function_size.py ${PROJECT_SOURCE_DIR} benches
    examples)

if(PERFGATE_RUN_CLANG_TIDY AND Python3_Interpreter_FOUND)
  # The build's flags are GCC's: clang-tidy (clang) is told to ignore the GCC-only warning options.
  add_custom_target(lint
    COMMAND ${PERFGATE_RUN_CLANG_TIDY} -quiet -p ${CMAKE_BINARY_DIR} -extra-arg=-Wno-unknown-warning-option
            "${PROJECT_SOURCE_DIR}/harness/"
    COMMAND ${PERFGATE_RUN_CLANG_TIDY} ${PERFGATE_BENCHES_TIDY_ARGS}
    COMMAND Python3::Interpreter ${PERFGATE_BENCHES_SIZE_SCRIPT}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "clang-tidy: checking harness/ (.clang-tidy), and benches/ and examples/ for function size"
    VERBATIM)
  # The benches/ and examples/ part of `lint` alone.
  add_custom_target(lint-benches
    COMMAND ${PERFGATE_RUN_CLANG_TIDY} ${PERFGATE_BENCHES_TIDY_ARGS}
    COMMAND Python3::Interpreter ${PERFGATE_BENCHES_SIZE_SCRIPT}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "readability-function-size: checking benches/ and examples/ (C++ by clang-tidy, CUDA by tools/)"
    VERBATIM)
endif()
