// Token files, the batch sampler and `pentad prep`: round trips against the
// bytes written, every open-time error message, and the layout independence of
// sample_batch (a slice of the global batch equals the same rows of the whole).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "io/data.hpp"
#include "io/dataset.hpp"
#include "../lib/input_error.hpp"
#include "../lib/temp_dir.hpp"
#include "io/prep.hpp"
#include "tok/tokenizer.hpp"
#include "core/error.hpp"

namespace fs = std::filesystem;
using pentad::InputError;
using pentad::TokenFile;

namespace {

class DataTest : public pentad::test::TempDirTest {
};

using pentad::test::input_error_of;

// Writes a token file by hand, as another tool would: a raw int32 header and
// raw uint16 tokens, optionally with extra trailing bytes.
void write_raw(const std::string& p, const std::vector<int32_t>& header,
               const std::vector<uint16_t>& tokens, size_t extra_bytes = 0) {
  std::ofstream f(p, std::ios::binary);
  std::vector<int32_t> h(header);
  h.resize(pentad::kTokenHeaderInts, 0);
  f.write(reinterpret_cast<const char*>(h.data()), std::streamsize(h.size() * sizeof(int32_t)));
  f.write(reinterpret_cast<const char*>(tokens.data()),
          std::streamsize(tokens.size() * sizeof(uint16_t)));
  for (size_t i = 0; i < extra_bytes; ++i) f.put('x');
}

std::vector<uint16_t> iota_tokens(int n) {
  std::vector<uint16_t> t(size_t(n), 0);
  for (int i = 0; i < n; ++i) t[size_t(i)] = uint16_t(i);
  return t;
}

}  // namespace

