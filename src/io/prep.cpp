// `pentad prep` (prep.hpp).
#include "io/prep.hpp"

#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <climits>
#include <filesystem>
#include <stdexcept>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>
#include <zlib.h>
#include <zstd.h>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/data.hpp"
#include "tok/parallel.hpp"

namespace pentad {
namespace {

namespace fs = std::filesystem;

std::string strerror_text(int err) { return std::strerror(err); }

// "a.jsonl.gz" -> "a.jsonl", "a.jsonl.zst" -> "a.jsonl"
std::string without_compression(const std::string& path) {
  const fs::path p(path);
  return p.extension() == ".gz" || p.extension() == ".zst" ? p.stem().string() : p.filename().string();
}

bool is_json_lines(const std::string& path) {
  std::string ext = fs::path(without_compression(path)).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".jsonl" || ext == ".ndjson";
}

// A stretch of one document's text: the whole document, or (plain files
// longer than a piece) a part cut where the ids cannot change.
struct Piece {
  std::string text;
  bool starts_doc = false;
  bool completion = false;  // prompt/completion pairs: the trained part
  std::vector<ChatMessage> messages;  // a conversation (PrepOptions::messages_key); text unused
  size_t input = 0;   // index of its input file
  int64_t line = 0;   // its line in a JSON Lines file; 0 in a plain file
};

// "prep input 'a.jsonl' line 7"
std::string where(const std::string& path, int64_t line) {
  return "prep input '" + path + "'" + (line > 0 ? " line " + std::to_string(line) : "");
}

// The bytes of one input file: as they are, gunzipped (a name ending in
// .gz; several gzip members are read one after the other, as gzip -d does)
// or decompressed from zstd (.zst; several frames likewise, as zstd -d does).
class ByteSource {
 public:
  explicit ByteSource(std::string path) : path_(std::move(path)) {
    const fs::path ext = fs::path(path_).extension();
    if (ext != ".gz") {
      f_ = std::fopen(path_.c_str(), "rb");
      if (f_ == nullptr) throw InputError(where(path_, 0) + ": cannot open: " + strerror_text(errno));
      if (ext == ".zst") {
        zs_ = ZSTD_createDStream();
        if (zs_ == nullptr) throw InputError(where(path_, 0) + ": cannot create a zstd decoder");
        zin_.resize(ZSTD_DStreamInSize());
      }
      return;
    }
    errno = 0;
    gz_ = gzopen(path_.c_str(), "rb");
    if (gz_ == nullptr)
      throw InputError(where(path_, 0) + ": cannot open: " + strerror_text(errno != 0 ? errno : ENOMEM));
    gzbuffer(gz_, 1u << 17);
    if (gzdirect(gz_) == 1) throw InputError(where(path_, 0) + ": not gzip data (the name ends in .gz)");
  }
  ~ByteSource() {
    if (f_ != nullptr) std::fclose(f_);
    if (gz_ != nullptr) gzclose_r(gz_);
    if (zs_ != nullptr) ZSTD_freeDStream(zs_);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // Up to n bytes into buf; 0 at the end of the file.
  size_t read(char* buf, size_t n) {
    if (zs_ != nullptr) return read_zstd(buf, n);
    if (f_ != nullptr) return read_file(buf, n);
    const int got = gzread(gz_, buf, unsigned(std::min<size_t>(n, size_t(1) << 30)));
    int err = Z_OK;
    const char* what = gzerror(gz_, &err);
    // A truncated file reads as its end with Z_BUF_ERROR ("unexpected end of file") set.
    if (got < 0 || (got == 0 && err != Z_OK)) {
      throw InputError(where(path_, 0) + (err == Z_ERRNO ? ": read failed: " + strerror_text(errno)
                                                         : ": not valid gzip data: " + std::string(what)));
    }
    return size_t(got);
  }
  // Bytes of the file read so far (of the compressed file for .gz and .zst).
  int64_t consumed() const {
    return f_ != nullptr ? plain_read_ : int64_t(gzoffset(gz_));
  }

 private:
  size_t read_file(char* buf, size_t n) {
    const size_t got = std::fread(buf, 1, n, f_);
    if (std::ferror(f_) != 0) throw InputError(where(path_, 0) + ": read failed: " + strerror_text(errno));
    plain_read_ += int64_t(got);
    return got;
  }

  // Decompresses until some output is ready or the file and the decoder are
  // both exhausted. ZSTD_decompressStream's result is 0 exactly when a frame
  // is complete and flushed, so a file that ends with it non-zero was cut.
  size_t read_zstd(char* buf, size_t n) {
    ZSTD_outBuffer out{buf, n, 0};
    while (out.pos == 0) {
      if (in_.pos == in_.size && !eof_) {
        const size_t got = read_file(zin_.data(), zin_.size());
        in_ = {zin_.data(), got, 0};
        eof_ = got == 0;
      }
      const size_t in_before = in_.pos, out_before = out.pos;
      const size_t r = ZSTD_decompressStream(zs_, &out, &in_);
      if (ZSTD_isError(r) != 0)
        throw InputError(where(path_, 0) + ": not valid zstd data: " + ZSTD_getErrorName(r));
      // A call that did nothing (no input left, nothing to flush) answers for
      // the next frame's header: keep what the last call that did something said.
      if (in_.pos != in_before || out.pos != out_before) frame_left_ = r;
      if (eof_ && out.pos == 0) break;  // the decoder has nothing more to give
    }
    if (out.pos == 0 && (frame_left_ != 0 || plain_read_ == 0))
      throw InputError(where(path_, 0) + (plain_read_ == 0 ? ": empty, not zstd data (the name ends in .zst)"
                                                           : ": truncated zstd data (the file ends inside a frame)"));
    return out.pos;
  }

  std::string path_;
  std::FILE* f_ = nullptr;
  int64_t plain_read_ = 0;
  gzFile gz_ = nullptr;
  ZSTD_DStream* zs_ = nullptr;
  std::vector<char> zin_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  size_t frame_left_ = 0;
  bool eof_ = false;
};

// The pieces of one input file, in order.
class InputReader {
 public:
  InputReader(std::string path, size_t index, const PrepOptions& o, const Tokenizer& tok)
      : path_(std::move(path)), src_(path_), index_(index), json_(is_json_lines(path_)), key_(o.json_key),
        prompt_key_(o.prompt_key), completion_key_(o.completion_key), messages_key_(o.messages_key),
        piece_bytes_(std::max<size_t>(1, o.piece_bytes)), tok_(tok) {}

