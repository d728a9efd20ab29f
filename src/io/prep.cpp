// `pentad prep` (prep.hpp).
#include "io/prep.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <climits>
#include <filesystem>
#include <tuple>
#include <utility>

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

// <dir>/<stem>_NNNNNN.bin, the name of shard i.
std::string shard_path(const std::string& dir, const std::string& stem, int64_t i) {
  char name[64];
  std::snprintf(name, sizeof name, "%s_%06lld.bin", stem.c_str(), (long long)i);
  return (std::filesystem::path(dir) / name).string();
}

// Shards of <stem> from an earlier prep in dir that a run writing n_new of
// them would leave beside its own: refused, since a glob would read them.
void refuse_stale_shards(const std::string& dir, const std::string& stem, int64_t n_new) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::string prefix = stem + "_";
    if (name.size() != prefix.size() + 10 || name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - 4, 4, ".bin") != 0)
      continue;
    const std::string digits = name.substr(prefix.size(), 6);
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    if (std::stoll(digits) >= n_new)
      throw InputError("prep: '" + e.path().string() + "' is a shard of an earlier prep that this one (" +
                       std::to_string(n_new) + " " + stem +
                       " shards) would not overwrite, and a glob would read it as data: remove it or "
                       "choose another --out");
  }
}

int64_t n_shards(int64_t n_tokens, int64_t shard_tokens) {
  return std::max<int64_t>(1, (n_tokens + shard_tokens - 1) / shard_tokens);
}

// Tokens [begin, end) as files of at most shard_tokens tokens; returns the
// version written and the number of files (one, possibly empty, at least).
std::pair<int, int64_t> write_shards(const std::string& dir, const std::string& stem,
                                     std::vector<uint32_t>::const_iterator begin,
                                     std::vector<uint32_t>::const_iterator end, int64_t shard_tokens,
                                     int64_t vocab_size) {
  const int64_t n = end - begin;
  const int64_t n_files = n_shards(n, shard_tokens);
  int version = 1;
  for (int64_t i = 0; i < n_files; ++i) {
    const auto a = begin + std::min(n, i * shard_tokens), b = begin + std::min(n, (i + 1) * shard_tokens);
    version = write_token_file(shard_path(dir, stem, i), std::vector<uint32_t>(a, b), vocab_size);
  }
  return {version, n_files};
}


}  // namespace

std::string PrepResult::summary() const {
  const auto part = [this](const std::string& path, int64_t tokens, int64_t files) {
    return path + " (" + std::to_string(tokens) + " tokens" +
           (sharded ? " in " + std::to_string(files) + (files == 1 ? " file" : " files") : "") + ")";
  };
  return "prep: " + std::to_string(n_files) + (n_files == 1 ? " file, " : " files, ") + std::to_string(bytes) +
         " bytes -> " + part(train_path, train_tokens, train_files) + ", " + part(val_path, val_tokens, val_files);
}

PrepResult prep_corpus(const std::vector<std::string>& inputs, const std::string& out_dir,
                       double val_fraction, const Tokenizer& tokenizer, int64_t shard_tokens) {
  namespace fs = std::filesystem;
  if (inputs.empty()) throw InputError("prep: no input files given");
  if (shard_tokens < 0 || shard_tokens > int64_t(INT32_MAX))
    throw InputError("prep: shard_tokens " + std::to_string(shard_tokens) + " is out of range [1, 2^31-1]");
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
  const auto split = tokens.cbegin() + r.train_tokens;
  if (shard_tokens > 0) {
    r.sharded = true;
    r.train_path = (fs::path(out_dir) / "train_*.bin").string();
    r.val_path = (fs::path(out_dir) / "val_*.bin").string();
    refuse_stale_shards(out_dir, "train", n_shards(r.train_tokens, shard_tokens));
    refuse_stale_shards(out_dir, "val", n_shards(r.val_tokens, shard_tokens));
    std::tie(r.version, r.train_files) =
        write_shards(out_dir, "train", tokens.cbegin(), split, shard_tokens, tokenizer.vocab_size());
    r.val_files = write_shards(out_dir, "val", split, tokens.cend(), shard_tokens, tokenizer.vocab_size()).second;
    return r;
  }
  r.train_path = (fs::path(out_dir) / "train.bin").string();
  r.val_path = (fs::path(out_dir) / "val.bin").string();
  r.version = write_token_file(r.train_path, std::vector<uint32_t>(tokens.cbegin(), split), tokenizer.vocab_size());
  write_token_file(r.val_path, std::vector<uint32_t>(split, tokens.cend()), tokenizer.vocab_size());
  return r;
}

std::string prep_bytes(const std::vector<std::string>& inputs, const std::string& out_dir,
                       double val_fraction) {
  return prep_corpus(inputs, out_dir, val_fraction, *make_byte_tokenizer()).summary();
}

}  // namespace pentad
