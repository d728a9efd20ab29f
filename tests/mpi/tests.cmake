# MPI tests (GTest on every rank, tests/lib/gtest_mpi_main.cpp): the grid's
# communicators, and the parallel layers against their serial twins.
pentad_mpi_gtest(test_topology_mpi ${CMAKE_CURRENT_LIST_DIR}/test_topology_mpi.cpp)
add_test(NAME mpi_topology_8 COMMAND ${PENTAD_MPIEXEC} -n 8 $<TARGET_FILE:test_topology_mpi>)
set_tests_properties(mpi_topology_8 PROPERTIES LABELS mpi ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)

# Tensor-parallel layers against their serial twins (tp = 2 and 4; on 4
# ranks recompute none only: 4 ranks oversubscribe small CI machines).
pentad_mpi_gtest(test_tensor_parallel_mpi ${CMAKE_CURRENT_LIST_DIR}/test_tensor_parallel_mpi.cpp)
add_test(NAME mpi_tensor_parallel_2 COMMAND ${PENTAD_MPIEXEC} -n 2 $<TARGET_FILE:test_tensor_parallel_mpi>)
add_test(NAME mpi_tensor_parallel_4 COMMAND ${PENTAD_MPIEXEC} -n 4 $<TARGET_FILE:test_tensor_parallel_mpi>
         --gtest_filter=-*_selective:*_full)
set_tests_properties(mpi_tensor_parallel_2 mpi_tensor_parallel_4 PROPERTIES LABELS mpi
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)

# Ring attention and the context-parallel model against their serial twins
# (cp = 2 and 4, contiguous and zig-zag, GQA), and the cp index math (on 4
# ranks the model with recompute none only).
pentad_mpi_gtest(test_context_parallel_mpi ${CMAKE_CURRENT_LIST_DIR}/test_context_parallel_mpi.cpp)
add_test(NAME mpi_context_parallel_2 COMMAND ${PENTAD_MPIEXEC} -n 2 $<TARGET_FILE:test_context_parallel_mpi>)
add_test(NAME mpi_context_parallel_4 COMMAND ${PENTAD_MPIEXEC} -n 4 $<TARGET_FILE:test_context_parallel_mpi>
         --gtest_filter=-*_selective:*_full)
set_tests_properties(mpi_context_parallel_2 mpi_context_parallel_4 PROPERTIES LABELS mpi
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)

# The MoE layer with expert parallelism against every expert on one rank
# (ep = 2 and 4), and its router/aux-loss gradients by finite differences.
pentad_mpi_gtest(test_moe_mpi ${CMAKE_CURRENT_LIST_DIR}/test_moe_mpi.cpp)
add_test(NAME mpi_moe_ep2 COMMAND ${PENTAD_MPIEXEC} -n 2 $<TARGET_FILE:test_moe_mpi>
         --gtest_filter=-*FiniteDifferences*)
add_test(NAME mpi_moe_ep4 COMMAND ${PENTAD_MPIEXEC} -n 4 $<TARGET_FILE:test_moe_mpi>
         --gtest_filter=-*FiniteDifferences*)
add_test(NAME moe_aux_loss_finite_differences COMMAND ${PENTAD_MPIEXEC} -n 1 $<TARGET_FILE:test_moe_mpi>
         --gtest_filter=*FiniteDifferences*)
set_tests_properties(mpi_moe_ep2 mpi_moe_ep4 moe_aux_loss_finite_differences PROPERTIES LABELS mpi
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)

# The bf16 weight copies on a ZeRO-1 rank that owns no shard (2 ranks).
pentad_mpi_gtest(test_weight_copies_mpi ${CMAKE_CURRENT_LIST_DIR}/test_weight_copies_mpi.cpp)
add_test(NAME mpi_weight_copies_zero1 COMMAND ${PENTAD_MPIEXEC} -n 2 $<TARGET_FILE:test_weight_copies_mpi>)
set_tests_properties(mpi_weight_copies_zero1 PROPERTIES LABELS "mpi;precision" ENVIRONMENT "${PENTAD_TEST_ENV}"
                     TIMEOUT 120)

# The watchdog's profiling layer: the blocking calls HDF5 makes, run as
# non-blocking calls plus a yielding wait, give MPI's results (3 ranks).
pentad_mpi_gtest(test_watchdog_mpi ${CMAKE_CURRENT_LIST_DIR}/test_watchdog_mpi.cpp)
target_link_libraries(test_watchdog_mpi PRIVATE ${CMAKE_DL_LIBS})
add_test(NAME mpi_watchdog_layer_3 COMMAND ${PENTAD_MPIEXEC} -n 3 $<TARGET_FILE:test_watchdog_mpi>)
set_tests_properties(mpi_watchdog_layer_3 PROPERTIES LABELS mpi ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
