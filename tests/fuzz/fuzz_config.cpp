// libFuzzer target: the deck parser. Any text must give a Config or an
// InputError (naming the key); anything else (a crash, an ASan report,
// another exception) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const pentad::Config cfg = pentad::parse_config(text, "fuzz.toml", {}, 1);
    // A deck that parses must print and parse back.
    (void)pentad::parse_config(pentad::config_to_toml(cfg), "resolved.toml", {}, 1);
  } catch (const pentad::InputError&) {
  }
  return 0;
}
