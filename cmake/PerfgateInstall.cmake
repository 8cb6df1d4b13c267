# Install + export of the perfgate CMake package, so a user's project can do
#   find_package(perfgate REQUIRED)
#   perfgate_add_suite(NAME my_kernels SOURCES bench.cpp LABELS cpu SMOKE_FILTER ".")
# Installed: the targets perfgate::contract, perfgate::harness, perfgate::bench_support[, perfgate::bench_support_cuda],
# perfgate::cli (the `perfgate` executable), their headers, docs/ under <prefix>/share/doc/perfgate, and
# cmake/PerfgateSuite.cmake and perfgateConfig.cmake / perfgateConfigVersion.cmake under <prefix>/lib/cmake/perfgate.
# Everything is in the install component "perfgate": `cmake --install build --component perfgate`.
include_guard(GLOBAL)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PERFGATE_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/perfgate" CACHE STRING
    "Where perfgateConfig.cmake is installed, relative to the prefix")

set(perfgate_export_targets perfgate_contract perfgate_harness perfgate_bench_support perfgate)
if(TARGET perfgate_bench_support_cuda)
  list(APPEND perfgate_export_targets perfgate_bench_support_cuda)
endif()

install(TARGETS ${perfgate_export_targets} EXPORT perfgateTargets COMPONENT perfgate
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/harness/include/ ${PROJECT_SOURCE_DIR}/harness/contract/include/
                  ${PROJECT_SOURCE_DIR}/benches/support/include/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT perfgate FILES_MATCHING PATTERN "*.hpp")
# The docs beside the executable: the reports link their glossary (docs/statistics.md) there.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT perfgate
        FILES_MATCHING PATTERN "*.md" PATTERN "*.png" PATTERN "examples-data" EXCLUDE)
install(EXPORT perfgateTargets NAMESPACE perfgate:: DESTINATION ${PERFGATE_INSTALL_CMAKEDIR}
        FILE perfgateTargets.cmake COMPONENT perfgate)

set(PERFGATE_PACKAGE_HAVE_CUDA ${PERFGATE_HAVE_CUDA})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/perfgateConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/perfgateConfig.cmake INSTALL_DESTINATION ${PERFGATE_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/perfgateConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/perfgateConfig.cmake ${PROJECT_BINARY_DIR}/cmake/perfgateConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/PerfgateSuite.cmake
        DESTINATION ${PERFGATE_INSTALL_CMAKEDIR} COMPONENT perfgate)