  // The next piece into p; false at the end of the file. A prompt/completion
  // line is two pieces: the prompt (starting the document), the completion.
  bool next(Piece& p) {
    p.input = index_;
    if (has_pending_) {
      p = std::move(pending_);
      has_pending_ = false;
      return true;
    }
    return json_ ? next_json(p) : next_text(p);
  }
  // Bytes of the file read so far (of the compressed file for .gz).
  int64_t bytes_read() const { return src_.consumed(); }

 private:
  // buf_[head_, end): read, not yet handed out.
  std::string_view rest() const { return std::string_view(buf_).substr(head_); }

  // Appends up to 1 MiB to the rest (moving it to the front of buf_ first
  // when that frees at least half); false at the end of the file.
  bool fill() {
    if (head_ > 0 && head_ >= buf_.size() / 2) {
      buf_.erase(0, head_);
      head_ = 0;
    }
    const size_t old = buf_.size();
    buf_.resize(old + (size_t(1) << 20));
    const size_t got = src_.read(buf_.data() + old, buf_.size() - old);
    buf_.resize(old + got);
    return got > 0;
  }

  bool next_text(Piece& p) {
    if (done_) return false;
    size_t scan_from = piece_bytes_;  // in rest()
    for (;;) {
      if (rest().size() > piece_bytes_) {
        const size_t cut = tok_.safe_cut(rest(), scan_from);
        if (cut < rest().size()) {
          p.text.assign(rest().substr(0, cut));
          head_ += cut;
          p.starts_doc = !started_;
          p.line = 0;
          started_ = true;
          return true;
        }
        // Every place before the last byte was looked at; go on from there.
        scan_from = std::max(piece_bytes_, rest().size());
      }
      if (!fill()) break;
    }
    done_ = true;
    if (started_ && rest().empty()) return false;
    p.text.assign(rest());
    head_ = buf_.size();
    p.starts_doc = !started_;  // an empty file is one empty document
    p.line = 0;
    started_ = true;
    return true;
  }

