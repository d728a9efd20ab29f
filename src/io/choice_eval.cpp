// Multiple-choice evaluation files (llm.c's eval format): read and checked
// whole (HellaSwag's validation set is 3.6 MB), written atomically, turned
// into scored rows, and scored.
#include "io/choice_eval.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "tok/tokenizer.hpp"

namespace pentad {
namespace {

constexpr int kHeaderInts = 256;
constexpr size_t kHeaderBytes = kHeaderInts * sizeof(int32_t);
constexpr uint32_t kStart = 65535;  // <START_EXAMPLE>
constexpr size_t kMaxField = 65535;

[[noreturn]] void choice_error(const std::string& path, const std::string& what) {
  throw InputError("multiple-choice file '" + path + "': " + what);
}

// Reads the uint16 fields of one example, each checked against the example's end.
class ExampleReader {
 public:
  ExampleReader(const std::string& path, const uint16_t* words, size_t begin, size_t end, int k)
      : path_(path), w_(words), pos_(begin), end_(end), k_(k), begin_(begin) {}
  uint32_t next(const char* field) {
    if (pos_ >= end_) fail(std::string("ends inside its ") + field);
    return w_[pos_++];
  }
  std::vector<int32_t> tokens(const char* what, int vocab_size) {
    const uint32_t n = next(what);
    if (n > end_ - pos_) fail(std::string(what) + " of " + std::to_string(n) + " tokens runs past the example's end");
    std::vector<int32_t> t(n);
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t id = w_[pos_++];
      if (id >= uint32_t(vocab_size))
        fail(std::string(what) + ": token id " + std::to_string(id) + " >= the vocabulary (" +
             std::to_string(vocab_size) + ")");
      t[i] = int32_t(id);
    }
    return t;
  }
  bool done() const { return pos_ == end_; }
  [[noreturn]] void fail(const std::string& what) const {
    choice_error(path_, "example " + std::to_string(k_) + " (byte offset " +
                            std::to_string(kHeaderBytes + 2 * begin_) + "): " + what);
  }

 private:
  const std::string& path_;
  const uint16_t* w_;
  size_t pos_, end_;
  int k_;
  size_t begin_;
};

}  // namespace

std::vector<ChoiceExample> read_choice_file(const std::string& path, int vocab_size) {
  const std::optional<std::string> text = read_text(path);
  if (!text) choice_error(path, "cannot be read: " + std::string(std::strerror(errno)));
  const std::string& s = *text;
  if (s.size() < kHeaderBytes)
    choice_error(path, std::to_string(s.size()) + " bytes, shorter than the 1024-byte header");
  int32_t header[kHeaderInts];
  std::memcpy(header, s.data(), kHeaderBytes);
  if (header[0] != kChoiceMagic)
    choice_error(path, "magic " + std::to_string(header[0]) + ", expected " + std::to_string(kChoiceMagic) +
                           " (llm.c's multiple-choice eval format)" +
                           (header[0] == 20240520 ? "; this is a token file (data.train, data.val)" : ""));
  if (header[1] != kChoiceVersion)
    choice_error(path, "version " + std::to_string(header[1]) + ", expected " + std::to_string(kChoiceVersion));
  if (header[2] < 1) choice_error(path, "the header counts " + std::to_string(header[2]) + " examples");
  if ((s.size() - kHeaderBytes) % 2 != 0) choice_error(path, "odd number of bytes after the header");
  const size_t n_words = (s.size() - kHeaderBytes) / 2;
  std::vector<uint16_t> w(n_words);
  std::memcpy(w.data(), s.data() + kHeaderBytes, n_words * 2);

  std::vector<ChoiceExample> out;
  out.reserve(std::min(size_t(header[2]), n_words / 8));  // an example is at least 8 words: no trust in the header
  size_t pos = 0;
  for (int k = 0; k < header[2]; ++k) {
    const std::string where = "example " + std::to_string(k) + " (byte offset " + std::to_string(kHeaderBytes + 2 * pos) + ")";
    if (pos >= n_words)
      choice_error(path, "the header counts " + std::to_string(header[2]) + " examples, the file ends after " +
                             std::to_string(k));
    if (w[pos] != kStart) choice_error(path, where + ": starts with " + std::to_string(w[pos]) + ", not 65535");
    if (pos + 1 >= n_words) choice_error(path, where + ": ends inside its header");
    const size_t bytes = w[pos + 1];
    if (bytes % 2 != 0 || bytes < 14)
      choice_error(path, where + ": size " + std::to_string(bytes) + " bytes is not a valid example size");
    if (pos + bytes / 2 > n_words)
      choice_error(path, where + ": its size (" + std::to_string(bytes) + " bytes) runs past the end of the file");
    ExampleReader r(path, w.data(), pos, pos + bytes / 2, k);
    r.next("start");
    r.next("size");
    ChoiceExample e;
    e.index = int(r.next("index"));
    e.label = int(r.next("label"));
    const int n_endings = int(r.next("number of endings"));
    if (n_endings < 2) r.fail(std::to_string(n_endings) + " endings (at least 2)");
    if (e.label >= n_endings)
      r.fail("label " + std::to_string(e.label) + " is not one of its " + std::to_string(n_endings) + " endings");
    e.context = r.tokens("the context", vocab_size);
    if (e.context.empty()) r.fail("the context is empty (an ending is scored after it)");
    for (int c = 0; c < n_endings; ++c) {
      const std::string name = "ending " + std::to_string(c);
      e.endings.push_back(r.tokens(name.c_str(), vocab_size));
      if (e.endings.back().empty()) r.fail(name + " is empty");
    }
    if (!r.done()) r.fail("its size (" + std::to_string(bytes) + " bytes) is more than its fields");
    pos += bytes / 2;
    out.push_back(std::move(e));
  }
  if (pos != n_words)
    choice_error(path, std::to_string(2 * (n_words - pos)) + " bytes after the " + std::to_string(header[2]) +
                           " examples the header counts");
  return out;
}

