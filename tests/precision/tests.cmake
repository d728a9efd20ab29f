# Mixed precision (train.dtype = bf16) on the CPU backend, where bf16 is
# emulated by rounding the GEMM operands (cpu/gemm.cpp). The unit tests of the
# rounding, the GEMM and the master weights are tests/unit/test_bf16.cpp.
#
# Loss-curve tolerance: per-step relative difference <= 1e-2 from the fp32
# run of the same deck, data and seed, over 20 steps. Why: bf16 keeps 8
# significand bits, a unit roundoff u = 2^-9 ~ 2e-3 per rounded operand; the
# loss is a smooth function of GEMM outputs whose relative error is of order
# u, so one forward moves it by a fraction of u, and 20 AdamW steps compound
# that mildly (the two runs see the same batches). 1e-2 is 5 u: a curve that
# leaves it is not "the same training at lower precision". Measured on the
# tiny deck at the time of writing: worst 7e-4 (step 15), mean ~1.5e-4.
foreach(model tiny llama)
  if(model STREQUAL "tiny")
    set(deck ${PROJECT_SOURCE_DIR}/input/tiny.toml)
  else()
    set(deck ${PROJECT_SOURCE_DIR}/tests/parity/llama.toml)
  endif()
  add_test(NAME bf16_follows_fp32_${model}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/loss_curves.sh ${deck} 20 1e-2 ""
                   "--set train.dtype=bf16")
  set_tests_properties(bf16_follows_fp32_${model} PROPERTIES LABELS "precision"
                       ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)
endforeach()
