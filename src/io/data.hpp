// Token data: llm.c-compatible token files. A token file is a 256 x int32 header (magic 20240520, version,
// token count, rest zero) followed by `count` tokens: uint16 in version 1,
// uint32 in version 2 (vocabularies over 65536, e.g. Llama 3's 128256). How a
// run reads many such files, in which order, is io/dataset.hpp.
// Versions 3 and 4 are pentad's own: versions 1 and 2 followed by a loss
// mask of ceil(count / 8) bytes, bit i % 8 (least significant first) of
// byte i / 8 set when token i is a trained target (`pentad prep
// --prompt-key`, supervised fine-tuning); a target whose bit is clear adds
// nothing to the loss. Readers of versions 1 and 2 refuse them by version.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pentad {

constexpr int32_t kTokenMagic = 20240520;
constexpr int32_t kTokenVersion = 1;    // uint16 tokens
constexpr int32_t kTokenVersion32 = 2;  // uint32 tokens
constexpr int32_t kTokenVersionMasked = 3;    // uint16 tokens, then the loss mask
constexpr int32_t kTokenVersion32Masked = 4;  // uint32 tokens, then the loss mask
constexpr int kTokenHeaderInts = 256;

// Whether opening a token file reads every token to check it against the
// vocabulary (all), or leaves that to check_tokens (header: a job that
// splits the check over its ranks, io/dataset.hpp).
enum class TokenScan { all, header };

// A read-only, memory-mapped token file, validated on open.
class TokenFile {
 public:
  // Throws InputError naming the file on: missing/unreadable file, short
  // header, wrong magic or version (1 to 4), size not matching the token count
  // (and, in versions 3 and 4, the loss mask),
  // fewer than min_tokens tokens, or (TokenScan::all) any token id >=
  // vocab_size (naming the index and value of the first bad token).
  TokenFile(const std::string& path, int vocab_size, int64_t min_tokens, TokenScan scan = TokenScan::all);
  // The vocabulary check of tokens [begin, end): InputError naming the file,
  // the index and the value of the first id >= vocab_size there.
  void check_tokens(int vocab_size, int64_t begin, int64_t end) const;
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  int64_t size() const { return n_tokens_; }
  uint32_t operator[](int64_t i) const {
    return wide_ ? static_cast<const uint32_t*>(tokens_)[i] : static_cast<const uint16_t*>(tokens_)[i];
  }
  // Is token i a trained target? Always in versions 1 and 2.
  bool trained(int64_t i) const { return mask_ == nullptr || ((mask_[i >> 3] >> (i & 7)) & 1) != 0; }
  bool has_loss_mask() const { return mask_ != nullptr; }
  const std::string& path() const { return path_; }
  int version() const {
    return mask_ ? (wide_ ? kTokenVersion32Masked : kTokenVersionMasked) : (wide_ ? kTokenVersion32 : kTokenVersion);
  }

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const void* tokens_ = nullptr;  // uint16 (version 1) or uint32 (version 2)
  const unsigned char* mask_ = nullptr;  // versions 3 and 4: the loss mask
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
// The version of a vocabulary's token files (the rule above); throws
// InputError naming `path` for a vocabulary outside [1, 2^31-1].
int token_file_version(const std::string& path, int64_t vocab_size);
// A token file of n tokens of `version` written from a source in pieces of
// at most `piece` tokens: read(begin, count, dst) puts tokens [begin,
// begin + count) at dst, in the file's width (2 or 4 bytes). Atomic and
// throwing as above; a file over 2^31 - 1 tokens is refused.
// With read_mask (versions 3 and 4 only, required there): read_mask(begin,
// count, dst) puts one byte per token at dst, non-zero for a trained target.
using TokenReader = std::function<void(int64_t begin, int64_t count, void* dst)>;
using MaskReader = std::function<void(int64_t begin, int64_t count, unsigned char* dst)>;
void write_token_file(const std::string& path, int version, int64_t n, int64_t piece, const TokenReader& read,
                      const MaskReader& read_mask = {});
// The version with the loss mask of an unmasked version, and back.
int masked_version(int version);
bool version_has_mask(int version);

}  // namespace pentad