  // The next line (without its '\n') as a view into buf_, valid until the
  // next call; false at the end of the file.
  bool next_line(std::string_view& line) {
    size_t scanned = 0;  // bytes of rest() known to hold no '\n'
    for (;;) {
      const std::string_view r = rest();
      const size_t nl = r.find('\n', scanned);
      if (nl != std::string_view::npos) {
        line = r.substr(0, nl);
        head_ += nl + 1;
        return true;
      }
      scanned = r.size();
      if (!fill()) {
        if (rest().empty()) return false;
        line = rest();  // the last line, without a '\n'
        head_ = buf_.size();
        return true;
      }
    }
  }

  bool next_json(Piece& p) {
    std::string_view line;
    while (next_line(line)) {
      ++line_;
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line.begin(), line.end());
      } catch (const nlohmann::json::parse_error& e) {
        // nlohmann's text counts lines and columns inside the one line; the
        // byte offset says the same without the confusion.
        std::string why = e.what();
        if (const size_t at = why.find(": ", why.find("column")); at != std::string::npos) why = why.substr(at + 2);
        throw InputError(where(path_, line_) + ": not valid JSON at byte " + std::to_string(e.byte) + " (" + why + ")");
      }
      if (!j.is_object()) throw InputError(where(path_, line_) + ": not a JSON object (" + j.type_name() + ")");
      p.starts_doc = true;
      p.line = line_;
      if (!messages_key_.empty()) {
        const auto it = j.find(messages_key_);
        if (it == j.end()) throw InputError(where(path_, line_) + ": no field \"" + messages_key_ + "\"");
        p.messages = chat_messages_of(*it, where(path_, line_) + ": field \"" + messages_key_ + "\"");
        if (std::none_of(p.messages.begin(), p.messages.end(), [](const ChatMessage& m) { return m.role == "assistant"; }))
          throw InputError(where(path_, line_) + ": the conversation has no assistant message, so nothing in it is trained");
        return true;
      }
      if (prompt_key_.empty()) {
        p.text = field(j, key_);
        return true;
      }
      p.text = field(j, prompt_key_);
      pending_.text = field(j, completion_key_);
      pending_.input = p.input;
      pending_.line = line_;
      pending_.completion = true;
      has_pending_ = true;
      return true;
    }
    return false;
  }

  // The string field `key` of a line's object, or an InputError naming it.
  std::string field(nlohmann::json& j, const std::string& key) const {
    const auto it = j.find(key);
    if (it == j.end()) throw InputError(where(path_, line_) + ": no field \"" + key + "\"");
    if (!it->is_string())
      throw InputError(where(path_, line_) + ": field \"" + key + "\" is a " + it->type_name() + ", not a string");
    return std::move(it->get_ref<std::string&>());
  }

  std::string path_;
  ByteSource src_;
  size_t index_;
  bool json_;
  std::string key_, prompt_key_, completion_key_, messages_key_;
  Piece pending_;  // a line's completion, after its prompt
  bool has_pending_ = false;
  size_t piece_bytes_;
  const Tokenizer& tok_;  // where a piece may end (safe_cut)
  std::string buf_;
  size_t head_ = 0;
  bool started_ = false, done_ = false;
  int64_t line_ = 0;
};

// A private directory in out_dir that holds the staging file and the token
// files until they are all written; removed, with whatever is in it, when
// prep ends either way.
class StagingDir {
 public:
  explicit StagingDir(const std::string& out_dir)
      : path_((fs::path(out_dir) / (".prep-" + std::to_string(::getpid()))).string()) {
    std::error_code ec;
    fs::remove_all(path_, ec);  // a crashed prep's of the same pid
    if (!fs::create_directory(path_, ec))
      throw InputError("prep: cannot create the staging directory '" + path_ + "': " + ec.message());
  }
  ~StagingDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;
  std::string file(const std::string& name) const { return (fs::path(path_) / name).string(); }

 private:
  std::string path_;
};

// Every token of the corpus in order, in the token files' width, on disk;
// with a loss mask also one byte per token (1: a trained target) in a
// second file.
class TokenStage {
 public:
  TokenStage(std::string path, int version, int64_t vocab_size, bool masked)
      : path_(std::move(path)), width_(version == kTokenVersion32 ? 4 : 2), vocab_(vocab_size) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) fail("create", errno);
    if (!masked) return;
    mask_fd_ = ::open((path_ + ".mask").c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (mask_fd_ < 0) fail("create", errno);
  }
  ~TokenStage() {
    if (fd_ >= 0) ::close(fd_);
    if (mask_fd_ >= 0) ::close(mask_fd_);
  }
  bool masked() const { return mask_fd_ >= 0; }
  int64_t trained() const { return trained_; }
  TokenStage(const TokenStage&) = delete;
  TokenStage& operator=(const TokenStage&) = delete;

