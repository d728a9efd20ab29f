// A Hugging Face tokenizer.json read in one streaming pass. Nearly all of
// such a file is two members of its "model": the vocabulary (an object of
// piece -> id) and the merges (a list). Gemma's has 256 000 pieces and
// 580 604 merges in 17 MB; as a json tree that is a million small heap
// objects, built and freed on every `pentad sample --tokenizer`. Here those
// two come out as flat lists, in the file's order, and every other member as
// a json tree.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pentad::hf {

// model.merges: each entry "LEFT RIGHT" (one space) or ["LEFT", "RIGHT"]
// kept as its two texts side by side; an entry of another shape kept as its
// json, for the message that names it.
class MergeList {
 public:
  size_t size() const { return form_.size(); }
  bool well_formed(size_t i) const { return form_[i] != kOdd; }
  // (well-formed entries) the left text, the right, and the two joined
  std::string_view left(size_t i) const { return {bytes_.data() + begin_[i], left_[i]}; }
  std::string_view right(size_t i) const {
    return {bytes_.data() + begin_[i] + left_[i], begin_[i + 1] - begin_[i] - left_[i]};
  }
  std::string_view joined(size_t i) const { return {bytes_.data() + begin_[i], begin_[i + 1] - begin_[i]}; }
  // Entry i as the file has it (its json).
  nlohmann::json entry(size_t i) const;

  void add_text(const std::string& s);          // a string entry
  void add_pair(std::vector<std::string>& strings);  // a list of strings
  nlohmann::json* add_odd(nlohmann::json value);  // any other entry (filled in by the caller)
  void clear() { *this = MergeList(); }

 private:
  enum : uint8_t { kText, kPair, kOdd };
  void add(std::string_view l, std::string_view r, uint8_t form);
  std::string bytes_;                    // each entry's left then right text
  std::vector<uint64_t> begin_{0};       // (n+1,) entry i is bytes_[begin_[i], begin_[i+1])
  std::vector<uint32_t> left_;           // (n,) its left text's length
  std::vector<uint8_t> form_;            // (n,) kText, kPair or kOdd
  std::map<size_t, nlohmann::json> odd_;  // the odd entries' json
};

struct TokenizerDoc {
  nlohmann::json rest;  // the file, less the two members below where they have these shapes
  bool has_vocab = false;  // model.vocab is an object: its entries, in the file's order
  std::vector<std::pair<std::string, nlohmann::json>> vocab;
  bool has_merges = false;  // model.merges is a list: its entries
  MergeList merges;
};

// The document of a tokenizer.json's text. A key given twice in one object
// keeps its last value, as a json tree's would, except in model.vocab,
// where both entries are kept: the readers skip an entry given again with
// the same id and refuse a piece given two ids, naming it. Throws
// nlohmann::json::parse_error (json::parse's message) for text that is not
// JSON.
TokenizerDoc read_tokenizer_doc(const std::string& text);

// The document as one json tree: json::parse's of the same text (the unit
// test and the fuzzer hold the reader to it).
nlohmann::json as_tree(const TokenizerDoc& doc);

}  // namespace pentad::hf
