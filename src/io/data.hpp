// Token data: llm.c-compatible token files and the layout-independent batch
// sampler. A token file is a 256 x int32 header (magic 20240520, version,
// token count, rest zero) followed by `count` tokens: uint16 in version 1,
// uint32 in version 2 (vocabularies over 65536, e.g. Llama 3's 128256). The global batch
// of step s is a pure function of (seed, s): sequence j of it starts at a
// position drawn from a counter-based hash of (seed, s, j), so every layout
// sees the same tokens; each (dp rank, micro-batch) takes its slice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pentad {

constexpr int32_t kTokenMagic = 20240520;
constexpr int32_t kTokenVersion = 1;    // uint16 tokens
constexpr int32_t kTokenVersion32 = 2;  // uint32 tokens
constexpr int kTokenHeaderInts = 256;

// A read-only, memory-mapped token file, validated on open.
class TokenFile {
 public:
  // Throws InputError naming the file on: missing/unreadable file, short
  // header, wrong magic or version (1 or 2), size not matching the token count,
  // fewer than min_tokens tokens, or any token id >= vocab_size (naming the
  // index and value of the first bad token).
  TokenFile(const std::string& path, int vocab_size, int64_t min_tokens);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  int64_t size() const { return n_tokens_; }
  uint32_t operator[](int64_t i) const {
    return wide_ ? static_cast<const uint32_t*>(tokens_)[i] : static_cast<const uint16_t*>(tokens_)[i];
  }
  const std::string& path() const { return path_; }
  int version() const { return wide_ ? kTokenVersion32 : kTokenVersion; }

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const void* tokens_ = nullptr;  // uint16 (version 1) or uint32 (version 2)
  bool wide_ = false;
  int64_t n_tokens_ = 0;
};

// Write tokens in the format above, atomically (path.tmp, fsync, rename).
// Throws InputError naming the path if it cannot be written.
void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens);  // version 1
// Version 1 when every id of the vocabulary fits uint16 (vocab_size <=
// 65536), version 2 otherwise; returns the version written. Throws
// InputError naming the path for a token >= vocab_size.
int write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, int64_t vocab_size);

// Fill inputs/targets (n_seq * T each, int32) with sequences
// [first_seq, first_seq + n_seq) of the global batch of `step`:
// inputs = tokens[o .. o+T), targets = tokens[o+1 .. o+T+1),
// o = hash(seed, step, j) mod (size - T).
void sample_batch(const TokenFile& file, uint64_t seed, int64_t step, int64_t first_seq,
                  int n_seq, int T, int32_t* inputs, int32_t* targets);

// The validation set: the fixed, non-overlapping windows of a token file.
// Window w holds inputs tokens[w*T .. w*T+T) and targets tokens[w*T+1 ..
// w*T+T+1), so each token is a target at most once; there are
// (size - 1) / T of them.
int64_t val_window_count(const TokenFile& file, int T);
// Fill inputs/targets (n * T each, int32) with windows [first, first + n).
// A window w >= n_valid is padding: the inputs of window w mod n_valid (real
// text, so the model sees ordinary rows) and targets -1, which the loss
// ignores. n_valid <= val_window_count(file, T).
void val_windows(const TokenFile& file, int64_t first, int n, int64_t n_valid, int T, int32_t* inputs,
                 int32_t* targets);

}  // namespace pentad
