// Token files (llm.c format: 256 x int32 header, then uint16 tokens), the
// layout-independent batch sampler and `pentad prep`. Sequence j of the batch
// of step s starts at Philox(seed, s, j) mod (size - T), so any split of the
// batch over dp ranks and micro-batches reads exactly the same tokens.
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
#include <string_view>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/rng.hpp"

namespace pentad {
namespace {

constexpr size_t kHeaderBytes = kTokenHeaderInts * sizeof(int32_t);

// Stream id base for batch positions; the step is added to it, the sequence
// index j is the counter, so (seed, step, j) each select independent values.
constexpr uint64_t kBatchStream = fnv1a64("pentad.data.sample_batch");

[[noreturn]] void data_error(const std::string& path, const std::string& what) {
  throw InputError("data file '" + path + "': " + what);
}

std::string errno_text(int err) { return std::strerror(err); }

// Index of the first token >= vocab_size, or -1. One parallel pass; the min
// reduction makes the reported index independent of the thread count.
int64_t first_bad_token(const uint16_t* tokens, int64_t n, int vocab_size) {
  if (vocab_size > 65535) return -1;  // every uint16 id is valid
  const uint16_t limit = uint16_t(vocab_size);
  int64_t first = INT64_MAX;
#pragma omp parallel for reduction(min : first) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] >= limit && i < first) first = i;
  }
  return first == INT64_MAX ? -1 : first;
}

}  // namespace

TokenFile::TokenFile(const std::string& path, int vocab_size, int64_t min_tokens) : path_(path) {
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
    if (header[1] != kTokenVersion) {
      data_error(path, "unsupported version " + std::to_string(header[1]) + " (expected " +
                           std::to_string(kTokenVersion) + ", uint16 tokens" +
                           (header[1] == 2 ? "; version 2 holds uint32 tokens)" : ")"));
    }
    const int64_t count = header[2];
    if (count < 0) data_error(path, "bad token count " + std::to_string(count) + " in the header");
    const int64_t held = int64_t((file_bytes - kHeaderBytes) / sizeof(uint16_t));
    if (count > held) {
      data_error(path, "truncated: header says " + std::to_string(count) +
                           " tokens but the file holds " + std::to_string(held));
    }
    const size_t expected_bytes = kHeaderBytes + size_t(count) * sizeof(uint16_t);
    if (file_bytes != expected_bytes) {
      data_error(path, "size mismatch: header says " + std::to_string(count) + " tokens (" +
                           std::to_string(expected_bytes) + " bytes) but the file is " +
                           std::to_string(file_bytes) + " bytes");
    }
    if (count < min_tokens) {
      data_error(path, "holds " + std::to_string(count) + " tokens, needs at least " +
                           std::to_string(min_tokens) + " (model.seq_len + 1)");
    }
    tokens_ = reinterpret_cast<const uint16_t*>(static_cast<const char*>(map_) + kHeaderBytes);
    n_tokens_ = count;
    const int64_t bad = first_bad_token(tokens_, n_tokens_, vocab_size);
    if (bad >= 0) {
      data_error(path, "token " + std::to_string(tokens_[bad]) + " at index " +
                           std::to_string(bad) + " is >= model.vocab_size " +
                           std::to_string(vocab_size));
    }
  } catch (...) {
    ::munmap(map_, map_bytes_);
    throw;
  }
}

TokenFile::~TokenFile() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens) {
  if (tokens.size() > size_t(INT32_MAX)) {
    data_error(path, std::to_string(tokens.size()) +
                         " tokens do not fit the int32 count of the llm.c header");
  }
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
  header[1] = kTokenVersion;
  header[2] = int32_t(tokens.size());
  if (FsStatus e = f.write(header, sizeof header)) fail(*e);
  if (FsStatus e = f.write(tokens.data(), tokens.size() * sizeof(uint16_t))) fail(*e);
  // After the rename only the directory fsync can fail: that loses nothing
  // already written, so it is not an error here.
  if (FsStatus e = f.commit(); e && !f.renamed()) fail(*e);
}

