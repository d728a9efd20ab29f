// A conversation as a prompt (`pentad sample --chat`, `--messages`): each
// message (role system, user or assistant; the last the user's) wrapped in
// the chat tokens of the tokenizer's family, with the assistant's turn
// opened for the model to answer.
//   chatml (Qwen2, Qwen2.5, Qwen3; <|im_start|> and <|im_end|>), per message:
//     <|im_start|>ROLE\n CONTENT <|im_end|>\n     then <|im_start|>assistant\n
//     (with strip_reasoning, Qwen3's: an assistant's CONTENT holding
//     </think> keeps only what follows its last </think>, leading newlines
//     removed, as Qwen3's template drops earlier turns' reasoning; an
//     assistant message after the last user message, as in training data,
//     is written <think>\nREASONING\n</think>\n\n CONTENT, REASONING the text
//     before its first </think> (after the last <think> there), newlines
//     stripped, when it is the last message or has reasoning: Qwen3's
//     template's rule)
//   llama3 (Llama 3 Instruct; <|start_header_id|>, <|end_header_id|>, <|eot_id|>):
//     <|begin_of_text|>, then per message
//     <|start_header_id|>ROLE<|end_header_id|>\n\n CONTENT <|eot_id|>, then
//     <|start_header_id|>assistant<|end_header_id|>\n\n
//     (CONTENT with leading and trailing whitespace removed, as Llama 3's
//     template trims it)
//   llama3_1 (Llama 3.1, 3.2, 3.3 Instruct: Llama 3's tokens and <|eom_id|>):
//     Llama 3's, but always opening with a system turn whose text is
//     "Cutting Knowledge Date: December 2023\nToday Date: DATE\n\n" and
//     then the first message's CONTENT (trimmed) if that one is the
//     system's (a later system message is a turn of its own), as their
//     templates write it (DATE: "26 Jul 2024" as Llama 3.1's and 3.3's
//     templates write it, today's for Llama 3.2's, or the one given)
//   gemma (Gemma 1, 1.1 and 2 instruct; <start_of_turn>, <end_of_turn>):
//     <bos>, then per message <start_of_turn>ROLE\n CONTENT <end_of_turn>\n
//     with assistant written as model and CONTENT trimmed, then
//     <start_of_turn>model\n; their template has no system role and takes
//     only user and assistant in turn from the user's, so anything else is
//     an InputError (Gemma 3's template, which folds a system message into
//     the first user turn, is not followed)
//   and, for chatml, a default system turn (ChatOptions::default_system,
//     read from the template: Qwen2.5's) before a conversation that does
//     not start with a system message
// These are the fixed parts of the families' chat templates, and the two
// facts read_chat_template takes from the template text; pentad does not
// run the template (no tools, no images). Render any other template
// yourself and pass it with --special (docs/sampling.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tok/tokenizer.hpp"

