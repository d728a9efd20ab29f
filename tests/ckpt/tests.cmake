# Checkpoint tests: the MPI program (GTest on every rank: splits, pruning,
# errors, export) on 4 oversubscribed ranks, and the kill -9 crash-safety script.
pentad_mpi_gtest(test_checkpoint ${PROJECT_SOURCE_DIR}/tests/mpi/test_checkpoint.cpp)
target_include_directories(test_checkpoint SYSTEM PRIVATE ${HDF5_C_INCLUDE_DIRS})

add_test(NAME ckpt_mpi_4 COMMAND ${PENTAD_MPIEXEC} -n 4 $<TARGET_FILE:test_checkpoint>)
set_tests_properties(ckpt_mpi_4 PROPERTIES LABELS "mpi;ckpt" ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)

add_test(NAME ckpt_crash_safety COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/crash_safety.sh
  $<TARGET_FILE:test_checkpoint>)
set_tests_properties(ckpt_crash_safety PROPERTIES LABELS "mpi;ckpt" ENVIRONMENT "${PENTAD_TEST_ENV}"
  TIMEOUT 180)

add_test(NAME ckpt_cli COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/cli.sh $<TARGET_FILE:test_checkpoint>)
set_tests_properties(ckpt_cli PROPERTIES LABELS "mpi;ckpt" ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)

# Training resume, reshard and signal, end to end with the pentad binary.
add_test(NAME ckpt_resume_bitwise_1rank COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh bitwise 1 "")
add_test(NAME ckpt_resume_bitwise_tp2_dp2_zero1 COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh bitwise 4
  "--set parallel.tp=2 --set parallel.dp=2 --set parallel.zero=1")
# Pipeline stages (tied wte on the first and last stage, both holding it).
add_test(NAME ckpt_resume_bitwise_pp2 COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh bitwise 2
  "--set parallel.pp=2 --set train.grad_accum=2")
# The same, every checkpoint written by every rank with MPI-IO
# (checkpoint.gather_below_mb = 0; the tiny checkpoints of the tests are
# otherwise gathered to rank 0 and written by it). On 2 ranks: 4-rank
# collective writes oversubscribe these 2-core machines (checkpoints.md).
add_test(NAME ckpt_resume_bitwise_pp2_parallel_write COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh bitwise 2
  "--set parallel.pp=2 --set train.grad_accum=2 --set checkpoint.gather_below_mb=0")
# zbv: two chunks per stage in a V, the tied wte once on stage 0.
add_test(NAME ckpt_resume_bitwise_pp2_zbv COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh bitwise 2
  "--set model.n_layers=4 --set parallel.pp=2 --set parallel.virtual_stages=2 --set parallel.schedule=zbv --set train.grad_accum=2")
# Context parallelism with ZeRO-1 sharded over dp x cp (here cp 2).
add_test(NAME ckpt_resume_bitwise_cp2_zero1 COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh bitwise 2
  "--set parallel.cp=2 --set parallel.zero=1")
# ZeRO-3 under a pipeline (zbh1, gpt2's tied wte on both ends): bitwise
# resume, and its checkpoint loaded under 1 rank and pp2 x dp2 ZeRO-2.
add_test(NAME ckpt_resume_bitwise_pp2_dp2_zero3 COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh bitwise 4
  "--set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=3 --set parallel.schedule=zbh1 --set train.grad_accum=2")
# Three shards read in epoch order (210 windows of 64 tokens, 32 sequences a
# step: the first epoch ends at step 7, after the resume at 5).
add_test(NAME ckpt_resume_bitwise_shards_epoch COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh bitwise 2
  "--set parallel.dp=2 --set model.seq_len=64 --set train.micro_batch=16 --set data.train=@DATA@/p*/val.bin --set data.order=epoch")
add_test(NAME ckpt_resume_epoch_batch_change COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh epoch_batch_change)
add_test(NAME ckpt_reshard_pp2_dp2_zero3 COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh pp_zero3_reshard)
add_test(NAME ckpt_reshard COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh reshard)
add_test(NAME ckpt_reshard_zbv COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh zbv_reshard)
add_test(NAME ckpt_signal COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh signal)
add_test(NAME ckpt_reshard_vocab_pad COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh vocab_pad)
add_test(NAME ckpt_reshard_kv_copies COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh kv_copies)
add_test(NAME ckpt_reshard_shared_expert COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh shared_expert)
set_tests_properties(ckpt_resume_bitwise_1rank ckpt_resume_bitwise_tp2_dp2_zero1 ckpt_resume_bitwise_pp2
  ckpt_resume_bitwise_pp2_parallel_write
  ckpt_resume_bitwise_pp2_zbv ckpt_resume_bitwise_cp2_zero1 ckpt_reshard_zbv
  ckpt_resume_bitwise_pp2_dp2_zero3 ckpt_reshard_pp2_dp2_zero3 ckpt_resume_bitwise_shards_epoch ckpt_resume_epoch_batch_change
  ckpt_signal ckpt_reshard_vocab_pad ckpt_reshard_kv_copies ckpt_reshard_shared_expert
  PROPERTIES LABELS "mpi;ckpt" ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)
# Six 4-rank trainings.
set_tests_properties(ckpt_reshard PROPERTIES LABELS "mpi;ckpt" ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 600)

# MoE: bitwise resume under dp2 x ep2 zero1, and an ep-split checkpoint saved under dp2 x ep2 x tp2
# loaded under 1 rank, dp4 x ep4 zero3 and dp2 x ep2 x pp2.
add_test(NAME ckpt_moe_resume_reshard COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/resume.sh moe)
set_tests_properties(ckpt_moe_resume_reshard PROPERTIES LABELS "mpi;ckpt" ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)

# checkpoint.init_from and the Hugging Face export on 2 ranks: llm.c .bin
# round trip (v3 bitwise, v5 bf16), pentad weights only, sharded safetensors,
# and the bad-input messages.
add_test(NAME ckpt_init_from COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/init_from.sh)
set_tests_properties(ckpt_init_from PROPERTIES LABELS "mpi;ckpt" ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)

# train.steps = 0 (and a resume already at train.steps): one evaluation of
# the weights loaded, equal to the training run's last one.
add_test(NAME ckpt_eval_only COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/eval_only.sh)
set_tests_properties(ckpt_eval_only PROPERTIES LABELS "mpi;ckpt" ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)