TEST_F(DataTest, WriteReadRoundTrip) {
  std::vector<uint16_t> tokens(5000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint16_t((i * 7919u + 13u) % 50257u);
  const std::string p = path("rt.bin");
  pentad::write_token_file(p, tokens);
  EXPECT_FALSE(fs::exists(p + ".tmp"));
  EXPECT_EQ(fs::file_size(p), 1024u + 2u * tokens.size());

  const TokenFile f(p, 50257, 65);
  ASSERT_EQ(f.size(), int64_t(tokens.size()));
  EXPECT_EQ(f.path(), p);
  int64_t n_diff = 0;
  for (int64_t i = 0; i < f.size(); ++i) n_diff += f[i] != tokens[size_t(i)];
  EXPECT_EQ(n_diff, 0);

  // Overwriting an existing file replaces it whole.
  pentad::write_token_file(p, iota_tokens(100));
  const TokenFile g(p, 256, 1);
  EXPECT_EQ(g.size(), 100);
  EXPECT_EQ(g[99], 99);
}

TEST_F(DataTest, Uint32RoundTrip) {
  // A Llama-3-sized vocabulary: ids above 65535 need version 2 (uint32).
  const int64_t V = 128256;
  std::vector<uint32_t> tokens(3000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint32_t((i * 104729u + 7u) % uint32_t(V));
  tokens[5] = uint32_t(V - 1);
  const std::string p = path("wide.bin");
  EXPECT_EQ(pentad::write_token_file(p, tokens, V), pentad::kTokenVersion32);
  EXPECT_EQ(fs::file_size(p), 1024u + 4u * tokens.size());
  const TokenFile f(p, int(V), 65);
  EXPECT_EQ(f.version(), 2);
  ASSERT_EQ(f.size(), int64_t(tokens.size()));
  int64_t n_diff = 0;
  for (int64_t i = 0; i < f.size(); ++i) n_diff += f[i] != tokens[size_t(i)];
  EXPECT_EQ(n_diff, 0);
  EXPECT_EQ(f[5], uint32_t(V - 1));

  // The id check against model.vocab_size holds for uint32 files too.
  const std::string msg = input_error_of([&] { TokenFile g(p, 100000, 65); });
  EXPECT_HAS(msg, "is >= model.vocab_size 100000");

  // A vocabulary that fits uint16 gets version 1, byte for byte the uint16 writer's file.
  std::vector<uint32_t> small(tokens.size());
  for (size_t i = 0; i < small.size(); ++i) small[i] = tokens[i] % 50257u;
  const std::string q = path("narrow.bin");
  EXPECT_EQ(pentad::write_token_file(q, small, 50257), pentad::kTokenVersion);
  EXPECT_EQ(fs::file_size(q), 1024u + 2u * small.size());
  const TokenFile h(q, 50257, 65);
  EXPECT_EQ(h.version(), 1);
  n_diff = 0;
  for (int64_t i = 0; i < h.size(); ++i) n_diff += h[i] != small[size_t(i)];
  EXPECT_EQ(n_diff, 0);

  // Writing refuses an id outside the vocabulary, naming the file.
  EXPECT_HAS(input_error_of([&] { pentad::write_token_file(path("bad.bin"), {1, 2, 70000}, 65536); }),
             "token 70000 at index 2 is >= the vocabulary size 65536");
}

TEST_F(DataTest, ForeignHeaderLoads) {
  // llm.c writes the header as a plain int array; reserved ints are not ours to check.
  const std::string p = path("foreign.bin");
  write_raw(p, {20240520, 1, 300, 0, 0, 42}, iota_tokens(300));
  const TokenFile f(p, 300, 300);
  EXPECT_EQ(f.size(), 300);
  EXPECT_EQ(f[0], 0);
  EXPECT_EQ(f[299], 299);
}

TEST_F(DataTest, OpenErrorsNameFileAndCause) {
  const std::string missing = path("missing.bin");
  std::string msg = input_error_of([&] { TokenFile f(missing, 256, 1); });
  EXPECT_HAS(msg, "data file '" + missing + "'");
  EXPECT_HAS(msg, "cannot open: No such file or directory");

  msg = input_error_of([&] { TokenFile f(dir_.string(), 256, 1); });
  EXPECT_HAS(msg, "is a directory");

  const std::string shorth = path("short.bin");
  { std::ofstream(shorth) << "hello"; }
  msg = input_error_of([&] { TokenFile f(shorth, 256, 1); });
  EXPECT_HAS(msg, "'" + shorth + "'");
  EXPECT_HAS(msg, "short header");

  const std::string magic = path("magic.bin");
  write_raw(magic, {12345, 1, 100}, iota_tokens(100));
  msg = input_error_of([&] { TokenFile f(magic, 256, 1); });
  EXPECT_HAS(msg, "data file '" + magic + "': bad magic 12345 (expected 20240520");

  const std::string version = path("version.bin");
  write_raw(version, {20240520, 5, 100}, iota_tokens(100));
  msg = input_error_of([&] { TokenFile f(version, 256, 1); });
  EXPECT_HAS(msg, "'" + version + "'");
  EXPECT_HAS(msg, "unsupported version 5");
  // Version 3 (pentad's, with a loss mask) without its mask.
  write_raw(version, {20240520, 3, 100}, iota_tokens(100));
  msg = input_error_of([&] { TokenFile f(version, 256, 1); });
  EXPECT_HAS(msg, "'" + version + "'");
  EXPECT_HAS(msg, "size mismatch: header says 100 tokens (1237 bytes with the loss mask) but the file is 1224 bytes");

  const std::string trunc = path("trunc.bin");
  write_raw(trunc, {20240520, 1, 1000}, iota_tokens(640));
  msg = input_error_of([&] { TokenFile f(trunc, 1024, 1); });
  EXPECT_HAS(msg, "data file '" + trunc +
                      "': truncated: header says 1000 tokens but the file holds 640");

  const std::string longer = path("long.bin");
  write_raw(longer, {20240520, 1, 100}, iota_tokens(100), 3);
  msg = input_error_of([&] { TokenFile f(longer, 256, 1); });
  EXPECT_HAS(msg, "'" + longer + "'");
  EXPECT_HAS(msg, "size mismatch");

  const std::string few = path("few.bin");
  write_raw(few, {20240520, 1, 10}, iota_tokens(10));
  msg = input_error_of([&] { TokenFile f(few, 256, 65); });
  EXPECT_HAS(msg, "data file '" + few + "': holds 10 tokens, needs at least 65 (model.seq_len + 1)");
}

TEST_F(DataTest, FirstBadTokenIsReportedWhateverTheThreads) {
  // Large enough that every OpenMP thread gets a chunk; bad tokens in several.
  std::vector<uint16_t> tokens(400000, 7);
  tokens[399999] = 65535;
  tokens[250000] = 300;
  tokens[123457] = 256;
  tokens[300001] = 1000;
  const std::string p = path("bad.bin");
  pentad::write_token_file(p, tokens);
  const std::string msg = input_error_of([&] { TokenFile f(p, 256, 65); });
  EXPECT_HAS(msg, "data file '" + p + "': token 256 at index 123457 is >= model.vocab_size 256");
  EXPECT_NO_THROW(TokenFile(p, 65536, 65));
}

TEST_F(DataTest, SampleBatchIsLayoutIndependent) {
  // Token i has value i, so every window reveals its start offset.
  const int n = 50000, T = 16, B = 8;
  const std::string p = path("iota.bin");
  pentad::write_token_file(p, iota_tokens(n));
  const pentad::TokenDataset data("data.train", p, {}, 65536, T);
  const pentad::BatchSampler batches(data, pentad::DataOrder::random, 1234, B);

  std::vector<int32_t> in(B * T), tgt(B * T);
  batches.fill(7, 0, B, in.data(), tgt.data());

  int bad_window = 0;
  std::set<int32_t> starts;
  for (int j = 0; j < B; ++j) {
    const int32_t o = in[size_t(j * T)];
    starts.insert(o);
    bad_window += o < 0 || o >= n - T;
    for (int t = 0; t < T; ++t) {
      bad_window += in[size_t(j * T + t)] != o + t;       // contiguous window
      bad_window += tgt[size_t(j * T + t)] != o + t + 1;  // targets = inputs shifted by one
    }
  }
  EXPECT_EQ(bad_window, 0);
  EXPECT_EQ(starts.size(), size_t(B)) << "sequences of one batch should start at different offsets";

  // A dp rank's slice [2, 5) is rows 2..4 of the global batch.
  std::vector<int32_t> in_s(3 * T), tgt_s(3 * T);
  batches.fill(7, 2, 3, in_s.data(), tgt_s.data());
  EXPECT_EQ(in_s, std::vector<int32_t>(in.begin() + 2 * T, in.begin() + 5 * T));
  EXPECT_EQ(tgt_s, std::vector<int32_t>(tgt.begin() + 2 * T, tgt.begin() + 5 * T));

  // Pure function: the same call again gives the same batch.
  std::vector<int32_t> in2(B * T), tgt2(B * T);
  batches.fill(7, 0, B, in2.data(), tgt2.data());
  EXPECT_EQ(in2, in);
  EXPECT_EQ(tgt2, tgt);

  // Another step, another seed: other offsets (position by position).
  batches.fill(8, 0, B, in2.data(), tgt2.data());
  int same_step = 0;
  for (int j = 0; j < B; ++j) same_step += in2[size_t(j * T)] == in[size_t(j * T)];
  EXPECT_EQ(same_step, 0);
  pentad::BatchSampler(data, pentad::DataOrder::random, 1235, B).fill(7, 0, B, in2.data(), tgt2.data());
  int same_seed = 0;
  for (int j = 0; j < B; ++j) same_seed += in2[size_t(j * T)] == in[size_t(j * T)];
  EXPECT_EQ(same_seed, 0);
}

TEST_F(DataTest, SampleBatchCoversTheFile) {
  // 4096 starts over 8 equal buckets of [0, size - T): each should get ~512.
  const int n = 8 * 1000 + 4, T = 4, B = 4096;
  const std::string p = path("cover.bin");
  pentad::write_token_file(p, iota_tokens(n));
  const pentad::TokenDataset data("data.train", p, {}, 65536, T);
  std::vector<int32_t> in(size_t(B) * T), tgt(size_t(B) * T);
  pentad::BatchSampler(data, pentad::DataOrder::random, 99, B).fill(1, 0, B, in.data(), tgt.data());
  std::vector<int> bucket(8, 0);
  for (int j = 0; j < B; ++j) ++bucket[size_t(in[size_t(j * T)] / 1000)];
  const int lowest = *std::min_element(bucket.begin(), bucket.end());
  const int highest = *std::max_element(bucket.begin(), bucket.end());
  EXPECT_GT(lowest, 400) << "bucket counts " << lowest << ".." << highest;
  EXPECT_LT(highest, 624) << "bucket counts " << lowest << ".." << highest;
}

// Validation windows are fixed and disjoint: window w is tokens [w*T, w*T+T)
// with targets shifted by one, whatever slice of them a rank asks for;
// windows past n_valid are padding (real inputs, targets -1).
TEST_F(DataTest, ValWindowsAreFixedAndDisjoint) {
  const int n = 1000, T = 32;
  const std::string p = path("val.bin");
  pentad::write_token_file(p, iota_tokens(n));
  const pentad::TokenDataset data("data.val", p, {}, 65536, T);
  const pentad::TokenShards& f = data.all();
  const int64_t count = pentad::val_window_count(f);
  EXPECT_EQ(count, (n - 1) / T);
  std::vector<int32_t> all_in(size_t(count) * T), all_tg(size_t(count) * T);
  pentad::val_windows(f, 0, int(count), count, all_in.data(), all_tg.data());
  int mismatches = 0;
  std::vector<int> target_uses(n, 0);
  for (int64_t w = 0; w < count; ++w)
    for (int t = 0; t < T; ++t) {
      mismatches += all_in[size_t(w * T + t)] != w * T + t;
      mismatches += all_tg[size_t(w * T + t)] != w * T + t + 1;
      ++target_uses[size_t(all_tg[size_t(w * T + t)])];
    }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(*std::max_element(target_uses.begin(), target_uses.end()), 1);
  // A slice is the same windows as the whole set.
  std::vector<int32_t> in(4 * T), tg(4 * T);
  pentad::val_windows(f, 5, 4, count, in.data(), tg.data());
  EXPECT_EQ(in, std::vector<int32_t>(all_in.begin() + 5 * T, all_in.begin() + 9 * T));
  EXPECT_EQ(tg, std::vector<int32_t>(all_tg.begin() + 5 * T, all_tg.begin() + 9 * T));
  // Past n_valid: the inputs of window w mod n_valid, targets ignored (-1).
  pentad::val_windows(f, count - 2, 4, count, in.data(), tg.data());
  EXPECT_EQ(std::vector<int32_t>(in.begin() + 2 * T, in.end()),
            std::vector<int32_t>(all_in.begin(), all_in.begin() + 2 * T));
  EXPECT_EQ(std::vector<int32_t>(tg.begin() + 2 * T, tg.end()), std::vector<int32_t>(2 * T, -1));
  EXPECT_EQ(std::vector<int32_t>(tg.begin(), tg.begin() + 2 * T),
            std::vector<int32_t>(all_tg.end() - 2 * T, all_tg.end()));
  EXPECT_THROW(pentad::val_windows(f, 0, 1, count + 1, in.data(), tg.data()), pentad::InputError);
}

// Versions 3 and 4: the tokens, then one bit per token (least significant
// first), set for a trained target; the reader's targets are -1 where clear.
TEST_F(DataTest, LossMaskRoundTrip) {
  const int n = 1001, T = 16;
  const auto trained = [](int64_t i) { return (i % 3 == 0) != (i % 7 == 0); };
  for (const int version : {pentad::kTokenVersionMasked, pentad::kTokenVersion32Masked}) {
    const bool wide = version == pentad::kTokenVersion32Masked;
    const std::string p = path("masked" + std::to_string(version) + ".bin");
    const auto id = [&](int64_t i) { return uint32_t(wide ? 70000 + i : i); };
    pentad::write_token_file(
        p, version, n, 64,  // several pieces, the last one partial
        [&](int64_t begin, int64_t count, void* dst) {
          for (int64_t i = 0; i < count; ++i) {
            if (wide) static_cast<uint32_t*>(dst)[i] = id(begin + i);
            else static_cast<uint16_t*>(dst)[i] = uint16_t(id(begin + i));
          }
        },
        [&](int64_t begin, int64_t count, unsigned char* dst) {
          for (int64_t i = 0; i < count; ++i) dst[i] = trained(begin + i) ? 7 : 0;  // any non-zero byte
        });
    // The bytes: header, tokens, then ceil(n / 8) mask bytes.
    std::ifstream raw(p, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(raw)), std::istreambuf_iterator<char>());
    const size_t width = wide ? 4 : 2, mask_at = 1024 + size_t(n) * width;
    ASSERT_EQ(bytes.size(), mask_at + (n + 7) / 8);
    int bad_bits = 0;
    for (int64_t i = 0; i < n; ++i)
      bad_bits += ((static_cast<unsigned char>(bytes[mask_at + size_t(i / 8)]) >> (i % 8)) & 1) != int(trained(i));
    EXPECT_EQ(bad_bits, 0);
    for (size_t b = size_t(n); b < (size_t(n) + 7) / 8 * 8; ++b)  // the last byte's unused bits
      EXPECT_EQ((static_cast<unsigned char>(bytes[mask_at + b / 8]) >> (b % 8)) & 1, 0);

    const TokenFile f(p, wide ? 80000 : 2000, 1);
    EXPECT_EQ(f.version(), version);
    EXPECT_TRUE(f.has_loss_mask());
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += f[i] != id(i) || f.trained(i) != trained(i);
    EXPECT_EQ(bad, 0);

    // Windows: the target of position t is token o + t + 1, or -1 where its bit is clear.
    const pentad::TokenDataset data("data.val", p, {}, wide ? 80000 : 2000, T);
    EXPECT_TRUE(data.has_loss_mask());
    const int64_t windows = pentad::val_window_count(data.all());
    std::vector<int32_t> in(size_t(windows) * T), tg(size_t(windows) * T);
    pentad::val_windows(data.all(), 0, int(windows), windows, in.data(), tg.data());
    int64_t bad_targets = 0, want_trained = 0;
    for (int64_t k = 0; k < windows * T; ++k) {
      const int64_t next = k + 1;
      bad_targets += in[size_t(k)] != int32_t(id(k)) || tg[size_t(k)] != (trained(next) ? int32_t(id(next)) : -1);
      want_trained += trained(next) ? 1 : 0;
    }
    EXPECT_EQ(bad_targets, 0);
    EXPECT_EQ(data.all().trained_targets(windows), want_trained);
    EXPECT_EQ(data.all().trained_targets(3), std::count_if(tg.begin(), tg.begin() + 3 * T, [](int32_t t) { return t >= 0; }));

    // A mask cut short is named.
    fs::resize_file(p, bytes.size() - 1);
    EXPECT_HAS(input_error_of([&] { TokenFile g(p, wide ? 80000 : 2000, 1); }), "with the loss mask");
  }
  // Without a mask every target is trained.
  const std::string plain = path("plain.bin");
  pentad::write_token_file(plain, iota_tokens(100));
  const pentad::TokenDataset data("data.val", plain, {}, 256, T);
  EXPECT_FALSE(data.has_loss_mask());
  EXPECT_EQ(data.all().trained_targets(5), 5 * T);
}

// Prompt/completion pairs: the completion's ids (and the end-of-text token
// after it) trained, the prompt's and a separator that is not the
// end-of-text token not; a separator that is the end-of-text token ends the
// completion before it, and one more ends the corpus.
TEST_F(DataTest, PrepPromptCompletionMask) {
  // The byte tokenizer with two special tokens: 256 ends a text, 257 starts one (or 256 both).
  struct Specials : pentad::Tokenizer {
    std::unique_ptr<pentad::Tokenizer> bytes = pentad::make_byte_tokenizer();
    int64_t sep;
    explicit Specials(int64_t s) : sep(s) {}
    std::vector<uint32_t> encode(std::string_view t) const override { return bytes->encode(t); }
    std::string decode(const uint32_t* ids, size_t n) const override { return bytes->decode(ids, n); }
    int64_t vocab_size() const override { return 258; }
    int64_t eot() const override { return 256; }
    int64_t doc_separator() const override { return sep; }
    std::string describe() const override { return "bytes + 2"; }
  };
  const std::string in = path("pairs.jsonl");
  std::ofstream(in) << "{\"p\": \"ab\", \"c\": \"XY\"}\n\n{\"c\": \"Z\", \"p\": \"cde\", \"other\": 1}\n";
  pentad::PrepOptions o;
  o.val_fraction = 0;
  o.prompt_key = "p";
  o.completion_key = "c";
  struct Case {
    int64_t sep;
    std::vector<uint32_t> ids;
    std::string trained;  // one character per token: 1 trained
  };
  const std::vector<Case> cases = {
      // separator 257, end 256 after each completion
      {257, {257, 'a', 'b', 'X', 'Y', 256, 257, 'c', 'd', 'e', 'Z', 256}, "000111000011"},
      // the end-of-text token is the separator: the next one ends the completion, one more the corpus
      {256, {256, 'a', 'b', 'X', 'Y', 256, 'c', 'd', 'e', 'Z', 256}, "00011100011"},
  };
  for (const Case& c : cases) {
    const std::string out = path("sft" + std::to_string(c.sep));
    const pentad::PrepResult r = pentad::prep_corpus({in}, out, Specials(c.sep), o);
    EXPECT_TRUE(r.masked);
    EXPECT_EQ(r.version, pentad::kTokenVersionMasked);
    EXPECT_EQ(r.trained_tokens, std::count(c.trained.begin(), c.trained.end(), '1'));
    EXPECT_HAS(r.summary(), "loss mask: " + std::to_string(r.trained_tokens) + " trained tokens");
    const TokenFile f(out + "/train.bin", 258, 1);
    ASSERT_EQ(f.size(), int64_t(c.ids.size()));
    std::string got;
    for (int64_t i = 0; i < f.size(); ++i) {
      EXPECT_EQ(f[i], c.ids[size_t(i)]) << "token " << i;
      got += f.trained(i) ? '1' : '0';
    }
    EXPECT_EQ(got, c.trained);
  }
  // The byte tokenizer has no end-of-text token and no separator: only the completions.
  const pentad::PrepResult r = pentad::prep_corpus({in}, path("bytes"), *pentad::make_byte_tokenizer(), o);
  const TokenFile f(path("bytes") + "/train.bin", 256, 1);
  std::string got;
  for (int64_t i = 0; i < f.size(); ++i) got += f.trained(i) ? '1' : '0';
  EXPECT_EQ(got, "00110001");
  EXPECT_EQ(r.trained_tokens, 3);

  // Refusals, each naming the culprit; nothing written.
  std::ofstream(path("no_c.jsonl")) << "{\"p\": \"ab\", \"c\": \"XY\"}\n{\"p\": \"ab\"}\n";
  EXPECT_HAS(input_error_of([&] { pentad::prep_corpus({path("no_c.jsonl")}, path("o1"), Specials(257), o); }),
             "'" + path("no_c.jsonl") + "' line 2: no field \"c\"");
  std::ofstream(path("num.jsonl")) << "{\"p\": 5, \"c\": \"XY\"}\n";
  EXPECT_HAS(input_error_of([&] { pentad::prep_corpus({path("num.jsonl")}, path("o2"), Specials(257), o); }),
             "line 1: field \"p\" is a number, not a string");
  std::ofstream(path("plain.txt")) << "text";
  EXPECT_HAS(input_error_of([&] { pentad::prep_corpus({in, path("plain.txt")}, path("o3"), Specials(257), o); }),
             "'" + path("plain.txt") + "': prompt/completion pairs are read from JSON Lines files only");
  pentad::PrepOptions half = o;
  half.completion_key.clear();
  EXPECT_HAS(input_error_of([&] { pentad::prep_corpus({in}, path("o4"), Specials(257), half); }),
             "a prompt field without a completion field");
  pentad::PrepOptions same = o;
  same.completion_key = "p";
  EXPECT_HAS(input_error_of([&] { pentad::prep_corpus({in}, path("o5"), Specials(257), same); }),
             "the prompt and completion fields are both \"p\"");
  for (const char* o_dir : {"o1", "o2", "o3", "o4", "o5"}) EXPECT_FALSE(fs::exists(path(o_dir) + "/train.bin"));
}

TEST_F(DataTest, PrepRoundTripAndSplit) {
  std::vector<std::string> inputs;
  std::vector<unsigned char> corpus;
  for (int k = 0; k < 3; ++k) {
    const std::string p = path("in" + std::to_string(k) + ".txt");
    std::ofstream f(p, std::ios::binary);
    for (int i = 0; i < 1000 + 37 * k; ++i) {
      const unsigned char c = (unsigned char)((i * 31 + k * 7) % 256);  // includes 0 and 255
      f.put(char(c));
      corpus.push_back(c);
    }
    inputs.push_back(p);
  }
  const std::string out = path("out/nested");  // created with mkdir -p semantics
  const std::string summary = pentad::prep_bytes(inputs, out, 0.1);

  const int64_t n = int64_t(corpus.size());  // 3111
  const int64_t n_val = 311;
  EXPECT_EQ(summary, "prep: 3 files, 3111 bytes -> " + out + "/train.bin (2800 tokens), " + out +
                         "/val.bin (311 tokens)");
  const TokenFile train(out + "/train.bin", 256, 1);
  const TokenFile val(out + "/val.bin", 256, 1);
  ASSERT_EQ(train.size(), n - n_val);
  ASSERT_EQ(val.size(), n_val);
  int64_t n_diff = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t tok = i < train.size() ? train[i] : val[i - train.size()];
    n_diff += tok != corpus[size_t(i)];
  }
  EXPECT_EQ(n_diff, 0);

  // A tiny corpus still keeps one byte for validation; 0 means no validation tokens.
  const std::string tiny = path("tiny.txt");
  { std::ofstream(tiny) << "abcde"; }
  EXPECT_HAS(pentad::prep_bytes({tiny}, path("t1"), 0.01),
             "prep: 1 file, 5 bytes -> " + path("t1") + "/train.bin (4 tokens)");
  EXPECT_HAS(pentad::prep_bytes({tiny}, path("t0"), 0.0), "/val.bin (0 tokens)");
}

