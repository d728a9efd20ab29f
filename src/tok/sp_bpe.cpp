// The SentencePiece BPE (sp_bpe.hpp).
#include "tok/sp_bpe.hpp"

#include <functional>
#include <queue>
#include <string_view>

#include "tok/special_tokens.hpp"
#include "tok/utf8.hpp"

namespace pentad {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // '▁', U+2581
constexpr uint32_t kNone = UINT32_MAX;

struct Merge {
  uint32_t rank = kNone;
  uint32_t made = kNone;
};
uint64_t key(uint32_t left, uint32_t right) { return (uint64_t(left) << 32) | right; }

// (left, right) -> its merge: open addressing, linear probing, a power of 2
// at least twice the merges (Gemma's 580 604 are built in milliseconds, and
// a lookup that misses, most of them while merging, reads one slot or two).
class MergeTable {
 public:
  void reserve(size_t n) {
    size_t size = 2;
    while (size < 2 * n) size *= 2;
    slots_.assign(size, Slot{});
  }
  void insert(uint64_t k, Merge m) {  // the first merge of a pair stays
    size_t s = slot_of(k);
    while (slots_[s].key != kEmpty && slots_[s].key != k) s = (s + 1) & (slots_.size() - 1);
    if (slots_[s].key == kEmpty) slots_[s] = Slot{k, m};
  }
  Merge find(uint64_t k) const {
    for (size_t s = slot_of(k);; s = (s + 1) & (slots_.size() - 1)) {
      if (slots_[s].key == k) return slots_[s].merge;
      if (slots_[s].key == kEmpty) return Merge{};
    }
  }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;  // (ids are below 2^31)
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge;
  };
  size_t slot_of(uint64_t k) const {
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    return size_t(h ^ (h >> 32)) & (slots_.size() - 1);
  }
  std::vector<Slot> slots_;
};

class SpBpeTokenizer final : public SpecialTokens {
 public:
  SpBpeTokenizer(SpBpeParts parts, const std::string& path)
      : SpecialTokens(path, uint32_t(parts.pieces.size()), parts.specials, parts.vocab, parts.eot, parts.separator,
                      parts.bos),
        pieces_(std::move(parts.pieces)), byte_ids_(parts.byte_ids), prefix_space_(parts.prefix_space),
        ignore_merges_(parts.ignore_merges), n_merges_(parts.merges.size()) {
    byte_of_.assign(pieces_.size(), -1);
    for (int b = 0; b < 256; ++b)
      if (byte_ids_[b] != kNoByteId) byte_of_[byte_ids_[b]] = int16_t(b);
    merges_.reserve(parts.merges.size());
    bool byte_merges = false;
    for (uint32_t rank = 0; rank < parts.merges.size(); ++rank) {
      const auto& [l, r, made] = parts.merges[rank];
      merges_.insert(key(l, r), Merge{rank, made});
      byte_merges = byte_merges || byte_of_[l] >= 0 || byte_of_[r] >= 0;
    }
    newline_inert_ = !byte_merges && !ignore_merges_ && id_of("\n") == kNone;
  }

  std::vector<uint32_t> encode(std::string_view text) const override { return encode_word(text, true); }
  std::vector<uint32_t> encode_continued(std::string_view part) const override { return encode_word(part, false); }

  // After a line break, when a line break is no piece (so its byte's token)
  // and no merge has a byte's token: nothing merges across it. Else nowhere.
  size_t safe_cut(std::string_view text, size_t from) const override {
    if (!newline_inert_ || from >= text.size()) return text.size();
    const size_t nl = text.find('\n', from == 0 ? 0 : from - 1);
    return nl == std::string_view::npos || nl + 1 >= text.size() ? text.size() : nl + 1;
  }

