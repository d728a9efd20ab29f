// The byte tokenizer, and the default safe cut (tokenizer.hpp).
#include "tok/tokenizer.hpp"

#include "core/error.hpp"
#include "tok/pretokenize.hpp"

namespace pentad {

size_t Tokenizer::safe_cut(std::string_view text, size_t from) const { return next_safe_cut(text, from); }

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
