// One chat turn as a prompt (`pentad sample --chat`): the user's text, and
// a system text if given, wrapped in the chat tokens of the tokenizer's
// family, with the assistant's turn opened for the model to answer.
//   chatml (Qwen2, Qwen2.5, Qwen3; <|im_start|> and <|im_end|>):
//     [<|im_start|>system\n SYSTEM <|im_end|>\n] <|im_start|>user\n USER <|im_end|>\n <|im_start|>assistant\n
//   llama3 (Llama 3 Instruct; <|start_header_id|>, <|end_header_id|>, <|eot_id|>):
//     <|begin_of_text|> [<|start_header_id|>system<|end_header_id|>\n\n SYSTEM <|eot_id|>]
//     <|start_header_id|>user<|end_header_id|>\n\n USER <|eot_id|> <|start_header_id|>assistant<|end_header_id|>\n\n
//     (SYSTEM and USER with leading and trailing whitespace removed, as
//     Llama 3's template trims them)
// These are the fixed parts of the families' chat templates only: a
// template that adds text of its own (Qwen2.5's default system prompt when
// none is given, Llama 3.1's date lines) is not reproduced; render such a
// template yourself and pass it with --special (docs/sampling.md).
#pragma once

#include <cstdint>
#include <string>

#include "tok/tokenizer.hpp"

namespace pentad {

enum class ChatFormat { chatml, llama3 };

// The format whose tokens tok has (chatml first), or an InputError naming
// the tokens it lacks.
ChatFormat chat_format(const Tokenizer& tok);
const char* chat_format_name(ChatFormat f);

// The turn's text, special tokens written as their text (for
// encode_with_specials). system "" = no system turn. no_think (chatml
// only, Qwen3's enable_thinking = false): an empty thinking block
// "<think>\n\n</think>\n\n" after the assistant's header, so the model
// answers without thinking first.
std::string chat_prompt(ChatFormat f, const std::string& system, const std::string& user, bool no_think = false);

// The id that ends the assistant's turn: <|im_end|> or <|eot_id|>.
int64_t chat_end_of_turn(const Tokenizer& tok, ChatFormat f);

}  // namespace pentad
