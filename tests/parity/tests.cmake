# Layout parity harness: each layout vs the 1-rank run of the same global batch.
# pentad_parity_test(NAME MODEL NP "REF_SETS" "LAYOUT_SETS")
function(pentad_parity_test name model np ref_sets layout_sets)
  add_test(NAME parity_${model}_${name}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_layout.sh
                   ${CMAKE_CURRENT_LIST_DIR}/${model}.toml ${np} "${ref_sets}" "${layout_sets}")
  set_tests_properties(parity_${model}_${name} PROPERTIES LABELS "mpi;parity"
                       ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)
endfunction()

foreach(model gpt2 llama)
  # dp 2 and 4 against one rank accumulating the same global batch.
  pentad_parity_test(dp2 ${model} 2 "--set train.grad_accum=2" "--set parallel.dp=2")
  pentad_parity_test(dp4 ${model} 4 "--set train.grad_accum=4" "--set parallel.dp=4")
  # dp 2 with gradient accumulation 2 (4 micro-batches of the global batch).
  pentad_parity_test(dp2_accum2 ${model} 2 "--set train.grad_accum=4" "--set parallel.dp=2 --set train.grad_accum=2")
  # Without clipping.
  pentad_parity_test(dp2_noclip ${model} 2 "--set train.grad_accum=2 --set train.grad_clip=0" "--set parallel.dp=2 --set train.grad_clip=0")
endforeach()

foreach(model gpt2 llama)
  add_test(NAME recompute_identical_${model}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/recompute_identical.sh ${CMAKE_CURRENT_LIST_DIR}/${model}.toml)
  set_tests_properties(recompute_identical_${model} PROPERTIES LABELS "mpi;parity"
                       ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
endforeach()