void write_choice_file(const std::string& path, const std::vector<ChoiceExample>& examples) {
  if (examples.empty()) choice_error(path, "no examples to write");
  if (examples.size() > kMaxField)
    choice_error(path, std::to_string(examples.size()) + " examples; the format holds at most 65535");
  std::vector<uint16_t> stream;
  size_t longest = 0;
  for (size_t k = 0; k < examples.size(); ++k) {
    const ChoiceExample& e = examples[k];
    const std::string where = "example " + std::to_string(k);
    const size_t begin = stream.size();
    const auto field = [&](size_t v, const char* what) {
      if (v >= kMaxField)
        choice_error(path, where + ": " + what + " " + std::to_string(v) +
                                 " does not fit the format (uint16 fields below 65535: vocabularies up to 65535)");
      stream.push_back(uint16_t(v));
    };
    stream.push_back(uint16_t(kStart));
    stream.push_back(0);  // the size, filled below
    field(size_t(e.index), "index");
    field(size_t(e.label), "label");
    field(e.endings.size(), "number of endings");
    for (size_t part = 0; part <= e.endings.size(); ++part) {
      const std::vector<int32_t>& t = part == 0 ? e.context : e.endings[part - 1];
      field(t.size(), "length");
      for (int32_t id : t) field(size_t(uint32_t(id)), "token id");
    }
    const size_t bytes = 2 * (stream.size() - begin);
    if (bytes > kMaxField)
      choice_error(path, where + ": " + std::to_string(bytes) + " bytes; the format holds at most 65535 per example");
    stream[begin + 1] = uint16_t(bytes);
    longest = std::max(longest, bytes);
  }
  int32_t header[kHeaderInts] = {};
  header[0] = kChoiceMagic;
  header[1] = kChoiceVersion;
  header[2] = int32_t(examples.size());
  header[3] = int32_t(longest);
  std::string bytes(reinterpret_cast<const char*>(header), kHeaderBytes);
  bytes.append(reinterpret_cast<const char*>(stream.data()), stream.size() * 2);
  if (FsStatus e = write_file_atomic(path, bytes)) choice_error(path, e->message());
}

