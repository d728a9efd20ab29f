// Token files (llm.c format: 256 x int32 header, then uint16 tokens in
// version 1 or uint32 tokens in version 2; pentad's versions 3 and 4 add a
// loss mask after them): validated on open, written atomically. The batch sampler over them is io/dataset.cpp.
#include "io/data.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string_view>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/rng.hpp"

namespace pentad {
namespace {

constexpr size_t kHeaderBytes = kTokenHeaderInts * sizeof(int32_t);

[[noreturn]] void data_error(const std::string& path, const std::string& what) {
  throw InputError("data file '" + path + "': " + what);
}

std::string errno_text(int err) { return std::strerror(err); }

// Index of the first token >= vocab_size, or -1. One parallel pass; the min
// reduction makes the reported index independent of the thread count.
template <typename Tok>
int64_t first_bad_token(const Tok* tokens, int64_t n, int vocab_size) {
  if (uint64_t(vocab_size) > uint64_t(std::numeric_limits<Tok>::max())) return -1;  // every id is valid
  const Tok limit = Tok(vocab_size);
  int64_t first = INT64_MAX;
#pragma omp parallel for reduction(min : first) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] >= limit && i < first) first = i;
  }
  return first == INT64_MAX ? -1 : first;
}

}  // namespace

TokenFile::TokenFile(const std::string& path, int vocab_size, int64_t min_tokens, TokenScan scan) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) data_error(path, "cannot open: " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    data_error(path, "cannot stat: " + errno_text(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    data_error(path, S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
  }
  const size_t file_bytes = size_t(st.st_size);
  if (file_bytes < kHeaderBytes) {
    ::close(fd);
    data_error(path, "short header: the file holds " + std::to_string(file_bytes) +
                         " bytes, the header alone is " + std::to_string(kHeaderBytes) +
                         " (is this an llm.c-format token file?)");
  }
  void* map = ::mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) data_error(path, "cannot mmap: " + errno_text(map_err));
  map_ = map;
  map_bytes_ = file_bytes;

  try {
    int32_t header[kTokenHeaderInts];
    std::memcpy(header, map_, kHeaderBytes);
    if (header[0] != kTokenMagic) {
      data_error(path, "bad magic " + std::to_string(header[0]) + " (expected " +
                           std::to_string(kTokenMagic) + "; is this an llm.c-format token file?)");
    }
    const int version = header[1];
    if (version < kTokenVersion || version > kTokenVersion32Masked) {
      data_error(path, "unsupported version " + std::to_string(version) +
                           " (expected 1, uint16 tokens, or 2, uint32 tokens; 3 or 4, the same with a loss mask)");
    }
    wide_ = version == kTokenVersion32 || version == kTokenVersion32Masked;
    const bool masked = version_has_mask(version);
    const size_t width = wide_ ? sizeof(uint32_t) : sizeof(uint16_t);
    const int64_t count = header[2];
    if (count < 0) data_error(path, "bad token count " + std::to_string(count) + " in the header");
    const int64_t held = int64_t((file_bytes - kHeaderBytes) / width);
    if (count > held) {
      data_error(path, "truncated: header says " + std::to_string(count) +
                           " tokens but the file holds " + std::to_string(held));
    }
    const size_t mask_bytes = masked ? (size_t(count) + 7) / 8 : 0;
    const size_t expected_bytes = kHeaderBytes + size_t(count) * width + mask_bytes;
    if (file_bytes != expected_bytes) {
      data_error(path, "size mismatch: header says " + std::to_string(count) + " tokens (" +
                           std::to_string(expected_bytes) + " bytes" + (masked ? " with the loss mask" : "") +
                           ") but the file is " + std::to_string(file_bytes) + " bytes");
    }
    if (count < min_tokens) {
      data_error(path, "holds " + std::to_string(count) + " tokens, needs at least " +
                           std::to_string(min_tokens) + " (model.seq_len + 1)");
    }
    tokens_ = static_cast<const char*>(map_) + kHeaderBytes;
    if (masked) mask_ = static_cast<const unsigned char*>(map_) + kHeaderBytes + size_t(count) * width;
    n_tokens_ = count;
    if (scan == TokenScan::all) check_tokens(vocab_size, 0, n_tokens_);
  } catch (...) {
    ::munmap(map_, map_bytes_);
    throw;
  }
}

void TokenFile::check_tokens(int vocab_size, int64_t begin, int64_t end) const {
  begin = std::clamp<int64_t>(begin, 0, n_tokens_);
  end = std::clamp<int64_t>(end, begin, n_tokens_);
  const int64_t bad = wide_ ? first_bad_token(static_cast<const uint32_t*>(tokens_) + begin, end - begin, vocab_size)
                            : first_bad_token(static_cast<const uint16_t*>(tokens_) + begin, end - begin, vocab_size);
  if (bad >= 0) {
    data_error(path_, "token " + std::to_string((*this)[begin + bad]) + " at index " + std::to_string(begin + bad) +
                          " is >= model.vocab_size " + std::to_string(vocab_size));
  }
}

TokenFile::~TokenFile() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

int masked_version(int version) { return version == kTokenVersion32 ? kTokenVersion32Masked : kTokenVersionMasked; }
bool version_has_mask(int version) { return version == kTokenVersionMasked || version == kTokenVersion32Masked; }

void write_token_file(const std::string& path, int version, int64_t n, int64_t piece, const TokenReader& read,
                      const MaskReader& read_mask) {
  if (n > int64_t(INT32_MAX)) {
    data_error(path, std::to_string(n) + " tokens do not fit the int32 count of the llm.c header "
                           "(pentad prep --shard-tokens N writes files of N tokens)");
  }
  if (version_has_mask(version) != bool(read_mask))
    throw std::logic_error("write_token_file: version " + std::to_string(version) +
                           (read_mask ? " has no loss mask" : " needs its loss mask"));
  const size_t width = version == kTokenVersion32 || version == kTokenVersion32Masked ? sizeof(uint32_t)
                                                                                      : sizeof(uint16_t);
  // A failure removes the half-written tmp file (AtomicFile's destructor).
  AtomicFile f(path);
  const auto fail = [&](const FsError& e) {
    if (e.step == FsStep::create)
      data_error(path, "cannot create '" + e.path + "': " + errno_text(e.err));
    if (e.step == FsStep::rename)
      data_error(path, "cannot rename '" + e.path + "' over it: " + errno_text(e.err));
    const char* step = e.step == FsStep::write ? "write" : e.step == FsStep::fsync ? "fsync" : "close";
    data_error(path, std::string(step) + " '" + e.path + "' failed: " + errno_text(e.err));
  };
  if (FsStatus e = f.open()) fail(*e);
  int32_t header[kTokenHeaderInts] = {};
  header[0] = kTokenMagic;
  header[1] = version;
  header[2] = int32_t(n);
  if (FsStatus e = f.write(header, sizeof header)) fail(*e);
  // A multiple of 8 tokens, so that each piece of the mask is whole bytes.
  piece = std::max<int64_t>(8, (std::min(piece, n) + 7) / 8 * 8);
  std::vector<unsigned char> buf(size_t(piece) * width);
  for (int64_t at = 0; at < n; at += piece) {
    const int64_t count = std::min(piece, n - at);
    read(at, count, buf.data());
    if (FsStatus e = f.write(buf.data(), size_t(count) * width)) fail(*e);
  }
  if (read_mask) {
    std::vector<unsigned char> bytes(static_cast<size_t>(piece)), bits(static_cast<size_t>(piece) / 8);
    for (int64_t at = 0; at < n; at += piece) {
      const int64_t count = std::min(piece, n - at);
      read_mask(at, count, bytes.data());
      std::fill(bits.begin(), bits.end(), 0);
      for (int64_t i = 0; i < count; ++i)
        if (bytes[size_t(i)] != 0) bits[size_t(i) >> 3] |= (unsigned char)(1u << (i & 7));
      if (FsStatus e = f.write(bits.data(), size_t(count + 7) / 8)) fail(*e);
    }
  }
  // After the rename only the directory fsync can fail: that loses nothing
  // already written, so it is not an error here.
  if (FsStatus e = f.commit(); e && !f.renamed()) fail(*e);
}

namespace {

void write_tokens(const std::string& path, int32_t version, const void* tokens, size_t n, size_t width) {
  const auto* bytes = static_cast<const unsigned char*>(tokens);
  write_token_file(path, version, int64_t(std::min<size_t>(n, size_t(INT64_MAX))), int64_t(1) << 20,
                   [&](int64_t begin, int64_t count, void* dst) {
                     std::memcpy(dst, bytes + size_t(begin) * width, size_t(count) * width);
                   });
}

}  // namespace

int token_file_version(const std::string& path, int64_t vocab_size) {
  if (vocab_size < 1 || vocab_size > int64_t(INT32_MAX))
    data_error(path, "vocabulary size " + std::to_string(vocab_size) + " is out of range [1, 2^31-1]");
  return vocab_size <= 65536 ? kTokenVersion : kTokenVersion32;
}

void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens) {
  write_tokens(path, kTokenVersion, tokens.data(), tokens.size(), sizeof(uint16_t));
}

int write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, int64_t vocab_size) {
  const int version = token_file_version(path, vocab_size);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (int64_t(tokens[i]) >= vocab_size) {
      data_error(path, "token " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                           " is >= the vocabulary size " + std::to_string(vocab_size));
    }
  }
  if (version == kTokenVersion) {
    write_token_file(path, std::vector<uint16_t>(tokens.begin(), tokens.end()));
    return kTokenVersion;
  }
  write_tokens(path, kTokenVersion32, tokens.data(), tokens.size(), sizeof(uint32_t));
  return kTokenVersion32;
}

}  // namespace pentad
