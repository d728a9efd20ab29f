// Byte-level BPE over tiktoken rank files (bpe.hpp): the rank file reader,
// the rank table (open addressing over one byte arena, no allocation per
// lookup), the two merge loops and the tokenizer.
#include "tok/bpe.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <queue>
#include <utility>

#include "core/error.hpp"
#include "tok/normalize.hpp"
#include "tok/pretokenize.hpp"
#include "tok/special_tokens.hpp"

namespace pentad {
namespace {

uint64_t hash_bytes(const char* p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t(n) * 0xFF51AFD7ED558CCDull);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 29;
  }
  return h ^ (h >> 32);
}

// Standard base64 (RFC 4648, with padding) as tiktoken files use it; false
// for anything else.
bool base64_decode(std::string_view in, std::string& out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  out.clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  for (size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    int v[4];
    int n_pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + k];
      if (c == '=' && last && k >= 2) {
        v[k] = 0;
        ++n_pad;
        continue;
      }
      if (n_pad > 0) return false;  // data after padding
      v[k] = value(c);
      if (v[k] < 0) return false;
    }
    const uint32_t w = uint32_t(v[0]) << 18 | uint32_t(v[1]) << 12 | uint32_t(v[2]) << 6 | uint32_t(v[3]);
    out.push_back(char(w >> 16));
    if (n_pad < 2) out.push_back(char(w >> 8 & 0xFF));
    if (n_pad < 1) out.push_back(char(w & 0xFF));
    // Canonical form only: the bits that padding drops must be zero.
    if ((n_pad == 1 && (w & 0xFF) != 0) || (n_pad == 2 && (w & 0xFFFF) != 0)) return false;
  }
  return true;
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError("rank file '" + path + "': is a directory");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw InputError("rank file '" + path + "': cannot open: " + std::strerror(errno));
  std::string text;
  char buf[1 << 16];
  size_t got = 0;
  while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, got);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) throw InputError("rank file '" + path + "': read failed: " + std::strerror(err));
  return text;
}

std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 60)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) {
      out += c;
    } else {
      char b[8];
      std::snprintf(b, sizeof(b), "\\x%02X", u);
      out += b;
    }
  }
  return s.size() > 60 ? out + "..." : out;
}

}  // namespace

// --- the rank table --------------------------------------------------------

namespace {

uint64_t head_of(const char* p, size_t n) {
  uint64_t w = 0;
  std::memcpy(&w, p, n < 8 ? n : 8);
  return w;
}

}  // namespace

uint32_t RankTable::find(const char* p, size_t n) const {
  const size_t mask = slots_.size() - 1;
  const uint64_t head = head_of(p, n);
  for (size_t s = hash_bytes(p, n) & mask;; s = (s + 1) & mask) {
    const Slot& slot = slots_[s];
    if (slot.rank_plus_1 == 0) return kNone;
    if (slot.length == n && slot.head == head) {
      const uint32_t r = slot.rank_plus_1 - 1;
      if (n <= 8 || std::memcmp(bytes_.data() + offset_[r] + 8, p + 8, n - 8) == 0) return r;
    }
  }
}

void RankTable::insert_or_die(uint32_t rank, const DuplicateMessage& duplicate) {
  const std::string_view b = bytes(rank);
  const uint32_t other = find(b.data(), b.size());
  if (other != kNone) throw InputError(duplicate(other, rank, printable(b)));
  const size_t mask = slots_.size() - 1;
  size_t s = hash_bytes(b.data(), b.size()) & mask;
  while (slots_[s].rank_plus_1 != 0) s = (s + 1) & mask;
  slots_[s] = Slot{head_of(b.data(), b.size()), rank + 1, uint32_t(b.size())};
}

RankTable RankTable::of(const std::vector<const std::string*>& in_rank_order, const DuplicateMessage& duplicate) {
  const uint64_t n = in_rank_order.size();
  RankTable t;
  t.offset_.assign(n + 1, 0);
  for (uint64_t r = 0; r < n; ++r) t.offset_[r + 1] = t.offset_[r] + in_rank_order[r]->size();
  t.bytes_.reserve(t.offset_[n]);
  for (uint64_t r = 0; r < n; ++r) t.bytes_ += *in_rank_order[r];
  size_t n_slots = 1;
  while (n_slots < 2 * n) n_slots *= 2;
  t.slots_.assign(n_slots, Slot{});
  for (uint64_t r = 0; r < n; ++r) t.insert_or_die(uint32_t(r), duplicate);
  return t;
}

