// load_tokenizer (tokenizer.hpp): a tokenizer.json or a tiktoken rank file.
#include <cstdio>

#include "core/error.hpp"
#include "tok/bpe.hpp"
#include "tok/hf_tokenizer.hpp"
#include "tok/tokenizer.hpp"

namespace pentad {
namespace {

// Whether the file's first non-blank byte is '{' (a rank file's lines start
// with base64). A file that cannot be opened is left to the rank-file reader,
// whose message names it.
bool looks_like_json(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  int c = 0;
  while ((c = std::fgetc(f)) == ' ' || c == '\t' || c == '\n' || c == '\r') {
  }
  std::fclose(f);
  return c == '{';
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path, const std::string& pattern) {
  if (!looks_like_json(path)) return load_tiktoken(path, pattern);
  hf::TokenizerJson t = hf::read_tokenizer_json(path);
  const std::string file_pattern = t.bytes ? std::string("none (the byte tokenizer)") : t.parts.pattern;
  if (!pattern.empty() && pattern != file_pattern &&
      !(!t.bytes && (pattern == "cl100k" || pattern == "llama3") && (file_pattern == "cl100k" || file_pattern == "llama3")))
    throw InputError("--pattern " + pattern + " differs from tokenizer.json '" + path + "', whose pattern is " +
                     file_pattern);
  if (t.bytes) return make_byte_tokenizer();
  return make_bpe_tokenizer(std::move(t.parts), path);
}

}  // namespace pentad
