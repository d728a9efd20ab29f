// Unicode normalization of text before pre-tokenization: NFC (canonical
// decomposition, then canonical composition; Unicode Standard Annex #15),
// the normalizer of Qwen2's and Qwen2.5's tokenizer.json. utf8proc computes
// it (its own Unicode tables: utf8proc 2.8.0 has Unicode 15.0).
#pragma once

#include <string>
#include <string_view>

namespace pentad {

// Whether nfc(text) == text can be told without normalizing: every code
// point is below U+0300 (no byte is 0xCC or above), and below U+0300 every
// character is NFC_Quick_Check=Yes and none combines with one before it.
bool nfc_stable_fast(std::string_view text);

// `text` in NFC. Each maximal run of valid UTF-8 (utf8.hpp) is normalized on
// its own; bytes that are not valid UTF-8 are kept as they are (as
// pretokenize.hpp's Pretokenizer keeps them, a piece of their own), so the
// text on either side of them is normalized as if they were a boundary.
std::string nfc(std::string_view text);

// The version of the Unicode tables nfc uses (e.g. "15.0.0"), for messages.
const char* nfc_unicode_version();

}  // namespace pentad
