# Layout parity harness: each layout vs the 1-rank run of the same global batch.
# pentad_parity_test(NAME MODEL NP "REF_SETS" "LAYOUT_SETS")
function(pentad_parity_test name model np ref_sets layout_sets)
  add_test(NAME parity_${model}_${name}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_layout.sh
                   ${CMAKE_CURRENT_LIST_DIR}/${model}.toml ${np} "${ref_sets}" "${layout_sets}")
  set_tests_properties(parity_${model}_${name} PROPERTIES LABELS "mpi;parity"
                       ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)
endfunction()

# The same harness on data with a loss mask (PENTAD_LOSS_MASK=1: the
# prompt/completion pairs of tests/data/sft.jsonl): the count of trained
# targets is summed over dp x cp, the loss is the last stage's, the
# vocabulary-parallel loss skips the untrained targets, and the MoE's routing
# losses still weigh every token.
function(pentad_parity_test_masked name model np ref_sets layout_sets)
  pentad_parity_test(${name}_loss_mask ${model} ${np} "${ref_sets}" "${layout_sets}")
  set_tests_properties(parity_${model}_${name}_loss_mask PROPERTIES ENVIRONMENT "${PENTAD_TEST_ENV};PENTAD_LOSS_MASK=1")
endfunction()
pentad_parity_test_masked(dp2 gpt2 2 "--set train.grad_accum=2" "--set parallel.dp=2")
pentad_parity_test_masked(tp2 gpt2 2 "" "--set parallel.tp=2")
pentad_parity_test_masked(pp2 gpt2 2 "--set train.grad_accum=4" "--set parallel.pp=2 --set train.grad_accum=4")
pentad_parity_test_masked(cp2_dp2_zero3 llama 4 "--set train.micro_batch=1 --set train.grad_accum=4"
                          "--set parallel.cp=2 --set parallel.dp=2 --set parallel.zero=3 --set train.micro_batch=1 --set train.grad_accum=2")
pentad_parity_test_masked(dp2_ep2_pp2_zbv moe_gpt2 4 "--set model.n_layers=4 --set train.grad_accum=4"
                          "--set model.n_layers=4 --set parallel.dp=2 --set parallel.ep=2 --set parallel.pp=2 --set parallel.schedule=zbv --set parallel.virtual_stages=2 --set train.grad_accum=2")

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

# ZeRO stages under the same harness (issue: DP + ZeRO-1/2/3).
foreach(model gpt2 llama)
  foreach(z 1 2 3)
    pentad_parity_test(zero${z}_dp2 ${model} 2 "--set train.grad_accum=2" "--set parallel.dp=2 --set parallel.zero=${z}")
    pentad_parity_test(zero${z}_dp4_accum2 ${model} 4 "--set train.grad_accum=8" "--set parallel.dp=4 --set parallel.zero=${z} --set train.grad_accum=2")
  endforeach()
  pentad_parity_test(zero3_dp2_noclip ${model} 2 "--set train.grad_accum=2 --set train.grad_clip=0" "--set parallel.dp=2 --set parallel.zero=3 --set train.grad_clip=0")
  # dp 3: the flat buffers do not divide into 3 shards (padding path); small
  # buckets so several reductions overlap backward.
  pentad_parity_test(zero2_dp3_padding ${model} 3 "--set train.grad_accum=3" "--set parallel.dp=3 --set parallel.zero=2 --set parallel.bucket_mb=0.01")
  pentad_parity_test(zero1_dp3_padding ${model} 3 "--set train.grad_accum=3" "--set parallel.dp=3 --set parallel.zero=1 --set parallel.bucket_mb=0.01")
endforeach()

add_test(NAME dp_no_sync_until_last_micro_batch COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/no_sync.sh ${CMAKE_CURRENT_LIST_DIR}/gpt2.toml)
set_tests_properties(dp_no_sync_until_last_micro_batch PROPERTIES LABELS "mpi;parity"
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)

# Tensor and sequence parallelism (issue: TP/SP). Unlike dp, tp changes the
# summation order inside the matmuls (split-K partial sums of the row-parallel
# layers, the vocab split of the loss); the decks' AdamW eps = 1e-3 (see
# gpt2.toml) keeps the final-parameter check about the layout.
# tp 4 on llama needs n_kv_heads divisible by 4: 8 query / 4 key-value heads.
# sp shards are contiguous ranges of the flattened (B*T) token rows: with
# micro_batch 2 the shards of tp 2 are whole sequences, with micro_batch 1
# (tp2_sp_mb1) every sequence is cut in two (positions, causal attention).
foreach(model gpt2 llama)
  set(c "")
  if(model STREQUAL "llama")
    set(c "--set model.n_heads=8 --set model.n_kv_heads=4")
  endif()
  pentad_parity_test(tp2 ${model} 2 "${c}" "${c} --set parallel.tp=2")
  pentad_parity_test(tp4 ${model} 4 "${c}" "${c} --set parallel.tp=4")
  pentad_parity_test(tp2_sp ${model} 2 "${c}" "${c} --set parallel.tp=2 --set parallel.sp=true")
  pentad_parity_test(tp2_sp_mb1 ${model} 2 "${c} --set train.micro_batch=1 --set train.grad_accum=2" "${c} --set parallel.tp=2 --set parallel.sp=true --set train.micro_batch=1 --set train.grad_accum=2")
  pentad_parity_test(tp2_dp2 ${model} 4 "${c} --set train.grad_accum=2" "${c} --set parallel.tp=2 --set parallel.dp=2")
  pentad_parity_test(tp2_sp_accum4 ${model} 2 "${c} --set train.grad_accum=4" "${c} --set parallel.tp=2 --set parallel.sp=true --set train.grad_accum=4")
  pentad_parity_test(tp2_full ${model} 2 "${c}" "${c} --set parallel.tp=2 --set train.recompute=full")
  pentad_parity_test(tp2_sp_selective ${model} 2 "${c}" "${c} --set parallel.tp=2 --set parallel.sp=true --set train.recompute=selective")
  foreach(z 1 3)
    pentad_parity_test(tp2_dp2_zero${z} ${model} 4 "${c} --set train.grad_accum=2" "${c} --set parallel.tp=2 --set parallel.dp=2 --set parallel.zero=${z}")
  endforeach()
