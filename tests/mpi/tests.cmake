# MPI tests: the grid's communicators, and the layout parity harness.
add_executable(test_topology_mpi ${CMAKE_CURRENT_LIST_DIR}/test_topology_mpi.cpp)
target_compile_options(test_topology_mpi PRIVATE ${PENTAD_WARNINGS})
target_link_libraries(test_topology_mpi PRIVATE pentad_core pentad_cpu)
add_test(NAME mpi_topology_8 COMMAND ${PENTAD_MPIEXEC} -n 8 $<TARGET_FILE:test_topology_mpi>)
set_tests_properties(mpi_topology_8 PROPERTIES LABELS mpi ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
