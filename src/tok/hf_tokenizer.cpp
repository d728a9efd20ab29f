// tokenizer.json and tokenizer_config.json of a BPE tokenizer or of the byte
// tokenizer (hf_tokenizer.hpp).
#include "tok/hf_tokenizer.hpp"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "tok/pretokenize.hpp"

namespace pentad::hf {

namespace {

// Plain (key-sorted) objects: an ordered_json object finds each new key by a
// linear scan, quadratic in a 100k-token vocabulary. Key order means nothing
// to the readers.
using json = nlohmann::json;

// The code point byte b stands for.
uint32_t byte_level_code_point(uint8_t b) {
  const auto itself = [](uint32_t c) { return (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE; };
  if (itself(b)) return b;
  uint32_t n = 0;
  for (uint32_t c = 0; c < b; ++c)
    if (!itself(c)) ++n;
  return 0x100 + n;
}

std::string utf8_of(uint32_t c) {
  std::string s;
  if (c < 0x80) {
    s += char(c);
  } else if (c < 0x800) {
    s += char(0xC0 | (c >> 6));
    s += char(0x80 | (c & 0x3F));
  } else {  // the table's code points are below U+0200
    s += char(0xE0 | (c >> 12));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  }
  return s;
}

// Token bytes as byte-level text.
class ByteLevelText {
 public:
  ByteLevelText() {
    for (int b = 0; b < 256; ++b) chars_[size_t(b)] = byte_level_char(uint8_t(b));
  }
  std::string operator()(std::string_view bytes) const {
    std::string s;
    for (const char c : bytes) s += chars_[uint8_t(c)];
    return s;
  }

 private:
  std::array<std::string, 256> chars_;
};

// What differs between tokenizers; the files follow from it.
struct Spec {
  json vocab = json::object();
  json merges = json::array();
  const char* pattern = nullptr;  // the Split pre-tokenizer's expression; nullptr: none
  std::vector<std::pair<std::string, uint32_t>> specials;
  int64_t bos = -1, eos = -1;
  bool bos_template = false;  // put the bos token before every sequence
};

TokenizerFiles files_of(Spec s, int64_t model_max_length) {
  json added = json::array();
  json added_decoder = json::object();
  std::string bos_text, eos_text;
  for (const auto& [text, id] : s.specials) {
    json tok = {{"id", id},        {"content", text},     {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", true}};
    added.push_back(tok);
    tok.erase("id");
    added_decoder[std::to_string(id)] = tok;
    if (int64_t(id) == s.bos) bos_text = text;
    if (int64_t(id) == s.eos) eos_text = text;
  }

  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                           {"use_regex", false}};
  json pre = byte_level;
  if (s.pattern)
    pre = {{"type", "Sequence"},
           {"pretokenizers",
            {{{"type", "Split"}, {"pattern", {{"Regex", s.pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
             byte_level}}};
  json post = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  if (s.bos_template) {
    const auto special = [&](int type_id) { return json{{"SpecialToken", {{"id", bos_text}, {"type_id", type_id}}}}; };
    const auto sequence = [](const char* id, int type_id) {
      return json{{"Sequence", {{"id", id}, {"type_id", type_id}}}};
    };
    const json templ = {
        {"type", "TemplateProcessing"},
        {"single", {special(0), sequence("A", 0)}},
        {"pair", {special(0), sequence("A", 0), special(1), sequence("B", 1)}},
        {"special_tokens",
         {{bos_text, {{"id", bos_text}, {"ids", json::array({s.bos})}, {"tokens", json::array({bos_text})}}}}}};
    post = {{"type", "Sequence"}, {"processors", {post, templ}}};
  }

  TokenizerFiles f;
  f.merges = int64_t(s.merges.size());
  json tj;
  tj["version"] = "1.0";
  tj["truncation"] = nullptr;
  tj["padding"] = nullptr;
  tj["added_tokens"] = added;
  tj["normalizer"] = nullptr;
  tj["pre_tokenizer"] = pre;
  tj["post_processor"] = post;
  tj["decoder"] = byte_level;
  tj["model"] = {{"type", "BPE"},
                 {"dropout", nullptr},
                 {"unk_token", nullptr},
                 {"continuing_subword_prefix", nullptr},
                 {"end_of_word_suffix", nullptr},
                 {"fuse_unk", false},
                 {"byte_fallback", false},
                 {"ignore_merges", true},
                 {"vocab", std::move(s.vocab)},
                 {"merges", std::move(s.merges)}};

  json cfg;
  cfg["added_tokens_decoder"] = added_decoder;
  if (!bos_text.empty()) cfg["bos_token"] = bos_text;
  if (!eos_text.empty()) cfg["eos_token"] = eos_text;
  cfg["clean_up_tokenization_spaces"] = false;
  cfg["model_input_names"] = json::array({"input_ids", "attention_mask"});
  cfg["model_max_length"] = model_max_length;
  cfg["tokenizer_class"] = "PreTrainedTokenizerFast";

  f.tokenizer_json = tj.dump(1) + "\n";
  f.tokenizer_config_json = cfg.dump(2) + "\n";
  f.bos_id = s.bos;
  f.eos_id = s.eos;
  return f;
}

}  // namespace

std::string byte_level_char(uint8_t byte) { return utf8_of(byte_level_code_point(byte)); }

TokenizerFiles tokenizer_files(const BpeParts& parts, int64_t model_max_length) {
  Spec s;
  s.pattern = hf_pattern(parts.pattern);
  if (s.pattern == nullptr) PENTAD_FATAL("tokenizer_files: no Hugging Face pattern for '" + parts.pattern + "'");
  const ByteLevelText text_of;
  const RankTable& ranks = parts.ranks;
  std::vector<std::tuple<uint32_t, uint32_t, size_t>> splits;  // (left rank, right rank, cut)
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    const std::string_view t = ranks.bytes(r);
    s.vocab[text_of(t)] = r;
    splits.clear();
    for (size_t cut = 1; cut < t.size(); ++cut) {
      const uint32_t left = ranks.find(t.data(), cut), right = ranks.find(t.data() + cut, t.size() - cut);
      if (left != RankTable::kNone && right != RankTable::kNone) splits.emplace_back(left, right, cut);
    }
    std::sort(splits.begin(), splits.end());
    // "left right": byte-level strings have no space (a space byte is U+0120).
    for (const auto& [left, right, cut] : splits)
      s.merges.push_back(text_of(t.substr(0, cut)) + " " + text_of(t.substr(cut)));
  }
  s.specials = parts.specials;
  s.bos = parts.separator;
  s.eos = parts.eot;
  s.bos_template = parts.pattern == "llama3";
  return files_of(std::move(s), model_max_length);
}

TokenizerFiles byte_tokenizer_files(int64_t model_max_length) {
  Spec s;
  const ByteLevelText text_of;
  for (int b = 0; b < 256; ++b) s.vocab[text_of(std::string(1, char(b)))] = b;
  return files_of(std::move(s), model_max_length);
}

}  // namespace pentad::hf
