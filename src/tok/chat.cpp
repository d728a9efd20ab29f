// A conversation as a prompt (chat.hpp).
#include "tok/chat.hpp"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/json.hpp"
#include "tok/utf8.hpp"

namespace pentad {

namespace {

// The tokens among `names` that tok lacks, as "a, b".
std::string missing(const Tokenizer& tok, std::initializer_list<const char*> names) {
  std::string out;
  for (const char* n : names)
    if (special_token_id(tok, n) < 0) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

// Python's str.isspace() code points (Jinja's trim filter is str.strip()):
// \t..\r, \x1c..\x1f, space, U+0085, U+00A0, U+1680, U+2000..U+200A,
// U+2028, U+2029, U+202F, U+205F, U+3000.
bool is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// The code point of the valid UTF-8 character of length n at s[i].
uint32_t code_point(const std::string& s, size_t i, size_t n) {
  const auto b = [&](size_t k) { return uint32_t(uint8_t(s[i + k])); };
  if (n == 1) return b(0);
  if (n == 2) return (b(0) & 0x1f) << 6 | (b(1) & 0x3f);
  if (n == 3) return (b(0) & 0x0f) << 12 | (b(1) & 0x3f) << 6 | (b(2) & 0x3f);
  return (b(0) & 0x07) << 18 | (b(1) & 0x3f) << 12 | (b(2) & 0x3f) << 6 | (b(3) & 0x3f);
}

// s without its leading and trailing whitespace (str.strip()), as Llama
// 3's template trims every message. Invalid UTF-8 is not whitespace.
std::string trim(const std::string& s) {
  size_t begin = s.size(), end = 0;  // the first and one past the last non-space character
  for (size_t i = 0; i < s.size();) {
    size_t bad = 0;
    const size_t n = utf8_char_at(s, i, &bad);
    const size_t len = n > 0 ? n : bad;
    if (n == 0 || !is_space(code_point(s, i, n))) {
      begin = std::min(begin, i);
      end = i + len;
    }
    i += len;
  }
  return begin < end ? s.substr(begin, end - begin) : std::string();
}

// s without its leading and/or trailing newlines (Python's strip('\n')).
std::string strip_newlines(const std::string& s, bool leading = true, bool trailing = true) {
  size_t b = 0, e = s.size();
  while (leading && b < e && s[b] == '\n') ++b;
  while (trailing && e > b && s[e - 1] == '\n') --e;
  return s.substr(b, e - b);
}

}  // namespace

ChatFormat chat_format(const Tokenizer& tok) {
  const std::string chatml = missing(tok, {"<|im_start|>", "<|im_end|>"});
  // Phi-4 has ChatML's tokens but writes <|im_sep|> after the role instead
  // of a newline, and no newline after <|im_end|>: not written here.
  if (chatml.empty() && special_token_id(tok, "<|im_sep|>") >= 0)
    throw InputError("--chat: tokenizer " + tok.describe() +
                     " has <|im_sep|> (Phi-4's chat format: <|im_start|>ROLE<|im_sep|>TEXT<|im_end|>), which --chat "
                     "does not write; write the format into the prompt and give --special instead");
  if (chatml.empty()) return ChatFormat::chatml;
  const std::string llama3 =
      missing(tok, {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"});
  if (llama3.empty()) return special_token_id(tok, "<|eom_id|>") >= 0 ? ChatFormat::llama3_1 : ChatFormat::llama3;
  const std::string gemma = missing(tok, {"<bos>", "<start_of_turn>", "<end_of_turn>"});
  if (gemma.empty()) return ChatFormat::gemma;
  throw InputError("--chat: tokenizer " + tok.describe() +
                   " has no chat tokens: ChatML's (Qwen) need " + chatml + "; Llama 3's need " + llama3 +
                   "; Gemma's need " + gemma + " (write the chat format into the prompt and give --special instead)");
}

const char* chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::chatml: return "chatml";
    case ChatFormat::llama3: return "llama3";
    case ChatFormat::llama3_1: return "llama3.1";
    case ChatFormat::gemma: return "gemma";
  }
  return "?";
}

namespace {

// Appends text to the conversation: to its last piece when that one is
// trained alike, else as a new piece.
void add(std::vector<ChatSegment>& out, std::string text, bool trained = false) {
  if (text.empty()) return;
  if (!out.empty() && out.back().trained == trained) out.back().text += text;
  else out.push_back({std::move(text), trained});
}

// Gemma's turns (chat.hpp). Its template raises an error for what is
// refused here: a system message ("System role not supported") and roles
// that do not alternate user, assistant, user, ... from the first.
void gemma_turns(std::vector<ChatSegment>& out, const std::vector<ChatMessage>& messages, const std::string& what) {
  add(out, "<bos>");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string at = (what.empty() ? "" : what + ": ") + "message " + std::to_string(i) + " of the conversation";
    if (m.role == "system")
      throw InputError(at + " is a system message: Gemma's chat format (the template of Gemma 1, 1.1 and 2) has "
                            "no system role; write the instructions into the first user message instead");
    const char* want = i % 2 == 0 ? "user" : "assistant";
    if (m.role != want)
      throw InputError(at + " is the " + m.role + "'s, not the " + want +
                       "'s: Gemma's chat template takes the user's and the assistant's messages in turn, the "
                       "user's first");
    const bool a = m.role == "assistant";
    add(out, "<start_of_turn>" + std::string(a ? "model" : "user") + "\n");
    add(out, trim(m.content) + "<end_of_turn>", a);
    add(out, "\n");
  }
}

}  // namespace

std::string chat_prompt(ChatFormat f, const std::string& system, const std::string& user, const ChatOptions& o) {
  std::vector<ChatMessage> messages;
  if (!system.empty()) messages.push_back({"system", system});
  messages.push_back({"user", user});
  return chat_prompt(f, messages, o);
}

std::string chat_prompt(ChatFormat f, const std::vector<ChatMessage>& messages, const ChatOptions& o) {
  std::string s;
  for (const ChatSegment& g : chat_segments(f, messages, o, true, "--chat")) s += g.text;
  return s;
}

std::vector<ChatSegment> chat_segments(ChatFormat f, const std::vector<ChatMessage>& messages, const ChatOptions& o,
                                       bool generation_prompt, const std::string& what) {
  if (o.no_think && f != ChatFormat::chatml)
    throw InputError("--no-think: " + std::string(f == ChatFormat::gemma ? "Gemma's" : "Llama 3's") +
                     " chat format has no thinking block (Qwen3's ChatML has)");
  std::vector<ChatSegment> out;
  if (f == ChatFormat::gemma) {
    gemma_turns(out, messages, what);
    if (generation_prompt) add(out, "<start_of_turn>model\n");
    return out;
  }
  if (f == ChatFormat::chatml) {
    if (!o.default_system.empty() && (messages.empty() || messages[0].role != "system"))
      add(out, "<|im_start|>system\n" + o.default_system + "<|im_end|>\n");
    size_t last_user = messages.size();  // none
    for (size_t i = 0; i < messages.size(); ++i)
      if (messages[i].role == "user") last_user = i;
    for (size_t i = 0; i < messages.size(); ++i) {
      const ChatMessage& m = messages[i];
      std::string content = m.content;
      if (o.strip_reasoning && m.role == "assistant") {
        std::string reasoning;
        if (const size_t end = content.rfind("</think>"); end != std::string::npos) {
          std::string before = content.substr(0, content.find("</think>"));
          if (const size_t open = before.rfind("<think>"); open != std::string::npos) before.erase(0, open + 7);
          reasoning = strip_newlines(before);
          content = strip_newlines(content.substr(end + 8), true, false);
        }
        // After the last user message (training data): the reasoning in its
        // block, an empty one in the last message.
        if (last_user < messages.size() && i > last_user && (i + 1 == messages.size() || !reasoning.empty()))
          content = "<think>\n" + reasoning + "\n</think>\n\n" + content;
      }
      add(out, "<|im_start|>" + m.role + "\n");
      add(out, content + "<|im_end|>", m.role == "assistant");
      add(out, "\n");
    }
    if (generation_prompt) add(out, o.no_think ? "<|im_start|>assistant\n<think>\n\n</think>\n\n" : "<|im_start|>assistant\n");
    return out;
  }
  add(out, "<|begin_of_text|>");
  size_t first = 0;
  if (f == ChatFormat::llama3_1) {  // the system turn, always, with the first message if it is the system's
    std::string system = "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: " +
                         o.date + "\n\n";
    if (!messages.empty() && messages[0].role == "system") system += trim(messages[first++].content);
    add(out, system + "<|eot_id|>");
  }
  for (size_t i = first; i < messages.size(); ++i) {
    add(out, "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n");
    add(out, trim(messages[i].content) + "<|eot_id|>", messages[i].role == "assistant");
  }
  if (generation_prompt) add(out, "<|start_header_id|>assistant<|end_header_id|>\n\n");
  return out;
}

ChatIds encode_chat(const Tokenizer& tok, const std::vector<ChatSegment>& pieces) {
  std::string text;
  std::vector<bool> trained_byte;
  for (const ChatSegment& g : pieces) {
    text += g.text;
    trained_byte.insert(trained_byte.end(), g.text.size(), g.trained);
  }
  ChatIds out;
  out.ids = encode_with_specials(tok, text);
  size_t at = 0;
  for (const uint32_t id : out.ids) {
    const std::string bytes = tok.decode(&id, 1);
    if (at >= text.size() || text.compare(at, bytes.size(), bytes) != 0)
      throw InputError("tokenizer " + tok.describe() + ": the ids of a conversation, decoded one by one, do not spell "
                       "its text at byte " + std::to_string(at) + ", so its trained ids cannot be told");
    out.trained.push_back(trained_byte[at]);
    at += bytes.size();
  }
  if (at != text.size())
    throw InputError("tokenizer " + tok.describe() + ": the ids of a conversation spell " + std::to_string(at) +
                     " of its " + std::to_string(text.size()) + " bytes, so its trained ids cannot be told");
  return out;
}

std::vector<ChatMessage> chat_messages_of(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array() || j.empty())
    throw InputError(where + ": expected a non-empty array of {\"role\": ..., \"content\": ...} messages");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = where + ": message " + std::to_string(i);
    const nlohmann::json& m = j[i];
    if (!m.is_object()) throw InputError(at + " is not an object");
    const auto role = m.find("role"), content = m.find("content");
    if (role == m.end() || !role->is_string() ||
        (*role != "system" && *role != "user" && *role != "assistant"))
      throw InputError(at + ": \"role\" must be \"system\", \"user\" or \"assistant\"" +
                       (role == m.end() ? std::string(" (missing)") : " (got " + role->dump() + ")"));
    if (content == m.end() || !content->is_string())
      throw InputError(at + ": \"content\" must be a string" +
                       (content == m.end() ? std::string(" (missing)") : " (got " + content->dump() + ")"));
    out.push_back({role->get<std::string>(), content->get<std::string>()});
  }
  return out;
}