std::vector<ChoiceExample> read_choices_jsonl(const std::string& path, const Tokenizer& tok) {
  for (const char* ext : {".gz", ".zst"})
    if (path.size() > std::strlen(ext) && path.compare(path.size() - std::strlen(ext), std::string::npos, ext) == 0)
      throw InputError("multiple-choice input '" + path + "': compressed; --choices reads plain JSON Lines "
                       "(decompress it first)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("multiple-choice input '" + path + "': cannot open: " + std::strerror(errno));
  const auto ids = [&](std::string_view text) {
    const std::vector<uint32_t> v = tok.encode(text);
    return std::vector<int32_t>(v.begin(), v.end());
  };
  std::vector<ChoiceExample> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "multiple-choice input '" + path + "' line " + std::to_string(n) + ": ";
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw InputError(where + "not valid JSON at byte " + std::to_string(e.byte));
    }
    if (!j.is_object()) throw InputError(where + "not a JSON object");
    const auto ctx = j.find("ctx"), endings = j.find("endings"), label = j.find("label");
    if (ctx == j.end() || !ctx->is_string()) throw InputError(where + "no string field \"ctx\"");
    if (endings == j.end() || !endings->is_array() || endings->size() < 2 ||
        !std::all_of(endings->begin(), endings->end(), [](const nlohmann::json& e) { return e.is_string(); }))
      throw InputError(where + "\"endings\" is not an array of at least 2 strings");
    if (label == j.end() || !label->is_number_integer() || label->get<int64_t>() < 0 ||
        label->get<int64_t>() >= int64_t(endings->size()))
      throw InputError(where + "\"label\" is not the index of one of its " + std::to_string(endings->size()) +
                       " endings (an unlabelled test split cannot be scored)");
    ChoiceExample e;
    e.index = int(out.size());
    e.label = int(label->get<int64_t>());
    e.context = ids(ctx->get_ref<const std::string&>());
    for (const nlohmann::json& end : *endings) {
      std::string text(1, ' ');  // the space llm.c puts before an ending (GPT-2's word boundary)
      text += end.get_ref<const std::string&>();
      e.endings.push_back(ids(text));
    }
    out.push_back(std::move(e));
  }
  if (in.bad()) throw InputError("multiple-choice input '" + path + "': read failed: " + std::strerror(errno));
  if (out.empty()) throw InputError("multiple-choice input '" + path + "': no examples");
  return out;
}

ChoiceRows choice_rows(const std::vector<ChoiceExample>& examples, int64_t n, int seq_len) {
  ChoiceRows rows;
  rows.seq_len = seq_len;
  const size_t T = size_t(seq_len);
  for (int64_t k = 0; k < n; ++k) {
    const ChoiceExample& e = examples[size_t(k)];
    for (size_t c = 0; c < e.endings.size(); ++c) {
      const size_t len = e.endings[c].size();
      // context + ending is at most T + 1 tokens: T inputs, the last a target only.
      if (len > T)
        throw InputError("multiple-choice example " + std::to_string(k) + ", ending " + std::to_string(c) + ": " +
                         std::to_string(len) + " tokens leave no context within model.seq_len = " +
                         std::to_string(seq_len));
      if (e.context.size() + len > T + 1) ++rows.truncated;
      rows.rows.push_back({int(k), int(c)});
      rows.tokens.push_back(int(len));
    }
  }
  rows.n_rows = int64_t(rows.rows.size());
  return rows;
}

void fill_choice_rows(const std::vector<ChoiceExample>& examples, const ChoiceRows& rows, int64_t first,
                      int64_t count, int32_t* inputs, int32_t* targets) {
  const size_t T = size_t(rows.seq_len);
  std::fill_n(inputs, size_t(count) * T, 0);
  std::fill_n(targets, size_t(count) * T, -1);
  for (int64_t i = 0; i < count && first + i < rows.n_rows; ++i) {
    const ChoiceRows::Row& r = rows.rows[size_t(first + i)];
    const ChoiceExample& e = examples[size_t(r.example)];
    const std::vector<int32_t>& end = e.endings[size_t(r.ending)];
    const size_t keep = std::min(e.context.size(), T + 1 - end.size());
    std::vector<int32_t> row(e.context.end() - std::ptrdiff_t(keep), e.context.end());
    row.insert(row.end(), end.begin(), end.end());
    int32_t* in = inputs + size_t(i) * T;
    int32_t* tg = targets + size_t(i) * T;
    for (size_t t = 0; t + 1 < row.size(); ++t) in[t] = row[t];
    for (size_t t = keep - 1; t + 1 < row.size(); ++t) tg[t] = row[t + 1];
  }
}

ChoiceScore score_choices(const std::vector<ChoiceExample>& examples, int64_t n, const std::vector<double>& row_loss,
                          const std::vector<int>& row_tokens) {
  ChoiceScore s;
  size_t r = 0;
  for (int64_t k = 0; k < n; ++k, ++s.examples) {
    const ChoiceExample& e = examples[size_t(k)];
    int best_norm = 0, best_sum = 0;
    for (int c = 0; c < int(e.endings.size()); ++c) {
      const double sum = row_loss[r + size_t(c)];
      const double mean = sum / row_tokens[r + size_t(c)];
      if (sum < row_loss[r + size_t(best_sum)]) best_sum = c;
      if (mean < row_loss[r + size_t(best_norm)] / row_tokens[r + size_t(best_norm)]) best_norm = c;
    }
    s.correct_norm += best_norm == e.label;
    s.correct_sum += best_sum == e.label;
    r += e.endings.size();
  }
  return s;
}

}  // namespace pentad