  void push(uint32_t id, bool trained = true) { append(&id, 1, trained); }
  // `trained` says whether the ids are trained targets (with a loss mask).
  void append(const uint32_t* ids, size_t n, bool trained = true) {
    buf_.resize(n * width_);
    for (size_t i = 0; i < n; ++i) {
      if (int64_t(ids[i]) >= vocab_)
        throw InputError("prep: the tokenizer gave id " + std::to_string(ids[i]) + ", outside its vocabulary of " +
                         std::to_string(vocab_));
      if (width_ == 2) {
        const uint16_t v = uint16_t(ids[i]);
        std::memcpy(buf_.data() + 2 * i, &v, 2);
      } else {
        std::memcpy(buf_.data() + 4 * i, &ids[i], 4);
      }
    }
    write_all(fd_, buf_);
    if (masked()) {
      buf_.assign(n, trained ? 1 : 0);
      write_all(mask_fd_, buf_);
      trained_ += trained ? int64_t(n) : 0;
    }
    n_ += int64_t(n);
  }
  int64_t size() const { return n_; }
  // With a loss mask: ids with a flag each, in runs of equal flags.
  void append(const std::vector<uint32_t>& ids, const std::vector<bool>& trained) {
    for (size_t a = 0; a < ids.size();) {
      size_t b = a + 1;
      while (b < ids.size() && trained[b] == trained[a]) ++b;
      append(ids.data() + a, b - a, trained[a]);
      a = b;
    }
  }
  // Tokens [begin, begin + count) into dst, in the files' width.
  void read(int64_t begin, int64_t count, void* dst) const { read_all(fd_, begin, count, width_, dst); }
  // Their mask bytes (masked() only).
  void read_mask(int64_t begin, int64_t count, unsigned char* dst) const { read_all(mask_fd_, begin, count, 1, dst); }