endforeach()

# Fewer key/value heads than tp ranks: each head is held by tp/n_kv_heads
# ranks, whose dK, dV are summed over the copies before the weight
# gradients (KvCopies). One head on tp 2 (the whole tp group, with the q/k/v biases);
# two heads on tp 4 with sp (each head's kv_copies group); one head under pp 2 with zbh1
# (the deferred W reads the summed copies) and the q/k norms; one head with
# cp 2 (ring attention's dK, dV) and sp; q/k norms with biases, where the
# k bias has a real gradient (taken from the summed copies).
set(K1 "--set model.n_kv_heads=1")
pentad_parity_test(tp2_kv1_bias llama 2 "${K1} --set model.qkv_bias=true" "${K1} --set model.qkv_bias=true --set parallel.tp=2")
pentad_parity_test(tp4_sp_kv2 llama 4 "" "--set parallel.tp=4 --set parallel.sp=true")
pentad_parity_test(pp2_tp2_zbh1_kv1_qk_norm llama 4 "${K1} --set model.qk_norm=true --set train.grad_accum=2"
                   "${K1} --set model.qk_norm=true --set parallel.tp=2 --set parallel.pp=2 --set parallel.schedule=zbh1 --set train.grad_accum=2")
pentad_parity_test(cp2_tp2_sp_kv1 llama 4 "${K1}" "${K1} --set parallel.cp=2 --set parallel.tp=2 --set parallel.sp=true")
pentad_parity_test(tp2_kv1_qk_norm_bias llama 2 "${K1} --set model.qk_norm=true --set model.qkv_bias=true"
                   "${K1} --set model.qk_norm=true --set model.qkv_bias=true --set parallel.tp=2")

# Vocabulary padding (model.pad_vocab_to, default 128): V = 300 against the
# unpadded 1-rank run. 1 rank holds 384 rows; tp 2 holds 512 (rank 1: 44 rows
# and 212 of padding); tp 4 holds 512 (rank 3: padding only). The plain tp4
# cases above pad V = 256 to 512 as well. The dumps hold the unpadded tensors.
foreach(model gpt2 llama)
  set(v "--set model.vocab_size=300")
  if(model STREQUAL "llama")
    set(v "${v} --set model.n_heads=8 --set model.n_kv_heads=4")
  endif()
  pentad_parity_test(vocab_pad ${model} 1 "${v} --set model.pad_vocab_to=1" "${v}")
  pentad_parity_test(tp2_sp_vocab_pad ${model} 2 "${v} --set model.pad_vocab_to=1" "${v} --set parallel.tp=2 --set parallel.sp=true")
  pentad_parity_test(tp4_vocab_pad ${model} 4 "${v} --set model.pad_vocab_to=1" "${v} --set parallel.tp=4")
endforeach()
# GPT-2's tied wte on both pipeline ends, padded on each.
pentad_parity_test(tp2_pp2_vocab_pad gpt2 4 "--set model.vocab_size=300 --set model.pad_vocab_to=1 --set train.grad_accum=4"
                   "--set model.vocab_size=300 --set parallel.tp=2 --set parallel.pp=2 --set train.grad_accum=4")

add_test(NAME dp_zero_memory_by_stage COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/memory.sh ${CMAKE_CURRENT_LIST_DIR}/gpt2.toml)
set_tests_properties(dp_zero_memory_by_stage PROPERTIES LABELS "mpi;parity"
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 180)

# Pipeline parallelism (issue: PP). The reference accumulates the same
# micro-batches on one rank; pp 4 needs 4 blocks. GPT-2 ties its embeddings,
# so every gpt2 case also sums wte's gradient over the first and last stage.
foreach(model gpt2 llama)
  set(L4 "--set model.n_layers=4")
  foreach(sched afab 1f1b zbh1)
    pentad_parity_test(pp2_${sched} ${model} 2 "--set train.grad_accum=4"
                       "--set parallel.pp=2 --set parallel.schedule=${sched} --set train.grad_accum=4")
    pentad_parity_test(pp4_${sched} ${model} 4 "${L4} --set train.grad_accum=8"
                       "${L4} --set parallel.pp=4 --set parallel.schedule=${sched} --set train.grad_accum=8")
  endforeach()
  pentad_parity_test(pp2_v2_interleaved ${model} 2 "${L4} --set train.grad_accum=4"
                     "${L4} --set parallel.pp=2 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved --set train.grad_accum=4")
  pentad_parity_test(pp2_dp2_zero1 ${model} 4 "--set train.grad_accum=4"
                     "--set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=1 --set train.grad_accum=2")
