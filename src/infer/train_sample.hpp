// The short sample a training run prints every train.sample_every steps:
// drawn at temperature 1 (no top-k, no top-p) with a fixed seed (the run's
// train.seed, the same uniforms at every sample point), as llm.c samples, so
// a run of any layout prints the sample its weights imply (a greedy sample
// of a barely trained model is one repeated byte; a drawn one shows what the
// distribution holds). The prompt is the token the tokenizer puts before
// every document (its doc_separator: GPT-2's <|endoftext|>, Llama 3's
// <|begin_of_text|>, Llama 2's <s>) when it has one, else the first tokens
// of a token file (data.val, or data.train).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "infer/engine.hpp"
#include "io/data.hpp"
#include "tok/tokenizer.hpp"

namespace pentad {

// The prompt: tok's document separator, or the first min(8, seq_len / 2) tokens of data.
std::vector<int32_t> train_sample_prompt(const TokenFile& data, int seq_len, const Tokenizer* tok);

// One line for the log: the step, the prompt and n_tokens tokens of
// continuation drawn with `seed` (fewer at end-of-text or model.seq_len), as text quoted with
// C escapes: decoded by tok, else as bytes for a vocabulary of 256 (invalid
// UTF-8 replaced by U+FFFD), else as token ids.
std::string train_sample_line(InferenceEngine& engine, int step, const std::vector<int32_t>& prompt, int n_tokens,
                              uint64_t seed, const Tokenizer* tok);

}  // namespace pentad
