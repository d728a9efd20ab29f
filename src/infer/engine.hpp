// Inference engine: one rank, batch 1, the whole model (GPT-2, Llama or MoE)
// on one backend, with a key/value cache. Each forward call takes the next n
// tokens of the sequence at positions [pos, pos + n): their keys and values
// go into the cache, and their queries attend to every cached position
// (causal, global offsets: Backend::attention_fwd with Tq = n, Tk = pos + n).
// The prompt is one call (prefill); each generated token is one call of one
// position. The layers are the training model's (model/model.cpp) written
// for this shape: the same backend ops on the same weights.
// MoE blocks route each token to its top_k experts with no capacity limit
// (training drops choices over a per-sequence capacity unless
// model.dropless; a sequence being generated has no fixed length to cut a
// capacity from).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "infer/weights.hpp"

namespace pentad {

class InferenceEngine {
 public:
  // Copies the weights to the backend and allocates the cache for
  // model.seq_len positions. The weights must hold every tensor of the
  // model's parameter list (weights.hpp); they are not kept.
  InferenceEngine(const ModelWeights& w, Backend& be);
  ~InferenceEngine();
  InferenceEngine(const InferenceEngine&) = delete;
  InferenceEngine& operator=(const InferenceEngine&) = delete;

  const ModelConfig& config() const { return cfg_; }
  int position() const { return pos_; }  // tokens in the cache
  void reset() { pos_ = 0; }              // forget the sequence

  // Runs tokens[0, n) at positions [position(), position() + n) and appends
  // them to the cache. logits (host) receives the (n, V) logits of every
  // position when all_positions, else the (V) logits of the last one.
  // Throws InputError when the sequence would pass model.seq_len or a token
  // is outside the vocabulary.
  void forward(const int32_t* tokens, int n, std::vector<float>& logits, bool all_positions = false);

 private:
  struct Layer;
  void build(const ModelWeights& w);
  float* upload(const ModelWeights& w, const std::string& name);
  void norm(float* out, const float* x, const float* w, const float* b, int n);
  void block(int l, int n);
  void moe_mlp(int l, int n);
  void shared_mlp(const Layer& y, int n);
  void head(int row0, int n, float* logits_host);

  ModelConfig cfg_;
  Backend& be_;
  bool gpt2_;
  int C_, H_, Hkv_, D_, F_, V_, L_, T_;
  int pos_ = 0;
  std::vector<std::unique_ptr<Layer>> layers_;
  const float *wte_ = nullptr, *wpe_ = nullptr, *lnf_w_ = nullptr, *lnf_b_ = nullptr, *head_w_ = nullptr;
  std::vector<void*> owned_;  // every device allocation
  // Activations for up to T rows (one prefill of the whole sequence).
  int32_t* tok_ = nullptr;            // (T)
  float *x_ = nullptr, *ln_ = nullptr;  // (T, C) residual stream, norm output
  float *mean_ = nullptr, *rstd_ = nullptr;  // (T)
  float* qk_rstd_ = nullptr;                 // (T, H) the q/k norms' (model.qk_norm)
  float *q_ = nullptr, *att_ = nullptr;      // (T, H*D)
  float* lse_ = nullptr;                     // (H, T)
  float *fc_ = nullptr, *up_ = nullptr, *act_ = nullptr;  // (T, F)
  float* logits_ = nullptr;            // (head_rows_, V)
  int head_rows_ = 1;
  // MoE: router logits (T, E); every choice's row in dispatch order (T k, C)
  // and its expert's output; the dispatch's index lists and weights (T k).
  float *router_ = nullptr, *xe_ = nullptr, *ye_ = nullptr, *moe_w_ = nullptr;
  int32_t *moe_row_ = nullptr, *moe_token_ = nullptr;
};

}  // namespace pentad