endforeach()
# ZeRO-2/3 under a pipeline: each rank reduce-scatters a bucket once its
# units are ready for one micro-batch (counted per micro-batch: a B and its
# W apart, buckets over two chunks of a rank, the tied wte held for the
# pair's sum), and ZeRO-3 gathers no parameters for a W. Small buckets
# (bucket_mb 0.01) put several reductions in flight.
foreach(model gpt2 llama)
  foreach(z 2 3)
    pentad_parity_test(pp2_dp2_zero${z} ${model} 4 "--set train.grad_accum=4"
                       "--set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=${z} --set train.grad_accum=2")
  endforeach()
endforeach()
pentad_parity_test(pp2_dp2_zero2_zbh1_small_buckets llama 4 "--set train.grad_accum=4"
                   "--set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=2 --set parallel.schedule=zbh1 --set parallel.bucket_mb=0.01 --set train.grad_accum=2")
pentad_parity_test(pp2_dp2_zero3_zbh1 gpt2 4 "--set train.grad_accum=4"
                   "--set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=3 --set parallel.schedule=zbh1 --set train.grad_accum=2")
pentad_parity_test(pp2_dp2_zero3_afab llama 4 "--set train.grad_accum=4"
                   "--set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=3 --set parallel.schedule=afab --set train.grad_accum=2")
pentad_parity_test(pp2_v2_dp3_zero3_interleaved_small_buckets gpt2 6 "--set model.n_layers=4 --set train.grad_accum=6"
                   "--set model.n_layers=4 --set parallel.pp=2 --set parallel.dp=3 --set parallel.zero=3 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved --set parallel.bucket_mb=0.01 --set train.grad_accum=2")
pentad_parity_test(pp2_tied_dp2_zero2 llama 4 "--set model.tied_embeddings=true --set train.grad_accum=4"
                   "--set model.tied_embeddings=true --set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=2 --set train.grad_accum=2")
pentad_parity_test(pp2_tp2_sp_dp2_zero3 llama 8 "--set model.n_heads=8 --set model.n_kv_heads=4 --set train.grad_accum=4"
                   "--set model.n_heads=8 --set model.n_kv_heads=4 --set parallel.tp=2 --set parallel.sp=true --set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=3 --set train.grad_accum=2")
pentad_parity_test(pp4_zero3_zbh1 llama 4 "--set model.n_layers=4 --set train.grad_accum=4"
                   "--set model.n_layers=4 --set parallel.pp=4 --set parallel.zero=3 --set parallel.schedule=zbh1 --set train.grad_accum=4")
pentad_parity_test(pp2_tp2 gpt2 4 "--set train.grad_accum=2"
                   "--set parallel.pp=2 --set parallel.tp=2 --set train.grad_accum=2")
pentad_parity_test(pp2_tp2_sp llama 4 "--set model.n_heads=8 --set model.n_kv_heads=4 --set train.grad_accum=2"
                   "--set model.n_heads=8 --set model.n_kv_heads=4 --set parallel.pp=2 --set parallel.tp=2 --set parallel.sp=true --set train.grad_accum=2")
# Llama with tied embeddings across the stages; uneven stages by deck.
pentad_parity_test(pp2_tied llama 2 "--set model.tied_embeddings=true --set train.grad_accum=2"
                   "--set model.tied_embeddings=true --set parallel.pp=2 --set train.grad_accum=2")
pentad_parity_test(pp2_stage_layers gpt2 2 "--set model.n_layers=4 --set train.grad_accum=2"
                   "--set model.n_layers=4 --set parallel.pp=2 --set parallel.stage_layers=3,1 --set train.grad_accum=2")
# Zero-bubble ZB-H1 (issue 22): the split backward composes with dp (ZeRO-1)
# and tp/sp, and the three recompute policies stay bitwise identical under it.
pentad_parity_test(pp2_dp2_zero1_zbh1 llama 4 "--set train.grad_accum=4"
                   "--set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=1 --set parallel.schedule=zbh1 --set train.grad_accum=2")
pentad_parity_test(pp2_tp2_zbh1 gpt2 4 "--set train.grad_accum=2"
                   "--set parallel.pp=2 --set parallel.tp=2 --set parallel.schedule=zbh1 --set train.grad_accum=2")
pentad_parity_test(pp2_tp2_sp_zbh1 llama 4 "--set model.n_heads=8 --set model.n_kv_heads=4 --set train.grad_accum=2"
                   "--set model.n_heads=8 --set model.n_kv_heads=4 --set parallel.pp=2 --set parallel.tp=2 --set parallel.sp=true --set parallel.schedule=zbh1 --set train.grad_accum=2")
# recompute_identical_<model>_pp2_<sched>: the three policies bitwise equal at pp 2 under SETS.
function(pentad_recompute_identical_pp2 model sched sets)
  add_test(NAME recompute_identical_${model}_pp2_${sched}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/recompute_identical.sh ${CMAKE_CURRENT_LIST_DIR}/${model}.toml 2
                   "--set parallel.pp=2 ${sets}")
  set_tests_properties(recompute_identical_${model}_pp2_${sched} PROPERTIES LABELS "mpi;parity"
                       ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)
endfunction()
foreach(model gpt2 llama)
  pentad_recompute_identical_pp2(${model} zbh1 "--set parallel.schedule=zbh1")
endforeach()
# Zero-bubble ZB-V (issue 22): two chunks per rank in a V, the first and the
# last on stage 0 (so a tied wte lives once there); pp 2 and 4, both
# families, and composed with dp (ZeRO-1), tp, tp + sp, cp, MoE/ep and tied
# embeddings across the V.
set(ZBV "--set parallel.virtual_stages=2 --set parallel.schedule=zbv")
foreach(model gpt2 llama)
  pentad_parity_test(pp2_zbv ${model} 2 "--set model.n_layers=4 --set train.grad_accum=4"
                     "--set model.n_layers=4 --set parallel.pp=2 ${ZBV} --set train.grad_accum=4")
  pentad_parity_test(pp4_zbv ${model} 4 "--set model.n_layers=8 --set train.grad_accum=8"
                     "--set model.n_layers=8 --set parallel.pp=4 ${ZBV} --set train.grad_accum=8")
  pentad_recompute_identical_pp2(${model} zbv "--set model.n_layers=4 ${ZBV}")
