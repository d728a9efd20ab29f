// Datasets of many token files (io/dataset.hpp): one file in random order
// reads exactly the documented rule; shards never mix files in a sequence;
// epoch order reads every window exactly once per epoch; a blend gives each
// source its share of every batch from its own files only; any slice of a
// batch equals the same rows of the whole; bad lists are named.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "io/data.hpp"
#include "io/dataset.hpp"
#include "../lib/input_error.hpp"
#include "../lib/temp_dir.hpp"

namespace fs = std::filesystem;
using pentad::BatchSampler;
using pentad::DataOrder;
using pentad::InputError;
using pentad::TokenDataset;

namespace {

class DatasetTest : public pentad::test::TempDirTest {
 protected:
  // A file whose token i is tag * kTag + i: every token names its file and offset.
  std::string tagged(const std::string& name, int tag, int n) const {
    std::vector<uint32_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) t[size_t(i)] = uint32_t(tag * kTag + i);
    pentad::write_token_file(path(name), t, kVocab);
    return path(name);
  }

  static constexpr int kTag = 100000;
  static constexpr int kVocab = 1000000;
};

using pentad::test::input_error_of;

// Rows of one batch: for each sequence, (file tag, first input offset); fails
// the test if a sequence is not T+1 consecutive tokens of one file.
std::vector<std::pair<int, int>> rows_of(const std::vector<int32_t>& in, const std::vector<int32_t>& tg, int T,
                                         int tag_unit) {
  std::vector<std::pair<int, int>> rows;
  int broken = 0;
  for (size_t j = 0; j * T < in.size(); ++j) {
    const int32_t first = in[j * T];
    for (int t = 0; t < T; ++t) {
      broken += in[j * T + size_t(t)] != first + t;
      broken += tg[j * T + size_t(t)] != first + t + 1;
    }
    rows.emplace_back(first / tag_unit, first % tag_unit);
  }
  EXPECT_EQ(broken, 0) << "a sequence is not one run of consecutive tokens of one file";
  return rows;
}

}  // namespace

// The random order over one file is the rule documented in running.md:
// sequence j of step s starts at Philox(seed, fnv("pentad.data.sample_batch")
// + s, j) mod (size - T). Runs made before datasets existed read these tokens.
TEST_F(DatasetTest, OneFileRandomIsTheDocumentedRule) {
  const int n = 5003, T = 8, B = 16;
  const std::string p = tagged("one.bin", 0, n);
  const TokenDataset data("data.train", p, {}, kVocab, T);
  const BatchSampler batches(data, DataOrder::random, 1234, B);
  for (int64_t step : {1, 2, 77}) {
    std::vector<int32_t> in(B * T), tg(B * T);
    batches.fill(step, 0, B, in.data(), tg.data());
    const pentad::CounterRng rng{1234, pentad::fnv1a64("pentad.data.sample_batch") + uint64_t(step)};
    int wrong = 0;
    for (int j = 0; j < B; ++j) wrong += in[size_t(j) * T] != int32_t(rng.u64(uint64_t(j)) % uint64_t(n - T));
    EXPECT_EQ(wrong, 0) << "step " << step;
  }
}

// Random order over three shards: no sequence crosses a file boundary, and
// starts fall in each file in proportion to its start positions.
TEST_F(DatasetTest, RandomShardsStayInsideFiles) {
  const int T = 4, B = 6000;
  const std::string spec = tagged("s0.bin", 1, 1004) + ", " + tagged("s1.bin", 2, 2004) + "," +
                           tagged("s2.bin", 3, 3004);
  const TokenDataset data("data.train", spec, {}, kVocab, T);
  ASSERT_EQ(data.sources().size(), 1u);
  EXPECT_EQ(data.all().start_count(), 1000 + 2000 + 3000);
  std::vector<int32_t> in(size_t(B) * T), tg(size_t(B) * T);
  BatchSampler(data, DataOrder::random, 5, B).fill(3, 0, B, in.data(), tg.data());
  std::map<int, int> per_file;
  int past_end = 0;
  for (const auto& [file, off] : rows_of(in, tg, T, kTag)) {
    ++per_file[file];
    past_end += off + T >= 1004 + 1000 * (file - 1);  // the last target is inside the file
  }
  EXPECT_EQ(past_end, 0);
  // Expected 1000, 2000, 3000 of 6000; binomial sd <= 39.
  EXPECT_NEAR(per_file[1], 1000, 160);
  EXPECT_NEAR(per_file[2], 2000, 160);
  EXPECT_NEAR(per_file[3], 3000, 160);
}

