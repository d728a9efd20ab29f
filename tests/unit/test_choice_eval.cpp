// Multiple-choice eval files (io/choice_eval.hpp, llm.c's eval format): a
// file written field by field here reads back as written, pentad's writer
// gives the same bytes, every malformed file is refused naming the file and
// the example, the rows put the ending's tokens as targets exactly where
// they are predicted, and the scoring picks by mean and by sum.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "io/choice_eval.hpp"
#include "../lib/input_error.hpp"
#include "../lib/temp_dir.hpp"

using pentad::ChoiceExample;
using pentad::test::input_error_of;

namespace {

class ChoiceEvalTest : public pentad::test::TempDirTest {};

// The uint16 stream of one example, field by field as llm.c's writer lays it out.
std::vector<uint16_t> example_words(int index, int label, const std::vector<uint16_t>& ctx,
                                    const std::vector<std::vector<uint16_t>>& endings) {
  std::vector<uint16_t> w = {65535, 0, uint16_t(index), uint16_t(label), uint16_t(endings.size()),
                             uint16_t(ctx.size())};
  w.insert(w.end(), ctx.begin(), ctx.end());
  for (const auto& e : endings) {
    w.push_back(uint16_t(e.size()));
    w.insert(w.end(), e.begin(), e.end());
  }
  w[1] = uint16_t(2 * w.size());
  return w;
}

void write_raw(const std::string& path, int32_t magic, int32_t version, int32_t n, const std::vector<uint16_t>& words,
               int32_t longest = 0) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = n;
  header[3] = longest;
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(header.data()), 1024);
  f.write(reinterpret_cast<const char*>(words.data()), std::streamsize(words.size() * 2));
}

std::string bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

std::vector<uint16_t> two_examples() {
  std::vector<uint16_t> w = example_words(0, 2, {10, 11, 12}, {{20}, {21, 22}, {23, 24, 25}});
  const std::vector<uint16_t> b = example_words(1, 0, {13}, {{26, 27}, {28}});
  w.insert(w.end(), b.begin(), b.end());
  return w;
}

TEST_F(ChoiceEvalTest, ReadsTheFieldsAsWrittenAndWritesTheSameBytes) {
  const std::vector<uint16_t> w = two_examples();
  write_raw(path("a.bin"), 20240522, 1, 2, w, 36);  // the longest: example 0, 18 words
  const std::vector<ChoiceExample> ex = pentad::read_choice_file(path("a.bin"), 64);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].index, 0);
  EXPECT_EQ(ex[0].label, 2);
  EXPECT_EQ(ex[0].context, (std::vector<int32_t>{10, 11, 12}));
  ASSERT_EQ(ex[0].endings.size(), 3u);
  EXPECT_EQ(ex[0].endings[2], (std::vector<int32_t>{23, 24, 25}));
  EXPECT_EQ(ex[1].label, 0);
  EXPECT_EQ(ex[1].endings[0], (std::vector<int32_t>{26, 27}));
  pentad::write_choice_file(path("b.bin"), ex);
  EXPECT_EQ(bytes_of(path("b.bin")), bytes_of(path("a.bin")));
}

TEST_F(ChoiceEvalTest, RefusesMalformedFilesNamingTheFileAndExample) {
  const std::vector<uint16_t> good = two_examples();
  const auto refused = [&](int32_t magic, int32_t version, int32_t n, std::vector<uint16_t> w, int vocab = 64) {
    write_raw(path("bad.bin"), magic, version, n, w);
    return input_error_of([&] { pentad::read_choice_file(path("bad.bin"), vocab); });
  };
  std::string m = refused(20240520, 1, 2, good);
  EXPECT_HAS(m, "bad.bin");
  EXPECT_HAS(m, "this is a token file");
  EXPECT_HAS(refused(20240522, 2, 2, good), "version 2");
  EXPECT_HAS(refused(20240522, 1, 0, good), "counts 0 examples");
  EXPECT_HAS(refused(20240522, 1, 3, good), "the file ends after 2");
  EXPECT_HAS(refused(20240522, 1, INT32_MAX, good), "the file ends after 2");  // no allocation by the header's count
  EXPECT_HAS(refused(20240522, 1, 1, good), "bytes after the 1 examples");
  std::vector<uint16_t> w = good;
  w[18] = 7;  // example 1's start (example 0 is 18 words)
  m = refused(20240522, 1, 2, w);
  EXPECT_HAS(m, "example 1 (byte offset 1060)");
  EXPECT_HAS(m, "not 65535");
  w = good;
  w[3] = 3;  // label 3 of 3 endings
  EXPECT_HAS(refused(20240522, 1, 2, w), "label 3 is not one of its 3 endings");
  m = refused(20240522, 1, 2, good, 26);  // ids 26.. too large
  EXPECT_HAS(m, "example 1");
  EXPECT_HAS(m, "token id 26 >= the vocabulary (26)");
  w = good;
  w[1] = 22;  // example 0 one word short of its fields
  EXPECT_HAS(refused(20240522, 1, 2, w), "example 0");
  w = good;
  w.pop_back();
  EXPECT_HAS(refused(20240522, 1, 2, w), "runs past the end of the file");
  EXPECT_HAS(refused(20240522, 1, 1, example_words(0, 0, {1}, {{2}, {}})), "ending 1 is empty");
  EXPECT_HAS(refused(20240522, 1, 1, example_words(0, 0, {}, {{2}, {3}})), "the context is empty");
  EXPECT_HAS(refused(20240522, 1, 1, example_words(0, 0, {1}, {{2}})), "1 endings (at least 2)");
  EXPECT_HAS(input_error_of([&] { pentad::read_choice_file(path("missing.bin"), 64); }), "missing.bin");
}

