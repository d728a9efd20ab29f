# Reliability guards (issue #17): memory refusal and named allocation
# failures, the MPI watchdog against a frozen rank, each a script run under
# mpiexec -n 2 that checks the message, the exit code and the time to exit.
foreach(case micro_batch n_layers d_model alloc)
  add_test(NAME guard_memory_${case} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/guard_memory.sh ${case})
  set_tests_properties(guard_memory_${case} PROPERTIES LABELS "mpi;reliability"
                       ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
endforeach()
add_test(NAME guard_frozen_rank COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/guard_frozen_rank.sh)
set_tests_properties(guard_frozen_rank PROPERTIES LABELS "mpi;reliability"
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