std::vector<ChatMessage> read_chat_messages(const std::string& path) {
  const std::string where = "--messages '" + path + "'";
  const std::optional<std::string> text = read_text(path);
  if (!text) throw InputError(where + ": cannot read the file");
  const std::vector<ChatMessage> out = chat_messages_of(parse_json(*text, where), where);
  if (out.back().role != "user")
    throw InputError(where + ": the last message is the " + out.back().role +
                     "'s; it must be the user's, for the assistant to answer");
  return out;
}

namespace {

// The text of the string literal of a Jinja template that opens at `open`
// (its quote character), escapes read as Python's (\n, \t, \\, \', \");
// *end: one past its closing quote (npos: unclosed).
std::string literal_at(const std::string& t, size_t open, size_t* end) {
  const char q = t[open];
  std::string out;
  for (size_t i = open + 1; i < t.size(); ++i) {
    if (t[i] == q) {
      *end = i + 1;
      return out;
    }
    if (t[i] == '\\' && i + 1 < t.size()) {
      const char c = t[++i];
      out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
    } else {
      out += t[i];
    }
  }
  *end = std::string::npos;
  return out;
}

// The first string literal of the template that is a whole ChatML system
// turn, '<|im_start|>system\nTEXT<|im_end|>...': TEXT ("" none). Only the
// literals that open with "<|im_start|>system" are read (so no quote in
// the template's plain text can mislead the scan).
std::string literal_system_turn(const std::string& t) {
  const std::string head = "<|im_start|>system", open = head + "\n", close = "<|im_end|>";
  for (size_t at = t.find(head); at != std::string::npos; at = t.find(head, at + 1)) {
    if (at == 0 || (t[at - 1] != '\'' && t[at - 1] != '"')) continue;
    size_t end = 0;
    const std::string lit = literal_at(t, at - 1, &end);
    if (end == std::string::npos || lit.rfind(open, 0) != 0) continue;
    const size_t stop = lit.find(close, open.size());
    if (stop != std::string::npos && stop > open.size()) return lit.substr(open.size(), stop - open.size());
  }
  return {};
}

}  // namespace

