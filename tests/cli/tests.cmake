# Bad-input tests: each case runs `pentad` under mpiexec -n 2 and checks the
# message, the exit code on every rank and that nothing hangs or is left behind.
foreach(case missing_data truncated_data bad_magic token_out_of_vocab token_out_of_vocab_late
        data_glob_no_match data_named_twice data_bad_shard data_weights_count data_weights_not_number
        data_weights_zero_share data_order_unknown loss_mask_cut loss_mask_val_untrained prep_pairs_half
        prep_pairs_plain_file lr_wsd_no_decay lr_wsd_too_long lr_decay_without_wsd unreadable_deck
        non_numeric set_unknown_key set_non_numeric toml_syntax bad_layout heads_not_dividing
        cp_seq_len_zigzag cp_seq_len_contiguous
        unwritable_dir unwritable_metrics diverged_no_partial_output unknown_command
        pp_too_few_micro_batches pp_interleaved_not_multiple pp_stage_layers
        zbh1_too_few_micro_batches zbh1_virtual_stages zbv_virtual_stages zbv_too_few_micro_batches zbv_empty_chunk
        moe_ep_not_dividing_dp moe_ep_not_dividing_experts moe_top_k moe_capacity_zero moe_ep_dense
        schedule_unknown_kind choice_missing choice_token_file choice_bad_label choice_ending_too_long)
  add_test(NAME cli_bad_input_${case}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bad_input.sh ${case})
  set_tests_properties(cli_bad_input_${case} PROPERTIES LABELS "mpi;cli"
                       ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
endforeach()

add_test(NAME default_run_tiny_dp2 COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/default_run.sh)
set_tests_properties(default_run_tiny_dp2 PROPERTIES LABELS "mpi;cli"
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 400)

# Training-loop failures (issue 17): a diverged step names the step, the
# ranks and the first non-finite quantity; SIGINT checkpoints and exits 130
# (a second one kills at once); a directory as deck; train.steps = 0.
foreach(case nan_loss_pp2 nan_grad_dp2_zero2 deck_directory zero_steps sigint sigint_twice)
  add_test(NAME cli_train_${case} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/train_failures.sh ${case})
  set_tests_properties(cli_train_${case} PROPERTIES LABELS "mpi;cli"
                       ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 180)
endforeach()

# 32-bit token files (issue 18): a 128256-token vocabulary trains, and tp=2
# matches 1 rank.
add_test(NAME cli_wide_vocab COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/wide_vocab.sh)
set_tests_properties(cli_wide_vocab PROPERTIES LABELS "mpi;cli" ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 180)

# `pentad sample` (issue 18): bad input, seeds, top-k 1, the weight sources
# and the seq_len bound, a Hugging Face directory's refusals and its generation_config.json
# sampling defaults (tests/cli/sample.sh).
foreach(case one_rank vocab_mismatch prompt_too_long empty_prompt temperature_negative top_p_zero
        top_p_above_one min_p_above_one top_k_negative repetition_penalty_zero threads_negative temperature_not_a_number missing_checkpoint not_a_checkpoint
        both_prompts pattern_without_tokenizer seed_repeats top_k_one_is_greedy export_and_latest
        stops_at_seq_len stop_strings hf_dir_errors hf_dir_generation_config)
  add_test(NAME cli_sample_${case} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/sample.sh ${case})
  set_tests_properties(cli_sample_${case} PROPERTIES LABELS "mpi;cli" ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
endforeach()

# train.sample_every on 2 ranks equals the 1-rank samples (tests/cli/train_sample.sh).
foreach(layout tp2 pp2 ep2 zero3 cp2)
  add_test(NAME cli_train_sample_${layout} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/train_sample.sh ${layout})
  set_tests_properties(cli_train_sample_${layout} PROPERTIES LABELS "mpi;cli" ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 180)
endforeach()

# Epoch order end to end: every window of three shards once in the first
# epoch, counted from the files by the test (tests/cli/data_epoch.sh).
add_test(NAME cli_data_epoch COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/data_epoch.sh)
set_tests_properties(cli_data_epoch PROPERTIES LABELS "mpi;cli" ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)

# train.threads = 0: the node's cores shared among its ranks (tests/cli/threads.sh).
add_test(NAME cli_threads_default COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/threads.sh)
set_tests_properties(cli_threads_default PROPERTIES LABELS "mpi;cli" ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)

# `pentad prep` streams: peak memory flat from a 48 MiB to a 192 MiB corpus,
# the shards equal to the corpus (tests/cli/prep_stream.sh).
add_test(NAME cli_prep_stream COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/prep_stream.sh)
set_tests_properties(cli_prep_stream PROPERTIES LABELS "cli" ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 300)

# Every deck in input/ parses and is planned on 8 ranks of 80 GiB; the Llama
# 3.2 1B deck has the published parameter count.
add_test(NAME cli_input_decks COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/input_decks.sh)
set_tests_properties(cli_input_decks PROPERTIES LABELS "cli;planner"
                     ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