// Epoch order: the sequences, in step-major order, read every window of the
// shards exactly once per epoch (N = 25 windows, batches of 8, so epochs end
// mid-batch), each epoch in another order.
TEST_F(DatasetTest, EpochReadsEveryWindowOncePerEpoch) {
  const int T = 5, B = 8;
  // (size - 1) / T windows: 7, 12 and 6 (the 6th file's last 4 tokens are never read).
  const std::string spec = tagged("e0.bin", 1, 36) + "," + tagged("e1.bin", 2, 64) + "," + tagged("e2.bin", 3, 35);
  const TokenDataset data("data.train", spec, {}, kVocab, T);
  const int64_t N = data.all().window_count();
  ASSERT_EQ(N, 7 + 12 + 6);
  const BatchSampler batches(data, DataOrder::epoch, 42, B);
  std::vector<std::pair<int, int>> order;  // (file, offset) by ordinal
  for (int step = 1; step <= 3 * N / B + 1; ++step) {
    std::vector<int32_t> in(B * T), tg(B * T);
    batches.fill(step, 0, B, in.data(), tg.data());
    for (const auto& r : rows_of(in, tg, T, kTag)) order.push_back(r);
  }
  ASSERT_GE(order.size(), size_t(3 * N));
  std::vector<std::set<std::pair<int, int>>> epochs(3);
  int misaligned = 0;
  for (int64_t o = 0; o < 3 * N; ++o) {
    misaligned += order[size_t(o)].second % T != 0;
    epochs[size_t(o / N)].insert(order[size_t(o)]);
  }
  EXPECT_EQ(misaligned, 0) << "a sequence does not start on a window";
  for (int e = 0; e < 3; ++e) EXPECT_EQ(epochs[size_t(e)].size(), size_t(N)) << "epoch " << e << " repeats a window";
  EXPECT_EQ(epochs[0], epochs[1]);
  EXPECT_FALSE(std::equal(order.begin(), order.begin() + N, order.begin() + N)) << "epochs 0 and 1 in the same order";
  EXPECT_NEAR(batches.epochs_read(0, 10), 10.0 * B / double(N), 1e-12);
}

// A run resumed under another global batch goes on from the checkpoint's
// sequence count: the 24 sequences of 3 steps of 8, then 28 of 7 steps of
// 4, read each of the 25 windows once in each epoch.
TEST_F(DatasetTest, EpochContinuesAcrossABatchChange) {
  const int T = 5;
  const std::string spec = tagged("e0.bin", 1, 36) + "," + tagged("e1.bin", 2, 64) + "," + tagged("e2.bin", 3, 35);
  const TokenDataset data("data.train", spec, {}, kVocab, T);
  const int64_t N = data.all().window_count();
  std::vector<std::pair<int, int>> order;
  const auto read = [&](const BatchSampler& b, int from, int to, int B) {
    for (int step = from; step <= to; ++step) {
      std::vector<int32_t> in(size_t(B) * T), tg(size_t(B) * T);
      b.fill(step, 0, B, in.data(), tg.data());
      for (const auto& r : rows_of(in, tg, T, kTag)) order.push_back(r);
    }
  };
  const BatchSampler first(data, DataOrder::epoch, 42, 8);
  read(first, 1, 3, 8);
  EXPECT_EQ(first.seqs_done(0, 3), 24);
  BatchSampler second(data, DataOrder::epoch, 42, 4);
  second.resume_from(3, {first.seqs_done(0, 3)});
  read(second, 4, 10, 4);
  EXPECT_EQ(second.seqs_done(0, 10), 24 + 28);
  ASSERT_EQ(order.size(), 52u);
  const std::set<std::pair<int, int>> epoch0(order.begin(), order.begin() + N);
  const std::set<std::pair<int, int>> epoch1(order.begin() + N, order.begin() + 2 * N);
  EXPECT_EQ(epoch0.size(), size_t(N));
  EXPECT_EQ(epoch1.size(), size_t(N));
  // Without the count (the closed form for batches of 4 from step 4 on) it would repeat windows.
  order.resize(24);
  read(BatchSampler(data, DataOrder::epoch, 42, 4), 4, 10, 4);
  const std::set<std::pair<int, int>> without(order.begin(), order.begin() + N);
  EXPECT_LT(without.size(), size_t(N));
}

// A slice of the batch equals the same rows of the whole, in every order
// and with a blend (how every dp rank and micro-batch reads its share).
TEST_F(DatasetTest, SlicesEqualTheWholeBatch) {
  const int T = 4, B = 12;
  const std::string a = tagged("a.bin", 1, 400), b = tagged("b.bin", 2, 300);
  const TokenDataset blend("data.train", a + "," + b, {2.0, 1.0}, kVocab, T);
  for (DataOrder order : {DataOrder::random, DataOrder::epoch}) {
    const BatchSampler batches(blend, order, 9, B);
    std::vector<int32_t> in(B * T), tg(B * T), in_s(5 * T), tg_s(5 * T);
    batches.fill(4, 0, B, in.data(), tg.data());
    batches.fill(4, 3, 5, in_s.data(), tg_s.data());
    EXPECT_EQ(in_s, std::vector<int32_t>(in.begin() + 3 * T, in.begin() + 8 * T));
    EXPECT_EQ(tg_s, std::vector<int32_t>(tg.begin() + 3 * T, tg.begin() + 8 * T));
  }
}