 private:
  void write_all(int fd, const std::vector<unsigned char>& b) const {
    for (size_t done = 0; done < b.size();) {
      const ssize_t w = ::write(fd, b.data() + done, b.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) fail("write", errno);
      done += size_t(w);
    }
  }
  void read_all(int fd, int64_t begin, int64_t count, size_t width, void* dst) const {
    auto* out = static_cast<unsigned char*>(dst);
    const size_t total = size_t(count) * width;
    for (size_t done = 0; done < total;) {
      const ssize_t r = ::pread(fd, out + done, total - done, off_t(size_t(begin) * width + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) fail("read", r < 0 ? errno : EIO);
      done += size_t(r);
    }
  }

  [[noreturn]] void fail(const char* step, int err) const {
    throw InputError("prep: " + std::string(step) + " of the staging file '" + path_ + "' failed: " +
                     strerror_text(err));
  }
  std::string path_;
  size_t width_;
  int64_t vocab_;
  int fd_ = -1, mask_fd_ = -1;
  int64_t n_ = 0, trained_ = 0;
  std::vector<unsigned char> buf_;
};

// <stem>_NNNNNN.bin, the name of shard i.
std::string shard_name(const std::string& stem, int64_t i) {
  char name[64];
  std::snprintf(name, sizeof name, "%s_%06lld.bin", stem.c_str(), (long long)i);
  return name;
}

// Shards of <stem> from an earlier prep in dir that a run writing n_new of
// them would leave beside its own: refused, since a glob would read them.
void refuse_stale_shards(const std::string& dir, const std::string& stem, int64_t n_new) {
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

// One token file to write: its name in out_dir and its tokens [begin, end)
// of the staging file.
struct OutFile {
  std::string name;
  int64_t begin = 0, end = 0;
};

// Tokens [begin, end) as files of at most shard_tokens tokens (all in one
// file when shard_tokens is 0): one, possibly empty, at least.
std::vector<OutFile> cut_into_files(const std::string& stem, int64_t begin, int64_t end, int64_t shard_tokens) {
  if (shard_tokens == 0) return {{stem + ".bin", begin, end}};
  std::vector<OutFile> files;
  const int64_t n = end - begin;
  for (int64_t i = 0; i < n_shards(n, shard_tokens); ++i)
    files.push_back({shard_name(stem, i), begin + std::min(n, i * shard_tokens),
                     begin + std::min(n, (i + 1) * shard_tokens)});
  return files;
}

void stop_if_asked(const PrepOptions& o) {
  if (o.stop && o.stop()) throw PrepStopped();
}

// Reads every input in order, encodes a batch of pieces at a time, and
// appends the ids (with the separator before each document) to the stage.
class Encoder {
 public:
  Encoder(const std::vector<std::string>& inputs, const Tokenizer& tok, const PrepOptions& o, TokenStage& stage,
          PrepResult& r)
      : inputs_(inputs), tok_(tok), o_(o), stage_(stage), r_(r) {
    batch_bytes_ = o.batch_bytes > 0 ? o.batch_bytes
                                     : std::max<size_t>(size_t(32) << 20, (size_t(4) << 20) * size_t(omp_get_max_threads()));
    for (const std::string& in : inputs) {
      std::error_code ec;
      const auto size = fs::file_size(in, ec);  // none for a pipe (/dev/stdin)
      if (!ec) total_bytes_ += int64_t(size);
    }
  }

  void run() {
    last_progress_ = start_ = std::chrono::steady_clock::now();
    for (size_t i = 0; i < inputs_.size(); ++i) {
      InputReader reader(inputs_[i], i, o_, tok_);
      Piece p;
      while (reader.next(p)) {
        size_t text = p.text.size();  // a conversation's: its messages'
        for (const ChatMessage& m : p.messages) text += m.content.size();
        r_.bytes += int64_t(text);
        r_.documents += p.starts_doc ? 1 : 0;
        batch_text_ += text;
        batch_.push_back(std::move(p));
        p = Piece{};
        if (batch_text_ >= batch_bytes_) flush(done_bytes_ + reader.bytes_read());
      }
      done_bytes_ += reader.bytes_read();
    }
    flush(done_bytes_);
    // The last completion's end, where the next document's separator would have been it.
    if (after_completion_ && tok_.eot() >= 0 && tok_.eot() == tok_.doc_separator()) stage_.push(uint32_t(tok_.eot()), true);
  }

 private:
  // Conversations: written in the chat format and encoded on all threads.
  void flush_chat() {
    std::vector<ChatIds> done(batch_.size());
    std::vector<std::string> errors(batch_.size());
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t k = 0; k < batch_.size(); ++k) {
      const Piece& p = batch_[k];
      try {
        done[k] = encode_chat(tok_, chat_segments(*o_.chat_format, p.messages, o_.chat_options, false, ""));
      } catch (const InputError& e) {
        errors[k] = where(inputs_[p.input], p.line) + ": " + e.what();
      }
    }
    for (const std::string& e : errors)
      if (!e.empty()) throw InputError(e);
    // A format without a begin token of its own (ChatML) gets the separator.
    const int64_t separator = *o_.chat_format == ChatFormat::chatml ? tok_.doc_separator() : -1;
    for (const ChatIds& c : done) {
      if (separator >= 0) stage_.push(uint32_t(separator), false);
      stage_.append(c.ids, c.trained);
    }
  }

  void flush(int64_t bytes_read) {
    if (o_.chat_format) {
      flush_chat();
      batch_.clear();
      batch_text_ = 0;
      report(bytes_read);
      stop_if_asked(o_);
      return;
    }
    std::vector<std::string_view> views;
    std::vector<bool> continued;  // a later piece of a plain file's document
    views.reserve(batch_.size());
    for (const Piece& p : batch_) views.emplace_back(p.text), continued.push_back(!p.starts_doc);
    std::vector<std::vector<uint32_t>> ids;
    try {
      ids = encode_documents(tok_, views, continued);
    } catch (const DocumentError& e) {
      const Piece& p = batch_[e.doc];
      throw InputError(where(inputs_[p.input], p.line) + ": " + e.what());
    }
    const int64_t separator = tok_.doc_separator();
    for (size_t k = 0; k < batch_.size(); ++k) {
      const Piece& p = batch_[k];
      // With a loss mask: a separator that is the end-of-text token ends the
      // completion before it (trained); any other separator is not trained.
      if (p.starts_doc && separator >= 0) stage_.push(uint32_t(separator), after_completion_ && separator == tok_.eot());
      stage_.append(ids[k].data(), ids[k].size(), !stage_.masked() || p.completion);
      after_completion_ = p.completion;
      if (p.completion && tok_.eot() >= 0 && tok_.eot() != separator) stage_.push(uint32_t(tok_.eot()), true);
    }
    batch_.clear();
    batch_text_ = 0;
    report(bytes_read);
    stop_if_asked(o_);
  }

  void report(int64_t bytes_read) {
    if (!o_.progress) return;
    const auto now = std::chrono::steady_clock::now();
    if (std::chrono::duration<double>(now - last_progress_).count() < o_.progress_s) return;
    last_progress_ = now;
    const double s = std::chrono::duration<double>(now - start_).count();
    char line[256];
    std::snprintf(line, sizeof line, "prep: %.3f GB of %.3f GB read (%.1f%%), %lld documents, %lld tokens, %.1f MB/s",
                  double(bytes_read) / 1e9, double(total_bytes_) / 1e9,
                  total_bytes_ > 0 ? 100.0 * double(bytes_read) / double(total_bytes_) : 100.0,
                  (long long)r_.documents, (long long)stage_.size(), double(bytes_read) / 1e6 / std::max(s, 1e-9));
    o_.progress(line);
  }

  const std::vector<std::string>& inputs_;
  const Tokenizer& tok_;
  const PrepOptions& o_;
  TokenStage& stage_;
  PrepResult& r_;
  size_t batch_bytes_ = 0;
  std::vector<Piece> batch_;
  size_t batch_text_ = 0;
  bool after_completion_ = false;  // the last piece staged was a completion
  int64_t total_bytes_ = 0, done_bytes_ = 0;
  std::chrono::steady_clock::time_point start_, last_progress_;
};

void check_options(const std::vector<std::string>& inputs, const PrepOptions& o) {
  if (inputs.empty()) throw InputError("prep: no input files given");
  if (o.shard_tokens < 0 || o.shard_tokens > int64_t(INT32_MAX))
    throw InputError("prep: shard_tokens " + std::to_string(o.shard_tokens) + " is out of range [1, 2^31-1]");
  if (!(o.val_fraction >= 0.0 && o.val_fraction < 1.0)) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", o.val_fraction);
    throw InputError("prep: val_fraction " + std::string(buf) + " is out of range [0, 1)");
  }
  if (o.json_key.empty()) throw InputError("prep: the JSON field name is empty");
  if (o.prompt_key.empty() != o.completion_key.empty())
    throw InputError(std::string("prep: ") + (o.prompt_key.empty() ? "a completion field" : "a prompt field") +
                     " without " + (o.prompt_key.empty() ? "a prompt field" : "a completion field") +
                     ": prompt/completion pairs need both (--prompt-key and --completion-key)");
  if (!o.messages_key.empty() && !o.prompt_key.empty())
    throw InputError("prep: conversations (a messages field) and prompt/completion pairs are two ways; give one");
  if (!o.messages_key.empty() && !o.chat_format)
    throw std::logic_error("prep: messages_key without chat_format");
  if (!o.prompt_key.empty() && o.prompt_key == o.completion_key)
    throw InputError("prep: the prompt and completion fields are both \"" + o.prompt_key + "\"");
  // Every input is checked before anything is read or written.
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) throw InputError("prep input '" + in + "': is a directory");
    std::FILE* f = std::fopen(in.c_str(), "rb");
    if (f == nullptr) throw InputError("prep input '" + in + "': cannot open: " + strerror_text(errno));
    std::fclose(f);
    if ((!o.prompt_key.empty() || !o.messages_key.empty()) && !is_json_lines(in))
      throw InputError("prep input '" + in + "': " +
                       (o.prompt_key.empty() ? "conversations are" : "prompt/completion pairs are") +
                       " read from JSON Lines files only (a name ending in .jsonl or .ndjson, optionally .gz or .zst)");
  }
}

}  // namespace