RankTable RankTable::from_tokens(const std::vector<const std::string*>& in_rank_order, const std::string& what,
                                 const DuplicateMessage& duplicate) {
  RankTable t = of(in_rank_order, duplicate);
  for (int b = 0; b < 256; ++b) {
    const char c = char(b);
    if (t.find(&c, 1) == kNone) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02X", b);
      throw InputError(what + ": the byte " + hex + " has no rank (a byte-level BPE file ranks all 256 single bytes)");
    }
  }
  return t;
}

RankTable RankTable::load(const std::string& path) {
  const std::string text = read_file(path);
  if (text.empty()) throw InputError("rank file '" + path + "': is empty");
  std::vector<int64_t> line_of;  // rank -> its line (0: none yet)
  std::string token;
  int64_t line_no = 0;
  size_t at = 0;
  std::vector<std::pair<uint64_t, std::string>> entries;  // (rank, bytes) in file order
  while (at < text.size()) {
    ++line_no;
    size_t eol = text.find('\n', at);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + at, eol - at);
    at = eol + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF files
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    const size_t sp = line.find(' ');
    if (line.empty() || sp == std::string_view::npos || sp == 0 || sp + 1 == line.size() ||
        line.find(' ', sp + 1) != std::string_view::npos)
      throw InputError(where + "expected 'BASE64 RANK', got \"" + printable(line) + "\"");
    const std::string_view b64 = line.substr(0, sp), rank_text = line.substr(sp + 1);
    uint64_t rank = 0;
    for (char c : rank_text) {
      if (c < '0' || c > '9' || rank > (uint64_t(1) << 31))
        throw InputError(where + "rank \"" + printable(rank_text) + "\" is not a non-negative integer below 2^31");
      rank = rank * 10 + uint64_t(c - '0');
    }
    if (rank >= (uint64_t(1) << 31))
      throw InputError(where + "rank \"" + printable(rank_text) + "\" is not a non-negative integer below 2^31");
    if (!base64_decode(b64, token))
      throw InputError(where + "\"" + printable(b64) + "\" is not valid base64");
    entries.emplace_back(rank, token);
  }
  const uint64_t n = entries.size();
  line_of.assign(n, 0);
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t rank = entries[i].first;
    const std::string where = path + ":" + std::to_string(i + 1) + ": ";
    if (rank >= n)
      throw InputError(where + "rank " + std::to_string(rank) + " is out of range: the " + std::to_string(n) +
                       " ranks of a file must be 0.." + std::to_string(n - 1) + ", each once (not contiguous)");
    if (line_of[rank] != 0)
      throw InputError(where + "rank " + std::to_string(rank) + " is already on line " +
                       std::to_string(line_of[rank]) + " (duplicate rank)");
    line_of[rank] = int64_t(i + 1);
  }
  std::vector<const std::string*> in_rank_order(n);
  for (const auto& e : entries) in_rank_order[e.first] = &e.second;
  return from_tokens(in_rank_order, "rank file '" + path + "'",
                     [&](uint32_t first_rank, uint32_t second_rank, const std::string& shown) {
                       const auto [first, second] = std::minmax(line_of[first_rank], line_of[second_rank]);
                       return path + ":" + std::to_string(second) + ": token \"" + shown + "\" is already on line " +
                              std::to_string(first) + " (duplicate token bytes)";
                     });
}

// --- merging ---------------------------------------------------------------

