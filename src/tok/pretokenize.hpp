// Pre-tokenization: the regular expressions that cut text into pieces before
// byte-pair merging, as tiktoken applies them (leftmost-first matches, one
// after the other). PCRE2 in UTF + UCP mode, JIT-compiled where available.
// The named patterns are GPT-2's (r50k), cl100k's and Qwen2's (cl100k's with
// one digit per piece); Llama 3 uses cl100k's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pentad {

class Pretokenizer {
 public:
  // name: "gpt2", "cl100k", "llama3" or "qwen2"; anything else is an InputError.
  explicit Pretokenizer(const std::string& name);
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  // Appends to `out` the pieces of `text` as [begin, end) byte offsets, in
  // order, covering all of it. Valid UTF-8 runs are matched as tiktoken
  // matches a string; each maximal run of bytes that is not valid UTF-8 is a
  // piece of its own (tiktoken takes only valid text). Thread-safe.
  void split(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& out) const;

  const std::string& name() const { return name_; }
  bool jit() const { return jit_; }

  // The names accepted by the constructor, for messages.
  static const char* known_names() { return "gpt2, cl100k, llama3, qwen2"; }

 private:
  void split_valid(const char* base, size_t begin, size_t end, void* match_data,
                   std::vector<std::pair<uint32_t, uint32_t>>& out) const;
  std::string name_;
  void* code_ = nullptr;  // pcre2_code_8
  bool jit_ = false;
};

// The named pattern as a Hugging Face tokenizer.json's Split pre-tokenizer
// holds it (Oniguruma syntax, which the `tokenizers` library compiles):
// tiktoken's expression with `\s` (Oniguruma's Unicode `\s` is U+0009-000D,
// U+0085 and the Zs, Zl and Zp characters: the White_Space set spelt out
// above) and without possessive quantifiers (cl100k's `?+` and `++` cannot
// change a match there: the optional character is not a letter, and
// `[\r\n]*` matches after any end of the run). nullptr for another name.
const char* hf_pattern(const std::string& name);

// The named pattern a tokenizer.json's Split expression is: "gpt2", "cl100k"
// (cl100k's and Llama 3's expression) or "qwen2" for hf_pattern's strings and
// for the other spellings of the same expressions in published files
// (tiktoken's cl100k_base; Meta's Llama 3; Qwen2's and Qwen2.5's, Meta's form
// with `\p{N}`); "" for any other expression.
std::string pattern_of_hf_regex(const std::string& regex);

// The first p >= from where text can be cut without changing any named
// pattern's pieces: text[p-2] is printable ASCII (not a space), text[p-1] is
// '\n' and text[p] is printable ASCII; text.size() if there is none. Why it
// is safe: '\n' there is a piece of its own or the end of the piece before it
// (gpt2 `\s+`; cl100k and qwen2, whose line-break alternatives are the same,
// `\s*[\r\n]` or `[^\s..]++[\r\n]*`), in the whole text as at the end of
// the cut-off head, and no pattern looks behind, so the piece at p starts
// there in both. Encoding the two parts and joining the ids gives the ids of
// the whole (also for the byte tokenizer). NFC (normalize.hpp) is also
// unchanged by such a cut: text[p] is an ASCII starter that composes with
// nothing before it, so NFC(head + tail) = NFC(head) + NFC(tail).
size_t next_safe_cut(std::string_view text, size_t from);

}  // namespace pentad