namespace pentad {

enum class ChatFormat { chatml, llama3, llama3_1, gemma };

// The date Llama 3.1's and 3.3's templates write (3.2's writes today's
// where the renderer offers strftime_now, as transformers does).
inline constexpr const char* kLlama31Date = "26 Jul 2024";

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// The format whose tokens tok has (chatml first, then Llama 3's: llama3_1
// where its tokens come with <|eom_id|>; then gemma), or an InputError
// naming the tokens it lacks (or Phi-4's <|im_sep|>, whose format is not
// written here).
ChatFormat chat_format(const Tokenizer& tok);
const char* chat_format_name(ChatFormat f);

struct ChatOptions {
  // chatml only, Qwen3's enable_thinking = false: an empty thinking block
  // "<think>\n\n</think>\n\n" after the assistant's header, so the model
  // answers without thinking first.
  bool no_think = false;
  bool strip_reasoning = false;  // chatml, Qwen3's (a tokenizer with <think> and </think>): as above
  std::string date = kLlama31Date;  // llama3_1's "Today Date"
  std::string default_system;  // chatml: the system turn's text when the first message is not the system's
};

// The turn's text, special tokens written as their text (for
// encode_with_specials). system "" = no system message.
std::string chat_prompt(ChatFormat f, const std::string& system, const std::string& user, const ChatOptions& o = {});
// A whole conversation (the last message the user's).
std::string chat_prompt(ChatFormat f, const std::vector<ChatMessage>& messages, const ChatOptions& o = {});

// A conversation's text in pieces, in order: each assistant message's
// content with the end-of-turn token after it is a trained piece (what
// supervised fine-tuning learns, `pentad prep --messages-key`); the rest
// (begin token, headers, other roles' messages, the newline after a turn)
// is not. Joined, the pieces are chat_prompt's text, which is this with
// generation_prompt (the assistant's turn opened after the last message).
// `what` names the caller in an InputError (Gemma's refusals; "" none).
struct ChatSegment {
  std::string text;
  bool trained = false;
};
std::vector<ChatSegment> chat_segments(ChatFormat f, const std::vector<ChatMessage>& messages, const ChatOptions& o,
                                       bool generation_prompt, const std::string& what);

// The pieces joined into one text and encoded as `pentad sample --special`
// encodes a prompt (encode_with_specials: the turn tokens' texts are their
// ids), with, for each id, whether it is trained: whether its first byte
// lies in a trained piece (the ids' bytes, decoded one by one, spell the
// text; an InputError where they do not).
struct ChatIds {
  std::vector<uint32_t> ids;
  std::vector<bool> trained;
};
ChatIds encode_chat(const Tokenizer& tok, const std::vector<ChatSegment>& pieces);

// The messages of a JSON file (`--messages`): an array of objects with a
// "role" (system, user, assistant) and a "content" string, the last the
// user's. Anything else is an InputError naming the file and the message.
std::vector<ChatMessage> read_chat_messages(const std::string& path);
// The messages of a JSON array as above (any role last); an InputError
// naming `where` and the message otherwise.
std::vector<ChatMessage> chat_messages_of(const nlohmann::json& j, const std::string& where);

// What the chat template beside a tokenizer (source: its file, or the
// directory holding it; "" none) writes of its own, as far as pentad
// reproduces it:
//   dates_today: it calls strftime_now, as Llama 3.2's does (transformers
//     renders it with the local date; Llama 3.1's and 3.3's write
//     kLlama31Date);
//   default_system: the text of a ChatML system turn written whole as one
//     string literal, '<|im_start|>system\nTEXT<|im_end|>...' (escapes
//     read as Python's), which Qwen2's and Qwen2.5's templates write when
//     the conversation does not start with a system message ("" when there
//     is none: Qwen3's writes only the given one).
// The template is, as transformers finds it, chat_template.jinja's text,
// else chat_template.json's or tokenizer_config.json's "chat_template" (a
// string, or the "default" of a list of named ones). Nothing without such a
// file or template; an InputError naming a file that is not valid JSON.
struct ChatTemplateFacts {
  bool dates_today = false;
  std::string default_system;
  std::string path;       // the file the template came from ("" none)
  std::string template_;  // its chat template ("" none)
};
ChatTemplateFacts read_chat_template(const std::string& source);

// The date of Llama 3.1's and later's system turn: `given` ("today": the
// local date as "%d %b %Y"); without it, today where the template dates its
// prompt today (Llama 3.2's), else kLlama31Date.
std::string chat_date(const ChatTemplateFacts& t, const std::string& given);

// An InputError when the template of t (if any) is not of format f: it
// never writes f's turn header (<|im_start|> for ChatML, <|start_header_id|>
// for Llama 3's, <start_of_turn> for Gemma's), so the model was tuned on
// another format (its tokenizer having f's tokens all the same).
void check_chat_template(const ChatTemplateFacts& t, ChatFormat f);

// The id that ends the assistant's turn: <|im_end|>, <|eot_id|> or <end_of_turn>.
int64_t chat_end_of_turn(const Tokenizer& tok, ChatFormat f);

}  // namespace pentad
