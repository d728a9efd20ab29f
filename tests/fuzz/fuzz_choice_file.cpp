// libFuzzer target: multiple-choice eval files (io/choice_eval.*). The bytes
// go to a file; any content must read or give an InputError naming the file,
// and what reads must lay out, fill and score as rows of 16 tokens (an
// ending too long for them is an InputError too).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "fuzz_file.hpp"
#include "io/choice_eval.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = pentad::fuzz::input_path("choices", ".bin");
  if (!pentad::fuzz::write_input(path, data, size)) return 0;
  try {
    const std::vector<pentad::ChoiceExample> ex = pentad::read_choice_file(path, 300);
    const pentad::ChoiceRows rows = pentad::choice_rows(ex, int64_t(ex.size()), 16);
    std::vector<int32_t> in(size_t(rows.n_rows + 1) * 16), tg(in.size());
    pentad::fill_choice_rows(ex, rows, 0, rows.n_rows + 1, in.data(), tg.data());  // one row of padding
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i] < 0 || in[i] >= 300 || tg[i] < -1 || tg[i] >= 300) std::abort();
    const std::vector<double> loss(size_t(rows.n_rows), 1.0);
    const pentad::ChoiceScore s = pentad::score_choices(ex, int64_t(ex.size()), loss, rows.tokens);
    if (s.examples != int64_t(ex.size()) || s.correct_norm > s.examples) std::abort();
  } catch (const pentad::InputError&) {
  }
  std::remove(path.c_str());
  return 0;
}
