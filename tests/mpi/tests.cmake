# MPI tests: the grid's communicators, and the layout parity harness.
add_executable(test_topology_mpi ${CMAKE_CURRENT_LIST_DIR}/test_topology_mpi.cpp)
target_compile_options(test_topology_mpi PRIVATE ${PENTAD_WARNINGS})
target_link_libraries(test_topology_mpi PRIVATE pentad_lib pentad_runtime)
add_test(NAME mpi_topology_8 COMMAND ${PENTAD_MPIEXEC} -n 8 $<TARGET_FILE:test_topology_mpi>)
set_tests_properties(mpi_topology_8 PROPERTIES LABELS mpi ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)

# Tensor-parallel layers against their serial twins (tp = 2 and 4).
add_executable(test_tensor_parallel_mpi ${CMAKE_CURRENT_LIST_DIR}/test_tensor_parallel_mpi.cpp)
target_compile_options(test_tensor_parallel_mpi PRIVATE ${PENTAD_WARNINGS})
target_link_libraries(test_tensor_parallel_mpi PRIVATE pentad_lib pentad_runtime)
add_test(NAME mpi_tensor_parallel_2 COMMAND ${PENTAD_MPIEXEC} -n 2 $<TARGET_FILE:test_tensor_parallel_mpi>)
add_test(NAME mpi_tensor_parallel_4 COMMAND ${PENTAD_MPIEXEC} -n 4 $<TARGET_FILE:test_tensor_parallel_mpi> quick)
set_tests_properties(mpi_tensor_parallel_2 mpi_tensor_parallel_4 PROPERTIES LABELS mpi
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)

# Ring attention and the context-parallel model against their serial twins
# (cp = 2 and 4, contiguous and zig-zag, GQA), and the cp index math.
add_executable(test_context_parallel_mpi ${CMAKE_CURRENT_LIST_DIR}/test_context_parallel_mpi.cpp)
target_compile_options(test_context_parallel_mpi PRIVATE ${PENTAD_WARNINGS})
target_link_libraries(test_context_parallel_mpi PRIVATE pentad_lib pentad_runtime)
add_test(NAME mpi_context_parallel_2 COMMAND ${PENTAD_MPIEXEC} -n 2 $<TARGET_FILE:test_context_parallel_mpi>)
add_test(NAME mpi_context_parallel_4 COMMAND ${PENTAD_MPIEXEC} -n 4 $<TARGET_FILE:test_context_parallel_mpi> quick)
set_tests_properties(mpi_context_parallel_2 mpi_context_parallel_4 PROPERTIES LABELS mpi
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)

# The MoE layer with expert parallelism against every expert on one rank
# (ep = 2 and 4), and its router/aux-loss gradients by finite differences.
add_executable(test_moe_mpi ${CMAKE_CURRENT_LIST_DIR}/test_moe_mpi.cpp)
target_compile_options(test_moe_mpi PRIVATE ${PENTAD_WARNINGS})
target_link_libraries(test_moe_mpi PRIVATE pentad_lib pentad_runtime)
add_test(NAME mpi_moe_ep2 COMMAND ${PENTAD_MPIEXEC} -n 2 $<TARGET_FILE:test_moe_mpi>)
add_test(NAME mpi_moe_ep4 COMMAND ${PENTAD_MPIEXEC} -n 4 $<TARGET_FILE:test_moe_mpi>)
add_test(NAME moe_aux_loss_finite_differences COMMAND ${PENTAD_MPIEXEC} -n 1 $<TARGET_FILE:test_moe_mpi> fd)
set_tests_properties(mpi_moe_ep2 mpi_moe_ep4 moe_aux_loss_finite_differences PROPERTIES LABELS mpi
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
