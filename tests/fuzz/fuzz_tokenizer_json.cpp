// libFuzzer target: a Hugging Face tokenizer.json (tok/hf_json.*,
// tok/hf_tokenizer.*). Two properties for any bytes:
//   - the streaming reader is json::parse: both refuse the text with the
//     same message, or its document as a tree is json::parse's tree;
//   - read_tokenizer_json gives a tokenizer's parts or an InputError naming
//     the file, nothing else.

#include <sys/stat.h>

#include <cerrno>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.hpp"
#include "fuzz_file.hpp"
#include "tok/hf_json.hpp"
#include "tok/hf_tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nlohmann::json;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string tree_error = "-", doc_error = "-";
  json tree;
  try {
    tree = json::parse(text);
  } catch (const json::parse_error& e) {
    tree_error = e.what();
  }
  try {
    const pentad::hf::TokenizerDoc doc = pentad::hf::read_tokenizer_doc(text);
    if (tree_error != "-" || pentad::hf::as_tree(doc) != tree) std::abort();
  } catch (const json::parse_error& e) {
    doc_error = e.what();
  }
  if (doc_error != tree_error) std::abort();

  // In a folder of its own: the reader also looks for tokenizer_config.json beside it.
  static const std::string dir = pentad::fuzz::input_path("tokenizer_json", "");
  static const bool made = ::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST;
  const std::string path = dir + "/tokenizer.json";
  if (!made || !pentad::fuzz::write_input(path, data, size)) return 0;
  try {
    (void)pentad::hf::read_tokenizer_json(path);
  } catch (const pentad::InputError&) {
  }
  std::remove(path.c_str());
  return 0;
}
