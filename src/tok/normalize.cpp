// NFC over utf8proc (normalize.hpp). utf8proc takes only valid UTF-8, so the
// text goes in one valid run at a time.
#include "tok/normalize.hpp"

#include <utf8proc.h>

#include <cstdint>
#include <cstdlib>

#include "core/error.hpp"
#include "tok/utf8.hpp"

namespace pentad {

bool nfc_stable_fast(std::string_view text) {
  // U+0300 is CC 80 in UTF-8; a lead byte below 0xCC starts a code point
  // below it, and continuation bytes are below 0xC0.
  for (const char c : text)
    if (uint8_t(c) >= 0xCC) return false;
  return true;
}

namespace {

// Appends NFC(run) to out; run is valid UTF-8.
void append_nfc(std::string_view run, std::string& out) {
  if (nfc_stable_fast(run)) {
    out += run;
    return;
  }
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                                          utf8proc_ssize_t(run.size()), &mapped,
                                          utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) {
    std::free(mapped);
    // The run was checked to be valid UTF-8, so only memory can run out.
    PENTAD_FATAL(std::string("utf8proc_map (NFC) of ") + std::to_string(run.size()) +
                 " bytes failed: " + utf8proc_errmsg(n));
  }
  out.append(reinterpret_cast<const char*>(mapped), size_t(n));
  std::free(mapped);
}

}  // namespace

std::string nfc(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t run = utf8_valid_run(text, i);
    append_nfc(text.substr(i, run), out);
    i += run;
    while (i < text.size()) {  // the invalid bytes up to the next valid character, as they are
      size_t n_bad = 0;
      if (utf8_char_at(text, i, &n_bad) != 0) break;
      out.append(text.substr(i, n_bad));
      i += n_bad;
    }
  }
  return out;
}

const char* nfc_unicode_version() { return utf8proc_unicode_version(); }

}  // namespace pentad
