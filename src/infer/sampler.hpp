// Choosing the next token from the logits, and the generation loop.
// temperature 0 is greedy (argmax; ties go to the lower id). Otherwise the
// candidates are the top_k largest logits (0: all), then the smallest
// prefix of them, by decreasing probability, whose probability mass reaches
// top_p (nucleus sampling, Holtzman et al. 2019), and of those the ones
// whose probability is at least min_p times the most likely one's (min-p
// sampling, Nguyen et al. 2024; transformers' MinPLogitsWarper after its
// top-k and top-p: the same set in either order); the token is drawn from
// softmax(logit / temperature) renormalised over the candidates, with the
// uniform number i of the counter-based stream (seed, kSampleStream) for
// the i-th generated token: the same seed gives the same tokens. A
// repetition penalty r != 1 first divides the logit of every id already in
// the sequence (prompt and generated) by r where it is positive and
// multiplies it by r where it is negative (Keskar et al. 2019, CTRL; the rule
// of transformers' RepetitionPenaltyLogitsProcessor), also when greedy.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "infer/engine.hpp"

namespace pentad {

struct SampleParams {
  double temperature = 1.0;  // >= 0; 0 = greedy
  int top_k = 0;             // >= 0; 0 = no limit
  double top_p = 1.0;        // in (0, 1]
  uint64_t seed = 0;
  // Candidates are the ids < vocab (the tokenizer's vocabulary, so a model
  // whose vocabulary is padded beyond it never yields a padding id); 0 = all
  // of the model's.
  int vocab = 0;
  double repetition_penalty = 1.0;  // > 0; 1 = none (generate() applies it)
  double min_p = 0.0;               // in [0, 1]; 0 = none
};

// An InputError naming the option when a value is out of range.
void check_sample_params(const SampleParams& p);

// logits (V) of a sequence whose ids so far are marked in seen (V) with the
// repetition penalty r applied, in place.
void apply_repetition_penalty(float* logits, const std::vector<uint8_t>& seen, double r);

// The token chosen from logits (V) for the i-th generated token (the
// repetition penalty is generate()'s, which knows the sequence).
int32_t sample_token(const float* logits, int V, const SampleParams& p, uint64_t i);

enum class StopReason { tokens, eot, seq_len, text };

struct Generation {
  std::vector<int32_t> ids;  // the generated tokens (an end-of-text is not included)
  StopReason stop = StopReason::tokens;
  int32_t stop_id = -1;      // StopReason::eot: the stop token sampled
  double prefill_s = 0, decode_s = 0;  // the prompt's forward; the later forwards
  int n_forwards = 0;                  // decode forwards (one position each)
};

// Runs the prompt (one forward from an empty cache), then up to n_new tokens,
// each one forward of one position; stops early at any of the stop tokens
// (an end-of-text; a Hugging Face generation_config.json may name several),
// when the sequence reaches model.seq_len, or when stop_after (nullable),
// called with each token kept, returns true (StopReason::text: the token is
// kept; `pentad sample --stop`'s strings). Throws InputError for an empty
// prompt or one longer than model.seq_len.
Generation generate(InferenceEngine& engine, const std::vector<int32_t>& prompt, int n_new, const SampleParams& p,
                    const std::vector<int64_t>& stop, const std::function<bool(int32_t)>& stop_after = {});

// The same with one stop token, eot (-1: none).
inline Generation generate(InferenceEngine& engine, const std::vector<int32_t>& prompt, int n_new,
                           const SampleParams& p, int64_t eot) {
  return generate(engine, prompt, n_new, p, eot >= 0 ? std::vector<int64_t>{eot} : std::vector<int64_t>{});
}

}  // namespace pentad