namespace {

void merge_scan(const RankTable& ranks, std::string_view piece, std::vector<uint32_t>& out) {
  constexpr uint32_t kNone = RankTable::kNone;
  const char* p = piece.data();
  const size_t n = piece.size();
  // Part i is piece[start[i], start[i+1]); rank[i] is the rank of parts i and
  // i+1 joined (kNone if that is no token or i is the last part).
  thread_local std::vector<uint32_t> start, rank;
  start.resize(n + 1);
  rank.resize(n + 1);
  size_t m = n;  // parts
  for (size_t i = 0; i <= n; ++i) start[i] = uint32_t(i);
  auto pair_rank = [&](size_t i) {
    return i + 2 <= m ? ranks.find(p + start[i], start[i + 2] - start[i]) : kNone;
  };
  for (size_t i = 0; i < m; ++i) rank[i] = pair_rank(i);
  while (m > 1) {
    uint32_t best = kNone;
    size_t at = 0;
    for (size_t i = 0; i + 1 < m; ++i)
      if (rank[i] < best) best = rank[i], at = i;
    if (best == kNone) break;
    std::copy(start.begin() + at + 2, start.begin() + m + 1, start.begin() + at + 1);
    std::copy(rank.begin() + at + 2, rank.begin() + m, rank.begin() + at + 1);
    --m;
    rank[at] = pair_rank(at);
    if (at > 0) rank[at - 1] = pair_rank(at - 1);
  }
  for (size_t i = 0; i < m; ++i) out.push_back(ranks.find(p + start[i], start[i + 1] - start[i]));
}

void merge_heap(const RankTable& ranks, std::string_view piece, std::vector<uint32_t>& out) {
  constexpr uint32_t kNone = RankTable::kNone;
  const char* p = piece.data();
  const uint32_t n = uint32_t(piece.size());
  // Parts are named by their first byte; next/prev link the live ones.
  std::vector<uint32_t> next(n), prev(n), pair(n);
  std::vector<char> live(n, 1);
  for (uint32_t i = 0; i < n; ++i) next[i] = i + 1, prev[i] = i == 0 ? 0 : i - 1;
  auto pair_rank = [&](uint32_t i) {
    if (next[i] >= n) return kNone;
    const uint32_t end = next[next[i]];
    return ranks.find(p + i, end - i);
  };
  using Entry = std::pair<uint32_t, uint32_t>;  // (rank, first byte): lowest rank, then leftmost
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (uint32_t i = 0; i < n; ++i) {
    pair[i] = pair_rank(i);
    if (pair[i] != kNone) heap.emplace(pair[i], i);
  }
  while (!heap.empty()) {
    const auto [r, i] = heap.top();
    heap.pop();
    if (!live[i] || pair[i] != r) continue;  // stale: the pair changed since
    const uint32_t j = next[i];
    live[j] = 0;
    next[i] = next[j];
    if (next[j] < n) prev[next[j]] = i;
    pair[i] = pair_rank(i);
    if (pair[i] != kNone) heap.emplace(pair[i], i);
    if (i > 0) {
      const uint32_t h = prev[i];
      pair[h] = pair_rank(h);
      if (pair[h] != kNone) heap.emplace(pair[h], h);
    }
  }
  for (uint32_t i = 0; i < n; i = next[i]) out.push_back(ranks.find(p + i, next[i] - i));
}

}  // namespace

void bpe_merge(const RankTable& ranks, std::string_view piece, std::vector<uint32_t>& out,
               MergeAlgorithm algorithm) {
  if (algorithm == MergeAlgorithm::kAuto)
    algorithm = piece.size() > 256 ? MergeAlgorithm::kHeap : MergeAlgorithm::kScan;
  if (algorithm == MergeAlgorithm::kHeap) merge_heap(ranks, piece, out);
  else merge_scan(ranks, piece, out);
}

// --- the tokenizer ---------------------------------------------------------

namespace {

// The special tokens, end-of-text and separator of a pattern's vocabulary.
void add_specials(BpeParts& f) {
  const uint32_t n_ranks = f.ranks.size();
  std::string eot, separator;
  if (f.pattern == "gpt2") {
    f.specials = {{"<|endoftext|>", n_ranks}};
    eot = separator = "<|endoftext|>";
  } else if (f.pattern == "cl100k") {
    // cl100k_base's ids leave 100261..100275 unused; they decode to nothing
    // and are counted in the vocabulary, as in tiktoken (n_vocab 100277).
    f.specials = {{"<|endoftext|>", n_ranks + 1},   {"<|fim_prefix|>", n_ranks + 2},
                  {"<|fim_middle|>", n_ranks + 3},  {"<|fim_suffix|>", n_ranks + 4},
                  {"<|endofprompt|>", n_ranks + 20}};
    eot = separator = "<|endoftext|>";
  } else if (f.pattern == "qwen2") {
    // Qwen's tiktoken file and Qwen2's tokenizer.json agree on these three;
    // the later ids differ between them (Qwen's <|extra_N|>, Qwen2's
    // vision and tool tokens), so none is guessed. Documents end with
    // <|endoftext|>, the base models' end of text.
    f.specials = {{"<|endoftext|>", n_ranks}, {"<|im_start|>", n_ranks + 1}, {"<|im_end|>", n_ranks + 2}};
    eot = separator = "<|endoftext|>";
  } else {  // llama3: Meta's 256 specials right after the ranks
    const char* first[] = {"<|begin_of_text|>",          "<|end_of_text|>",
                           "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
                           "<|reserved_special_token_2|>", "<|reserved_special_token_3|>",
                           "<|start_header_id|>",        "<|end_header_id|>",
                           "<|reserved_special_token_4|>", "<|eot_id|>"};
    uint32_t id = n_ranks;
    for (const char* s : first) f.specials.emplace_back(s, id++);
    for (int k = 5; k < 251; ++k) f.specials.emplace_back("<|reserved_special_token_" + std::to_string(k) + "|>", id++);
    eot = "<|end_of_text|>";
    separator = "<|begin_of_text|>";
  }
  const bool bos_first = f.pattern == "llama3";  // as Meta's and Hugging Face's Llama 3 tokenizers
  f.vocab = n_ranks;
  for (const auto& [text, id] : f.specials) {
    f.vocab = std::max<int64_t>(f.vocab, int64_t(id) + 1);
    if (text == eot) f.eot = id;
    if (text == separator) f.separator = id;
  }
  if (bos_first) f.bos = f.separator;
}

class BpeTokenizer final : public SpecialTokens {
 public:
  BpeTokenizer(BpeParts parts, const std::string& path)
      : SpecialTokens(path, parts.ranks.size(), parts.specials, parts.vocab, parts.eot, parts.separator, parts.bos),
        ranks_(std::move(parts.ranks)), pre_(parts.pattern), nfc_(parts.nfc) {}

