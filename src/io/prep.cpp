// `pentad prep` (prep.hpp).
#include "io/prep.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "io/data.hpp"
#include "tok/parallel.hpp"

namespace pentad {
namespace {

std::string read_input(const std::string& in) {
  std::error_code ec;
  if (std::filesystem::is_directory(in, ec)) throw InputError("prep input '" + in + "': is a directory");
  std::FILE* f = std::fopen(in.c_str(), "rb");
  if (f == nullptr) throw InputError("prep input '" + in + "': cannot open: " + std::strerror(errno));
  std::string text;
  char buf[1 << 16];
  size_t got = 0;
  while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, got);
  const bool read_failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (read_failed) throw InputError("prep input '" + in + "': read failed: " + std::strerror(err));
  return text;
}

}  // namespace

std::string PrepResult::summary() const {
  return "prep: " + std::to_string(n_files) + (n_files == 1 ? " file, " : " files, ") +
         std::to_string(bytes) + " bytes -> " + train_path + " (" + std::to_string(train_tokens) +
         " tokens), " + val_path + " (" + std::to_string(val_tokens) + " tokens)";
}

PrepResult prep_corpus(const std::vector<std::string>& inputs, const std::string& out_dir,
                       double val_fraction, const Tokenizer& tokenizer) {
  namespace fs = std::filesystem;
  if (inputs.empty()) throw InputError("prep: no input files given");
  if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", val_fraction);
    throw InputError("prep: val_fraction " + std::string(buf) + " is out of range [0, 1)");
  }

  PrepResult r;
  r.n_files = int(inputs.size());
  std::vector<std::string> texts;
  texts.reserve(inputs.size());
  for (const std::string& in : inputs) {
    texts.push_back(read_input(in));
    r.bytes += int64_t(texts.back().size());
  }
  // Encoded on all cores, in chunks cut where the ids cannot change (tok/parallel.hpp).
  std::vector<std::vector<uint32_t>> ids;
  try {
    ids = encode_documents(tokenizer, std::vector<std::string_view>(texts.begin(), texts.end()));
  } catch (const DocumentError& e) {
    throw InputError("prep input '" + inputs[e.doc] + "': " + e.what());
  }
  size_t n_total = 0;
  for (const auto& v : ids) n_total += v.size() + 1;
  std::vector<uint32_t> tokens;
  tokens.reserve(n_total);
  const int64_t separator = tokenizer.doc_separator();
  for (auto& doc : ids) {
    if (separator >= 0) tokens.push_back(uint32_t(separator));
    tokens.insert(tokens.end(), doc.begin(), doc.end());
    std::vector<uint32_t>().swap(doc);
  }
  texts.clear();
  if (r.bytes == 0) throw InputError("prep: the corpus is empty (" + std::to_string(inputs.size()) +
                                     " input files, 0 bytes)");
  const int64_t n = int64_t(tokens.size());
  int64_t n_val = 0;
  if (val_fraction > 0.0) {
    if (n < 2) throw InputError("prep: a corpus of 1 token cannot be split into train and val");
    n_val = std::clamp<int64_t>(int64_t(std::floor(double(n) * val_fraction)), 1, n - 1);
  }
  r.train_tokens = n - n_val;
  r.val_tokens = n_val;

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec || !fs::is_directory(out_dir)) {
    throw InputError("prep: cannot create output directory '" + out_dir + "': " +
                     (ec ? ec.message() : std::string("exists and is not a directory")));
  }
  r.train_path = (fs::path(out_dir) / "train.bin").string();
  r.val_path = (fs::path(out_dir) / "val.bin").string();
  const auto split = tokens.begin() + r.train_tokens;
  r.version = write_token_file(r.train_path, std::vector<uint32_t>(tokens.begin(), split),
                               tokenizer.vocab_size());
  write_token_file(r.val_path, std::vector<uint32_t>(split, tokens.end()), tokenizer.vocab_size());
  return r;
}

std::string prep_bytes(const std::vector<std::string>& inputs, const std::string& out_dir,
                       double val_fraction) {
  return prep_corpus(inputs, out_dir, val_fraction, *make_byte_tokenizer()).summary();
}

}  // namespace pentad