std::string PrepResult::summary() const {
  const auto part = [this](const std::string& path, int64_t tokens, int64_t files) {
    return path + " (" + std::to_string(tokens) + " tokens" +
           (sharded ? " in " + std::to_string(files) + (files == 1 ? " file" : " files") : "") + ")";
  };
  return "prep: " + std::to_string(n_files) + (n_files == 1 ? " file, " : " files, ") + std::to_string(bytes) +
         " bytes -> " + part(train_path, train_tokens, train_files) + ", " + part(val_path, val_tokens, val_files) +
         (masked ? "; loss mask: " + std::to_string(trained_tokens) + " trained tokens (" +
                       (chat_format.empty() ? std::string("completions") : "assistant turns, chat format " + chat_format) + ")"
                 : "");
}

PrepResult prep_corpus(const std::vector<std::string>& inputs, const std::string& out_dir,
                       const Tokenizer& tokenizer, const PrepOptions& o) {
  check_options(inputs, o);
  std::error_code ec;
  const bool existed = fs::is_directory(out_dir, ec);
  fs::create_directories(out_dir, ec);
  if (ec || !fs::is_directory(out_dir)) {
    throw InputError("prep: cannot create output directory '" + out_dir + "': " +
                     (ec ? ec.message() : std::string("exists and is not a directory")));
  }
  try {
    PrepResult r;
    r.n_files = int(inputs.size());
    const StagingDir staging(out_dir);
    r.version = token_file_version(out_dir, tokenizer.vocab_size());
    r.masked = !o.prompt_key.empty() || !o.messages_key.empty();
    if (o.chat_format) r.chat_format = chat_format_name(*o.chat_format);
    TokenStage stage(staging.file("tokens"), r.version, tokenizer.vocab_size(), r.masked);
    Encoder(inputs, tokenizer, o, stage, r).run();
    if (r.masked) {
      r.version = masked_version(r.version);
      r.trained_tokens = stage.trained();
    }
    if (r.bytes == 0)
      throw InputError("prep: the corpus is empty (" + std::to_string(inputs.size()) + " input files, 0 bytes)");

    const int64_t n = stage.size();
    int64_t n_val = 0;
    if (o.val_fraction > 0.0) {
      if (n < 2) throw InputError("prep: a corpus of 1 token cannot be split into train and val");
      n_val = std::clamp<int64_t>(int64_t(std::floor(double(n) * o.val_fraction)), 1, n - 1);
    }
    r.train_tokens = n - n_val;
    r.val_tokens = n_val;
    r.sharded = o.shard_tokens > 0;
    const std::string ext = r.sharded ? "_*.bin" : ".bin";
    r.train_path = (fs::path(out_dir) / ("train" + ext)).string();
    r.val_path = (fs::path(out_dir) / ("val" + ext)).string();
    const std::vector<OutFile> train = cut_into_files("train", 0, r.train_tokens, o.shard_tokens);
    const std::vector<OutFile> val = cut_into_files("val", r.train_tokens, n, o.shard_tokens);
    r.train_files = int64_t(train.size());
    r.val_files = int64_t(val.size());
    if (r.sharded) {
      refuse_stale_shards(out_dir, "train", r.train_files);
      refuse_stale_shards(out_dir, "val", r.val_files);
    }
    std::vector<OutFile> all = train;
    all.insert(all.end(), val.begin(), val.end());
    for (const OutFile& f : all) {
      stop_if_asked(o);
      MaskReader mask;
      if (r.masked)
        mask = [&](int64_t begin, int64_t count, unsigned char* dst) { stage.read_mask(f.begin + begin, count, dst); };
      write_token_file(staging.file(f.name), r.version, f.end - f.begin, int64_t(1) << 22,
                       [&](int64_t begin, int64_t count, void* dst) { stage.read(f.begin + begin, count, dst); }, mask);
    }
    stop_if_asked(o);
    // Every file is complete: move them into place.
    for (const OutFile& f : all) {
      const std::string to = (fs::path(out_dir) / f.name).string();
      // (after the rename only the directory's fsync can fail, which loses nothing written)
      if (FsStatus e = rename_durable(staging.file(f.name), to); e && e->step == FsStep::rename)
        throw InputError("prep: cannot move the token file into place: " + e->message());
    }
    return r;
  } catch (...) {
    if (!existed) fs::remove(out_dir, ec);  // only if empty: made by this prep, nothing in it
    throw;
  }
}

PrepResult prep_corpus(const std::vector<std::string>& inputs, const std::string& out_dir,
                       double val_fraction, const Tokenizer& tokenizer, int64_t shard_tokens) {
  PrepOptions o;
  o.val_fraction = val_fraction;
  o.shard_tokens = shard_tokens;
  return prep_corpus(inputs, out_dir, tokenizer, o);
}

std::string prep_bytes(const std::vector<std::string>& inputs, const std::string& out_dir,
                       double val_fraction) {
  return prep_corpus(inputs, out_dir, val_fraction, *make_byte_tokenizer()).summary();
}

}  // namespace pentad
