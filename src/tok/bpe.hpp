// Byte-level BPE over a tiktoken rank file (one `base64(token bytes) rank`
// a line, ranks 0..n-1): text is cut into pieces by a named pattern
// (pretokenize.hpp), and each piece that is not itself a token is merged
// bytewise, the adjacent pair of lowest rank first (leftmost on ties), as
// tiktoken's byte_pair_merge does. Special tokens follow the ranks:
//   gpt2    50256 ranks + <|endoftext|> 50256                  (vocab 50257)
//   cl100k 100256 ranks + <|endoftext|> 100257, <|fim_prefix|> 100258,
//          <|fim_middle|> 100259, <|fim_suffix|> 100260,
//          <|endofprompt|> 100276                              (vocab 100277)
//   llama3 128000 ranks + Meta's 256 specials 128000..128255   (vocab 128256)
//   qwen2  151643 ranks + <|endoftext|> 151643, <|im_start|> 151644,
//          <|im_end|> 151645 (the three Qwen and Qwen2 share)     (vocab 151646)
// A tokenizer read from a tokenizer.json may also put its text in NFC
// (normalize.hpp) before cutting it into pieces, as Qwen2's does.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tok/tokenizer.hpp"
#include "tok/utf8.hpp"  // utf8_replace: decoded bytes as text, as tiktoken's decode() renders them

namespace pentad {

// Token bytes <-> rank, from a rank file. Lookups are thread-safe.
class RankTable {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  // Throws InputError naming the file (and line) for: an unreadable or empty
  // file, a line that is not `base64 rank`, bad base64, an empty token, a
  // duplicate rank or token, ranks that are not 0..n-1, a byte with no rank.
  static RankTable load(const std::string& path);
  // duplicate(first, second, token): the message for two ranks of the same
  // bytes (token printable).
  using DuplicateMessage = std::function<std::string(uint32_t, uint32_t, const std::string&)>;
  // The table of the texts in rank order (rank r = *in_rank_order[r]).
  // Throws InputError for a duplicate text (duplicate's message).
  static RankTable of(const std::vector<const std::string*>& in_rank_order, const DuplicateMessage& duplicate);
  // The same, for a byte-level BPE's tokens: also throws InputError for a
  // byte with no rank (naming `what`).
  static RankTable from_tokens(const std::vector<const std::string*>& in_rank_order, const std::string& what,
                               const DuplicateMessage& duplicate);

  uint32_t size() const { return uint32_t(offset_.size() - 1); }
  uint32_t find(const char* p, size_t n) const;  // the rank, or kNone
  std::string_view bytes(uint32_t rank) const {
    return std::string_view(bytes_.data() + offset_[rank], offset_[rank + 1] - offset_[rank]);
  }

 private:
  std::string bytes_;             // every token's bytes, in rank order
  std::vector<uint64_t> offset_;  // (n+1,) token r is bytes_[offset_[r], offset_[r+1])
  // Open addressing, linear probing, a power of 2 at least twice the ranks.
  // A slot holds the token's first 8 bytes and length, so a probe that
  // misses (most lookups while merging) reads nothing else, and a token of
  // at most 8 bytes is found without reading bytes_.
  struct Slot {
    uint64_t head = 0;  // the first min(length, 8) bytes, zero-padded
    uint32_t rank_plus_1 = 0;  // 0: empty
    uint32_t length = 0;
  };
  std::vector<Slot> slots_;
  void insert_or_die(uint32_t rank, const DuplicateMessage& duplicate);
};

// How a piece that is not a token is merged. Both give the same tokens:
// kScan looks for the lowest pair by a linear scan after each merge
// (quadratic, fastest for the short pieces of ordinary text); kHeap keeps the
// pairs in a priority queue (n log n, for long pieces). kAuto picks by length.
enum class MergeAlgorithm { kAuto, kScan, kHeap };

// Appends the tokens of one piece (bytes all of which have a rank) to out.
void bpe_merge(const RankTable& ranks, std::string_view piece, std::vector<uint32_t>& out,
               MergeAlgorithm algorithm = MergeAlgorithm::kAuto);

// What a byte-level BPE tokenizer is made of: its ranks, its pattern's name
// and its special tokens. load_tiktoken builds the tokenizer from these; the
// Hugging Face writer (tok/hf_tokenizer.hpp) writes them out.
struct BpeParts {
  RankTable ranks;
  std::string pattern;                                     // gpt2, cl100k, llama3 or qwen2
  bool nfc = false;  // the text is put in NFC before pre-tokenization (a tokenizer.json's NFC normalizer)
  std::vector<std::pair<std::string, uint32_t>> specials;  // text, id (after the ranks)
  int64_t vocab = 0;      // every id is below it, special tokens and unused ids included
  int64_t eot = -1;       // Tokenizer::eot()
  int64_t separator = -1; // Tokenizer::doc_separator()
  int64_t bos = -1;       // Tokenizer::bos()
};

// The tokenizer of `parts`; source names the file in describe() and messages.
std::unique_ptr<Tokenizer> make_bpe_tokenizer(BpeParts parts, const std::string& source);

// The parts of the BPE tokenizer of a rank file; the arguments and errors of
// load_tiktoken below.
BpeParts load_bpe_parts(const std::string& path, const std::string& pattern);

// The BPE tokenizer of a rank file. pattern: "gpt2", "cl100k", "llama3",
// "qwen2", or "" to infer it from the number of ranks (50256 gpt2, 100256
// cl100k, 128000 llama3, 151643 qwen2; any other count needs a pattern). Throws InputError (rank-file
// errors, an unknown pattern name, a count that fits no named pattern).
std::unique_ptr<Tokenizer> load_tiktoken(const std::string& path, const std::string& pattern);

}  // namespace pentad
