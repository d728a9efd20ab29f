// What the BPE tokenizers (bpe.hpp's byte-level one, sp_bpe.hpp's
// SentencePiece one) share: the ids after their own tokens are special
// tokens, decoded as their text, and the four ids of the Tokenizer
// interface.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "tok/tokenizer.hpp"

namespace pentad {

class SpecialTokens : public Tokenizer {
 public:
  int64_t vocab_size() const override { return vocab_; }
  int64_t eot() const override { return eot_; }
  int64_t doc_separator() const override { return separator_; }
  int64_t bos() const override { return bos_; }
  const std::vector<std::pair<std::string, uint32_t>>& special_tokens() const override { return specials_; }

 protected:
  // Ids first..vocab-1 are special: specials' (text, id) with id >= first,
  // the others decode to nothing (cl100k's unused ids).
  SpecialTokens(std::string path, uint32_t first, const std::vector<std::pair<std::string, uint32_t>>& specials,
                int64_t vocab, int64_t eot, int64_t separator, int64_t bos)
      : path_(std::move(path)), first_(first), vocab_(vocab), eot_(eot), separator_(separator), bos_(bos),
        specials_(specials) {
    text_.resize(size_t(vocab_ > int64_t(first_) ? vocab_ - first_ : 0));
    for (const auto& [text, id] : specials)
      if (id >= first_) text_[id - first_] = text;
  }
  // Appends the text of id >= first; throws InputError for id >= vocab.
  void append_special(uint32_t id, std::string& out) const {
    if (int64_t(id) >= vocab_)
      throw InputError("token " + std::to_string(id) + " is outside the vocabulary (" + std::to_string(vocab_) +
                       ") of " + path_);
    out += text_[id - first_];
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  uint32_t first_ = 0;
  int64_t vocab_ = 0, eot_ = -1, separator_ = -1, bos_ = -1;
  std::vector<std::string> text_;  // (vocab - first,) "" for an unused id
  std::vector<std::pair<std::string, uint32_t>> specials_;
};

}  // namespace pentad