ChatTemplateFacts read_chat_template(const std::string& source) {
  if (source.empty()) return {};
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::is_directory(source, ec) ? fs::path(source) : fs::path(source).parent_path();
  // transformers' order: chat_template.jinja (the template itself), else
  // chat_template.json, else tokenizer_config.json, each under "chat_template".
  for (const char* name : {"chat_template.jinja", "chat_template.json", "tokenizer_config.json"}) {
    const std::string path = (dir / name).string();
    if (!fs::exists(path, ec)) continue;
    const std::string where = "'" + path + "'";
    const std::optional<std::string> text = read_text(path);
    if (!text) throw InputError(where + ": cannot read the file");
    std::string tmpl;
    if (std::string(name) == "chat_template.jinja") {
      tmpl = *text;
    } else {
      const nlohmann::json j = parse_json(*text, where);
      const auto t = j.is_object() ? j.find("chat_template") : j.end();
      if (t == j.end()) continue;
      // One template, or a list of named ones ({"name": ..., "template": ...}): the "default".
      if (t->is_string()) tmpl = t->get<std::string>();
      for (const auto& x : t->is_array() ? *t : nlohmann::json::array())
        if (x.is_object() && x.value("name", "") == "default" && x.contains("template") && x["template"].is_string())
          tmpl = x["template"].get<std::string>();
    }
    return {tmpl.find("strftime_now") != std::string::npos, literal_system_turn(tmpl), path, tmpl};
  }
  return {};
}