  std::vector<uint32_t> encode(std::string_view text) const override {
    std::vector<uint32_t> ids;
    ids.reserve(text.size() / 3 + 16);
    thread_local std::vector<std::pair<uint32_t, uint32_t>> pieces;
    // Blocks of about 1 MiB cut where every named pattern starts afresh
    // and NFC is unchanged (next_safe_cut), so the pieces list stays small.
    thread_local std::string normalized;
    size_t begin = 0;
    while (begin < text.size()) {
      const size_t end = next_safe_cut(text, begin + (size_t(1) << 20));
      std::string_view block = text.substr(begin, end - begin);
      if (nfc_ && !nfc_stable_fast(block)) {
        normalized = nfc(block);
        block = normalized;
      }
      pieces.clear();
      pre_.split(block, pieces);
      for (const auto& [b, e] : pieces) {
        const uint32_t r = ranks_.find(block.data() + b, e - b);
        if (r != RankTable::kNone) ids.push_back(r);
        else bpe_merge(ranks_, block.substr(b, e - b), ids);
      }
      begin = end;
    }
    return ids;
  }

  std::string decode(const uint32_t* ids, size_t n) const override {
    std::string out;
    for (size_t i = 0; i < n; ++i) {
      if (ids[i] < ranks_.size()) out += ranks_.bytes(ids[i]);
      else append_special(ids[i], out);
    }
    return out;
  }

  std::string describe() const override {
    return "BPE " + pre_.name() + " (" + path() + ", " + std::to_string(ranks_.size()) + " ranks, " +
           (nfc_ ? std::string("NFC (Unicode ") + nfc_unicode_version() + "), " : std::string()) +
           (pre_.jit() ? "PCRE2 JIT)" : "PCRE2 interpreter)");
  }

 private:
  RankTable ranks_;
  Pretokenizer pre_;
  bool nfc_ = false;  // BpeParts::nfc
};

}  // namespace

BpeParts load_bpe_parts(const std::string& path, const std::string& pattern) {
  if (!pattern.empty()) Pretokenizer check(pattern);  // an unknown name fails before the file is read
  BpeParts parts;
  parts.ranks = RankTable::load(path);
  parts.pattern = pattern;
  if (parts.pattern.empty()) {
    switch (parts.ranks.size()) {
      case 50256: parts.pattern = "gpt2"; break;
      case 100256: parts.pattern = "cl100k"; break;
      case 128000: parts.pattern = "llama3"; break;
      case 151643: parts.pattern = "qwen2"; break;
      default:
        throw InputError("rank file '" + path + "' has " + std::to_string(parts.ranks.size()) +
                         " ranks, which fits no named pattern (gpt2 50256, cl100k 100256, llama3 128000, qwen2 151643): "
                         "give --pattern " + Pretokenizer::known_names());
    }
  }
  add_specials(parts);
  return parts;
}

std::unique_ptr<Tokenizer> make_bpe_tokenizer(BpeParts parts, const std::string& source) {
  return std::make_unique<BpeTokenizer>(std::move(parts), source);
}

std::unique_ptr<Tokenizer> load_tiktoken(const std::string& path, const std::string& pattern) {
  return make_bpe_tokenizer(load_bpe_parts(path, pattern), path);
}

}  // namespace pentad
