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
#include "tok/pretokenize.hpp"

namespace pentad {
namespace {

constexpr size_t kPrepChunkBytes = size_t(1) << 20;

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
  // Documents are cut into chunks of about 1 MiB where every tokenizer's
  // pieces start afresh (tok/pretokenize.hpp, next_safe_cut), so the ids of
  // the chunks joined are the ids of the whole document; the chunks of all
  // documents are encoded in parallel.
  struct Chunk {
    size_t doc;
    std::string_view text;
  };
  std::vector<Chunk> chunks;
  for (size_t d = 0; d < texts.size(); ++d) {
    const std::string_view t = texts[d];
    if (t.empty()) chunks.push_back({d, t});
    for (size_t begin = 0; begin < t.size();) {
      const size_t end = next_safe_cut(t, begin + kPrepChunkBytes);
      chunks.push_back({d, t.substr(begin, end - begin)});
      begin = end;
    }
  }
  std::vector<std::vector<uint32_t>> ids(chunks.size());
  std::string err;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t k = 0; k < chunks.size(); ++k) {
    try {
      ids[k] = tokenizer.encode(chunks[k].text);
    } catch (const InputError& e) {
#pragma omp critical(pentad_prep_error)
      if (err.empty()) err = "prep input '" + inputs[chunks[k].doc] + "': " + e.what();
    }
  }
  if (!err.empty()) throw InputError(err);
  size_t n_total = 0;
  for (const auto& v : ids) n_total += v.size() + 1;
  std::vector<uint32_t> tokens;
  tokens.reserve(n_total);
  const int64_t separator = tokenizer.doc_separator();
  for (size_t k = 0; k < chunks.size(); ++k) {
    if (separator >= 0 && (k == 0 || chunks[k].doc != chunks[k - 1].doc)) tokens.push_back(uint32_t(separator));
    tokens.insert(tokens.end(), ids[k].begin(), ids[k].end());
    std::vector<uint32_t>().swap(ids[k]);
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