TEST_F(ChoiceEvalTest, RowsScoreTheEndingWhereItIsPredicted) {
  write_raw(path("a.bin"), 20240522, 1, 2, two_examples());
  const std::vector<ChoiceExample> ex = pentad::read_choice_file(path("a.bin"), 64);
  // seq_len 4: context + ending <= 5 tokens; ending 2 of example 0 (3 tokens) keeps 2 context tokens.
  const pentad::ChoiceRows r = pentad::choice_rows(ex, 2, 4);
  ASSERT_EQ(r.n_rows, 5);
  EXPECT_EQ(r.tokens, (std::vector<int>{1, 2, 3, 2, 1}));
  EXPECT_EQ(r.truncated, 1);
  std::vector<int32_t> inputs(6 * 4), targets(6 * 4);  // all five rows and one of padding
  pentad::fill_choice_rows(ex, r, 0, 6, inputs.data(), targets.data());
  const auto row = [&](const std::vector<int32_t>& v, int k) { return std::vector<int32_t>(v.begin() + 4 * k, v.begin() + 4 * k + 4); };
  EXPECT_EQ(row(inputs, 0), (std::vector<int32_t>{10, 11, 12, 0}));
  EXPECT_EQ(row(targets, 0), (std::vector<int32_t>{-1, -1, 20, -1}));
  EXPECT_EQ(row(inputs, 1), (std::vector<int32_t>{10, 11, 12, 21}));
  EXPECT_EQ(row(targets, 1), (std::vector<int32_t>{-1, -1, 21, 22}));
  EXPECT_EQ(row(inputs, 2), (std::vector<int32_t>{11, 12, 23, 24}));  // context cut from the left
  EXPECT_EQ(row(targets, 2), (std::vector<int32_t>{-1, 23, 24, 25}));
  EXPECT_EQ(row(inputs, 3), (std::vector<int32_t>{13, 26, 0, 0}));
  EXPECT_EQ(row(targets, 3), (std::vector<int32_t>{26, 27, -1, -1}));
  EXPECT_EQ(row(inputs, 5), (std::vector<int32_t>{0, 0, 0, 0}));  // padding: nothing scored
  EXPECT_EQ(row(targets, 5), (std::vector<int32_t>{-1, -1, -1, -1}));
  // A slice from row 2 is those rows of the whole.
  std::vector<int32_t> in2(2 * 4), tg2(2 * 4);
  pentad::fill_choice_rows(ex, r, 2, 2, in2.data(), tg2.data());
  EXPECT_EQ(in2, std::vector<int32_t>(inputs.begin() + 8, inputs.begin() + 16));
  EXPECT_EQ(tg2, std::vector<int32_t>(targets.begin() + 8, targets.begin() + 16));
  // Only the first example: its rows alone.
  EXPECT_EQ(pentad::choice_rows(ex, 1, 4).n_rows, 3);
  // An ending of seq_len + 1 tokens leaves no context.
  std::vector<ChoiceExample> long_end = ex;
  long_end[1].endings[0] = {1, 2, 3, 4, 5};
  const std::string m = input_error_of([&] { pentad::choice_rows(long_end, 2, 4); });
  EXPECT_HAS(m, "example 1, ending 0: 5 tokens");
  EXPECT_HAS(m, "model.seq_len = 4");
}

TEST_F(ChoiceEvalTest, ScoresByMeanAndBySumWithTiesToTheFirst) {
  ChoiceExample a;  // label 1: mean picks ending 1 (2.0/2 < 1.5/1), sum picks ending 0
  a.label = 1;
  a.context = {1};
  a.endings = {{2}, {3, 4}};
  ChoiceExample b;  // label 0: a tie between endings 0 and 1 goes to 0
  b.label = 0;
  b.context = {1};
  b.endings = {{2}, {3}, {4}};
  const pentad::ChoiceScore s = pentad::score_choices({a, b}, 2, {1.5, 2.0, 0.5, 0.5, 0.9}, {1, 2, 1, 1, 1});
  EXPECT_EQ(s.examples, 2);
  EXPECT_EQ(s.correct_norm, 2);
  EXPECT_EQ(s.correct_sum, 1);
  EXPECT_DOUBLE_EQ(s.acc_norm(), 1.0);
  EXPECT_DOUBLE_EQ(s.acc(), 0.5);
}

TEST_F(ChoiceEvalTest, WriterRefusesWhatTheFormatCannotHold) {
  ChoiceExample e;
  e.context = {1};
  e.endings = {{2}, {65535}};  // 65535 marks an example's start
  std::string m = input_error_of([&] { pentad::write_choice_file(path("w.bin"), {e}); });
  EXPECT_HAS(m, "w.bin");
  EXPECT_HAS(m, "token id 65535");
  e.endings = {{2}, std::vector<int32_t>(40000, 3)};
  EXPECT_HAS(input_error_of([&] { pentad::write_choice_file(path("w.bin"), {e}); }), "at most 65535 per example");
}

}  // namespace