// A blend: each source supplies its largest-remainder share of every batch,
// only from its own files, spread evenly over the batch.
TEST_F(DatasetTest, BlendSharesAndSources) {
  const int T = 4, B = 8;
  const std::string web0 = tagged("web_0.bin", 1, 500), web1 = tagged("web_1.bin", 2, 500);
  const std::string code = tagged("code.bin", 3, 500);
  const TokenDataset data("data.train", path("web_*.bin") + "," + code, {3.0, 1.0}, kVocab, T);
  ASSERT_EQ(data.sources().size(), 2u);
  EXPECT_EQ(data.sources()[0].shards.files().size(), 2u);
  for (DataOrder order : {DataOrder::random, DataOrder::epoch}) {
    const BatchSampler batches(data, order, 3, B);
    EXPECT_EQ(batches.per_batch(0), 6);
    EXPECT_EQ(batches.per_batch(1), 2);
    std::vector<int32_t> in(B * T), tg(B * T);
    for (int step = 1; step <= 5; ++step) {
      batches.fill(step, 0, B, in.data(), tg.data());
      const auto rows = rows_of(in, tg, T, kTag);
      int wrong_source = 0, code_rows = 0, code_first_half = 0;
      for (int j = 0; j < B; ++j) {
        const bool is_code = rows[size_t(j)].first == 3;
        wrong_source += is_code != (batches.source_of(j) == 1);
        code_rows += is_code;
        code_first_half += is_code && j < B / 2;
      }
      EXPECT_EQ(wrong_source, 0) << "step " << step;
      EXPECT_EQ(code_rows, 2);
      EXPECT_EQ(code_first_half, 1) << "the code rows are not spread over the batch";
    }
  }
  // Shares by largest remainder, ties to the earlier source.
  const TokenDataset three("data.train", web0 + "," + web1 + "," + code, {1.0, 1.0, 1.0}, kVocab, T);
  const BatchSampler thirds(three, DataOrder::random, 1, 8);
  EXPECT_EQ(thirds.per_batch(0) * 100 + thirds.per_batch(1) * 10 + thirds.per_batch(2), 332);
  const TokenDataset tenths("data.train", web0 + "," + code, {0.7, 0.3}, kVocab, T);
  EXPECT_EQ(BatchSampler(tenths, DataOrder::epoch, 1, 10).per_batch(1), 3);
  EXPECT_HAS(BatchSampler(tenths, DataOrder::epoch, 1, 10).describe(), "3 of 10 sequences a batch (weight 0.3000 asked, 0.3000 given)");
}

TEST_F(DatasetTest, ShareRoundingToNothingIsRefused) {
  const std::string a = tagged("a.bin", 1, 100), b = tagged("b.bin", 2, 100);
  const TokenDataset data("data.train", a + "," + b, {100.0, 1.0}, kVocab, 4);
  EXPECT_HAS(input_error_of([&] { BatchSampler(data, DataOrder::random, 1, 8); }),
             "data.weights: source '" + b + "' (weight 1) gets 0 of the 8 sequences of a global batch");
  EXPECT_NO_THROW(BatchSampler(data, DataOrder::random, 1, 101));
}

