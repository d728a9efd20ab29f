// The pentad side of the tokenizer oracle tests (oracle.sh, hf_read.sh)
// besides `pentad prep`: decode ids with pentad's decoder, and utf8_replace
// a file.
//   tok_tool decode TOKENIZER IDS OUT   TOKENIZER: a rank file or a tokenizer.json
//                                       (load_tokenizer); IDS: raw little-endian uint32 ids
//   tok_tool replace IN OUT         OUT = utf8_replace(IN)
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tok/tokenizer.hpp"
#include "tok/utf8.hpp"

namespace {

std::string slurp(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw pentad::InputError(std::string("cannot open ") + path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write(const char* path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
  if (!f) throw pentad::InputError(std::string("cannot write ") + path);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "decode" && argc == 5) {
      const auto tok = pentad::load_tokenizer(argv[2], "");
      const std::string raw = slurp(argv[3]);
      std::vector<uint32_t> ids(raw.size() / 4);
      for (size_t i = 0; i < ids.size(); ++i)
        ids[i] = uint32_t(uint8_t(raw[4 * i])) | uint32_t(uint8_t(raw[4 * i + 1])) << 8 |
                 uint32_t(uint8_t(raw[4 * i + 2])) << 16 | uint32_t(uint8_t(raw[4 * i + 3])) << 24;
      write(argv[4], tok->decode(ids));
      return 0;
    }
    if (cmd == "replace" && argc == 4) {
      write(argv[3], pentad::utf8_replace(slurp(argv[2])));
      return 0;
    }
    std::cerr << "usage: tok_tool decode TOKENIZER IDS OUT | replace IN OUT\n";
    return 2;
  } catch (const pentad::InputError& e) {
    std::cerr << "tok_tool: " << e.what() << "\n";
    return 1;
  }
}
