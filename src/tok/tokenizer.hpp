// Text <-> token ids. A Tokenizer turns ordinary text into ids and ids back
// into bytes. Three kinds exist: the byte tokenizer (vocabulary 256, one id
// per byte, no special tokens; what `pentad prep` makes without --tokenizer),
// byte-level BPE over a tiktoken rank file or a tokenizer.json (bpe.hpp), and
// a SentencePiece BPE with byte fallback from a tokenizer.json (sp_bpe.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pentad {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Ordinary text to ids; a special token's text (e.g. "<|endoftext|>") is
  // encoded as ordinary text, never as the special id.
  virtual std::vector<uint32_t> encode(std::string_view text) const = 0;
  // Ids to the bytes they stand for; the bytes may end inside a UTF-8
  // character (a token can split one). Throws InputError for an id >=
  // vocab_size().
  virtual std::string decode(const uint32_t* ids, size_t n) const = 0;
  std::string decode(const std::vector<uint32_t>& ids) const { return decode(ids.data(), ids.size()); }
  // Every id is < vocab_size(), special tokens included.
  virtual int64_t vocab_size() const = 0;
  // The end-of-text token: the stop token of `pentad sample`; -1 if the
  // tokenizer has none.
  virtual int64_t eot() const = 0;
  // The token `pentad prep` puts before every document (llm.c's data scripts:
  // <|endoftext|> for GPT-2, <|begin_of_text|> for Llama 3); -1 for none.
  virtual int64_t doc_separator() const { return eot(); }
  // The token a model's input starts with, which `pentad sample` puts before
  // the prompt: Llama 3's <|begin_of_text|> (what Hugging Face's tokenizer
  // adds by its template, and what `pentad prep` puts before each document);
  // -1 for none (GPT-2, cl100k, the byte tokenizer).
  virtual int64_t bos() const { return -1; }
  // The special (added) tokens: each one's text and id (none for the byte
  // tokenizer). encode_with_specials matches their texts.
  virtual const std::vector<std::pair<std::string, uint32_t>>& special_tokens() const;
  // One line for logs, e.g. "bytes (256)".
  virtual std::string describe() const = 0;
  // Where text may be cut so that its parts, encoded one after another (the
  // first by encode(), each later one by encode_continued()), give
  // encode(text): the first such place at or after `from`, else text.size().
  // `pentad prep` reads and encodes long documents in such parts. By
  // default pretokenize.hpp's next_safe_cut: after a newline between two
  // printable ASCII characters, where every named pattern starts afresh.
  virtual size_t safe_cut(std::string_view text, size_t from) const;
  // The ids of a part that continues a text cut at safe_cut (encode() but
  // for what a tokenizer puts before a whole text: SentencePiece's '▁').
  virtual std::vector<uint32_t> encode_continued(std::string_view part) const { return encode(part); }
};

// The id of the special token whose text is `text`, or -1.
int64_t special_token_id(const Tokenizer& tok, std::string_view text);

// Text in which a special token's text stands for its id (tiktoken's
// allowed_special = "all", Hugging Face's added tokens): at each position
// the longest special token's text there becomes its id, and each run of
// text between them is encoded by tok.encode() as a text of its own. No
// begin token is added. The added tokens' lstrip/rstrip/single_word flags
// are not applied (pentad's readers keep none of them).
std::vector<uint32_t> encode_with_specials(const Tokenizer& tok, std::string_view text);

// One id per byte, ids 0..255, no end-of-text token.
std::unique_ptr<Tokenizer> make_byte_tokenizer();

// The tokenizer of a file: a Hugging Face tokenizer.json (a file whose first
// non-blank character is '{': tok/hf_tokenizer.hpp's read_tokenizer_json;
// a directory holding one stands for it) or a tiktoken rank file
// (tok/bpe.hpp's load_tiktoken; pattern as there). A pattern given with a
// tokenizer.json must be the file's. Throws InputError naming the file.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path, const std::string& pattern);

}  // namespace pentad
