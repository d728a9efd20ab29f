// The BPE of a SentencePiece model as Hugging Face's tokenizers runs it from
// a tokenizer.json with "byte_fallback": true (Llama 1 and 2, Mistral,
// TinyLlama, CodeLlama, Vicuna; Gemma): the text, with a '▁' (U+2581) before
// it (not Gemma's) and every space made a '▁', is one word; it starts as its
// characters (a character the vocabulary lacks as its UTF-8 bytes, each the
// token <0xNN>), and the adjacent pair listed first in the merges is joined,
// leftmost on ties, until no listed pair is left. The merge list's order is
// the priority, not the ids the merges make: Llama 2's file lists the merges
// of '▁' runs last although "▁▁" is id 259, and Hugging Face (and pentad)
// merge them last. hf_tokenizer.hpp's read_tokenizer_json reads the file.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tok/bpe.hpp"
#include "tok/tokenizer.hpp"

namespace pentad {

inline constexpr uint32_t kNoByteId = UINT32_MAX;

struct SpBpeParts {
  RankTable pieces;  // id <-> its text ('▁' for a space); ids 0..n-1
  // Byte b -> the id of <0xNN>; kNoByteId for an ASCII byte the vocabulary
  // has no <0xNN> for but a one-character piece (Gemma's "\t"), which the
  // character is, so it never falls back.
  std::array<uint32_t, 256> byte_ids{};
  bool prefix_space = true;  // a '▁' before the text (Llama 2's Prepend, Metaspace); Gemma's has none
  std::vector<std::array<uint32_t, 3>> merges;  // (left, right, made) in priority order
  bool ignore_merges = false;                   // a word that is a piece is that piece, unmerged
  std::vector<std::pair<std::string, uint32_t>> specials;  // added tokens: text, id (decoded as their text)
  int64_t vocab = 0;       // every id is below it
  int64_t eot = -1;        // Tokenizer::eot()
  int64_t separator = -1;  // Tokenizer::doc_separator()
  int64_t bos = -1;        // Tokenizer::bos()
};

// The tokenizer of `parts`; source names the file in describe() and messages.
// decode() gives each piece's text with '▁' as a space and <0xNN> as its
// byte, and keeps the space the '▁' before the text stands for (Hugging
// Face's decoder strips it: its Strip step; Gemma's puts none there).
std::unique_ptr<Tokenizer> make_sp_bpe_tokenizer(SpBpeParts parts, const std::string& source);

}  // namespace pentad
