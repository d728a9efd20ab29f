// Multiple-choice evaluation (HellaSwag, MMLU) in llm.c's eval file format,
// which llm.c's data scripts write and its trainer reads: a 256 x int32
// header (magic 20240522, version 1, the number of examples, the longest
// example in bytes) and then the examples, each a stream of uint16:
//   65535 (start of example), its size in bytes (from that 65535 on), its
//   index, the label (the correct ending), the number of endings,
//   the context's length and tokens, then each ending's length and tokens.
// 65535 never is a token, so the format holds vocabularies up to 65535.
//
// An ending's score is the model's loss on its tokens after the context:
// row c of an example is context + ending c, with targets only on the
// ending. The prediction is the ending of least mean loss per token
// (acc_norm, the figure llm.c reports for HellaSwag) and, beside it, of
// least summed loss (acc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pentad {

class Tokenizer;

constexpr int32_t kChoiceMagic = 20240522;
constexpr int32_t kChoiceVersion = 1;

struct ChoiceExample {
  int index = 0;  // as the file numbers it
  int label = 0;  // the correct ending
  std::vector<int32_t> context;
  std::vector<std::vector<int32_t>> endings;
};

// The file's examples. Throws InputError naming the file (and the example
// and its byte offset) for a missing file, a bad header, a malformed
// example, a label not among the endings, an empty ending, a token id >=
// vocab_size, or a size that does not match the examples.
std::vector<ChoiceExample> read_choice_file(const std::string& path, int vocab_size);

// The examples in the same format (what `pentad prep --choices` writes);
// throws InputError naming the path when an example cannot be represented
// (a token id >= 65535, an example over 65535 bytes, more than 65535
// examples) or the file cannot be written. Written atomically.
void write_choice_file(const std::string& path, const std::vector<ChoiceExample>& examples);

// HellaSwag's JSON Lines (one example a line: "ctx", a string; "endings",
// strings; "label", the correct ending's index) tokenized as llm.c renders
// it: the context's ids, and each ending's ids with a space before it.
// Blank lines are skipped; an example is numbered by its place in the file.
// Throws InputError naming the file and line for a line that is not such
// an object (the test split's unlabelled lines among them).
std::vector<ChoiceExample> read_choices_jsonl(const std::string& path, const Tokenizer& tok);

// The rows of the first n examples, as windows of seq_len tokens: one row
// per ending, example by example, ending by ending. Row r holds context +
// ending as inputs (the last token only as a target), padded with token 0;
// its targets are the ending's tokens at the positions that predict them,
// -1 (ignored) elsewhere. A context too long for seq_len loses its first
// tokens (left truncation, counted); an ending longer than seq_len is an
// InputError naming the example. choice_rows lays the rows out (cheap);
// fill_choice_rows writes the windows of some of them, so each rank builds
// only its own.
struct ChoiceRows {
  int seq_len = 0;
  int64_t n_rows = 0;
  std::vector<int> tokens;  // per row: the ending's tokens (scored positions)
  int truncated = 0;        // rows whose context was cut
  struct Row {
    int example, ending;
  };
  std::vector<Row> rows;
};
ChoiceRows choice_rows(const std::vector<ChoiceExample>& examples, int64_t n, int seq_len);
// Rows [first, first + count) into (count, seq_len) inputs and targets; rows
// past n_rows are padding (inputs 0, targets -1).
void fill_choice_rows(const std::vector<ChoiceExample>& examples, const ChoiceRows& rows, int64_t first,
                      int64_t count, int32_t* inputs, int32_t* targets);

// Accuracy of the first n examples from each row's loss sum (rows in
// choice_rows' order). Ties go to the first ending.
struct ChoiceScore {
  int64_t examples = 0;
  int64_t correct_norm = 0;  // least mean loss per token
  int64_t correct_sum = 0;   // least summed loss
  double acc_norm() const { return examples ? double(correct_norm) / double(examples) : 0.0; }
  double acc() const { return examples ? double(correct_sum) / double(examples) : 0.0; }
};
ChoiceScore score_choices(const std::vector<ChoiceExample>& examples, int64_t n, const std::vector<double>& row_loss,
                          const std::vector<int>& row_tokens);

}  // namespace pentad
