// load_tokenizer (tokenizer.hpp): a tokenizer.json (byte-level or SentencePiece
// BPE, or the byte tokenizer) or a tiktoken rank file.
#include "tok/bpe.hpp"
#include "tok/hf_tokenizer.hpp"
#include "tok/tokenizer.hpp"

namespace pentad {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path, const std::string& pattern) {
  const std::string file = hf::tokenizer_file(path);
  if (!hf::is_tokenizer_json(file)) return load_tiktoken(file, pattern);
  hf::TokenizerJson t = hf::read_tokenizer_json(file, pattern);
  if (t.bytes) return make_byte_tokenizer();
  if (t.sentencepiece) return make_sp_bpe_tokenizer(std::move(t.sp), file);
  return make_bpe_tokenizer(std::move(t.parts), file);
}

}  // namespace pentad
