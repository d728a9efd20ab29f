// UTF-8 by maximal subparts (utf8.hpp). The well-formed byte sequences are
// those of Table 3-7 of the Unicode standard: the second byte's range depends
// on the lead byte (no overlong forms, no surrogates, nothing above U+10FFFF).
#include "tok/utf8.hpp"

#include <cstdint>
#include <cstring>

namespace pentad {
namespace {

inline bool in(unsigned char c, unsigned lo, unsigned hi) { return c >= lo && c <= hi; }

}  // namespace

size_t utf8_char_at(std::string_view s, size_t i, size_t* n_bad) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  const size_t left = s.size() - i;
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  size_t need = 0;            // continuation bytes after the lead
  unsigned lo = 0x80, hi = 0xBF;  // range of the first continuation byte
  if (in(c, 0xC2, 0xDF)) {
    need = 1;
  } else if (c == 0xE0) {
    need = 2, lo = 0xA0;
  } else if (in(c, 0xE1, 0xEC) || in(c, 0xEE, 0xEF)) {
    need = 2;
  } else if (c == 0xED) {
    need = 2, hi = 0x9F;
  } else if (c == 0xF0) {
    need = 3, lo = 0x90;
  } else if (in(c, 0xF1, 0xF3)) {
    need = 3;
  } else if (c == 0xF4) {
    need = 3, hi = 0x8F;
  } else {
    *n_bad = 1;  // a continuation byte, C0, C1 or F5..FF cannot start a character
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    const bool ok = k < left && (k == 1 ? in(p[k], lo, hi) : in(p[k], 0x80, 0xBF));
    if (!ok) {
      *n_bad = k;  // the lead and the continuation bytes that were right so far
      return 0;
    }
  }
  return need + 1;
}

size_t utf8_valid_run(std::string_view s, size_t i) {
  const size_t start = i;
  size_t n_bad = 0;
  while (i < s.size()) {
    // ASCII eight bytes at a time: most text is mostly ASCII.
    while (i + 8 <= s.size()) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const size_t len = utf8_char_at(s, i, &n_bad);
    if (len == 0) break;
    i += len;
  }
  return i - start;
}

std::string utf8_replace(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const size_t run = utf8_valid_run(bytes, i);
    out.append(bytes.data() + i, run);
    i += run;
    if (i < bytes.size()) {
      size_t n_bad = 0;
      utf8_char_at(bytes, i, &n_bad);
      out.append("\xEF\xBF\xBD");
      i += n_bad;
    }
  }
  return out;
}

}  // namespace pentad
