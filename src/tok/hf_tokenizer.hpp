// A BPE tokenizer (bpe.hpp), or the byte tokenizer, as the files a Hugging Face model directory
// carries: tokenizer.json (the `tokenizers` library's format, which
// transformers' PreTrainedTokenizerFast and tokenizers.js load) and
// tokenizer_config.json. docs/huggingface.md says what they hold and how they
// are tested.
//
// The mapping, in short. Token bytes are written as GPT-2's byte-level
// strings (each byte one printable character, byte_level_char). The ranks
// become the vocabulary; the merges list every way to split each token into
// two tokens, in rank order of the whole, so that Hugging Face's BPE (merge
// the adjacent pair earliest in the list) merges what tiktoken's merges
// (the adjacent pair whose join has the lowest rank). `ignore_merges` keeps
// a piece that is itself a token whole, as tiktoken does. The pattern is
// pretokenize.hpp's hf_pattern; the special tokens are added tokens.
#pragma once

#include <cstdint>
#include <string>

#include "tok/bpe.hpp"

namespace pentad::hf {

// GPT-2's byte-to-character table: bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF
// stand for themselves (U+0021..., as UTF-8), the other 68 bytes, in
// increasing order, for U+0100, U+0101, ... (so a space is U+0120 'Ġ').
std::string byte_level_char(uint8_t byte);

struct TokenizerFiles {
  std::string tokenizer_json;
  std::string tokenizer_config_json;
  int64_t bos_id = -1;  // the id a sequence starts with (the document separator); -1: none
  int64_t eos_id = -1;  // the end-of-text id (what generation stops at); -1: none
  int64_t merges = 0;   // entries in tokenizer.json's merges
};

// The files of `parts`' tokenizer for a model of model_max_length positions.
// Llama 3's tokenizer puts <|begin_of_text|> before every sequence (a
// post-processor template, as Meta's and Hugging Face's do); GPT-2's and
// cl100k's add nothing (as OpenAI's do).
TokenizerFiles tokenizer_files(const BpeParts& parts, int64_t model_max_length);

// The byte tokenizer's files (`pentad prep` without --tokenizer): a BPE
// with the 256 bytes as ids 0..255 and no merges, no pattern, no special
// tokens, so every byte is its own token, as in pentad.
TokenizerFiles byte_tokenizer_files(int64_t model_max_length);

}  // namespace pentad::hf
