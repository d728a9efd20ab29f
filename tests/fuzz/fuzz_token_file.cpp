// libFuzzer target: the token-file header and body checks (io/data.*),
// loss masks (versions 3 and 4) included. The
// bytes go to a file (TokenFile maps a path); any content must open or give
// an InputError naming the file.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "fuzz_file.hpp"
#include "io/data.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = pentad::fuzz::input_path("tokens", ".bin");
  if (!pentad::fuzz::write_input(path, data, size)) return 0;
  try {
    const pentad::TokenFile tokens(path, 256, 2);
    int64_t sum = 0;
    for (int64_t i = 0; i < tokens.size(); ++i) sum += tokens[i] + (tokens.trained(i) ? 1 : 0);  // every token and mask bit is readable
    if (sum < 0) std::abort();
  } catch (const pentad::InputError&) {
  }
  std::remove(path.c_str());
  return 0;
}
