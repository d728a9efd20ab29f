// The pre-tokenization patterns (pretokenize.hpp). `\s` is spelled out as
// the Unicode White_Space set, which tiktoken's Rust regex engine gives `\s`:
// PCRE2's UCP `\s` adds U+180E (MONGOLIAN VOWEL SEPARATOR, no longer white
// space since Unicode 6.3), and the set so written does not depend on the
// PCRE2 version. cl100k's pattern is tiktoken's with
// possessive quantifiers where they cannot change a match; Meta's Llama 3
// tokenizer uses the same expression. Qwen2's is cl100k's with one digit per
// piece (`\p{N}` for `\p{N}{1,3}`), written the same way.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tok/pretokenize.hpp"

#include <pcre2.h>

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "tok/utf8.hpp"

namespace pentad {
namespace {

#define WS "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

// GPT-2 / r50k_base.
const char* const kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])|[" WS "]+";

// cl100k_base, and Llama 3.
const char* const kCl100k =
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]++[\\r\\n]*|[" WS
    "]*[\\r\\n]|[" WS "]+(?![^" WS "])|[" WS "]+";

// Qwen2 and Qwen2.5 (and Qwen's first tiktoken file).
const char* const kQwen2 =
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^" WS "\\p{L}\\p{N}]++[\\r\\n]*|[" WS
    "]*[\\r\\n]|[" WS "]+(?![^" WS "])|[" WS "]+";

#undef WS

// The same, as Hugging Face's tokenizer.json holds them (pretokenize.hpp).
const char* const kGpt2Hf = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char* const kCl100kHf =
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|"
    "\\s+(?!\\S)|\\s+";
const char* const kQwen2Hf =
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|"
    "\\s+(?!\\S)|\\s+";

// The other spellings of the same expressions found in tokenizer.json files:
// tiktoken's own cl100k_base expression (possessive quantifiers, `\s`), and
// Meta's Llama 3 expression (its tokenizer.py, copied into Hugging Face's
// Llama 3 tokenizer.json), which lists the contractions as alternatives
// inside (?i:...) and ends the newline run with `[\r\n]+` (the same matches:
// `\s*` backs off to the last newline of the run either way).
const char* const kCl100kTiktoken =
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|\\s*[\\r\\n]|"
    "\\s+(?!\\S)|\\s+";
const char* const kLlama3Meta =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen's own spelling of its expression (Meta's Llama 3 form with `\p{N}`),
// as Qwen2's and Qwen2.5's tokenizer.json hold it.
const char* const kQwen2Published =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

pcre2_code* as_code(void* p) { return static_cast<pcre2_code*>(p); }

}  // namespace

Pretokenizer::Pretokenizer(const std::string& name) : name_(name) {
  const char* pattern = nullptr;
  if (name == "gpt2") pattern = kGpt2;
  else if (name == "cl100k" || name == "llama3") pattern = kCl100k;
  else if (name == "qwen2") pattern = kQwen2;
  else throw InputError("unknown pre-tokenization pattern '" + name + "' (known: " + known_names() + ")");
  int err = 0;
  PCRE2_SIZE err_at = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_at, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    PENTAD_FATAL("pcre2_compile of the " + name + " pattern failed at offset " + std::to_string(err_at) +
                 ": " + reinterpret_cast<const char*>(msg));
  }
  code_ = code;
  // Without JIT support (some architectures) the interpreter gives the same matches, slower.
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

const char* hf_pattern(const std::string& name) {
  if (name == "gpt2") return kGpt2Hf;
  if (name == "cl100k" || name == "llama3") return kCl100kHf;
  if (name == "qwen2") return kQwen2Hf;
  return nullptr;
}

std::string pattern_of_hf_regex(const std::string& regex) {
  if (regex == kGpt2Hf) return "gpt2";
  if (regex == kCl100kHf || regex == kCl100kTiktoken || regex == kLlama3Meta) return "cl100k";
  if (regex == kQwen2Hf || regex == kQwen2Published) return "qwen2";
  return {};
}

Pretokenizer::~Pretokenizer() { pcre2_code_free(as_code(code_)); }

void Pretokenizer::split_valid(const char* base, size_t begin, size_t end, void* match_data,
                               std::vector<std::pair<uint32_t, uint32_t>>& out) const {
  auto* md = static_cast<pcre2_match_data*>(match_data);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(base + begin);
  const size_t n = end - begin;
  size_t at = 0;
  while (at < n) {
    const int rc = jit_ ? pcre2_jit_match(as_code(code_), subject, n, at, 0, md, nullptr)
                        : pcre2_match(as_code(code_), subject, n, at, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) {
      // Every character matches one of the alternatives, so this cannot
      // happen; the rest is kept as one piece rather than dropped.
      out.emplace_back(uint32_t(begin + at), uint32_t(end));
      return;
    }
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      PENTAD_FATAL(std::string("pcre2_match failed: ") + reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t m0 = ov[0], m1 = ov[1];
    if (m0 > at) out.emplace_back(uint32_t(begin + at), uint32_t(begin + m0));  // an unmatched gap (none occur)
    if (m1 == m0) {  // an empty match (none of the patterns has one): keep one character
      size_t n_bad = 0;
      m1 = m0 + std::max<size_t>(1, utf8_char_at(std::string_view(base + begin, n), m0, &n_bad));
    }
    out.emplace_back(uint32_t(begin + m0), uint32_t(begin + m1));
    at = m1;
  }
}

size_t next_safe_cut(std::string_view text, size_t from) {
  auto printable = [](char c) { return c > 0x20 && c < 0x7F; };
  for (size_t p = std::max<size_t>(from, 2); p < text.size(); ++p) {
    const void* nl = std::memchr(text.data() + p - 1, '\n', text.size() - (p - 1));
    if (nl == nullptr) break;
    p = size_t(static_cast<const char*>(nl) - text.data()) + 1;  // just after the '\n'
    if (p < text.size() && printable(text[p - 2]) && printable(text[p])) return p;
  }
  return text.size();
}

void Pretokenizer::split(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& out) const {
  if (text.size() > UINT32_MAX) throw InputError("pre-tokenization: a text of 4 GiB or more is not supported");
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  if (md == nullptr) PENTAD_FATAL("pcre2_match_data_create failed");
  size_t i = 0;
  while (i < text.size()) {
    const size_t run = utf8_valid_run(text, i);
    if (run > 0) split_valid(text.data(), i, i + run, md, out);
    i += run;
    // The maximal run of bytes that are not valid UTF-8 starting here.
    const size_t bad_begin = i;
    while (i < text.size()) {
      size_t n_bad = 0;
      if (utf8_char_at(text, i, &n_bad) != 0) break;
      i += n_bad;
    }
    if (i > bad_begin) out.emplace_back(uint32_t(bad_begin), uint32_t(i));
  }
  pcre2_match_data_free(md);
}

}  // namespace pentad