// --shard-tokens: the same tokens as the unsharded files, cut into files of
// N tokens (the last shorter) that a glob reads back in order; a shard an
// earlier prep left beyond this one's count is refused before anything is
// written.
TEST_F(DataTest, PrepShards) {
  std::vector<std::string> inputs;
  for (int k = 0; k < 3; ++k) {
    inputs.push_back(path("in" + std::to_string(k) + ".txt"));
    std::ofstream f(inputs.back(), std::ios::binary);
    for (int i = 0; i < 1000 + 37 * k; ++i) f.put(char((i * 31 + k * 7) % 256));
  }
  const auto tok = pentad::make_byte_tokenizer();
  const std::string whole = path("whole"), cut = path("cut");
  pentad::prep_corpus(inputs, whole, 0.1, *tok);
  const pentad::PrepResult r = pentad::prep_corpus(inputs, cut, 0.1, *tok, 1000);
  EXPECT_EQ(r.summary(), "prep: 3 files, 3111 bytes -> " + cut + "/train_*.bin (2800 tokens in 3 files), " + cut +
                             "/val_*.bin (311 tokens in 1 file)");
  const TokenFile train(whole + "/train.bin", 256, 1), val(whole + "/val.bin", 256, 1);
  const pentad::TokenDataset shards("data.train", r.train_path, {}, 256, 4);
  const pentad::TokenDataset val_shards("data.val", r.val_path, {}, 256, 4);
  ASSERT_EQ(shards.n_files(), 3u);
  ASSERT_EQ(val_shards.n_files(), 1u);
  std::vector<int64_t> sizes;
  int64_t at = 0, n_diff = 0;
  for (const TokenFile* f : shards.all().files()) {
    sizes.push_back(f->size());
    for (int64_t i = 0; i < f->size(); ++i) n_diff += (*f)[i] != train[at++];
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{1000, 1000, 800}));
  EXPECT_EQ(at, train.size());
  EXPECT_EQ(n_diff, 0);
  const TokenFile& v0 = val_shards.first_file();
  ASSERT_EQ(v0.size(), val.size());
  for (int64_t i = 0; i < v0.size(); ++i) n_diff += v0[i] != val[i];
  EXPECT_EQ(n_diff, 0);

  // Re-running with larger shards would leave train_000002.bin behind: refused, nothing written.
  const auto before = fs::last_write_time(cut + "/train_000000.bin");
  EXPECT_HAS(input_error_of([&] { pentad::prep_corpus(inputs, cut, 0.1, *tok, 1500); }),
             "prep: '" + cut + "/train_000002.bin' is a shard of an earlier prep that this one (2 train shards)");
  EXPECT_EQ(fs::last_write_time(cut + "/train_000000.bin"), before);
  // Smaller shards overwrite the old ones and add more.
  EXPECT_NO_THROW(pentad::prep_corpus(inputs, cut, 0.1, *tok, 700));
  EXPECT_EQ(pentad::TokenDataset("data.train", r.train_path, {}, 256, 4).n_files(), 4u);
}