// Glob patterns expand in name order; a pattern without a match, a file
// named twice and a bad shard are each named.
TEST_F(DatasetTest, PatternsAndTheirErrors) {
  tagged("shard_2.bin", 2, 50);
  tagged("shard_0.bin", 0, 50);
  tagged("shard_1.bin", 1, 50);
  const TokenDataset data("data.train", path("shard_*.bin"), {}, kVocab, 4);
  ASSERT_EQ(data.n_files(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(data.all().files()[i]->path(), path("shard_" + std::to_string(i) + ".bin"));
  EXPECT_HAS(input_error_of([&] { TokenDataset("data.train", path("none_*.bin"), {}, kVocab, 4); }),
             "data.train: '" + path("none_*.bin") + "' matches no file");
  EXPECT_HAS(input_error_of([&] {
               TokenDataset("data.val", path("shard_*.bin") + "," + path("shard_1.bin"), {}, kVocab, 4);
             }),
             "data.val: '" + path("shard_1.bin") + "' is named twice");
  // A shard too short for one sequence, or with a token outside the vocabulary, named.
  tagged("shard_3.bin", 3, 4);
  EXPECT_HAS(input_error_of([&] { TokenDataset("data.train", path("shard_*.bin"), {}, kVocab, 4); }),
             "data file '" + path("shard_3.bin") + "': holds 4 tokens, needs at least 5");
  fs::remove(path("shard_3.bin"));
  EXPECT_HAS(input_error_of([&] { TokenDataset("data.train", path("shard_*.bin"), {}, 2 * kTag, 4); }),
             "data file '" + path("shard_2.bin") + "': token 200000 at index 0 is >= model.vocab_size 200000");
}

// The vocabulary check split over a job's ranks: wherever one bad id sits
// (a file's first or last token, a part boundary), exactly one of the parts
// finds it and names its file and index; a header error every part finds.
TEST_F(DatasetTest, VocabularyCheckIsSplitOverParts) {
  const int T = 4, n_parts = 3;
  const int sizes[3] = {10, 7, 13};  // 30 tokens: parts [0,10) [10,20) [20,30)
  for (int bad_at : {0, 9, 10, 16, 17, 19, 20, 29}) {
    std::string spec;
    const std::string names[3] = {path("v0.bin"), path("v1.bin"), path("v2.bin")};
    for (int f = 0, at = 0; f < 3; at += sizes[f], ++f) {
      std::vector<uint32_t> t(static_cast<size_t>(sizes[f]), 7u);
      if (bad_at >= at && bad_at < at + sizes[f]) t[size_t(bad_at - at)] = 999;
      pentad::write_token_file(names[f], t, 1000);
      if (f > 0) spec += ",";
      spec += names[f];
    }
    int found = 0;
    for (int part = 0; part < n_parts; ++part) {
      try {
        TokenDataset("data.train", spec, {}, 100, T, part, n_parts);
      } catch (const InputError& e) {
        ++found;
        const int file = bad_at < 10 ? 0 : bad_at < 17 ? 1 : 2;
        const int index = bad_at - (file == 0 ? 0 : file == 1 ? 10 : 17);
        EXPECT_HAS(e.what(), "data file '" + names[file] + "': token 999 at index " +
                                 std::to_string(index) + " is >= model.vocab_size 100");
        EXPECT_EQ(part, bad_at / 10) << "bad id at " << bad_at;
      }
    }
    EXPECT_EQ(found, 1) << "bad id at " << bad_at;
  }
  pentad::write_token_file(path("v1.bin"), std::vector<uint16_t>(3, 7));  // 3 tokens: too short for T = 4
  const std::string spec = path("v0.bin") + "," + path("v1.bin") + "," + path("v2.bin");
  for (int part = 0; part < n_parts; ++part)
    EXPECT_HAS(input_error_of([&] { TokenDataset("data.train", spec, {}, 100, T, part, n_parts); }),
               "data file '" + path("v1.bin") + "': holds 3 tokens, needs at least 5");
}

// data.weights as the config reads it.
TEST(DataWeights, ParsedAndChecked) {
  pentad::DataConfig d;
  d.train = "a/*.bin, b.bin";
  d.weights = " 0.7, 0.3 ";
  EXPECT_EQ(pentad::data_weights(d), (std::vector<double>{0.7, 0.3}));
  d.weights = "";
  EXPECT_TRUE(pentad::data_weights(d).empty());
  d.weights = "1";
  EXPECT_HAS(input_error_of([&] { pentad::data_weights(d); }),
             "data.weights=\"1\" gives 1 weights for the 2 entries of data.train");
  for (const char* bad : {"0.7,0", "0.7,-1", "0.7,x", "0.7,inf", "0.7,1e999", "0.7,0.3x"}) {
    d.weights = bad;
    EXPECT_HAS(input_error_of([&] { pentad::data_weights(d); }), "is not a weight");
  }
  d.weights = "0.7,,0.3";
  EXPECT_HAS(input_error_of([&] { pentad::data_weights(d); }), "an empty entry");
  EXPECT_EQ(pentad::list_entries(" a ,b,  c"), (std::vector<std::string>{"a", "b", "c"}));
}

// The epoch shuffle is a bijection of [0, n) for every n, and the stream
// changes it.
TEST(WindowPermutation, IsABijection) {
  for (uint64_t n : {1ull, 2ull, 3ull, 5ull, 64ull, 1000ull, 4097ull, 65537ull}) {
    const pentad::WindowPermutation p(n, 7, 1), q(n, 7, 2);
    std::vector<char> hit(n, 0);
    uint64_t out_of_range = 0, repeats = 0, same_as_q = 0;
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t v = p(i);
      if (v >= n) {
        ++out_of_range;
        continue;
      }
      repeats += hit[v];
      hit[v] = 1;
      same_as_q += v == q(i);
    }
    EXPECT_EQ(out_of_range, 0u) << "n " << n;
    EXPECT_EQ(repeats, 0u) << "n " << n;
    if (n >= 64) {
      EXPECT_LT(same_as_q, n / 8) << "n " << n << ": two streams give nearly the same order";
    }
  }
}
