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
#include "tok/sp_bpe.hpp"

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
  // Files passed on beside them (name, text): the export's chat template
  // kept apart from tokenizer_config.json (chat_template.jinja, .json).
  std::vector<std::pair<std::string, std::string>> extra;
};

// The files of `parts`' tokenizer for a model of model_max_length positions.
// Llama 3's tokenizer puts <|begin_of_text|> before every sequence (a
// post-processor template, as Meta's and Hugging Face's do); GPT-2's,
// cl100k's and Qwen2's add nothing (as OpenAI's and Qwen's do). An NFC
// tokenizer (parts.nfc) gets Qwen2's normalizer, {"type": "NFC"}.
TokenizerFiles tokenizer_files(const BpeParts& parts, int64_t model_max_length);

// A tokenizer.json read back (read_tokenizer_json).
struct TokenizerJson {
  bool bytes = false;          // the byte tokenizer (ids 0..255 the bytes, no merges, no pattern)
  bool sentencepiece = false;  // a BPE with byte fallback: sp
  BpeParts parts;              // otherwise: a byte-level BPE
  SpBpeParts sp;
  int64_t merges = 0;          // entries in the file's merges
};

// Reads a Hugging Face tokenizer.json as the byte-level BPE it describes, in
// tiktoken's terms: the vocabulary's ids are the ranks (token text in GPT-2's
// byte-level characters, decoded to bytes), the added tokens the special
// tokens, the Split expression (or ByteLevel's own, GPT-2's) one of the
// named patterns (pattern_of_hf_regex). A BPE with "byte_fallback": true is
// read instead as a SentencePiece BPE (sentencepiece, sp: sp_bpe.hpp; its
// rules in docs/tokenizer.md). What pentad's tokenizer would do
// differently is refused, naming the key: another model type, a normalizer
// other than NFC's ({"type": "NFC"}, Qwen2's: BpeParts::nfc), subword prefixes, ids that are not 0..n-1 followed by the
// added tokens, a byte without an id, and merges that are not in the order
// of the ids they make (pentad merges the pair whose join has the lowest id,
// as tiktoken does; Hugging Face's BPE the pair listed first: the two agree
// when the merges are in that order, as in GPT-2's and Llama 3's files and
// in pentad's own). The end-of-text token is tokenizer_config.json's
// eos_token (the file beside it), else an added <|endoftext|> or
// <|end_of_text|>; bos is the token the post-processor's template puts first;
// the document separator is bos, else an added <|endoftext|>, else the
// end-of-text token (Qwen2.5 Instruct: eos <|im_end|>, separator
// <|endoftext|>, no bos).
TokenizerJson read_tokenizer_json(const std::string& path);

// What --tokenizer PATH names: PATH/tokenizer.json for a directory that
// holds one (a Hugging Face model directory), else PATH.
std::string tokenizer_file(const std::string& path);

// Whether `path` is to be read as a tokenizer.json: a file whose first
// non-blank byte is '{' (a rank file's lines start with base64).
bool is_tokenizer_json(const std::string& path);

// read_tokenizer_json, with a --pattern given beside the file: it must be
// the file's ("" = none given; cl100k and llama3 are one expression).
TokenizerJson read_tokenizer_json(const std::string& path, const std::string& pattern);

// The files of the BPE read from the tokenizer.json at `path`
// (read_tokenizer_json; byte-level or SentencePiece), passed on as they are:
// that file, and the tokenizer_config.json beside it (its chat template,
// added tokens and names kept) or, where there is none, one naming its bos
// and eos tokens for a model of model_max_length positions.
TokenizerFiles tokenizer_json_files(const std::string& path, const TokenizerJson& t, int64_t model_max_length);

// The byte tokenizer's files (`pentad prep` without --tokenizer): a BPE
// with the 256 bytes as ids 0..255 and no merges, no pattern, no special
// tokens, so every byte is its own token, as in pentad.
TokenizerFiles byte_tokenizer_files(int64_t model_max_length);

}  // namespace pentad::hf