void sample_batch(const TokenFile& file, uint64_t seed, int64_t step, int64_t first_seq,
                  int n_seq, int T, int32_t* inputs, int32_t* targets) {
  if (T < 1 || file.size() < int64_t(T) + 1) {
    data_error(file.path(), "holds " + std::to_string(file.size()) + " tokens, needs at least " +
                                std::to_string(int64_t(T) + 1) + " (model.seq_len + 1)");
  }
  const CounterRng rng{seed, kBatchStream + uint64_t(step)};
  const uint64_t n_starts = uint64_t(file.size() - T);
  for (int s = 0; s < n_seq; ++s) {
    const int64_t j = first_seq + s;
    const int64_t o = int64_t(rng.u64(uint64_t(j)) % n_starts);
    int32_t* in = inputs + int64_t(s) * T;     // (T)
    int32_t* tgt = targets + int64_t(s) * T;   // (T)
    for (int t = 0; t < T; ++t) {
      in[t] = file[o + t];
      tgt[t] = file[o + t + 1];
    }
  }
}

int64_t val_window_count(const TokenFile& file, int T) { return T < 1 ? 0 : (file.size() - 1) / T; }

void val_windows(const TokenFile& file, int64_t first, int n, int64_t n_valid, int T, int32_t* inputs,
                 int32_t* targets) {
  if (n_valid < 1 || n_valid > val_window_count(file, T)) {
    data_error(file.path(), "holds " + std::to_string(val_window_count(file, T)) + " windows of " +
                                std::to_string(T) + " tokens, " + std::to_string(n_valid) + " asked for");
  }
  for (int s = 0; s < n; ++s) {
    const int64_t w = first + s;
    const int64_t o = (w % n_valid) * T;
    const bool pad = w >= n_valid;
    int32_t* in = inputs + int64_t(s) * T;     // (T)
    int32_t* tgt = targets + int64_t(s) * T;   // (T)
    for (int t = 0; t < T; ++t) {
      in[t] = file[o + t];
      tgt[t] = pad ? -1 : int32_t(file[o + t + 1]);
    }
  }
}

std::string prep_bytes(const std::vector<std::string>& inputs, const std::string& out_dir,
                       double val_fraction) {
  namespace fs = std::filesystem;
  if (inputs.empty()) throw InputError("prep: no input files given");
  if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", val_fraction);
    throw InputError("prep: val_fraction " + std::string(buf) + " is out of range [0, 1)");
  }

  std::vector<uint16_t> tokens;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) throw InputError("prep input '" + in + "': is a directory");
    std::FILE* f = std::fopen(in.c_str(), "rb");
    if (f == nullptr) throw InputError("prep input '" + in + "': cannot open: " + errno_text(errno));
    unsigned char buf[1 << 16];
    size_t got = 0;
    while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0) tokens.insert(tokens.end(), buf, buf + got);
    const bool read_failed = std::ferror(f) != 0;
    const int err = errno;
    std::fclose(f);
    if (read_failed) throw InputError("prep input '" + in + "': read failed: " + errno_text(err));
  }
  const int64_t n = int64_t(tokens.size());
  if (n == 0) throw InputError("prep: the corpus is empty (" + std::to_string(inputs.size()) +
                               " input files, 0 bytes)");
  int64_t n_val = 0;
  if (val_fraction > 0.0) {
    if (n < 2) throw InputError("prep: a corpus of 1 byte cannot be split into train and val");
    n_val = std::clamp<int64_t>(int64_t(std::floor(double(n) * val_fraction)), 1, n - 1);
  }
  const int64_t n_train = n - n_val;

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec || !fs::is_directory(out_dir)) {
    throw InputError("prep: cannot create output directory '" + out_dir + "': " +
                     (ec ? ec.message() : std::string("exists and is not a directory")));
  }
  const std::string train_path = (fs::path(out_dir) / "train.bin").string();
  const std::string val_path = (fs::path(out_dir) / "val.bin").string();
  write_token_file(train_path, std::vector<uint16_t>(tokens.begin(), tokens.begin() + n_train));
  write_token_file(val_path, std::vector<uint16_t>(tokens.begin() + n_train, tokens.end()));
  return "prep: " + std::to_string(inputs.size()) + (inputs.size() == 1 ? " file, " : " files, ") +
         std::to_string(n) + " bytes -> " + train_path + " (" + std::to_string(n_train) +
         " tokens), " + val_path + " (" + std::to_string(n_val) + " tokens)";
}

}  // namespace pentad
