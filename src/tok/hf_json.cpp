// The streaming reader of a tokenizer.json (hf_json.hpp).
#include "tok/hf_json.hpp"

#include <stdexcept>

namespace pentad::hf {

using json = nlohmann::json;

void MergeList::add(std::string_view l, std::string_view r, uint8_t form) {
  bytes_.append(l).append(r);
  begin_.push_back(bytes_.size());
  left_.push_back(uint32_t(l.size()));
  form_.push_back(form);
}

void MergeList::add_text(const std::string& s) {
  const size_t sp = s.find(' ');
  if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
    *add_odd(json()) = s;
    return;
  }
  add(std::string_view(s).substr(0, sp), std::string_view(s).substr(sp + 1), kText);
}

void MergeList::add_pair(std::vector<std::string>& strings) {
  if (strings.size() == 2) return add(strings[0], strings[1], kPair);
  json a = json::array();
  for (std::string& s : strings) a.push_back(std::move(s));
  *add_odd(json()) = std::move(a);
}

json* MergeList::add_odd(json value) {
  const size_t i = size();
  add({}, {}, kOdd);
  return &(odd_[i] = std::move(value));
}

json MergeList::entry(size_t i) const {
  switch (form_[i]) {
    case kText: return std::string(left(i)) + " " + std::string(right(i));
    case kPair: return json::array({std::string(left(i)), std::string(right(i))});
    default: return odd_.at(i);
  }
}

namespace {

// Builds TokenizerDoc from the parser's events: a json tree, except that
// the entries of model.vocab (an object) and model.merges (a list) go
// straight to their flat lists.
class DocBuilder final : public nlohmann::json_sax<json> {
 public:
  explicit DocBuilder(TokenizerDoc& doc) : doc_(doc) {}

  bool null() override { return place(json()), true; }
  bool boolean(bool v) override { return place(v), true; }
  bool number_integer(number_integer_t v) override { return place(v), true; }
  bool number_unsigned(number_unsigned_t v) override { return place(v), true; }
  bool number_float(number_float_t v, const string_t&) override { return place(v), true; }
  bool binary(binary_t& v) override { return place(json::binary(std::move(v))), true; }
  bool string(string_t& v) override {
    if (top() == Sink::kMerges) doc_.merges.add_text(v);
    else if (top() == Sink::kPair) pair_.push_back(std::move(v));
    else place(std::move(v));
    return true;
  }
  bool key(string_t& k) override { return key_ = std::move(k), true; }

  bool start_object(std::size_t) override {
    if (in_model() && key_ == "vocab") {
      stack_.back().node->erase("vocab");
      doc_.has_vocab = true;
      doc_.vocab.clear();
      stack_.push_back({Sink::kVocab, nullptr, false});
      return true;
    }
    const bool model = stack_.size() == 1 && stack_[0].node->is_object() && key_ == "model";
    json* node = place(json::object());
    stack_.push_back({Sink::kTree, node, model});
    return true;
  }

  bool start_array(std::size_t) override {
    if (in_model() && key_ == "merges") {
      stack_.back().node->erase("merges");
      doc_.has_merges = true;
      doc_.merges.clear();
      stack_.push_back({Sink::kMerges, nullptr, false});
    } else if (top() == Sink::kMerges) {
      pair_.clear();
      stack_.push_back({Sink::kPair, nullptr, false});
    } else {
      json* node = place(json::array());
      stack_.push_back({Sink::kTree, node, false});
    }
    return true;
  }

  bool end_object() override { return stack_.pop_back(), true; }
  bool end_array() override {
    if (top() == Sink::kPair) doc_.merges.add_pair(pair_);
    stack_.pop_back();
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    if (const auto* p = dynamic_cast<const json::parse_error*>(&e)) throw *p;
    throw std::runtime_error(e.what());
  }

 private:
  enum class Sink { kTree, kVocab, kMerges, kPair };
  struct Frame {
    Sink sink;
    json* node;  // kTree: the object or list being filled
    bool model;  // the root's "model" object
  };

  Sink top() const { return stack_.empty() ? Sink::kTree : stack_.back().sink; }
  bool in_model() const { return !stack_.empty() && stack_.back().model; }

  // Puts a value where the parser is; returns where it went (stable until
  // its container gets its next value, after the value's own end).
  json* place(json v) {
    if (stack_.empty()) return &(doc_.rest = std::move(v));
    Frame& f = stack_.back();
    switch (f.sink) {
      case Sink::kVocab:
        doc_.vocab.emplace_back(std::move(key_), std::move(v));
        return &doc_.vocab.back().second;
      case Sink::kMerges: return doc_.merges.add_odd(std::move(v));
      case Sink::kPair: {  // not a list of strings after all: the entry as json, kept whole
        json a = json::array();
        for (std::string& s : pair_) a.push_back(std::move(s));
        pair_.clear();
        f = {Sink::kTree, doc_.merges.add_odd(std::move(a)), false};
        return place(std::move(v));
      }
      case Sink::kTree: break;
    }
    if (!f.node->is_object()) return &f.node->emplace_back(std::move(v));
    // A key given again replaces its value, streamed lists included.
    const bool model = stack_.size() == 1 && key_ == "model";
    if (model || (f.model && key_ == "vocab")) doc_.has_vocab = false, doc_.vocab.clear();
    if (model || (f.model && key_ == "merges")) doc_.has_merges = false, doc_.merges.clear();
    json& slot = (*f.node)[key_];
    slot = std::move(v);
    return &slot;
  }

  TokenizerDoc& doc_;
  std::vector<Frame> stack_;
  std::string key_;
  std::vector<std::string> pair_;  // the strings of the merges entry being read
};

}  // namespace

TokenizerDoc read_tokenizer_doc(const std::string& text) {
  TokenizerDoc doc;
  DocBuilder builder(doc);
  json::sax_parse(text, &builder);
  return doc;
}

json as_tree(const TokenizerDoc& doc) {
  json j = doc.rest;
  if (doc.has_vocab) {
    json& vocab = j["model"]["vocab"] = json::object();
    for (const auto& [key, value] : doc.vocab) vocab[key] = value;  // a key given again: its last value
  }
  if (doc.has_merges) {
    json& merges = j["model"]["merges"] = json::array();
    for (size_t i = 0; i < doc.merges.size(); ++i) merges.push_back(doc.merges.entry(i));
  }
  return j;
}

}  // namespace pentad::hf
