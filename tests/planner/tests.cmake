# The layout planner (issue: scaling benchmarks and a planner users can trust).
# Memory model vs measured peaks on the parity suite's layouts, the planner's
# choice runs and fits, bad input, and the report on a recorded CSV.
foreach(model gpt2 llama)
  add_test(NAME planner_memory_model_${model}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/memory_model.sh ${model})
  set_tests_properties(planner_memory_model_${model} PROPERTIES LABELS "mpi;planner"
                       ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 400)
  # Context parallelism (the model's decks) and MoE / expert parallelism (moe_<model>).
  add_test(NAME planner_memory_model_cp_moe_${model}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/memory_model.sh ${model} cp_moe)
  set_tests_properties(planner_memory_model_cp_moe_${model} PROPERTIES LABELS "mpi;planner"
                       ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 200)
  add_test(NAME planner_memory_model_zbh1_${model}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/memory_model.sh ${model} zbh1)
  set_tests_properties(planner_memory_model_zbh1_${model} PROPERTIES LABELS "mpi;planner"
                       ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 200)
endforeach()
add_test(NAME planner_choice_runs_and_fits COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/choice_fits.sh)
add_test(NAME planner_bad_input COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bad_input.sh)
add_test(NAME planner_report_fixture COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/report_fixture.sh)
set_tests_properties(planner_choice_runs_and_fits planner_bad_input planner_report_fixture PROPERTIES
                     LABELS "mpi;planner" ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 180)
