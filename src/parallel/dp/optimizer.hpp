// AdamW with FP32 master weights and moments, decoupled weight decay (only on
// tensors marked `decay`: matrices and embeddings, not norms or biases), and
// the learning-rate schedule: linear warm-up, then train.lr_schedule.
#pragma once

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "model/params.hpp"

namespace pentad {

// lr at 1-based step s: lr*s/warmup for s <= warmup, then, with
// p = clamp((s - warmup) / max(1, steps - warmup), 0, 1):
//   cosine:   min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2
//   linear:   lr - (lr - min_lr) * p
//   constant: lr
//   wsd:      lr up to step steps - decay_steps, then
//             lr - (lr - min_lr) * min(1, (s - (steps - decay_steps)) / decay_steps)
double lr_at(const TrainConfig& t, int step);

// Scale applied to the gradients by global-norm clipping (1 when off or not needed),
// as torch.nn.utils.clip_grad_norm_: clip / (norm + 1e-6) when norm > clip.
float clip_scale(double grad_norm, float grad_clip);

// Updates the flat range [lo, hi) of the parameters (the whole model, or a
// ZeRO shard); moments are held for that range only.
class AdamW {
 public:
  AdamW(ParamStore& params, Backend& backend, const TrainConfig& cfg, size_t lo, size_t hi);
  AdamW(ParamStore& params, Backend& backend, const TrainConfig& cfg)
      : AdamW(params, backend, cfg, 0, params.numel()) {}
  ~AdamW();
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;

  // One update with this step's lr; p and g address flat element lo (the
  // range's values and gradients); grads are multiplied by grad_scale
  // (clipping) on the fly. step is 1-based (bias correction).
  void step(float* p, const float* g, int step, float lr, float grad_scale);
  // The whole model when the flat buffers are full (no ZeRO).
  void step(int step_no, float lr, float grad_scale) {
    step(params_.params(), params_.grads(), step_no, lr, grad_scale);
  }
  float* m() { return m_; }  // moments of [lo, hi)
  float* v() { return v_; }
  size_t state_bytes() const { return 2 * n_ * sizeof(float); }

 private:
  ParamStore& params_;
  Backend& be_;
  TrainConfig cfg_;
  size_t lo_ = 0, hi_ = 0, n_ = 0;
  float* m_ = nullptr;
  float* v_ = nullptr;
};

}  // namespace pentad