TEST_F(DataTest, PrepErrorsNameTheCulprit) {
  EXPECT_HAS(input_error_of([&] { pentad::prep_bytes({}, path("o"), 0.1); }), "no input files");

  const std::string missing = path("nope.txt");
  std::string msg = input_error_of([&] { pentad::prep_bytes({missing}, path("o"), 0.1); });
  EXPECT_HAS(msg, "'" + missing + "'");
  EXPECT_HAS(msg, "No such file or directory");

  const std::string a_dir = path("adir");
  fs::create_directory(a_dir);
  msg = input_error_of([&] { pentad::prep_bytes({a_dir}, path("o"), 0.1); });
  EXPECT_HAS(msg, "'" + a_dir + "': is a directory");

  const std::string empty = path("empty.txt");
  { std::ofstream f(empty); }
  EXPECT_HAS(input_error_of([&] { pentad::prep_bytes({empty, empty}, path("o"), 0.1); }),
             "corpus is empty");

  const std::string text = path("text.txt");
  { std::ofstream(text) << "some text for the corpus"; }
  const std::string file_as_dir = path("iam_a_file");
  { std::ofstream(file_as_dir) << "x"; }
  msg = input_error_of([&] { pentad::prep_bytes({text}, file_as_dir, 0.1); });
  EXPECT_HAS(msg, "'" + file_as_dir + "'");

  EXPECT_HAS(input_error_of([&] { pentad::prep_bytes({text}, path("o"), 1.5); }), "val_fraction");
}

TEST_F(DataTest, FailedWriteLeavesNoTmpFile) {
  // The parent "directory" is a regular file: the tmp file cannot be created.
  const std::string file_as_dir = path("plain");
  { std::ofstream(file_as_dir) << "x"; }
  const std::string p1 = file_as_dir + "/train.bin";
  std::string msg = input_error_of([&] { pentad::write_token_file(p1, iota_tokens(10)); });
  EXPECT_HAS(msg, "data file '" + p1 + "'");
  EXPECT_HAS(msg, "Not a directory");

  // The target is a non-empty directory: the tmp file is written, the rename
  // fails, and the tmp file must be removed.
  const std::string p2 = path("target.bin");
  fs::create_directories(p2 + "/occupied");
  msg = input_error_of([&] { pentad::write_token_file(p2, iota_tokens(10)); });
  EXPECT_HAS(msg, "data file '" + p2 + "'");
  EXPECT_HAS(msg, "rename");
  EXPECT_FALSE(fs::exists(p2 + ".tmp"));
  EXPECT_TRUE(fs::is_directory(p2 + "/occupied"));
}
