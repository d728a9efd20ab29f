// The BPE tokenizer's parts that need no oracle: rank-file errors (each
// names the file and line), utf8_replace against the Unicode standard's
// maximal-subpart examples, the two merge loops against a plain reference,
// safe cuts against the whole text's pieces, the pattern's White_Space,
// special tokens and the prep separator. Token-for-token equality with
// tiktoken is tests/tokenizer (js-tiktoken).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/data.hpp"
#include "io/prep.hpp"
#include "../lib/input_error.hpp"
#include "tok/hf_json.hpp"
#include "tok/hf_tokenizer.hpp"
#include "tok/parallel.hpp"
#include "tok/bpe.hpp"
#include "tok/chat.hpp"
#include "tok/normalize.hpp"
#include "tok/pretokenize.hpp"
#include "tok/utf8.hpp"

namespace fs = std::filesystem;
using pentad::InputError;

namespace {

std::string b64(const std::string& s) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < s.size(); i += 3) {
    uint32_t w = uint32_t(uint8_t(s[i])) << 16;
    if (i + 1 < s.size()) w |= uint32_t(uint8_t(s[i + 1])) << 8;
    if (i + 2 < s.size()) w |= uint32_t(uint8_t(s[i + 2]));
    out += a[w >> 18 & 63];
    out += a[w >> 12 & 63];
    out += i + 1 < s.size() ? a[w >> 6 & 63] : '=';
    out += i + 2 < s.size() ? a[w & 63] : '=';
  }
  return out;
}

// The 256 single bytes, then `extra` tokens, ranks in that order.
std::string rank_lines(const std::vector<std::string>& extra) {
  std::string out;
  int r = 0;
  for (int b = 0; b < 256; ++b) out += b64(std::string(1, char(b))) + " " + std::to_string(r++) + "\n";
  for (const auto& t : extra) out += b64(t) + " " + std::to_string(r++) + "\n";
  return out;
}

// Every string over {a, b} of length 2..8, in a fixed shuffled rank order.
std::vector<std::string> ab_tokens(uint32_t seed) {
  std::vector<std::string> t;
  for (int len = 2; len <= 8; ++len)
    for (int m = 0; m < (1 << len); ++m) {
      std::string s;
      for (int k = 0; k < len; ++k) s += (m >> k & 1) ? 'b' : 'a';
      t.push_back(s);
    }
  std::mt19937 rng(seed);
  std::shuffle(t.begin(), t.end(), rng);
  return t;
}

std::vector<uint32_t> read_ids(const std::string& path, int64_t vocab);  // below

class TokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "pentad_test_tok_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& text) {
    const std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  // The message of load_tiktoken(path, pattern)'s InputError ("" if none).
  static std::string load_error(const std::string& path, const std::string& pattern = "gpt2") {
    try {
      pentad::load_tiktoken(path, pattern);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
  // Compressed copies (packed) of the plain inputs give the same token files
  // (51 documents: a.txt, and b.jsonl's 50 lines); packed[0] cut in half,
  // and with bytes 100..199 inverted, is refused with cut_error and
  // damaged_error naming it, leaving nothing behind.
  void expect_packed_like_plain(const std::vector<std::string>& plain, const std::vector<std::string>& packed,
                                const pentad::Tokenizer& tok, const std::string& cut_error,
                                const std::string& damaged_error) {
    using pentad::test::input_error_of;
    const pentad::PrepResult rp = pentad::prep_corpus(plain, (dir_ / "plain").string(), 0.1, tok);
    const pentad::PrepResult rz = pentad::prep_corpus(packed, (dir_ / "packed").string(), 0.1, tok);
    EXPECT_EQ(rz.documents, 51);
    EXPECT_EQ(rz.summary().substr(0, 30), rp.summary().substr(0, 30));  // the same files, bytes (of text) and tokens
    EXPECT_EQ(read_ids(rz.train_path, tok.vocab_size()), read_ids(rp.train_path, tok.vocab_size()));
    EXPECT_EQ(read_ids(rz.val_path, tok.vocab_size()), read_ids(rp.val_path, tok.vocab_size()));
    const std::string out = (dir_ / "bad").string(), ext = fs::path(packed[0]).extension().string();
    std::string bytes;
    { std::ifstream f(packed[0], std::ios::binary); bytes.assign(std::istreambuf_iterator<char>(f), {}); }
    const std::string cut = write("cut.txt" + ext, bytes.substr(0, bytes.size() / 2));
    EXPECT_HAS(input_error_of([&] { pentad::prep_corpus({cut}, out, 0.0, tok); }),
               "prep input '" + cut + "': " + cut_error);
    for (size_t i = 100; i < 200; ++i) bytes[i] = char(~bytes[i]);
    const std::string damaged = write("damaged.txt" + ext, bytes);
    EXPECT_HAS(input_error_of([&] { pentad::prep_corpus({damaged}, out, 0.0, tok); }),
               "prep input '" + damaged + "': " + damaged_error);
    EXPECT_FALSE(fs::exists(out));
  }
  fs::path dir_;
};

// --- rank files --------------------------------------------------------------

TEST_F(TokenizerTest, RankFileErrorsNameFileAndLine) {
  const std::string good = rank_lines({"ab"});  // 257 lines
  struct Case {
    std::string name, text, want;  // want: a part of the message after "<path>"
  };
  const std::vector<Case> cases = {
      {"no_rank", good + "YWJj\n", ":258: expected 'BASE64 RANK', got \"YWJj\""},
      {"two_spaces", good + "YWJj  257\n", ":258: expected 'BASE64 RANK'"},
      {"extra_field", good + "YWJj 257 x\n", ":258: expected 'BASE64 RANK'"},
      {"blank_line", rank_lines({}) + "\n" + "YWI= 256\n", ":257: expected 'BASE64 RANK', got \"\""},
      {"rank_not_number", good + "YWJj 2x7\n", ":258: rank \"2x7\" is not a non-negative integer"},
      {"rank_negative", good + "YWJj -1\n", ":258: rank \"-1\" is not a non-negative integer"},
      {"bad_base64_char", good + "YW*j 257\n", ":258: \"YW*j\" is not valid base64"},
      {"bad_base64_length", good + "YWJ 257\n", ":258: \"YWJ\" is not valid base64"},
      {"padding_inside", good + "YQ==YWJj 257\n", ":258: \"YQ==YWJj\" is not valid base64"},
      {"non_canonical_padding", good + "YWJ= 257\n", ""},  // "ab" + bits: see below
      {"rank_gap", good + "YWJj 258\n", ":258: rank 258 is out of range"},
      {"rank_duplicate", good + "YWJj 256\n", ":258: rank 256 is already on line 257 (duplicate rank)"},
      {"token_duplicate", good + "YWI= 257\n", ":258: token \"ab\" is already on line 257 (duplicate token bytes)"},
  };
  for (const auto& c : cases) {
    const std::string path = write(c.name + ".tiktoken", c.text);
    const std::string msg = load_error(path);
    if (c.name == "non_canonical_padding") {
      // "YWJ=" sets a bit that padding drops: not the canonical encoding of "ab".
      EXPECT_NE(msg.find(path + ":258: \"YWJ=\" is not valid base64"), std::string::npos) << msg;
      continue;
    }
    EXPECT_NE(msg.find(path + c.want), std::string::npos) << c.name << ": " << msg;
  }
}

TEST_F(TokenizerTest, RankFileWholeFileErrors) {
  const std::string empty = write("empty.tiktoken", "");
  EXPECT_NE(load_error(empty).find("rank file '" + empty + "': is empty"), std::string::npos) << load_error(empty);
  // Byte 0x41 ('A') missing: the other 255 bytes plus "ab" keep 256 ranks.
  std::string text;
  int r = 0;
  for (int b = 0; b < 256; ++b)
    if (b != 0x41) text += b64(std::string(1, char(b))) + " " + std::to_string(r++) + "\n";
  text += b64("ab") + " " + std::to_string(r) + "\n";
  const std::string no_a = write("no_a.tiktoken", text);
  EXPECT_NE(load_error(no_a).find("the byte 0x41 has no rank"), std::string::npos) << load_error(no_a);
  const std::string missing = (dir_ / "missing.tiktoken").string();
  EXPECT_NE(load_error(missing).find("rank file '" + missing + "': cannot open"), std::string::npos);
  const std::string good = write("good.tiktoken", rank_lines({"ab"}));
  EXPECT_NE(load_error(good, "gpt3").find("unknown pre-tokenization pattern 'gpt3' (known: gpt2, cl100k, llama3, qwen2)"),
            std::string::npos)
      << load_error(good, "gpt3");
  EXPECT_NE(load_error(good, "").find("has 257 ranks, which fits no named pattern"), std::string::npos)
      << load_error(good, "");
  EXPECT_EQ(load_error(good, "gpt2"), "");
  // CRLF line ends are accepted.
  std::string crlf = rank_lines({"ab"});
  for (size_t at = crlf.find('\n'); at != std::string::npos; at = crlf.find('\n', at + 2)) crlf.insert(at, "\r");
  EXPECT_EQ(load_error(write("crlf.tiktoken", crlf), "gpt2"), "");
}

TEST_F(TokenizerTest, PatternInferredFromRankCount) {
  for (const auto& [n, name, vocab] : std::vector<std::tuple<int, std::string, int64_t>>{
           {50256, "gpt2", 50257}, {100256, "cl100k", 100277}, {128000, "llama3", 128256}}) {
    std::vector<std::string> extra;
    for (int i = 256; i < n; ++i) {
      std::string t = "t";
      t += std::to_string(i);
      extra.push_back(t);
    }
    std::string file_name = name;
    file_name += ".tiktoken";
    const std::string path = write(file_name, rank_lines(extra));
    const auto tok = pentad::load_tiktoken(path, "");
    EXPECT_NE(tok->describe().find("BPE " + name + " "), std::string::npos) << tok->describe();
    EXPECT_EQ(tok->vocab_size(), vocab) << name;
  }
}

// --- specials and separators -------------------------------------------------

TEST_F(TokenizerTest, SpecialTokensAndSeparators) {
  const std::string path = write("small.tiktoken", rank_lines({"ab", "abab"}));
  const uint32_t n = 258;
  const auto gpt2 = pentad::load_tiktoken(path, "gpt2");
  EXPECT_EQ(gpt2->vocab_size(), n + 1);
  EXPECT_EQ(gpt2->eot(), n);
  EXPECT_EQ(gpt2->doc_separator(), n);
  EXPECT_EQ(gpt2->decode({n}), "<|endoftext|>");
  const auto cl = pentad::load_tiktoken(path, "cl100k");
  EXPECT_EQ(cl->vocab_size(), n + 21);
  EXPECT_EQ(cl->eot(), n + 1);
  EXPECT_EQ(cl->doc_separator(), n + 1);
  EXPECT_EQ(cl->decode({n + 1, n + 2, n + 3, n + 4, n + 20}),
            "<|endoftext|><|fim_prefix|><|fim_middle|><|fim_suffix|><|endofprompt|>");
  EXPECT_EQ(cl->decode({n, n + 5}), "");  // ids no token has
  const auto l3 = pentad::load_tiktoken(path, "llama3");
  EXPECT_EQ(l3->vocab_size(), n + 256);
  EXPECT_EQ(l3->eot(), n + 1);
  EXPECT_EQ(l3->doc_separator(), n);
  EXPECT_EQ(l3->decode({n, n + 1, n + 6, n + 7, n + 9}),
            "<|begin_of_text|><|end_of_text|><|start_header_id|><|end_header_id|><|eot_id|>");
  EXPECT_EQ(l3->decode({n + 2, n + 8, n + 10, n + 255}),
            "<|reserved_special_token_0|><|reserved_special_token_4|><|reserved_special_token_5|>"
            "<|reserved_special_token_250|>");
  EXPECT_THROW(l3->decode({n + 256}), InputError);
  // Special tokens' text is ordinary text to encode().
  const std::vector<uint32_t> ids = gpt2->encode("<|endoftext|>");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), n), 0);
  EXPECT_EQ(gpt2->decode(ids), "<|endoftext|>");
}