std::string chat_date(const ChatTemplateFacts& t, const std::string& given) {
  if (given.empty() && !t.dates_today) return kLlama31Date;
  if (!given.empty() && given != "today") return given;
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%d %b %Y", &local);
  return buf;
}

void check_chat_template(const ChatTemplateFacts& t, ChatFormat f) {
  const bool chatml = f == ChatFormat::chatml, gemma = f == ChatFormat::gemma;
  const char* header = chatml ? "<|im_start|>" : gemma ? "<start_of_turn>" : "<|start_header_id|>";
  if (t.template_.empty() || t.template_.find(header) != std::string::npos) return;
  throw InputError("--chat: the chat template of '" + t.path + "' never writes " + header + ", the turn header of " +
                   (chatml ? "ChatML" : gemma ? "Gemma's format" : "Llama 3's format") +
                   ", whose tokens the tokenizer has: the model was tuned on another format, which --chat does not "
                   "write (render the template and give --special instead)");
}

int64_t chat_end_of_turn(const Tokenizer& tok, ChatFormat f) {
  const char* end = f == ChatFormat::chatml ? "<|im_end|>" : f == ChatFormat::gemma ? "<end_of_turn>" : "<|eot_id|>";
  return special_token_id(tok, end);  // (llama3_1: <|eot_id|>)
}

}  // namespace pentad
