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
# Qwen3's attention (q/k norms on heads of their own width) likewise.
set(_qwen3 "--set model.qk_norm=true --set model.head_dim=12 --set model.n_heads=8")
add_test(NAME bf16_follows_fp32_qwen3
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/loss_curves.sh ${PROJECT_SOURCE_DIR}/tests/parity/llama.toml 20 1e-2
                 "${_qwen3}" "${_qwen3} --set train.dtype=bf16")
set_tests_properties(bf16_follows_fp32_qwen3 PROPERTIES LABELS "precision"
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)

# bf16's two storage options, each with and without (KEY, the deck key;
# bf16_storage_identical.sh): bitwise-identical gradients, losses and final
# parameters. Test names: <prefix>_<name>.
set(_wc ${CMAKE_CURRENT_LIST_DIR}/bf16_storage_identical.sh)
set(_parity ${PROJECT_SOURCE_DIR}/tests/parity)
function(pentad_bf16_storage_test key prefix name deck np sets resume)
  add_test(NAME ${prefix}_${name} COMMAND bash ${_wc} ${_parity}/${deck}.toml ${np} "${sets}")
  set(labels "precision")
  if(np GREATER 1)
    set(labels "precision;mpi")
  endif()
  set_tests_properties(${prefix}_${name} PROPERTIES LABELS "${labels}" TIMEOUT 300
                       ENVIRONMENT "${PENTAD_TEST_ENV};RESUME=${resume};KEY=${key}")
endfunction()

# The bf16 weight copies (Backend::keep_weight_copy), in every layout
# that writes the weights differently (the optimizer over a ZeRO shard and
# its gather, ZeRO-3's per-unit windows, tp slices, pipeline stages with a
# tied embedding, the expert store, cp) and across a resume.
function(pentad_weight_copies_test name deck np sets resume)
  pentad_bf16_storage_test(bf16_weight_copies weight_copies_identical ${name} ${deck} ${np} "${sets}" ${resume})
endfunction()
pentad_weight_copies_test(gpt2 gpt2 1 "" 0)
pentad_weight_copies_test(llama_resume llama 1 "" 1)
pentad_weight_copies_test(gpt2_dp2_zero1 gpt2 2 "--set parallel.dp=2 --set parallel.zero=1" 0)
pentad_weight_copies_test(llama_dp2_zero3_resume llama 2 "--set parallel.dp=2 --set parallel.zero=3" 1)
pentad_weight_copies_test(gpt2_tp2_sp gpt2 2 "--set parallel.tp=2 --set parallel.sp=true" 0)
pentad_weight_copies_test(llama_pp2_tied llama 2
                          "--set model.tied_embeddings=true --set parallel.pp=2 --set parallel.schedule=1f1b" 0)
pentad_weight_copies_test(moe_llama_dp2_ep2_zero3 moe_llama 2
                          "--set parallel.dp=2 --set parallel.ep=2 --set parallel.zero=3" 0)
pentad_weight_copies_test(llama_cp2 llama 2 "--set parallel.cp=2" 0)
# The gated shared expert (dense store) split over tp with expert tp.
pentad_weight_copies_test(moe_llama_shared_tp2_sp_expert_tp moe_llama 2
                          "--set model.shared_expert_ffn=48 --set model.shared_expert_gate=true --set parallel.tp=2 --set parallel.sp=true --set parallel.expert_tp=true" 0)

# The activations held in bf16 (train.bf16_activations,
# Backend::hold_gemm_form: the MLP activation and the norm outputs), in
# the layouts that write or read them differently: GELU (in linear_fwd) and
# SwiGLU, LayerNorm and RMSNorm, tp slices (the norm outputs held without
# sp, not with it), selective recompute (the MLP activation rebuilt in
# scratch), full recompute under zbh1 (B's copies for the deferred W), full
# recompute with an MoE block (the shared set's ln2 not held), pipeline
# stages, MoE blocks beside dense ones, cp, and a resume.
function(pentad_bf16_activations_test name deck np sets resume)
  pentad_bf16_storage_test(bf16_activations bf16_activations_identical ${name} ${deck} ${np} "${sets}" ${resume})
endfunction()
pentad_bf16_activations_test(gpt2 gpt2 1 "" 0)
pentad_bf16_activations_test(llama_resume llama 1 "" 1)
pentad_bf16_activations_test(gpt2_selective gpt2 1 "--set train.recompute=selective" 0)
pentad_bf16_activations_test(gpt2_tp2_sp gpt2 2 "--set parallel.tp=2 --set parallel.sp=true" 0)
pentad_bf16_activations_test(llama_tp2 llama 2 "--set parallel.tp=2" 0)
pentad_bf16_activations_test(llama_cp2 llama 2 "--set parallel.cp=2" 0)
# q and k held in bf16 after Qwen3's norms (normalized in fp32 scratch first).
pentad_bf16_activations_test(qwen3_tp2 llama 2 "${_qwen3} --set parallel.tp=2" 0)
pentad_bf16_activations_test(moe_llama_full moe_llama 1 "--set model.moe_every=2 --set train.recompute=full" 0)
pentad_bf16_activations_test(llama_pp2_zbh1_full llama 2
                             "--set parallel.pp=2 --set parallel.schedule=zbh1 --set train.recompute=full" 0)
pentad_bf16_activations_test(moe_gpt2_pp2 moe_gpt2 2
                             "--set model.moe_every=2 --set parallel.pp=2 --set parallel.schedule=1f1b" 0)
