// The byte tokenizer, and the default safe cut (tokenizer.hpp).
#include "tok/tokenizer.hpp"

#include "core/error.hpp"
#include "tok/pretokenize.hpp"

namespace pentad {

size_t Tokenizer::safe_cut(std::string_view text, size_t from) const { return next_safe_cut(text, from); }

const std::vector<std::pair<std::string, uint32_t>>& Tokenizer::special_tokens() const {
  static const std::vector<std::pair<std::string, uint32_t>> none;
  return none;
}

int64_t special_token_id(const Tokenizer& tok, std::string_view text) {
  for (const auto& [s, id] : tok.special_tokens())
    if (s == text) return id;
  return -1;
}

std::vector<uint32_t> encode_with_specials(const Tokenizer& tok, std::string_view text) {
  const auto& specials = tok.special_tokens();
  std::vector<uint32_t> ids;
  const auto plain = [&](std::string_view part) {
    if (part.empty()) return;
    const std::vector<uint32_t> p = tok.encode(part);
    ids.insert(ids.end(), p.begin(), p.end());
  };
  size_t start = 0;  // the first byte not yet encoded
  for (size_t i = 0; i < text.size();) {
    size_t best = 0;
    uint32_t id = 0;
    for (const auto& [s, sid] : specials)
      if (s.size() > best && text.compare(i, s.size(), s) == 0) best = s.size(), id = sid;
    if (best == 0) {
      ++i;
      continue;
    }
    plain(text.substr(start, i - start));
    ids.push_back(id);
    i += best;
    start = i;
  }
  plain(text.substr(start));
  return ids;
}

namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<uint32_t> encode(std::string_view text) const override {
    std::vector<uint32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  std::string decode(const uint32_t* ids, size_t n) const override {
    std::string out(n, '\0');
    for (size_t i = 0; i < n; ++i) {
      if (ids[i] > 255)
        throw InputError("token " + std::to_string(ids[i]) + " is outside the byte vocabulary (256)");
      out[i] = char(ids[i]);
    }
    return out;
  }
  int64_t vocab_size() const override { return 256; }
  int64_t eot() const override { return -1; }
  std::string describe() const override { return "bytes (256)"; }
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

}  // namespace pentad