// encode_with_specials: a special token's text is its id, the text between
// encoded as texts of their own; the chat formats' fixed parts (tok/chat.hpp).
TEST_F(TokenizerTest, SpecialTokensInPromptsAndChatTurns) {
  const std::string path = write("small.tiktoken", rank_lines({"ab", "abab"}));
  const uint32_t n = 258;
  const auto cl = pentad::load_tiktoken(path, "cl100k");
  std::vector<uint32_t> want = cl->encode("ab a");
  want.push_back(n + 1);
  for (uint32_t id : cl->encode("b\n")) want.push_back(id);
  want.push_back(n + 2);
  EXPECT_EQ(pentad::encode_with_specials(*cl, "ab a<|endoftext|>b\n<|fim_prefix|>"), want);
  EXPECT_EQ(pentad::encode_with_specials(*cl, "<|endoftext|><|endoftext|>"), (std::vector<uint32_t>{n + 1, n + 1}));
  EXPECT_EQ(pentad::encode_with_specials(*cl, "<|endoftext|"), cl->encode("<|endoftext|"));  // not a token
  EXPECT_EQ(pentad::encode_with_specials(*pentad::make_byte_tokenizer(), "<|x|>"),
            pentad::make_byte_tokenizer()->encode("<|x|>"));
  // Chat formats: ChatML where <|im_start|> and <|im_end|> are tokens, else
  // Llama 3's headers, else refused naming what is missing.
  const auto qwen = pentad::load_tiktoken(path, "qwen2");
  const auto l3 = pentad::load_tiktoken(path, "llama3");
  EXPECT_EQ(pentad::chat_format(*qwen), pentad::ChatFormat::chatml);
  EXPECT_EQ(pentad::chat_end_of_turn(*qwen, pentad::ChatFormat::chatml), n + 2);
  EXPECT_EQ(pentad::chat_format(*l3), pentad::ChatFormat::llama3);
  EXPECT_EQ(pentad::chat_end_of_turn(*l3, pentad::ChatFormat::llama3), n + 9);
  EXPECT_HAS(pentad::test::input_error_of([&] { pentad::chat_format(*cl); }),
             "ChatML's (Qwen) need <|im_start|>, <|im_end|>; Llama 3's need <|begin_of_text|>, "
             "<|start_header_id|>, <|end_header_id|>, <|eot_id|>");
  EXPECT_EQ(pentad::chat_prompt(pentad::ChatFormat::chatml, "", " hi\n"),
            "<|im_start|>user\n hi\n<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(pentad::chat_prompt(pentad::ChatFormat::chatml, "S", "U"),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
  // Llama 3 trims each message of Unicode whitespace (U+3000, U+00A0),
  // not of other characters or of invalid UTF-8.
  EXPECT_EQ(pentad::chat_prompt(pentad::ChatFormat::llama3, "\xe3\x80\x80 S \xc2\xa0", "\t\xffU.\n"),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n\xffU.<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(pentad::chat_prompt(pentad::ChatFormat::llama3, "", " \n"),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  const std::vector<uint32_t> turn =
      pentad::encode_with_specials(*l3, pentad::chat_prompt(pentad::ChatFormat::llama3, "", "ab"));
  EXPECT_EQ(turn.front(), n);
  EXPECT_EQ(std::count(turn.begin(), turn.end(), n + 9), 1);  // <|eot_id|>
  EXPECT_EQ(std::count(turn.begin(), turn.end(), n + 6), 2);  // <|start_header_id|>
  // A conversation: each message in turn; with strip_reasoning (Qwen3's) an
  // earlier answer keeps only what follows its last </think>, less leading
  // newlines; without it, all of it.
  const std::vector<pentad::ChatMessage> talk = {
      {"user", "Q1"}, {"assistant", "<think>\nr\n</think>\n\n A1\n"}, {"system", "S"}, {"user", "Q2"}};
  const std::string tail = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n";
  pentad::ChatOptions strip;
  strip.strip_reasoning = true;
  EXPECT_EQ(pentad::chat_prompt(pentad::ChatFormat::chatml, talk, strip),
            "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n A1\n<|im_end|>\n" + tail);
  EXPECT_EQ(pentad::chat_prompt(pentad::ChatFormat::chatml, talk),
            "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\n A1\n<|im_end|>\n" + tail);
  EXPECT_EQ(pentad::chat_prompt(pentad::ChatFormat::llama3, talk),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nQ1<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n<think>\nr\n</think>\n\n A1<|eot_id|>"
            "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nQ2<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST_F(TokenizerTest, PrepPutsTheSeparatorBeforeEachDocument) {
  const std::string ranks = write("small.tiktoken", rank_lines({"ab", "abab"}));
  const std::string a = write("a.txt", "abab ab"), b = write("b.txt", "ba");
  for (const std::string pattern : {"gpt2", "llama3"}) {
    const auto tok = pentad::load_tiktoken(ranks, pattern);
    const auto r = pentad::prep_corpus({a, b}, (dir_ / pattern).string(), 0.0, *tok);
    const pentad::TokenFile file(r.train_path, int(tok->vocab_size()), 1);
    std::vector<uint32_t> got;
    for (int64_t i = 0; i < file.size(); ++i) got.push_back(file[i]);
    std::vector<uint32_t> want = {uint32_t(tok->doc_separator())};
    for (uint32_t id : tok->encode("abab ab")) want.push_back(id);
    want.push_back(uint32_t(tok->doc_separator()));
    for (uint32_t id : tok->encode("ba")) want.push_back(id);
    EXPECT_EQ(got, want) << pattern;
    EXPECT_EQ(r.version, 1);
  }
}

// The ids of a prep'd token file (train.bin, then val.bin if asked).
std::vector<uint32_t> read_ids(const std::string& path, int64_t vocab) {
  const pentad::TokenFile file(path, int(vocab), 1);
  std::vector<uint32_t> ids;
  for (int64_t i = 0; i < file.size(); ++i) ids.push_back(file[i]);
  return ids;
}

// Lines of words over a small alphabet: many places where prep may cut.
// A small SentencePiece BPE's tokenizer.json in Llama 2's form: <unk>, <s>,
// </s>, the 256 <0xNN>, then '▁' a b ▁▁ ▁a ab ▁ab (259..265), with "▁ ▁"
// listed last though "▁▁" is made before "▁a".
nlohmann::json sp_tokenizer_json() {
  using nlohmann::json;
  const std::string sp = "\xE2\x96\x81";  // '▁'
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  const std::vector<std::string> pieces = {sp, "a", "b", sp + sp, sp + "a", "ab", sp + "ab"};  // 259..265
  for (size_t k = 0; k < pieces.size(); ++k) vocab[pieces[k]] = 259 + int(k);
  const json merges = {"a b", sp + " a", sp + " ab", sp + " " + sp};
  const auto special = [](const char* t, int id) { return json{{"id", id}, {"content", t}, {"special", true}}; };
  return {{"added_tokens", {special("<unk>", 0), special("<s>", 1), special("</s>", 2)}},
          {"normalizer", {{"type", "Sequence"},
                          {"normalizers", {{{"type", "Prepend"}, {"prepend", sp}},
                                           {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", sp}}}}}},
          {"pre_tokenizer", nullptr},
          {"post_processor", {{"type", "TemplateProcessing"},
                              {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}}},
          {"decoder", {{"type", "Sequence"},
                       {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", sp}}}, {"content", " "}},
                                     {{"type", "ByteFallback"}}, {{"type", "Fuse"}},
                                     {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
          {"model", {{"type", "BPE"}, {"byte_fallback", true}, {"fuse_unk", true}, {"unk_token", "<unk>"},
                     {"vocab", vocab}, {"merges", merges}}}};
}

// Llama 3.1+'s format (Llama 3's tokens with <|eom_id|>): a system turn
// always, its date lines first, the first message's text after them if it
// is the system's; a later system message a turn of its own. The date comes
// from the template beside the tokenizer: today's where it calls
// strftime_now (Llama 3.2's).
TEST_F(TokenizerTest, Llama31ChatFormatWritesTheDateLines) {
  using nlohmann::json;
  json tj = sp_tokenizer_json();
  const std::pair<const char*, int> l3[] = {{"<|begin_of_text|>", 266}, {"<|start_header_id|>", 267},
                                             {"<|end_header_id|>", 268}, {"<|eot_id|>", 269}};
  for (const auto& [t, id] : l3) tj["added_tokens"].push_back(json{{"id", id}, {"content", t}, {"special", true}});
  EXPECT_EQ(pentad::chat_format(*pentad::load_tokenizer(write("l3.json", tj.dump()), "")),
            pentad::ChatFormat::llama3);
  tj["added_tokens"].push_back(json{{"id", 270}, {"content", "<|eom_id|>"}, {"special", true}});
  const auto l31 = pentad::load_tokenizer(write("l31.json", tj.dump()), "");
  EXPECT_EQ(pentad::chat_format(*l31), pentad::ChatFormat::llama3_1);
  EXPECT_EQ(pentad::chat_end_of_turn(*l31, pentad::ChatFormat::llama3_1), 269);
  const std::string head = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                           "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
  EXPECT_EQ(pentad::chat_prompt(pentad::ChatFormat::llama3_1, "", "U"),
            head + "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
                   "<|start_header_id|>assistant<|end_header_id|>\n\n");
  const std::vector<pentad::ChatMessage> talk = {{"system", " S\n"}, {"user", "Q1"}, {"system", "S2"}, {"user", "Q2"}};
  pentad::ChatOptions dated;
  dated.date = "01 Jan 2025";
  EXPECT_EQ(pentad::chat_prompt(pentad::ChatFormat::llama3_1, talk, dated),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 01 Jan 2025\n\nS<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nQ1<|eot_id|>"
            "<|start_header_id|>system<|end_header_id|>\n\nS2<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nQ2<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // The template's date: strftime_now in tokenizer_config.json (one
  // template, or the "default" of a list); none, no file: not today.
  std::filesystem::create_directories(std::filesystem::path(write("probe", "")).parent_path() / "cfg");
  const std::string dir = write("cfg/tokenizer.json", tj.dump());
  const auto today = [&] { return pentad::read_chat_template(dir).dates_today; };
  EXPECT_FALSE(today());
  write("cfg/tokenizer_config.json", R"({"chat_template": "{{ strftime_now('%d %b %Y') }}"})");
  EXPECT_TRUE(today());
  EXPECT_TRUE(pentad::read_chat_template(dir.substr(0, dir.rfind('/'))).dates_today);  // the directory
  write("cfg/tokenizer_config.json",
        R"({"chat_template": [{"name": "tool_use", "template": "x"},
                              {"name": "default", "template": "strftime_now"}]})");
  EXPECT_TRUE(today());
  write("cfg/tokenizer_config.json", R"({"chat_template": "{{ date_string }}"})");
  EXPECT_FALSE(today());
  EXPECT_FALSE(pentad::read_chat_template("").dates_today);
  write("cfg/tokenizer_config.json", "{");
  EXPECT_HAS(pentad::test::input_error_of([&] { pentad::read_chat_template(dir); }),
             "tokenizer_config.json' is not valid JSON");
}

// A ChatML template's default system turn: the text of a string literal
// that is a whole system turn (Qwen2's and Qwen2.5's), escapes read; one
// built with + (Qwen3's: the given message only) is none. chat_prompt
// writes it first unless the conversation starts with a system message.
TEST_F(TokenizerTest, ChatMLDefaultSystemTurnIsReadFromTheTemplate) {
  using nlohmann::json;
  std::filesystem::create_directories(std::filesystem::path(write("probe", "")).parent_path() / "t");
  const std::string tok = write("t/tokenizer.json", "{}");  // (not read)
  const auto system_of = [&](const std::string& tmpl) {
    write("t/tokenizer_config.json", json{{"chat_template", tmpl}}.dump());
    return pentad::read_chat_template(tok).default_system;
  };
  EXPECT_EQ(system_of("{%- if messages[0]['role'] != 'system' %}"
                      R"({{- '<|im_start|>system\nYou are Q. It\'s "me".<|im_end|>\n' }}{%- endif %})"),
            "You are Q. It's \"me\".");
  EXPECT_EQ(system_of(R"({{ "<|im_start|>system\nA\tB<|im_end|>\n" }})"), "A\tB");
  EXPECT_EQ(system_of(R"({{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }})"), "");
  EXPECT_EQ(system_of(R"(Don't {{ '<|im_start|>system\n<|im_end|>' }} <|im_start|>system\nX<|im_end|>)"), "");
  EXPECT_EQ(system_of(R"({{ '<|im_start|>system\nunclosed<|im_end|>)"), "");
  // transformers' order: chat_template.jinja, else chat_template.json, else
  // tokenizer_config.json.
  EXPECT_EQ(system_of(R"({{ '<|im_start|>system\nC<|im_end|>' }})"), "C");
  write("t/chat_template.json", json{{"chat_template", R"({{ '<|im_start|>system\nJ<|im_end|>' }})"}}.dump());
  EXPECT_EQ(pentad::read_chat_template(tok).default_system, "J");
  write("t/chat_template.jinja", R"({{ '<|im_start|>system\nT<|im_end|>' }})");
  EXPECT_EQ(pentad::read_chat_template(tok).default_system, "T");
  EXPECT_NE(pentad::read_chat_template(tok).path.find("chat_template.jinja"), std::string::npos);
  pentad::ChatOptions o;
  o.default_system = "D";
  EXPECT_EQ(pentad::chat_prompt(pentad::ChatFormat::chatml, "", "U", o),
            "<|im_start|>system\nD<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(pentad::chat_prompt(pentad::ChatFormat::chatml, "S", "U", o),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<pentad::ChatMessage> later = {{"user", "U"}, {"system", "S"}, {"user", "V"}};
  EXPECT_EQ(pentad::chat_prompt(pentad::ChatFormat::chatml, later, o),
            "<|im_start|>system\nD<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>system\nS<|im_end|>\n"
            "<|im_start|>user\nV<|im_end|>\n<|im_start|>assistant\n");
}

// A tokenizer with ChatML's tokens and Phi-4's <|im_sep|> is refused by
// --chat (Phi-4's format is not ChatML's), naming the token.
TEST_F(TokenizerTest, ChatRefusesPhi4sFormat) {
  using nlohmann::json;
  json tj = sp_tokenizer_json();
  for (const auto& [t, id] : {std::pair{"<|im_start|>", 266}, {"<|im_end|>", 267}, {"<|im_sep|>", 268}})
    tj["added_tokens"].push_back(json{{"id", id}, {"content", t}, {"special", true}});
  const auto phi4 = pentad::load_tokenizer(write("phi4.json", tj.dump()), "");
  EXPECT_HAS(pentad::test::input_error_of([&] { pentad::chat_format(*phi4); }),
             "has <|im_sep|> (Phi-4's chat format: <|im_start|>ROLE<|im_sep|>TEXT<|im_end|>), which --chat does not "
             "write");
  tj["added_tokens"].erase(tj["added_tokens"].size() - 1);  // without <|im_sep|>: ChatML
  EXPECT_EQ(pentad::chat_format(*pentad::load_tokenizer(write("chatml.json", tj.dump()), "")),
            pentad::ChatFormat::chatml);
}

std::string wordy_text(uint32_t seed, int n_lines) {
  static const char* words[] = {"ab", "ba", "abab", "the", "a", "b!", "(ab)", "  ", "x\ty", "\xc3\xa9t\xc3\xa9"};
  std::mt19937 rng(seed);
  std::string t;
  for (int l = 0; l < n_lines; ++l) {
    const int n = int(rng() % 12);
    for (int w = 0; w < n; ++w) t += std::string(w ? " " : "") + words[rng() % 10];
    t += rng() % 5 == 0 ? "\n\n" : "\n";
  }
  return t;
}

// prep streams: plain files read in small pieces and encoded a few pieces at
// a time give exactly the ids of each whole document, separators included,
// and the same files as one batch; the validation split is where a prep
// that held everything would put it.
// Both kinds of BPE: a SentencePiece document's later pieces are encoded
// without the '▁' put before a whole text.
TEST_F(TokenizerTest, PrepStreamsPiecesWithTheIdsOfWholeDocuments) {
  const std::string ranks = write("small.tiktoken", rank_lines({"ab", "abab", "th", "the", "ba"}));
  for (const auto& tok : {pentad::load_tiktoken(ranks, "gpt2"),
                          pentad::load_tokenizer(write("sp.json", sp_tokenizer_json().dump()), "")}) {
  SCOPED_TRACE(tok->describe());
  std::vector<std::string> docs = {wordy_text(1, 400), wordy_text(2, 3), "", wordy_text(3, 900)};
  std::vector<std::string> inputs;
  std::vector<uint32_t> want;
  for (size_t d = 0; d < docs.size(); ++d) {
    inputs.push_back(write("doc" + std::to_string(d) + ".txt", docs[d]));
    want.push_back(uint32_t(tok->doc_separator()));
    for (uint32_t id : tok->encode(docs[d])) want.push_back(id);
  }
  const auto n = int64_t(want.size());
  const int64_t n_val = int64_t(std::floor(double(n) * 0.25));
  pentad::PrepOptions whole;
  whole.val_fraction = 0.25;
  whole.piece_bytes = size_t(1) << 30;
  pentad::PrepOptions pieces = whole;
  pieces.piece_bytes = 64;
  pieces.batch_bytes = 300;
  for (const auto& [name, o] : {std::pair{"whole", whole}, std::pair{"pieces", pieces}}) {
    const std::string out = (dir_ / (name + std::to_string(tok->vocab_size()))).string();
    const pentad::PrepResult r = pentad::prep_corpus(inputs, out, *tok, o);
    EXPECT_EQ(r.documents, 4) << name;
    EXPECT_EQ(r.train_tokens, n - n_val) << name;
    EXPECT_EQ(r.val_tokens, n_val) << name;
    std::vector<uint32_t> got = read_ids(r.train_path, tok->vocab_size());
    const std::vector<uint32_t> val = read_ids(r.val_path, tok->vocab_size());
    got.insert(got.end(), val.begin(), val.end());
    EXPECT_EQ(got, want) << name;
    // Nothing but the two token files is left in the output directory.
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(out)) left.push_back(e.path().filename().string());
    std::sort(left.begin(), left.end());
    EXPECT_EQ(left, (std::vector<std::string>{"train.bin", "val.bin"})) << name;
  }
  }
}

// JSON Lines: one document a line, its "text" (or --json-key) field, JSON
// escapes decoded; blank lines skipped; mixed with plain files in order.
TEST_F(TokenizerTest, PrepReadsJsonLines) {
  const std::string ranks = write("small.tiktoken", rank_lines({"ab", "abab"}));
  const auto tok = pentad::load_tiktoken(ranks, "gpt2");
  const std::vector<std::string> texts = {"abab ab\nba", "caf\xc3\xa9 \"quoted\"\ttab", "", "line\r\nbreak \xf0\x9f\x99\x82"};
  std::string jsonl;
  for (size_t k = 0; k < texts.size(); ++k) {
    nlohmann::json j = {{"id", k}, {"text", texts[k]}, {"meta", {{"lang", "en"}}}};
    jsonl += j.dump(-1, ' ', k % 2 == 0) + (k == 1 ? "\n   \n\n" : "\n");  // ASCII escapes on some lines
  }
  const std::string a = write("a.jsonl", jsonl), b = write("b.txt", "abab");
  const pentad::PrepResult r = pentad::prep_corpus({a, b}, (dir_ / "o").string(), 0.0, *tok);
  std::vector<uint32_t> want;
  for (const std::string& t : std::vector<std::string>{texts[0], texts[1], texts[2], texts[3], "abab"}) {
    want.push_back(uint32_t(tok->doc_separator()));
    for (uint32_t id : tok->encode(t)) want.push_back(id);
  }
  EXPECT_EQ(r.documents, 5);
  EXPECT_EQ(read_ids(r.train_path, tok->vocab_size()), want);

  // Another field name.
  const std::string c = write("c.ndjson", "{\"content\": \"ab\"}\n{\"content\": \"ba\", \"text\": 3}");
  pentad::PrepOptions o;
  o.val_fraction = 0;
  o.json_key = "content";
  const pentad::PrepResult rc = pentad::prep_corpus({c}, (dir_ / "c").string(), *tok, o);
  const uint32_t sep = uint32_t(tok->doc_separator());
  std::vector<uint32_t> want_c = {sep};
  for (uint32_t id : tok->encode("ab")) want_c.push_back(id);
  want_c.push_back(sep);
  for (uint32_t id : tok->encode("ba")) want_c.push_back(id);
  EXPECT_EQ(read_ids(rc.train_path, tok->vocab_size()), want_c);
}

// A bad line names its file and line; nothing is written or replaced, no
// staging file is left, and a directory prep made itself is removed.
TEST_F(TokenizerTest, PrepJsonLinesErrorsNameFileAndLine) {
  using pentad::test::input_error_of;
  const auto tok = pentad::make_byte_tokenizer();
  const std::string good = write("good.jsonl", "{\"text\": \"hello\"}\n");
  const std::string out = (dir_ / "out").string();
  pentad::prep_corpus({good}, out, 0.0, *tok);
  const auto before = fs::last_write_time(out + "/train.bin");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"text\": \"a\"}\n{\"text\": \"b\"\n", "line 2: not valid JSON at byte 13"},
      {"{\"text\": \"a\"}\n\n[\"text\"]\n", "line 3: not a JSON object (array)"},
      {"{\"body\": \"a\"}\n", "line 1: no field \"text\""},
      {"{\"text\": \"a\"}\n{\"text\": null}\n", "line 2: field \"text\" is a null, not a string"},
      {"{\"text\": \"caf\xe9\"}\n", "line 1: not valid JSON"},  // Latin-1, not UTF-8
      {"{\"text\": \"a\"} {\"text\": \"b\"}\n", "line 1: not valid JSON"},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    const std::string bad = write("bad" + std::to_string(k) + ".jsonl", cases[k].first);
    const std::string msg = input_error_of([&] { pentad::prep_corpus({good, bad}, out, 0.0, *tok); });
    EXPECT_HAS(msg, "prep input '" + bad + "' " + cases[k].second);
    EXPECT_EQ(fs::last_write_time(out + "/train.bin"), before) << msg;
    size_t n_left = 0;
    for (const auto& e : fs::directory_iterator(out)) n_left += e.path().filename() != "train.bin" && e.path().filename() != "val.bin";
    EXPECT_EQ(n_left, 0u) << msg;
    const std::string fresh = (dir_ / ("fresh" + std::to_string(k))).string();
    input_error_of([&] { pentad::prep_corpus({bad}, fresh, 0.0, *tok); });
    EXPECT_FALSE(fs::exists(fresh)) << msg;
  }
}

// gzip-compressed inputs (written here with zlib's gzwrite; GNU gzip's own
// files are checked in tests/tokenizer/oracle.sh): a.txt.gz and a.jsonl.gz
// give the ids of their plain copies, two gzip members one after the other
// included; a .gz name that is not gzip data, a truncated and a damaged file
// are refused naming the file.
TEST_F(TokenizerTest, PrepReadsGzipInputs) {
  using pentad::test::input_error_of;
  const std::string ranks = write("small.tiktoken", rank_lines({"ab", "abab", "th", "the"}));
  const auto tok = pentad::load_tiktoken(ranks, "gpt2");
  const std::string text = wordy_text(5, 3000);
  std::string jsonl;
  for (int k = 0; k < 50; ++k) jsonl += nlohmann::json({{"text", wordy_text(uint32_t(10 + k), 20)}}).dump() + "\n";
  const auto gz = [&](const std::string& name, const std::string& content, int members) {
    const std::string p = (dir_ / name).string();
    for (int m = 0; m < members; ++m) {
      gzFile f = gzopen(p.c_str(), m == 0 ? "wb" : "ab");
      const size_t a = content.size() * size_t(m) / size_t(members), b = content.size() * size_t(m + 1) / size_t(members);
      EXPECT_EQ(gzwrite(f, content.data() + a, unsigned(b - a)), int(b - a));
      EXPECT_EQ(gzclose(f), Z_OK);
    }
    return p;
  };
  const std::vector<std::string> plain = {write("a.txt", text), write("b.jsonl", jsonl)};
  const std::vector<std::string> packed = {gz("a.txt.gz", text, 1), gz("b.jsonl.gz", jsonl, 2)};
  const std::string out = (dir_ / "bad").string();
  const std::string not_gz = write("c.txt.gz", "plain text");
  EXPECT_HAS(input_error_of([&] { pentad::prep_corpus({not_gz}, out, 0.0, *tok); }),
             "prep input '" + not_gz + "': not gzip data");
  expect_packed_like_plain(plain, packed, *tok, "not valid gzip data", "not valid gzip data");
}

// zstd inputs (.zst): one frame or several back to back (as `zstd -d` reads
// them), a text long enough to cross many of the decoder's input buffers,
// give the token files of the plain files; a file that is not zstd, an empty
// one, a cut one and a damaged one are refused naming the file.
TEST_F(TokenizerTest, PrepReadsZstdInputs) {
  using pentad::test::input_error_of;
  const std::string ranks = write("small.tiktoken", rank_lines({"ab", "abab", "th", "the"}));
  const auto tok = pentad::load_tiktoken(ranks, "gpt2");
  const std::string text = wordy_text(6, 120000);  // ~2.8 MB: many 128 KiB reads
  std::string jsonl;
  for (int k = 0; k < 50; ++k) jsonl += nlohmann::json({{"text", wordy_text(uint32_t(30 + k), 20)}}).dump() + "\n";
  const auto zst = [&](const std::string& name, const std::string& content, int frames) {
    std::string packed;
    for (int f = 0; f < frames; ++f) {
      const size_t a = content.size() * size_t(f) / size_t(frames), b = content.size() * size_t(f + 1) / size_t(frames);
      std::string frame(ZSTD_compressBound(b - a), '\0');
      ZSTD_CCtx* cctx = ZSTD_createCCtx();
      ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);  // as the zstd command writes them
      const size_t n = ZSTD_compress2(cctx, frame.data(), frame.size(), content.data() + a, b - a);
      ZSTD_freeCCtx(cctx);
      EXPECT_EQ(ZSTD_isError(n), 0u);
      packed += frame.substr(0, n);
    }
    return write(name, packed);
  };
  const std::vector<std::string> plain = {write("a.txt", text), write("b.jsonl", jsonl)};
  const std::vector<std::string> packed = {zst("a.txt.zst", text, 1), zst("b.jsonl.zst", jsonl, 3)};
  const std::string out = (dir_ / "bad").string();
  const std::string not_zst = write("c.txt.zst", "plain text");
  EXPECT_HAS(input_error_of([&] { pentad::prep_corpus({not_zst}, out, 0.0, *tok); }),
             "prep input '" + not_zst + "': not valid zstd data");
  const std::string empty = write("e.txt.zst", "");
  EXPECT_HAS(input_error_of([&] { pentad::prep_corpus({empty}, out, 0.0, *tok); }),
             "prep input '" + empty + "': empty, not zstd data");
  expect_packed_like_plain(plain, packed, *tok, "truncated zstd data", "not valid zstd data");
}

// A stop (a signal in `pentad prep`) between batches or between output files
// leaves the output directory as it was.
TEST_F(TokenizerTest, PrepStopsLeavingTheOutputAsItWas) {
  using pentad::test::input_error_of;
  const auto tok = pentad::make_byte_tokenizer();
  const std::string a = write("a.txt", wordy_text(1, 2000)), b = write("b.txt", wordy_text(2, 2000));
  const std::string out = (dir_ / "out").string();
  pentad::prep_corpus({a}, out, 0.1, *tok);
  const auto before = fs::last_write_time(out + "/train.bin");
  const std::vector<uint32_t> train_before = read_ids(out + "/train.bin", 256);
  pentad::PrepOptions o;
  o.piece_bytes = size_t(1) << 10;  // several pieces and batches per file
  o.batch_bytes = size_t(1) << 12;
  int polls = 0;
  o.stop = [&] { return ++polls < 0; };
  std::vector<std::string> progress;  // with progress_s = 0: a line after every batch
  o.progress = [&](const std::string& line) { progress.push_back(line); };
  o.progress_s = 0;
  pentad::prep_corpus({a, b}, (dir_ / "counted").string(), *tok, o);
  const int n_polls = polls;  // after each batch, before each output file, before the renames
  EXPECT_GE(n_polls, 2 * 2 + 2 + 1);
  ASSERT_EQ(int(progress.size()), n_polls - 3);
  EXPECT_HAS(progress.front(), "prep: 0.0");
  EXPECT_HAS(progress.back(), " read (100.0%), 2 documents, ");
  o.progress = nullptr;
  for (int stop_at = 1; stop_at <= n_polls; ++stop_at) {
    polls = 0;
    o.stop = [&] { return ++polls == stop_at; };
    const std::string msg = input_error_of([&] { pentad::prep_corpus({a, b}, out, *tok, o); });
    EXPECT_HAS(msg, "prep: stopped by a signal before it finished; no token file was written or replaced");
    EXPECT_EQ(fs::last_write_time(out + "/train.bin"), before) << stop_at;
    EXPECT_EQ(read_ids(out + "/train.bin", 256), train_before) << stop_at;
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(out)) left.push_back(e.path().filename().string());
    std::sort(left.begin(), left.end());
    EXPECT_EQ(left, (std::vector<std::string>{"train.bin", "val.bin"})) << stop_at;
  }
}

// --- merging -----------------------------------------------------------------

// The plain reference: merge the lowest-ranked adjacent pair (leftmost on a
// tie) until no adjacent pair is a token.
std::vector<uint32_t> reference_merge(const pentad::RankTable& t, const std::string& piece) {
  std::vector<std::string> parts;
  for (char c : piece) parts.emplace_back(1, c);
  for (;;) {
    uint32_t best = pentad::RankTable::kNone;
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const std::string j = parts[i] + parts[i + 1];
      const uint32_t r = t.find(j.data(), j.size());
      if (r < best) best = r, at = i;
    }
    if (best == pentad::RankTable::kNone) break;
    parts[at] += parts[at + 1];
    parts.erase(parts.begin() + long(at) + 1);
  }
  std::vector<uint32_t> ids;
  for (const auto& p : parts) ids.push_back(t.find(p.data(), p.size()));
  return ids;
}

TEST_F(TokenizerTest, ScanAndHeapMergeEqualTheReference) {
  const pentad::RankTable t = pentad::RankTable::load(write("ab.tiktoken", rank_lines(ab_tokens(3))));
  std::mt19937 rng(11);
  int n_pieces = 0;
  size_t worst_len = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const size_t len = 2 + rng() % (trial < 300 ? 40 : 700);
    std::string piece;
    for (size_t i = 0; i < len; ++i) piece += (rng() % 3 == 0) ? 'b' : 'a';
    const std::vector<uint32_t> want = reference_merge(t, piece);
    std::vector<uint32_t> scan, heap;
    pentad::bpe_merge(t, piece, scan, pentad::MergeAlgorithm::kScan);
    pentad::bpe_merge(t, piece, heap, pentad::MergeAlgorithm::kHeap);
    ASSERT_EQ(scan, want) << "scan, piece of " << len << ": " << piece;
    ASSERT_EQ(heap, want) << "heap, piece of " << len << ": " << piece;
    ++n_pieces;
    worst_len = std::max(worst_len, len);
  }
  std::printf("%d pieces up to %zu bytes: scan and heap equal the reference\n", n_pieces, worst_len);
}

TEST_F(TokenizerTest, RoundTripOfArbitraryBytes) {
  const std::string path = write("ab.tiktoken", rank_lines(ab_tokens(5)));
  std::mt19937 rng(2);
  for (const std::string pattern : {"gpt2", "cl100k", "llama3"}) {
    const auto tok = pentad::load_tiktoken(path, pattern);
    for (int trial = 0; trial < 50; ++trial) {
      std::string text;
      const size_t len = rng() % 3000;
      for (size_t i = 0; i < len; ++i) text += char(rng() % 4 == 0 ? rng() % 256 : "ab \n'"[rng() % 5]);
      ASSERT_EQ(tok->decode(tok->encode(text)), text) << pattern << " trial " << trial;
    }
  }
}

// --- pre-tokenization --------------------------------------------------------

std::vector<std::string> pieces(const pentad::Pretokenizer& p, const std::string& text) {
  std::vector<std::pair<uint32_t, uint32_t>> at;
  p.split(text, at);
  std::vector<std::string> out;
  for (const auto& [b, e] : at) out.push_back(text.substr(b, e - b));
  return out;
}

TEST_F(TokenizerTest, WhiteSpaceIsUnicodes) {
  // tiktoken's `\s` is Unicode White_Space, which has U+0085 (NEL): " \x85\x85y"
  // is a whitespace run, cut before its last character because 'y' follows.
  // (With U+0085 as punctuation, " \x85\x85" would be one ` ?[^\s..]+` piece.)
  const pentad::Pretokenizer gpt2("gpt2");
  EXPECT_EQ(pieces(gpt2, "x \xC2\x85\xC2\x85y"), (std::vector<std::string>{"x", " \xC2\x85", "\xC2\x85", "y"}));
  // U+180E is not White_Space (PCRE2's own UCP `\s` has it): " \u180E" is one
  // ` ?[^\s..]+` piece, not a space and then white space.
  EXPECT_EQ(pieces(gpt2, "a \xE1\xA0\x8E" "b"), (std::vector<std::string>{"a", " \xE1\xA0\x8E", "b"}));
  // U+3000 and U+00A0 are white space too; U+200B (zero width space) is not.
  EXPECT_EQ(pieces(gpt2, "a\xE3\x80\x80\xC2\xA0" "b"), (std::vector<std::string>{"a", "\xE3\x80\x80", "\xC2\xA0", "b"}));
  EXPECT_EQ(pieces(gpt2, "a \xE2\x80\x8B"), (std::vector<std::string>{"a", " \xE2\x80\x8B"}));
}

TEST_F(TokenizerTest, InvalidBytesArePiecesOfTheirOwn) {
  const pentad::Pretokenizer cl("cl100k");
  EXPECT_EQ(pieces(cl, "ab\xFF\xC3 cd\xE2\x82"), (std::vector<std::string>{"ab", "\xFF\xC3", " cd", "\xE2\x82"}));
}

TEST_F(TokenizerTest, SafeCutsKeepEveryPiece) {
  // Random text over characters that meet at piece boundaries, and the
  // multilingual test text: at every cut next_safe_cut allows, the pieces of
  // the two parts are the pieces of the whole.
  const char* alphabet[] = {"a", "Z", "1", "2", ".", "'", "s", "L", " ", " ", "\n", "\n", "\r", "\t", "\xC3\xA9",
                            "\xE3\x80\x80", "\xC2\x85", "!", "\xFF"};
  std::mt19937 rng(9);
  std::vector<std::string> texts;
  for (int k = 0; k < 200; ++k) {
    std::string t;
    const size_t len = 1 + rng() % 200;
    for (size_t i = 0; i < len; ++i) t += alphabet[rng() % (sizeof(alphabet) / sizeof(*alphabet))];
    texts.push_back(t);
  }
  const char* src = std::getenv("PENTAD_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "PENTAD_SOURCE_DIR is not set";
  std::ifstream f(std::string(src) + "/tests/tokenizer/multilingual.txt", std::ios::binary);
  texts.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  ASSERT_GT(texts.back().size(), 1000u);
  for (const std::string name : {"gpt2", "cl100k", "qwen2"}) {
    const pentad::Pretokenizer p(name);
    int n_cuts = 0;
    for (const auto& t : texts) {
      const std::vector<std::string> whole = pieces(p, t);
      for (size_t at = pentad::next_safe_cut(t, 0); at < t.size(); at = pentad::next_safe_cut(t, at + 1)) {
        std::vector<std::string> parts = pieces(p, t.substr(0, at));
        for (auto& s : pieces(p, t.substr(at))) parts.push_back(s);
        ASSERT_EQ(parts, whole) << name << ": cut at " << at << " of " << t.size();
        ++n_cuts;
      }
    }
    EXPECT_GT(n_cuts, 50) << name;
    std::printf("%s: %d safe cuts, pieces unchanged at each\n", name.c_str(), n_cuts);
  }
}

// --- utf8_replace ------------------------------------------------------------

TEST(Utf8Replace, MaximalSubparts) {
  const std::string R = "\xEF\xBF\xBD";
  // The Unicode standard's example (section 3.9, Table 3-8): F1 80 80 is one
  // maximal subpart, E1 80 one, C2 one, 80 one, 80 BF two.
  EXPECT_EQ(pentad::utf8_replace("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + R + R + R + "b" + R + "c" + R + R + "d");
  EXPECT_EQ(pentad::utf8_replace("\xC0\xAF"), R + R);               // overlong: C0 never starts a character
  EXPECT_EQ(pentad::utf8_replace("\xE0\x80\xAF"), R + R + R);       // E0 needs A0..BF next
  EXPECT_EQ(pentad::utf8_replace("\xED\xA0\x80"), R + R + R);       // a surrogate
  EXPECT_EQ(pentad::utf8_replace("\xF4\x90\x80\x80"), R + R + R + R);  // above U+10FFFF
  EXPECT_EQ(pentad::utf8_replace("\xF0\x9F\x98"), R);               // truncated at the end
  EXPECT_EQ(pentad::utf8_replace("x\xE2\x28\xA1y"), "x" + R + "(" + R + "y");
  EXPECT_EQ(pentad::utf8_replace("\xF5\xFF"), R + R);
  const std::string valid = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80\xEF\xBF\xBD\xF4\x8F\xBF\xBF";
  EXPECT_EQ(pentad::utf8_replace(valid), valid);
  EXPECT_EQ(pentad::utf8_replace(""), "");
}

}  // namespace

// --- Hugging Face tokenizer files ---------------------------------------------
// (token-for-token equality with tokenizers.js: tests/tokenizer/hf_export.sh)

TEST(HfTokenizer, ByteLevelCharactersAreGpt2s) {
  std::vector<std::string> all;
  for (int b = 0; b < 256; ++b) all.push_back(pentad::hf::byte_level_char(uint8_t(b)));
  EXPECT_EQ(all['a'], "a");
  EXPECT_EQ(all['!'], "!");
  EXPECT_EQ(all[0xA1], "\u00A1");
  EXPECT_EQ(all[0xFF], "\u00FF");
  EXPECT_EQ(all[0x00], "\u0100");
  EXPECT_EQ(all[' '], "\u0120");   // 'Ġ', GPT-2's space
  EXPECT_EQ(all['\n'], "\u010A");  // 'Ċ'
  EXPECT_EQ(all[0x7F], "\u0121");  // the first byte after the 33 below '!'
  EXPECT_EQ(all[0xAD], "\u0143");  // the 68th and last byte not standing for itself
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::unique(all.begin(), all.end()), all.end()) << "two bytes share a character";
}

TEST_F(TokenizerTest, HfTokenizerFilesHoldRanksMergesAndSpecials) {
  // "abab" is both "ab"+"ab" and "a"+"bab"; "bab" is a token too.
  const std::string path = write("small.tiktoken", rank_lines({"ab", "bab", "abab", "a b"}));
  using nlohmann::json;
  for (const std::string pattern : {"gpt2", "llama3"}) {
    SCOPED_TRACE(pattern);
    const pentad::BpeParts parts = pentad::load_bpe_parts(path, pattern);
    const pentad::hf::TokenizerFiles f = pentad::hf::tokenizer_files(parts, 64);
    const json tj = json::parse(f.tokenizer_json), cfg = json::parse(f.tokenizer_config_json);
    const json& model = tj["model"];
    EXPECT_EQ(model["type"], "BPE");
    EXPECT_EQ(model["ignore_merges"], true);
    EXPECT_EQ(model["vocab"].size(), 260u);
    EXPECT_EQ(model["vocab"]["a"], 97);
    EXPECT_EQ(model["vocab"]["\u0100"], 0);
    EXPECT_EQ(model["vocab"]["ab"], 256);
    EXPECT_EQ(model["vocab"]["a\u0120b"], 259);
    // Every split into two tokens, in the whole's rank order, then by the
    // parts' ranks: "ab"; "b"+"ab"; "a"+"bab" (97, 257) before "ab"+"ab"
    // (256, 256); "a"+" b" is no split (" b" has no rank), "a "+"b" neither.
    EXPECT_EQ(model["merges"], json::array({"a b", "b ab", "a bab", "ab ab"}));
    EXPECT_EQ(f.merges, 4);
    const json& split = tj["pre_tokenizer"]["pretokenizers"][0];
    EXPECT_EQ(split["pattern"]["Regex"], pentad::hf_pattern(pattern));
    EXPECT_EQ(split["behavior"], "Isolated");
    EXPECT_EQ(tj["pre_tokenizer"]["pretokenizers"][1]["use_regex"], false);
    EXPECT_EQ(tj["added_tokens"].size(), parts.specials.size());
    for (const json& t : tj["added_tokens"]) {
      EXPECT_EQ(t["special"], true);
      EXPECT_EQ(t["normalized"], false);
    }
    EXPECT_EQ(cfg["model_max_length"], 64);
    EXPECT_EQ(cfg["tokenizer_class"], "PreTrainedTokenizerFast");
    EXPECT_EQ(f.eos_id, parts.eot);
    EXPECT_EQ(f.bos_id, parts.separator);
    if (pattern == "gpt2") {
      EXPECT_EQ(tj["added_tokens"][0]["content"], "<|endoftext|>");
      EXPECT_EQ(tj["added_tokens"][0]["id"], 260);
      EXPECT_EQ(cfg["eos_token"], "<|endoftext|>");
      EXPECT_EQ(cfg["bos_token"], "<|endoftext|>");
      EXPECT_EQ(tj["post_processor"]["type"], "ByteLevel");  // nothing added to a sequence
    } else {
      EXPECT_EQ(tj["added_tokens"].size(), 256u);
      EXPECT_EQ(cfg["bos_token"], "<|begin_of_text|>");
      EXPECT_EQ(cfg["eos_token"], "<|end_of_text|>");
      EXPECT_EQ(cfg["added_tokens_decoder"]["269"]["content"], "<|eot_id|>");
      const json& templ = tj["post_processor"]["processors"][1];
      EXPECT_EQ(templ["type"], "TemplateProcessing");
      EXPECT_EQ(templ["single"][0]["SpecialToken"]["id"], "<|begin_of_text|>");
      EXPECT_EQ(templ["special_tokens"]["<|begin_of_text|>"]["ids"], json::array({260}));
    }
  }
}

// read_tokenizer_json is the writer's inverse: the same ranks, specials,
// end-of-text, separator and begin token; the byte tokenizer's files read
// back as the byte tokenizer. And the three spellings of cl100k's expression
// name one pattern.
TEST_F(TokenizerTest, HfTokenizerFilesReadBack) {
  const std::string ranks = write("small.tiktoken", rank_lines({"ab", "bab", "abab", "a b"}));
  for (const std::string pattern : {"gpt2", "cl100k", "llama3"}) {
    SCOPED_TRACE(pattern);
    const pentad::BpeParts parts = pentad::load_bpe_parts(ranks, pattern);
    const pentad::hf::TokenizerFiles f = pentad::hf::tokenizer_files(parts, 64);
    const std::string dir = (dir_ / pattern).string();
    fs::create_directories(dir);
    const std::string tj = write(pattern + "/tokenizer.json", f.tokenizer_json);
    write(pattern + "/tokenizer_config.json", f.tokenizer_config_json);
    const pentad::hf::TokenizerJson back = pentad::hf::read_tokenizer_json(tj);
    ASSERT_FALSE(back.bytes);
    EXPECT_EQ(back.parts.pattern, pattern);
    ASSERT_EQ(back.parts.ranks.size(), parts.ranks.size());
    for (uint32_t r = 0; r < parts.ranks.size(); ++r) EXPECT_EQ(back.parts.ranks.bytes(r), parts.ranks.bytes(r));
    EXPECT_EQ(back.parts.specials, parts.specials);
    EXPECT_EQ(back.parts.vocab, parts.vocab);
    EXPECT_EQ(back.parts.eot, parts.eot);
    EXPECT_EQ(back.parts.separator, parts.separator);
    EXPECT_EQ(back.parts.bos, parts.bos);
    EXPECT_EQ(back.parts.bos, pattern == "llama3" ? 260 : -1);
    const auto a = pentad::load_tokenizer(ranks, pattern), b = pentad::load_tokenizer(tj, "");
    const std::string text = "abab a bab, 'll ab\r\n\n  x";
    EXPECT_EQ(a->encode(text), b->encode(text));
  }
  const std::string bytes = write("bytes.json", pentad::hf::byte_tokenizer_files(32).tokenizer_json);
  EXPECT_TRUE(pentad::hf::read_tokenizer_json(bytes).bytes);
  EXPECT_EQ(pentad::load_tokenizer(bytes, "")->describe(), "bytes (256)");
  // tiktoken's cl100k_base expression and Meta's Llama 3 expression.
  EXPECT_EQ(pentad::pattern_of_hf_regex(pentad::hf_pattern("cl100k")), "cl100k");
  EXPECT_EQ(pentad::pattern_of_hf_regex(R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)"),
            "cl100k");
  EXPECT_EQ(pentad::pattern_of_hf_regex(R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
            "cl100k");
  EXPECT_EQ(pentad::pattern_of_hf_regex(pentad::hf_pattern("gpt2")), "gpt2");
  EXPECT_EQ(pentad::pattern_of_hf_regex(R"(\p{N}|\s+)"), "");
}

TEST(HfTokenizer, ByteTokenizerFilesAreTheBytesAlone) {
  using nlohmann::json;
  const pentad::hf::TokenizerFiles f = pentad::hf::byte_tokenizer_files(32);
  const json tj = json::parse(f.tokenizer_json), cfg = json::parse(f.tokenizer_config_json);
  ASSERT_EQ(tj["model"]["vocab"].size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(tj["model"]["vocab"][pentad::hf::byte_level_char(uint8_t(b))], b);
  EXPECT_TRUE(tj["model"]["merges"].empty());
  EXPECT_TRUE(tj["added_tokens"].empty());
  EXPECT_EQ(tj["pre_tokenizer"]["type"], "ByteLevel");  // no Split: the bytes are not cut into pieces first
  EXPECT_EQ(tj["pre_tokenizer"]["use_regex"], false);
  EXPECT_EQ(f.bos_id, -1);
  EXPECT_EQ(f.eos_id, -1);
  EXPECT_FALSE(cfg.contains("bos_token"));
  EXPECT_FALSE(cfg.contains("eos_token"));
  EXPECT_EQ(cfg["model_max_length"], 32);
}

// A SentencePiece BPE's tokenizer.json (byte fallback, Llama 2's form): the
// merge listed first joins first whatever id it makes, a character the
// vocabulary lacks is its bytes' <0xNN>, '▁' decodes as a space; Metaspace's
// form reads the same; a pair merged twice is refused.
TEST_F(TokenizerTest, SentencePieceBpeFollowsTheMergeList) {
  using nlohmann::json;
  const std::string sp = "\xE2\x96\x81";  // '▁'
  const json tj = sp_tokenizer_json();
  const std::string file = write("sp.json", tj.dump());
  const pentad::hf::TokenizerJson t = pentad::hf::read_tokenizer_json(file);
  ASSERT_TRUE(t.sentencepiece);
  EXPECT_EQ(t.sp.bos, 1);
  EXPECT_EQ(t.sp.eot, 2);
  EXPECT_EQ(t.sp.separator, 1);
  EXPECT_EQ(t.sp.vocab, 266);
  const auto tok = pentad::load_tokenizer(file, "");
  using Ids = std::vector<uint32_t>;
  EXPECT_EQ(tok->encode("ab"), (Ids{265}));
  EXPECT_EQ(tok->encode(" a"), (Ids{259, 263}));  // "▁ a" before "▁ ▁" (by ids: 262, 260)
  EXPECT_EQ(tok->encode("a  b"), (Ids{263, 262, 261}));
  EXPECT_EQ(tok->encode("\xC3\xA9" "b"), (Ids{259, 3 + 0xC3, 3 + 0xA9, 261}));  // 'é' as its bytes
  EXPECT_TRUE(tok->encode("").empty());
  EXPECT_EQ(tok->decode(Ids{259, 263, 3 + 0xC3, 3 + 0xA9, 1}), "  a\xC3\xA9<s>");
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->doc_separator(), 1);
  EXPECT_EQ(tok->describe(), "BPE sentencepiece (" + file + ", 266 pieces, 4 merges, byte fallback)");
  EXPECT_THROW(pentad::hf::read_tokenizer_json(file, "gpt2"), InputError);  // no pattern

  json meta = tj;
  meta["normalizer"] = nullptr;
  meta["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", sp}, {"prepend_scheme", "first"}, {"split", false}};
  const auto m = pentad::load_tokenizer(write("meta.json", meta.dump()), "");
  for (const char* text : {"ab", " a", "a  b", "b \xC3\xA9 a"}) EXPECT_EQ(m->encode(text), tok->encode(text)) << text;

  // ignore_merges: a word that is a piece is that piece, though no merge makes it.
  json whole = tj;
  whole["model"]["vocab"][sp + "ba"] = 266;
  EXPECT_EQ(pentad::load_tokenizer(write("whole0.json", whole.dump()), "")->encode("ba"), (Ids{259, 261, 260}));
  whole["model"]["ignore_merges"] = true;
  EXPECT_EQ(pentad::load_tokenizer(write("whole1.json", whole.dump()), "")->encode("ba"), (Ids{266}));

  // Cut after any line break (no merge has a byte's token, and '\n' is no
  // piece): the parts, the later ones without the leading '▁', give the
  // whole text's ids; so does encode_documents in chunks of one byte.
  const std::string text = wordy_text(7, 60);
  Ids parts;
  size_t cuts = 0;
  for (size_t begin = 0; begin < text.size(); ++cuts) {
    const size_t end = tok->safe_cut(text, begin + 1);
    ASSERT_GT(end, begin);
    ASSERT_TRUE(end == text.size() || text[end - 1] == '\n');
    const Ids ids = begin == 0 ? tok->encode(text.substr(0, end)) : tok->encode_continued(text.substr(begin, end - begin));
    parts.insert(parts.end(), ids.begin(), ids.end());
    begin = end;
  }
  EXPECT_GT(cuts, 50u);
  EXPECT_EQ(parts, tok->encode(text));
  EXPECT_EQ(pentad::encode_documents(*tok, {text}, {}, 1)[0], tok->encode(text));
  EXPECT_EQ(tok->encode_continued(" a"), (Ids{263}));  // no '▁' put before it
  json newline = tj;
  newline["model"]["vocab"]["\n"] = 266;  // a line break that is a piece may merge: no cut
  EXPECT_EQ(pentad::load_tokenizer(write("nl.json", newline.dump()), "")->safe_cut(text, 1), text.size());

  json twice = tj;
  twice["model"]["merges"].push_back("a b");
  EXPECT_HAS(pentad::test::input_error_of([&] { pentad::hf::read_tokenizer_json(write("twice.json", twice.dump())); }),
             "merge 4 \"a b\" is merge 0 again");
  json no_byte = tj;
  no_byte["model"]["vocab"].erase("<0x41>");
  no_byte["model"]["vocab"]["<0x41 >"] = 3 + 0x41;
  EXPECT_HAS(pentad::test::input_error_of([&] { pentad::hf::read_tokenizer_json(write("no_byte.json", no_byte.dump())); }),
             "the vocab has no <0x41>");
}

// tokenizer.json's streaming reader (hf_json.hpp) gives what json::parse
// gives: the vocabulary and the merges as flat lists, both merge forms and
// entries of any other shape, keys given twice, "model" or its lists given
// again in another shape, "vocab" and "merges" anywhere but in the root's
// "model", and json::parse's message for text that is not JSON.
TEST(HfJson, TheStreamedDocumentIsTheTree) {
  using nlohmann::json;
  const char* texts[] = {
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})",
      R"({"model": {"merges": [["a", "b"], "a b", ["a b", "c"], "a", "a b c", "", 7, null, ["a"], ["a", 1],
                               ["a", ["b"]], ["a", "b", "c"], [], {"x": ["y"]}, [["a", "b"]], ["", ""]],
                    "vocab": {"a": 0, "\u00e9\n\"": 1, "a": 2, "n": [1, {"k": 2}], "o": {"p": 3}}}})",
      R"({"model": {"vocab": {"a": 0}, "merges": ["a a"]}, "model": {"vocab": {"b": 1}}})",
      R"({"model": {"vocab": {"a": 0}, "merges": ["a a"]}, "model": 5})",
      R"({"model": {"vocab": {"a": 0}, "vocab": [1, 2], "merges": ["a a"], "merges": {"x": 1}}})",
      R"({"model": {"vocab": 3, "vocab": {"a": 0}, "merges": "no", "merges": ["b c"]}})",
      R"({"other": {"model": {"vocab": {"a": 0}, "merges": ["a b"]}}, "vocab": {"z": 1}, "merges": ["z z"]})",
      R"([{"model": {"vocab": {"a": 0}}}, {"model": 1}])",
      R"({"model": {"vocab": {}, "merges": []}, "added_tokens": [{"id": 3, "content": "<s>"}], "x": [1.5, -2, true]})",
      R"("model")",
      R"(17)",
  };
  for (const char* text : texts) {
    const pentad::hf::TokenizerDoc doc = pentad::hf::read_tokenizer_doc(text);
    EXPECT_EQ(pentad::hf::as_tree(doc), json::parse(text)) << text;
  }
  const pentad::hf::TokenizerDoc two = pentad::hf::read_tokenizer_doc(texts[1]);
  ASSERT_TRUE(two.has_vocab && two.has_merges);
  ASSERT_EQ(two.vocab.size(), 5u);  // in the file's order, "a" both times
  EXPECT_EQ(two.vocab[2].first, "a");
  EXPECT_EQ(two.vocab[2].second, 2);
  EXPECT_EQ(two.vocab[1].first, "\xC3\xA9\n\"");
  ASSERT_EQ(two.merges.size(), 16u);
  EXPECT_TRUE(two.merges.well_formed(0) && two.merges.well_formed(1) && two.merges.well_formed(15));
  EXPECT_EQ(two.merges.left(1), "a");
  EXPECT_EQ(two.merges.right(1), "b");
  EXPECT_EQ(two.merges.joined(0), "ab");
  EXPECT_EQ(two.merges.left(2), "a b");  // a list's texts may hold a space
  EXPECT_EQ(two.merges.joined(15), "");
  for (size_t i = 3; i < 15; ++i) EXPECT_FALSE(two.merges.well_formed(i)) << i;
  for (const char* bad : {"", "{", R"({"model": {"vocab": {"a": 0,}}})", R"({"model": {"merges": ["a b"]})",
                          R"({"a": 1} x)", "[1, 2"}) {
    std::string tree_error, doc_error;
    try {
      const json tree = json::parse(bad);
      ADD_FAILURE() << "parsed: " << tree.dump();
    } catch (const json::parse_error& e) {
      tree_error = e.what();
    }
    try {
      (void)pentad::hf::read_tokenizer_doc(bad);
    } catch (const json::parse_error& e) {
      doc_error = e.what();
    }
    EXPECT_FALSE(tree_error.empty()) << bad;
    EXPECT_EQ(doc_error, tree_error) << bad;
  }
}

// A vocabulary entry given again: skipped with the same id; a piece given
// two ids is refused by name (SentencePiece's vocab and byte-level's).
TEST_F(TokenizerTest, AVocabKeyGivenTwice) {
  using nlohmann::json;
  const std::string text = sp_tokenizer_json().dump();
  const size_t at = text.find("\"vocab\":{") + 9;
  ASSERT_NE(at, std::string::npos + 9);
  const auto with = [&](const std::string& entry) { return text.substr(0, at) + entry + "," + text.substr(at); };
  const pentad::hf::TokenizerJson same = pentad::hf::read_tokenizer_json(write("same.json", with(R"("ab":264)")));
  EXPECT_EQ(same.sp.pieces.size(), 266u);
  EXPECT_HAS(pentad::test::input_error_of([&] { pentad::hf::read_tokenizer_json(write("two.json", with(R"("ab":266)"))); }),
             "vocab entry \"ab\" is given twice, with ids 264 and 266");
}

// Members of shapes the checks do not expect: an InputError naming the file
// (found by fuzz_tokenizer_json: no normalizer and a null pre-tokenizer
// ended in json's type_error).
TEST_F(TokenizerTest, TokenizerJsonMembersOfOtherShapes) {
  using nlohmann::json;
  json bare = sp_tokenizer_json();
  bare.erase("normalizer");
  EXPECT_HAS(pentad::test::input_error_of([&] { pentad::hf::read_tokenizer_json(write("bare.json", bare.dump())); }),
             "\"pre_tokenizer\" null: with byte fallback and no normalizer pentad reads Metaspace");
  json flag = sp_tokenizer_json();
  flag["model"]["byte_fallback"] = "yes";
  const std::string m =
      pentad::test::input_error_of([&] { pentad::hf::read_tokenizer_json(write("flag.json", flag.dump())); });
  EXPECT_HAS(m, "flag.json': a member of an unexpected type: ");
  EXPECT_HAS(m, "type must be boolean, but is string");
}

// --- Qwen2's pattern and NFC ---------------------------------------------------
// (token-for-token equality with tokenizers.js on Qwen2.5's own file:
// tests/tokenizer/hf_read.sh qwen2)

// Qwen2's expression is cl100k's but for digits: one per piece, not up to three.
TEST_F(TokenizerTest, Qwen2CutsDigitsOneByOne) {
  const pentad::Pretokenizer qwen("qwen2"), cl("cl100k");
  EXPECT_EQ(pieces(qwen, "x 12345, 67"), (std::vector<std::string>{"x", " ", "1", "2", "3", "4", "5", ",", " ", "6", "7"}));
  EXPECT_EQ(pieces(cl, "x 12345, 67"), (std::vector<std::string>{"x", " ", "123", "45", ",", " ", "67"}));
  // Other \p{N}: Arabic-Indic digits and a superscript two, one each.
  EXPECT_EQ(pieces(qwen, "\xD9\xA1\xD9\xA2\xC2\xB2"), (std::vector<std::string>{"\xD9\xA1", "\xD9\xA2", "\xC2\xB2"}));
  // Without digits the two cut alike.
  const char* alphabet[] = {"a", "Z", ".", "'", "s", "L", "LL", " ", " ", "\n", "\r", "\t", "\xC3\xA9", "\xE3\x80\x80",
                            "\xC2\x85", "!", "\xFF", "\xCC\x81"};
  std::mt19937 rng(4);
  for (int k = 0; k < 300; ++k) {
    std::string t;
    for (size_t i = 0, len = 1 + rng() % 120; i < len; ++i) t += alphabet[rng() % (sizeof(alphabet) / sizeof(*alphabet))];
    ASSERT_EQ(pieces(qwen, t), pieces(cl, t)) << t;
  }
  // Qwen's published spelling and the export's name the pattern.
  EXPECT_EQ(pentad::pattern_of_hf_regex(R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
            "qwen2");
  EXPECT_EQ(pentad::pattern_of_hf_regex(pentad::hf_pattern("qwen2")), "qwen2");
  EXPECT_NE(std::string(pentad::hf_pattern("qwen2")), pentad::hf_pattern("cl100k"));
}

// NFC against the Unicode Character Database's compositions.
TEST(Nfc, ComposesAsUnicodeSays) {
  EXPECT_EQ(pentad::nfc("e\xCC\x81"), "\xC3\xA9");                 // e + U+0301 -> U+00E9
  EXPECT_EQ(pentad::nfc("A\xCC\x8A"), "\xC3\x85");                 // A + U+030A -> U+00C5
  EXPECT_EQ(pentad::nfc("\xE2\x84\xAB"), "\xC3\x85");              // U+212B ANGSTROM SIGN, a singleton
  EXPECT_EQ(pentad::nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // jamo G A G -> U+AC01
  EXPECT_EQ(pentad::nfc("a\xCC\xA3\xCC\x87"), "\xE1\xBA\xA1\xCC\x87");  // dot below first: U+1EA1 + U+0307
  EXPECT_EQ(pentad::nfc("a\xCC\x87\xCC\xA3"), "\xE1\xBA\xA1\xCC\x87");  // reordered by combining class
  EXPECT_EQ(pentad::nfc("\n\xCC\x81x"), "\n\xCC\x81x");            // nothing to compose with
  EXPECT_EQ(pentad::nfc("12345 abc\n"), "12345 abc\n");
  // Invalid bytes pass through and compose nothing across them.
  EXPECT_EQ(pentad::nfc("e\xFF\xCC\x81" "e\xCC\x81\xC3"), "e\xFF\xCC\x81\xC3\xA9\xC3");
  EXPECT_EQ(pentad::nfc("\xED\xA0\x80" "A\xCC\x8A\xF0\x9F"), "\xED\xA0\x80\xC3\x85\xF0\x9F");
  EXPECT_TRUE(pentad::nfc_stable_fast("plain \xC3\xA9 text"));
  EXPECT_FALSE(pentad::nfc_stable_fast("e\xCC\x81"));
}

// At every next_safe_cut NFC of the parts is NFC of the whole; a cut before
// a combining mark is not (the check can fail).
TEST(Nfc, SafeCutsKeepNfc) {
  const char* alphabet[] = {"a", "e", "A", "1", " ", "\n", "\n", ".", "\xCC\x81", "\xCC\x8A", "\xCC\xA3",
                            "\xE1\x84\x80", "\xE1\x85\xA1", "\xE1\x86\xA8", "\xC3\xA9", "\xFF", "\xE2\x84\xAB"};
  std::mt19937 rng(5);
  int n_cuts = 0;
  for (int k = 0; k < 300; ++k) {
    std::string t;
    for (size_t i = 0, len = 1 + rng() % 200; i < len; ++i) t += alphabet[rng() % (sizeof(alphabet) / sizeof(*alphabet))];
    const std::string whole = pentad::nfc(t);
    for (size_t at = pentad::next_safe_cut(t, 0); at < t.size(); at = pentad::next_safe_cut(t, at + 1), ++n_cuts)
      ASSERT_EQ(pentad::nfc(t.substr(0, at)) + pentad::nfc(t.substr(at)), whole) << "cut at " << at;
  }
  EXPECT_GT(n_cuts, 100);
  std::printf("%d safe cuts, NFC unchanged at each\n", n_cuts);
  const std::string t = "ae\xCC\x81";
  EXPECT_NE(pentad::nfc(t.substr(0, 2)) + pentad::nfc(t.substr(2)), pentad::nfc(t));
}

// A BPE with "é" as a token: with NFC, "e" + U+0301 is that token; without,
// three byte tokens. Over 1 MiB (encode's blocks, prep's parts) the ids are
// those of the text put in NFC as a whole.
TEST_F(TokenizerTest, NfcTokenizerEncodesTheComposedText) {
  const std::string path = write("e.tiktoken", rank_lines({"\xC3\xA9", "ab"}));
  pentad::BpeParts with = pentad::load_bpe_parts(path, "qwen2"), without = pentad::load_bpe_parts(path, "qwen2");
  with.nfc = true;
  const auto nfc_tok = pentad::make_bpe_tokenizer(std::move(with), path);
  const auto plain = pentad::make_bpe_tokenizer(std::move(without), path);
  using Ids = std::vector<uint32_t>;
  EXPECT_EQ(nfc_tok->encode("e\xCC\x81"), (Ids{256}));
  EXPECT_EQ(plain->encode("e\xCC\x81"), (Ids{'e', 0xCC, 0x81}));
  EXPECT_EQ(nfc_tok->encode("\xFF" "e\xCC\x81"), (Ids{0xFF, 256}));
  EXPECT_EQ(nfc_tok->decode(nfc_tok->encode("ab e\xCC\x81")), "ab \xC3\xA9");
  EXPECT_NE(nfc_tok->describe().find("NFC (Unicode "), std::string::npos) << nfc_tok->describe();
  // Lines of decomposed text, every 7th starting with a combining mark.
  std::string big;
  for (int line = 0; big.size() < (size_t(5) << 19); ++line)
    big += std::string(line % 7 == 0 ? "\xCC\x81" : "") + "ab e\xCC\x81 A\xCC\x8A 123 \xE1\x84\x80\xE1\x85\xA1 x\n";
  const Ids whole = plain->encode(pentad::nfc(big));
  EXPECT_EQ(nfc_tok->encode(big), whole);
  Ids parts;
  int n_parts = 0;
  for (size_t begin = 0; begin < big.size(); ++n_parts) {
    const size_t end = nfc_tok->safe_cut(big, begin + (size_t(1) << 18));
    const Ids ids = begin == 0 ? nfc_tok->encode(big.substr(0, end)) : nfc_tok->encode_continued(big.substr(begin, end - begin));
    parts.insert(parts.end(), ids.begin(), ids.end());
    begin = end;
  }
  EXPECT_GE(n_parts, 8);
  EXPECT_EQ(parts, whole);
  EXPECT_NE(plain->encode(big), whole);
}

// A rank file of Qwen's size is qwen2's; the export of an NFC tokenizer
// carries the normalizer, and reads back the same.
TEST_F(TokenizerTest, Qwen2FilesReadBack) {
  const std::string ranks = write("small.tiktoken", rank_lines({"\xC3\xA9", "ab"}));
  pentad::BpeParts parts = pentad::load_bpe_parts(ranks, "qwen2");
  EXPECT_EQ(parts.vocab, 258 + 3);
  EXPECT_EQ(parts.eot, 258);
  EXPECT_EQ(parts.separator, 258);
  EXPECT_EQ(parts.bos, -1);
  EXPECT_FALSE(parts.nfc);
  for (const bool nfc : {false, true}) {
    SCOPED_TRACE(nfc);
    parts.nfc = nfc;
    const pentad::hf::TokenizerFiles f = pentad::hf::tokenizer_files(parts, 64);
    const nlohmann::json tj = nlohmann::json::parse(f.tokenizer_json);
    EXPECT_EQ(tj["normalizer"], (nfc ? nlohmann::json{{"type", "NFC"}} : nlohmann::json()));
    const std::string sub = nfc ? "nfc" : "plain";
    fs::create_directories(dir_ / sub);
    const std::string tj_path = write(sub + "/tokenizer.json", f.tokenizer_json);
    write(sub + "/tokenizer_config.json", f.tokenizer_config_json);
    const pentad::hf::TokenizerJson back = pentad::hf::read_tokenizer_json(tj_path, "qwen2");
    EXPECT_EQ(back.parts.pattern, "qwen2");
    EXPECT_EQ(back.parts.nfc, nfc);
    EXPECT_EQ(back.parts.specials, parts.specials);
    EXPECT_EQ(back.parts.eot, parts.eot);
    EXPECT_EQ(back.parts.separator, parts.separator);
    EXPECT_EQ(back.parts.bos, parts.bos);
    EXPECT_EQ(pentad::load_tokenizer(tj_path, "")->encode("e\xCC\x81").size(), nfc ? 1u : 3u);
    EXPECT_EQ(pentad::hf::tokenizer_files(back.parts, 64).tokenizer_json, f.tokenizer_json);
  }
  // tokenizer_config.json naming <|im_end|> (Qwen2.5 Instruct's): that is
  // the end of text, <|endoftext|> still separates documents.
  fs::create_directories(dir_ / "chat");
  const std::string tj_path = write("chat/tokenizer.json", pentad::hf::tokenizer_files(parts, 64).tokenizer_json);
  write("chat/tokenizer_config.json", R"({"eos_token": "<|im_end|>", "bos_token": null})");
  const auto tok = pentad::load_tokenizer(tj_path, "");
  EXPECT_EQ(tok->eot(), 260);
  EXPECT_EQ(tok->doc_separator(), 258);
  EXPECT_EQ(tok->bos(), -1);
  // Other normalizers are refused, naming the key.
  nlohmann::json nfkc = nlohmann::json::parse(pentad::hf::tokenizer_files(parts, 64).tokenizer_json);
  nfkc["normalizer"] = {{"type", "NFKC"}};
  const std::string bad = write("nfkc.json", nfkc.dump());
  EXPECT_HAS(pentad::test::input_error_of([&] { pentad::hf::read_tokenizer_json(bad); }),
             "tokenizer.json '" + bad + "': \"normalizer\" {\"type\":\"NFKC\"}: pentad applies none, or NFC");
}