  std::string decode(const uint32_t* ids, size_t n) const override {
    std::string out;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t id = ids[i];
      if (id < pieces_.size()) {
        if (byte_of_[id] >= 0) {
          out += char(byte_of_[id]);
          continue;
        }
        const std::string_view p = pieces_.bytes(id);
        for (size_t k = 0; k < p.size();) {
          if (p.compare(k, kSpace.size(), kSpace) == 0) out += ' ', k += kSpace.size();
          else out += p[k++];
        }
      } else {
        append_special(id, out);
      }
    }
    return out;
  }

  std::string describe() const override {
    return "BPE sentencepiece (" + path() + ", " + std::to_string(pieces_.size()) + " pieces, " +
           std::to_string(n_merges_) + " merges, byte fallback" + (prefix_space_ ? "" : ", no prefix space") + ")";
  }

 private:
  // The text as one word ('▁' for each space, and before it if `first` and
  // the file prepends one), merged.
  std::vector<uint32_t> encode_word(std::string_view text, bool first) const {
    if (text.empty()) return {};
    std::string word(first && prefix_space_ ? kSpace : std::string_view());
    word.reserve(text.size() + text.size() / 4 + 8);
    for (const char c : text) {
      if (c == ' ') word += kSpace;
      else word += c;
    }
    if (ignore_merges_)
      if (const uint32_t id = id_of(word); id != kNone) return {id};
    std::vector<uint32_t> ids;
    ids.reserve(word.size());
    for (size_t i = 0; i < word.size();) {
      size_t n_bad = 0;
      size_t n = utf8_char_at(word, i, &n_bad);
      if (n == 0) n = n_bad;  // bytes that are no character: each its <0xNN>
      const uint32_t id = n_bad == 0 ? id_of(std::string_view(word).substr(i, n)) : kNone;
      if (id != kNone) {
        ids.push_back(id);
      } else {  // (every such byte has its <0xNN>: a byte without one is an ASCII character that is a piece)
        for (size_t k = i; k < i + n; ++k) ids.push_back(byte_ids_[static_cast<unsigned char>(word[k])]);
      }
      i += n;
    }
    merge(ids);
    return ids;
  }

  uint32_t id_of(std::string_view piece) const { return pieces_.find(piece.data(), piece.size()); }
  Merge merge_of(uint32_t left, uint32_t right) const { return merges_.find(key(left, right)); }

  // Joins the adjacent pair of lowest rank, leftmost on ties, until no pair
  // has a rank. Symbols are named by their first position; next/prev link
  // the live ones; a heap entry whose pair has changed since is skipped.
  void merge(std::vector<uint32_t>& ids) const {
    const uint32_t n = uint32_t(ids.size());
    std::vector<uint32_t> next(n), prev(n), rank(n, kNone);
    std::vector<char> live(n, 1);
    for (uint32_t i = 0; i < n; ++i) next[i] = i + 1, prev[i] = i == 0 ? 0 : i - 1;
    using Entry = std::pair<uint32_t, uint32_t>;  // (rank, position)
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
    const auto rerank = [&](uint32_t i) {
      rank[i] = next[i] < n ? merge_of(ids[i], ids[next[i]]).rank : kNone;
      if (rank[i] != kNone) heap.emplace(rank[i], i);
    };
    for (uint32_t i = 0; i < n; ++i) rerank(i);
    while (!heap.empty()) {
      const auto [r, i] = heap.top();
      heap.pop();
      if (!live[i] || rank[i] != r) continue;  // stale (a rank names one pair: merges are unique)
      const uint32_t j = next[i];
      ids[i] = merge_of(ids[i], ids[j]).made;
      live[j] = 0;
      next[i] = next[j];
      if (next[j] < n) prev[next[j]] = i;
      rerank(i);
      if (i > 0) rerank(prev[i]);
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i = next[i]) ids[k++] = ids[i];
    ids.resize(k);
  }

  RankTable pieces_;  // piece <-> id
  std::array<uint32_t, 256> byte_ids_;
  bool prefix_space_ = true;
  bool ignore_merges_ = false;
  size_t n_merges_ = 0;
  bool newline_inert_ = false;  // safe_cut may cut after a line break
  std::vector<int16_t> byte_of_;  // (pieces,) the byte of <0xNN>, -1 for other pieces
  MergeTable merges_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_sp_bpe_tokenizer(SpBpeParts parts, const std::string& source) {
  return std::make_unique<SpBpeTokenizer>(std::move(parts), source);
}

}  // namespace pentad