endforeach()
pentad_parity_test(pp2_dp2_zero1_zbv llama 4 "--set model.n_layers=4 --set train.grad_accum=4"
                   "--set model.n_layers=4 --set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=1 ${ZBV} --set train.grad_accum=2")
foreach(z 2 3)
  pentad_parity_test(pp2_dp2_zero${z}_zbv gpt2 4 "--set model.n_layers=4 --set train.grad_accum=4"
                     "--set model.n_layers=4 --set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=${z} ${ZBV} --set train.grad_accum=2")
endforeach()
pentad_parity_test(pp2_tp2_zbv gpt2 4 "--set model.n_layers=4 --set train.grad_accum=2"
                   "--set model.n_layers=4 --set parallel.pp=2 --set parallel.tp=2 ${ZBV} --set train.grad_accum=2")
pentad_parity_test(pp2_tp2_sp_zbv llama 4 "--set model.n_heads=8 --set model.n_kv_heads=4 --set model.n_layers=4 --set train.grad_accum=2"
                   "--set model.n_heads=8 --set model.n_kv_heads=4 --set model.n_layers=4 --set parallel.pp=2 --set parallel.tp=2 --set parallel.sp=true ${ZBV} --set train.grad_accum=2")
pentad_parity_test(pp2_tied_zbv llama 2 "--set model.n_layers=4 --set model.tied_embeddings=true --set train.grad_accum=2"
                   "--set model.n_layers=4 --set model.tied_embeddings=true --set parallel.pp=2 ${ZBV} --set train.grad_accum=2")
pentad_parity_test(cp2_pp2_zbv llama 4 "--set model.n_layers=4 --set train.grad_accum=2"
                   "--set model.n_layers=4 --set parallel.cp=2 --set parallel.pp=2 ${ZBV} --set train.grad_accum=2")
foreach(model moe_gpt2 moe_llama)
  pentad_parity_test(dp2_ep2_pp2_zbv ${model} 4 "--set model.n_layers=4 --set train.grad_accum=4"
                     "--set model.n_layers=4 --set parallel.dp=2 --set parallel.ep=2 --set parallel.pp=2 ${ZBV} --set train.grad_accum=2")
endforeach()
pentad_parity_test(dp2_ep2_pp2_zero3_zbv moe_llama 4 "--set model.n_layers=4 --set train.grad_accum=4"
                   "--set model.n_layers=4 --set parallel.dp=2 --set parallel.ep=2 --set parallel.pp=2 --set parallel.zero=3 ${ZBV} --set train.grad_accum=2")
# zbv's B then W against 1f1b, bitwise per recompute policy (llama: untied, see the script).
foreach(r none selective full)
  add_test(NAME split_backward_identical_llama_pp2_zbv_${r}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/split_backward_identical.sh ${CMAKE_CURRENT_LIST_DIR}/llama.toml 2
                   "--set model.n_layers=4 --set parallel.pp=2 --set train.grad_accum=4 --set train.recompute=${r}"
                   zbv "--set parallel.virtual_stages=2")
  set_tests_properties(split_backward_identical_llama_pp2_zbv_${r} PROPERTIES LABELS "mpi;parity"
                       ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)
endforeach()
# B then a deferred W is bitwise the fused backward (1f1b), per recompute policy.
foreach(model gpt2 llama)
  foreach(r none selective full)
    add_test(NAME split_backward_identical_${model}_pp2_${r}
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/split_backward_identical.sh ${CMAKE_CURRENT_LIST_DIR}/${model}.toml 2
                     "--set parallel.pp=2 --set train.grad_accum=4 --set train.recompute=${r}")
    set_tests_properties(split_backward_identical_${model}_pp2_${r} PROPERTIES LABELS "mpi;parity"
                         ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)
  endforeach()
endforeach()
add_test(NAME split_backward_identical_llama_pp2_tp2_sp
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/split_backward_identical.sh ${CMAKE_CURRENT_LIST_DIR}/llama.toml 4
                 "--set model.n_heads=8 --set model.n_kv_heads=4 --set parallel.pp=2 --set parallel.tp=2 --set parallel.sp=true --set train.grad_accum=2 --set train.recompute=full")
set_tests_properties(split_backward_identical_llama_pp2_tp2_sp PROPERTIES LABELS "mpi;parity"
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)
pentad_parity_test(pp2_recompute_full gpt2 2 "--set train.recompute=full --set train.grad_accum=2"
                   "--set train.recompute=full --set parallel.pp=2 --set train.grad_accum=2")
pentad_parity_test(pp2_recompute_selective llama 2 "--set train.recompute=selective --set train.grad_accum=2"
                   "--set train.recompute=selective --set parallel.pp=2 --set train.grad_accum=2")

# Activation high-water marks (afab vs 1f1b) against the schedule checker,
# and the trace / bubble report.
add_test(NAME pipeline_activation_high_water COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/pipeline_memory.sh)
add_test(NAME pipeline_trace COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/pipeline_trace.sh)
set_tests_properties(pipeline_activation_high_water pipeline_trace PROPERTIES LABELS "mpi;parity"
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 180)

