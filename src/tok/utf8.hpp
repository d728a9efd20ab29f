// UTF-8 validation by maximal subparts (Unicode 15, section 3.9 "U+FFFD
// substitution of maximal subparts"; the rule of Python's errors="replace"
// and of the WHATWG decoder), used to split text into valid runs before
// pre-tokenization and to render decoded bytes as text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pentad {

// Length of the valid UTF-8 character starting at s[i] (1..4), or 0 if none
// starts there; then *n_bad is the length of the maximal invalid subpart at
// s[i] (1..3), the bytes one U+FFFD stands for.
size_t utf8_char_at(std::string_view s, size_t i, size_t* n_bad);

// Length of the longest valid UTF-8 prefix of s[i..].
size_t utf8_valid_run(std::string_view s, size_t i);

// `bytes` as valid UTF-8: every maximal invalid subpart becomes U+FFFD
// (EF BF BD); valid input comes back unchanged. This is how tiktoken's
// decode() (Python's errors="replace") renders decoded bytes as text.
std::string utf8_replace(std::string_view bytes);

}  // namespace pentad
