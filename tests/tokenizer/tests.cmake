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