# Context parallelism (issue 6): ring attention over cp ranks against the
# 1-rank run of the same batch. Zig-zag is the default layout; cp x tp uses
# 8 query / 4 key-value heads on llama (as the tp tests), cp x dp x ZeRO
# shards the optimizer state over dp x cp.
foreach(model gpt2 llama)
  set(c "")
  if(model STREQUAL "llama")
    set(c "--set model.n_heads=8 --set model.n_kv_heads=4")
  endif()
  pentad_parity_test(cp2 ${model} 2 "" "--set parallel.cp=2")
  pentad_parity_test(cp2_contiguous ${model} 2 "" "--set parallel.cp=2 --set parallel.cp_layout=contiguous")
  pentad_parity_test(cp4 ${model} 4 "" "--set parallel.cp=4")
  pentad_parity_test(cp2_tp2 ${model} 4 "${c}" "${c} --set parallel.cp=2 --set parallel.tp=2")
  pentad_parity_test(cp2_dp2_zero1 ${model} 4 "--set train.grad_accum=2" "--set parallel.cp=2 --set parallel.dp=2 --set parallel.zero=1")
endforeach()
# cp x tp x sp (sp splits each cp rank's tokens again over tp), and ZeRO-3 over dp x cp.
pentad_parity_test(cp2_tp2_sp_selective llama 4 "--set model.n_heads=8 --set model.n_kv_heads=4" "--set model.n_heads=8 --set model.n_kv_heads=4 --set parallel.cp=2 --set parallel.tp=2 --set parallel.sp=true --set train.recompute=selective")
pentad_parity_test(cp2_dp2_zero3_full llama 4 "--set train.grad_accum=2" "--set parallel.cp=2 --set parallel.dp=2 --set parallel.zero=3 --set train.recompute=full")
# Llama 3.1's RoPE scaling (original context 64: the 8-wide heads' pairs in all
# three bands) under zig-zag cp, whose ranks hold positions out of order.
set(ROPE3 "--set model.rope_scaling=llama3 --set model.rope_original_context=64")
pentad_parity_test(cp2_rope_llama3 llama 2 "${ROPE3}" "${ROPE3} --set parallel.cp=2")
# YaRN (the 8-wide heads' pairs on both sides of the ramp, untruncated; q and
# k scaled by its attention factor) under zig-zag cp and tp.
set(YARN "--set model.rope_scaling=yarn --set model.rope_scaling_factor=4 --set model.rope_original_context=2048 --set model.rope_truncate=false")
pentad_parity_test(cp2_tp2_rope_yarn llama 4 "${YARN}" "${YARN} --set parallel.cp=2 --set parallel.tp=2")
# LongRoPE (a factor per pair of the 8-wide heads, the long list at the
# training context 16 > 8; q and k scaled by its attention factor) under
# zig-zag cp and tp.
set(LONGROPE "--set model.rope_scaling=longrope --set model.rope_scaling_factor=4 --set model.rope_original_context=8 --set model.rope_short_factor=[1,1.25,1.5,2] --set model.rope_long_factor=[1,2.5,7,20]")
pentad_parity_test(cp2_tp2_rope_longrope llama 4 "${LONGROPE}" "${LONGROPE} --set parallel.cp=2 --set parallel.tp=2")
# A partial rotary (RoPE on the first 4 channels of the 8-wide heads) under
# zig-zag cp and tp with sp.
set(PARTIAL "--set model.rotary_dim=4")
pentad_parity_test(cp2_tp2_sp_partial_rotary llama 4 "${PARTIAL}" "${PARTIAL} --set parallel.cp=2 --set parallel.tp=2 --set parallel.sp=true")
# Gemma (GeGLU, RMSNorms scaling by 1 + w, embeddings times sqrt(d_model),
# a tied head): the scaled embedding on the first pipeline stage, the tied
# copy of wte unscaled in the last stage's head, under tp with sp; and the
# GeGLU experts under ep with ZeRO-2.
set(GEMMA "--set model.mlp_act=gelu_tanh --set model.norm_plus_one=true --set model.embed_scale=true --set model.tied_embeddings=true")
pentad_parity_test(tp2_pp2_sp_gemma llama 4 "${GEMMA} --set train.grad_accum=2" "${GEMMA} --set train.grad_accum=2 --set parallel.tp=2 --set parallel.pp=2 --set parallel.sp=true")
pentad_parity_test(dp2_ep2_zero2_gemma moe_llama 2 "${GEMMA} --set train.grad_accum=2" "${GEMMA} --set parallel.dp=2 --set parallel.ep=2 --set parallel.zero=2")

# Ring attention recomputes its probabilities in every policy: none,
# selective and full stay bitwise identical under cp.
add_test(NAME recompute_identical_llama_cp2
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/recompute_identical.sh ${CMAKE_CURRENT_LIST_DIR}/llama.toml 2 "--set parallel.cp=2")
set_tests_properties(recompute_identical_llama_cp2 PROPERTIES LABELS "mpi;parity"
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)

# Context x pipeline parallelism.
pentad_parity_test(cp2_pp2 gpt2 4 "--set train.grad_accum=2" "--set parallel.cp=2 --set parallel.pp=2 --set train.grad_accum=2")
pentad_parity_test(cp2_pp2 llama 4 "--set train.grad_accum=2" "--set parallel.cp=2 --set parallel.pp=2 --set train.grad_accum=2")

