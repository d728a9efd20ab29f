# Checkpoint tests: the MPI program (splits, pruning, errors, export) on 4
# oversubscribed ranks, and the kill -9 crash-safety script.
add_executable(test_checkpoint ${PROJECT_SOURCE_DIR}/tests/mpi/test_checkpoint.cpp)
target_compile_options(test_checkpoint PRIVATE ${PENTAD_WARNINGS})
target_link_libraries(test_checkpoint PRIVATE pentad_core pentad_cpu)
target_include_directories(test_checkpoint SYSTEM PRIVATE ${HDF5_C_INCLUDE_DIRS})

add_test(NAME ckpt_mpi_4 COMMAND ${PENTAD_MPIEXEC} -n 4 $<TARGET_FILE:test_checkpoint>)
set_tests_properties(ckpt_mpi_4 PROPERTIES LABELS "mpi;ckpt" ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)

add_test(NAME ckpt_crash_safety COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/crash_safety.sh
  $<TARGET_FILE:test_checkpoint>)
set_tests_properties(ckpt_crash_safety PROPERTIES LABELS "mpi;ckpt" ENVIRONMENT "${PENTAD_TEST_ENV}"
  TIMEOUT 180)