# Mixture of experts and expert parallelism (issue: MoE/EP). moe_gpt2: every
# block MoE; moe_llama: block 1 MoE, block 0 dense (so with pp 2 the first
# stage holds no expert). Routing groups are single sequences, so every
# layout routes and drops the same tokens as the 1-rank run; the dumps also
# compare the per-step aux loss.
foreach(model moe_gpt2 moe_llama)
  pentad_parity_test(dp2_ep2 ${model} 2 "--set train.grad_accum=2" "--set parallel.dp=2 --set parallel.ep=2")
  pentad_parity_test(dp4_ep4 ${model} 4 "--set train.grad_accum=4" "--set parallel.dp=4 --set parallel.ep=4")
  # expert_dp of size 2: expert gradients reduced over dp/ep, ZeRO-1 shards both stores.
  pentad_parity_test(dp4_ep2_zero1 ${model} 4 "--set train.grad_accum=4" "--set parallel.dp=4 --set parallel.ep=2 --set parallel.zero=1")
  pentad_parity_test(dp2_ep2_zero1 ${model} 2 "--set train.grad_accum=2" "--set parallel.dp=2 --set parallel.ep=2 --set parallel.zero=1")
  pentad_parity_test(dp2_ep2_pp2 ${model} 4 "--set train.grad_accum=4" "--set parallel.dp=2 --set parallel.ep=2 --set parallel.pp=2 --set train.grad_accum=2")
  # ZB-H1: the MoE layer's backward stays whole in B; the attention's W is deferred.
  pentad_parity_test(dp2_ep2_pp2_zbh1 ${model} 4 "--set train.grad_accum=4" "--set parallel.dp=2 --set parallel.ep=2 --set parallel.pp=2 --set parallel.schedule=zbh1 --set train.grad_accum=2")
  pentad_parity_test(dp2_ep2_full_dropless ${model} 2 "--set model.dropless=true --set train.grad_accum=2"
                     "--set model.dropless=true --set parallel.dp=2 --set parallel.ep=2 --set train.recompute=full")
  add_test(NAME recompute_identical_${model}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/recompute_identical.sh ${CMAKE_CURRENT_LIST_DIR}/${model}.toml)
  set_tests_properties(recompute_identical_${model} PROPERTIES LABELS "mpi;parity"
                       ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
endforeach()
# ZeRO-2/3 shard both stores (gradient windows and gathered parameter units
# per store; units without experts skipped); small buckets, accumulation.
pentad_parity_test(dp4_ep2_zero3_accum2 moe_gpt2 4 "--set train.grad_accum=8"
                   "--set parallel.dp=4 --set parallel.ep=2 --set parallel.zero=3 --set train.grad_accum=2 --set parallel.bucket_mb=0.01")
pentad_parity_test(dp4_ep2_zero2_accum2 moe_llama 4 "--set train.grad_accum=8"
                   "--set parallel.dp=4 --set parallel.ep=2 --set parallel.zero=2 --set train.grad_accum=2 --set parallel.bucket_mb=0.01")
pentad_parity_test(dp2_ep2_zero3 moe_llama 2 "--set train.grad_accum=2" "--set parallel.dp=2 --set parallel.ep=2 --set parallel.zero=3")
# TP: the MoE layer is replicated over tp (no sp); dense layers split as usual.
foreach(model moe_gpt2 moe_llama)
  pentad_parity_test(dp2_ep2_tp2 ${model} 4 "--set train.grad_accum=2" "--set parallel.dp=2 --set parallel.ep=2 --set parallel.tp=2")
endforeach()
pentad_parity_test(tp2_full moe_gpt2 2 "" "--set parallel.tp=2 --set train.recompute=full")
pentad_parity_test(tp2_pp2_zero1 moe_llama 4 "--set train.grad_accum=2" "--set parallel.tp=2 --set parallel.pp=2 --set parallel.zero=1 --set train.grad_accum=2")
# Expert tp (parallel.expert_tp): each expert's d_ff split over tp as a dense
# MLP's, the expert outputs and the rows' input gradients summed over tp.
foreach(model moe_gpt2 moe_llama)
  pentad_parity_test(tp2_expert_tp ${model} 2 "" "--set parallel.tp=2 --set parallel.expert_tp=true")
  pentad_parity_test(dp2_ep2_tp2_expert_tp ${model} 4 "--set train.grad_accum=2" "--set parallel.dp=2 --set parallel.ep=2 --set parallel.tp=2 --set parallel.expert_tp=true")
endforeach()
pentad_parity_test(tp2_sp_full_expert_tp moe_gpt2 2 "" "--set parallel.tp=2 --set parallel.sp=true --set parallel.expert_tp=true --set train.recompute=full")
pentad_parity_test(tp2_pp2_zero1_expert_tp moe_llama 4 "--set train.grad_accum=2" "--set parallel.tp=2 --set parallel.pp=2 --set parallel.zero=1 --set parallel.expert_tp=true --set train.grad_accum=2")
pentad_parity_test(tp4_expert_tp moe_gpt2 4 "" "--set parallel.tp=4 --set parallel.expert_tp=true")
pentad_parity_test(cp2_tp2_sp_expert_tp moe_llama 4 "" "--set parallel.cp=2 --set parallel.tp=2 --set parallel.sp=true --set parallel.expert_tp=true")
# ZeRO-3 over dp (expert_dp 2) gathers the expert units cut over tp.
pentad_parity_test(dp2_tp2_zero3_expert_tp moe_gpt2 4 "--set train.grad_accum=2" "--set parallel.dp=2 --set parallel.tp=2 --set parallel.zero=3 --set parallel.expert_tp=true")
# SP: the MoE layer sees the all-gathered rows, each tp rank keeps its own.
# CP: each cp rank routes its tokens; capacity is decided on the whole
# sequence from the exchanged top-k choices (moe_llama drops tokens at
# capacity_factor 1.0, so a wrong order shows).
foreach(model moe_gpt2 moe_llama)
  pentad_parity_test(tp2_sp ${model} 2 "" "--set parallel.tp=2 --set parallel.sp=true")
  pentad_parity_test(cp2 ${model} 2 "" "--set parallel.cp=2")
  pentad_parity_test(cp2_dp2_ep2 ${model} 4 "--set train.grad_accum=2" "--set parallel.cp=2 --set parallel.dp=2 --set parallel.ep=2")
endforeach()
pentad_parity_test(tp2_sp_full moe_gpt2 2 "" "--set parallel.tp=2 --set parallel.sp=true --set train.recompute=full")
pentad_parity_test(cp4_contiguous_dropless_full moe_gpt2 4 "--set model.dropless=true"
                   "--set model.dropless=true --set parallel.cp=4 --set parallel.cp_layout=contiguous --set train.recompute=full")
pentad_parity_test(cp2_tp2_sp moe_llama 4 "" "--set parallel.cp=2 --set parallel.tp=2 --set parallel.sp=true")
pentad_parity_test(cp2_pp2_zero1 moe_llama 4 "--set train.grad_accum=2" "--set parallel.cp=2 --set parallel.pp=2 --set parallel.zero=1 --set train.grad_accum=2")
pentad_parity_test(cp2_dp2_ep2_zero3 moe_gpt2 4 "--set train.grad_accum=2" "--set parallel.cp=2 --set parallel.dp=2 --set parallel.ep=2 --set parallel.zero=3")

# The validation loss: the same fixed windows of data.val, the same val_loss
# under dp, cp, tp, pp and every micro_batch x grad_accum split.
add_test(NAME parity_val_loss_layouts COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/val_loss.sh ${CMAKE_CURRENT_LIST_DIR}/gpt2.toml)
set_tests_properties(parity_val_loss_layouts PROPERTIES LABELS "mpi;parity"
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)
# data.val with several entries: each evaluated alone (val_loss_<k>), equal
# to a run on that entry alone, the same under dp, cp, tp and pp.
add_test(NAME parity_val_sources COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/val_sources.sh ${CMAKE_CURRENT_LIST_DIR}/gpt2.toml)
set_tests_properties(parity_val_sources PROPERTIES LABELS "mpi;parity"
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)

# Datasets (io/dataset.hpp): three shards blended 2:1 with a fourth file and
# read in epoch order, and three shards as one body in random order; @DATA@
# is the harness's data folder (tests/lib/make_shards.sh). Each rank's
# slice of the global batch must be the 1-rank run's rows.
set(blend "--set data.train=@DATA@/p*/train.bin,@DATA@/train.bin --set data.weights=2,1 --set data.order=epoch")
pentad_parity_test(data_blend_epoch_dp2_pp2 gpt2 4 "--set train.grad_accum=4 ${blend}"
                   "--set parallel.dp=2 --set parallel.pp=2 --set train.grad_accum=2 ${blend}")
pentad_parity_test(data_shards_dp4 llama 4 "--set train.grad_accum=4 --set data.train=@DATA@/p*/train.bin"
                   "--set parallel.dp=4 --set data.train=@DATA@/p*/train.bin")

# data.choice_eval (multiple-choice accuracy) in five layouts against 1 rank.
add_test(NAME parity_choice_eval COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/choice_eval.sh ${CMAKE_CURRENT_LIST_DIR}/gpt2.toml)
set_tests_properties(parity_choice_eval PROPERTIES LABELS "mpi;parity"
  ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)

# Qwen2's attention (model.qkv_bias on the llama deck, tied head): the q/k/v
# biases split over tp (with sp: their gradients summed over the sequence
# shards), over a ring of cp ranks, sharded by ZeRO-3 across pipeline stages.
set(QWEN2 "--set model.qkv_bias=true --set model.tied_embeddings=true --set model.n_heads=8 --set model.n_kv_heads=4")
pentad_parity_test(qwen2_tp2_sp llama 2 "${QWEN2}" "${QWEN2} --set parallel.tp=2 --set parallel.sp=true")
pentad_parity_test(qwen2_cp2 llama 2 "${QWEN2}" "${QWEN2} --set parallel.cp=2")
pentad_parity_test(qwen2_pp2_dp2_zero3 llama 4 "${QWEN2} --set train.grad_accum=4"
                   "${QWEN2} --set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=3 --set train.grad_accum=2")

# A head dimension of its own (model.head_dim = 12 in a 32-wide model of 8
# heads: q and the attention output 96 wide, k and v 24 (2 kv heads)):
# the heads split over tp with sp, a ring of cp ranks, ZeRO-3 over stages.
set(HEADDIM "--set model.head_dim=12 --set model.n_heads=8")
pentad_parity_test(headdim_tp2_sp llama 2 "${HEADDIM}" "${HEADDIM} --set parallel.tp=2 --set parallel.sp=true")
pentad_parity_test(headdim_cp2 llama 2 "${HEADDIM}" "${HEADDIM} --set parallel.cp=2")
pentad_parity_test(headdim_pp2_dp2_zero3 llama 4 "${HEADDIM} --set train.grad_accum=4"
                   "${HEADDIM} --set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=3 --set train.grad_accum=2")

# Qwen3's q/k norms on those heads: one weight shared by every head, whose
# gradient each tp rank sees for its own heads only (summed over tp with or
# without sp), over a ring of cp ranks, sharded by ZeRO-3 across stages.
set(QWEN3 "${HEADDIM} --set model.qk_norm=true --set model.tied_embeddings=true")
pentad_parity_test(qwen3_tp2 llama 2 "${QWEN3}" "${QWEN3} --set parallel.tp=2")
pentad_parity_test(qwen3_tp2_sp llama 2 "${QWEN3}" "${QWEN3} --set parallel.tp=2 --set parallel.sp=true")
pentad_parity_test(qwen3_cp2 llama 2 "${QWEN3}" "${QWEN3} --set parallel.cp=2")
pentad_parity_test(qwen3_pp2_dp2_zero3 llama 4 "${QWEN3} --set train.grad_accum=4"
                   "${QWEN3} --set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=3 --set train.grad_accum=2")

# Qwen3-MoE (model.qk_norm on the MoE llama, heads of 12 in the 32-wide
# model): the q/k norms' gradients summed over tp beside the experts split
# over tp (expert_tp, with sp), and the experts over ep with the norms
# replicated over dp.
set(QWEN3MOE "--set model.qk_norm=true --set model.head_dim=12 --set model.n_heads=8")
pentad_parity_test(qwen3moe_dp2_ep2 moe_llama 2 "${QWEN3MOE} --set train.grad_accum=2"
                   "${QWEN3MOE} --set parallel.dp=2 --set parallel.ep=2")
pentad_parity_test(qwen3moe_tp2_sp_expert_tp moe_llama 2 "${QWEN3MOE}"
                   "${QWEN3MOE} --set parallel.tp=2 --set parallel.sp=true --set parallel.expert_tp=true")

# A shared expert (model.shared_expert_ffn; gated: model.shared_expert_gate,
# Qwen2-MoE's): a dense MLP in the MoE block, replicated over ep and (without
# expert tp) over tp, its width split over tp with expert_tp, beside the
# routed experts over ep, cp, pipeline stages (1F1B and ZB-H1) and ZeRO.
set(SHARED_GATED "--set model.shared_expert_ffn=48 --set model.shared_expert_gate=true")
set(SHARED "--set model.shared_expert_ffn=64")
pentad_parity_test(shared_dp2_ep2_zero3 moe_llama 2 "${SHARED_GATED} --set train.grad_accum=2"
                   "${SHARED_GATED} --set parallel.dp=2 --set parallel.ep=2 --set parallel.zero=3")
pentad_parity_test(shared_tp2_sp_expert_tp moe_llama 2 "${SHARED_GATED}"
                   "${SHARED_GATED} --set parallel.tp=2 --set parallel.sp=true --set parallel.expert_tp=true")
pentad_parity_test(shared_cp2_tp2_sp_expert_tp moe_llama 4 "${SHARED_GATED}"
                   "${SHARED_GATED} --set parallel.cp=2 --set parallel.tp=2 --set parallel.sp=true --set parallel.expert_tp=true")
pentad_parity_test(shared_pp2_dp2_zero1 moe_llama 4 "${SHARED_GATED} --set train.grad_accum=4"
                   "${SHARED_GATED} --set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=1 --set train.grad_accum=2")
pentad_parity_test(shared_pp2_zbh1 moe_llama 2 "${SHARED_GATED} --set train.grad_accum=4"
                   "${SHARED_GATED} --set parallel.pp=2 --set parallel.schedule=zbh1 --set train.grad_accum=4")
pentad_parity_test(shared_tp2_full moe_gpt2 2 "${SHARED}" "${SHARED} --set parallel.tp=2 --set train.recompute=full")
pentad_parity_test(shared_tp4_expert_tp moe_gpt2 4 "${SHARED}" "${SHARED} --set parallel.tp=4 --set parallel.expert_tp=true")
pentad_parity_test(shared_gated_tp2_sp_full_expert_tp moe_gpt2 2 "${SHARED} --set model.shared_expert_gate=true"
                   "${SHARED} --set model.shared_expert_gate=true --set parallel.tp=2 --set parallel.sp=true --set parallel.expert_tp=true --set train.recompute=full")

# The grouped message plan (parallel.pp_p2p = grouped: NCCL's way, run here
# over MPI with one tag, so messages pair by order as NCCL pairs them) gives
# bitwise the eager run: 1f1b across four stages with GPT-2's tied ends,
# interleaved (activations and gradients of several chunks in one stream
# between two ranks), zbv (the V's turn a message to oneself) and zbh1 with dp.
function(pentad_grouped_identical name model np sets)
  add_test(NAME grouped_identical_${model}_${name}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/grouped_identical.sh ${CMAKE_CURRENT_LIST_DIR}/${model}.toml ${np} "${sets}")
  set_tests_properties(grouped_identical_${model}_${name} PROPERTIES LABELS "mpi;parity"
                       ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)
endfunction()
pentad_grouped_identical(pp4_1f1b gpt2 4 "--set model.n_layers=4 --set parallel.pp=4 --set train.grad_accum=8")
pentad_grouped_identical(pp2_v2_interleaved llama 2
  "--set model.n_layers=4 --set parallel.pp=2 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved --set train.grad_accum=4")
pentad_grouped_identical(pp4_zbv llama 4
  "--set model.n_layers=8 --set parallel.pp=4 --set parallel.virtual_stages=2 --set parallel.schedule=zbv --set train.grad_accum=8")
pentad_grouped_identical(pp2_dp2_zbh1 gpt2 4 "--set parallel.pp=2 --set parallel.dp=2 --set parallel.schedule=zbh1 --set train.grad_accum=4")
