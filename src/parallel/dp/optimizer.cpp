// AdamW over the flat buffers, one backend call per tensor (decay differs).
#include "parallel/dp/optimizer.hpp"

#include <algorithm>
#include <cmath>

namespace pentad {

double lr_at(const TrainConfig& t, int step) {
  if (t.warmup_steps > 0 && step <= t.warmup_steps) return double(t.lr) * step / t.warmup_steps;
  const double lr = t.lr, min_lr = t.min_lr;
  const double span = std::max(1, t.steps - t.warmup_steps);
  const double progress = std::clamp((step - t.warmup_steps) / span, 0.0, 1.0);
  switch (t.lr_schedule) {
    case LrSchedule::cosine: return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(M_PI * progress));
    case LrSchedule::linear: return lr - (lr - min_lr) * progress;
    case LrSchedule::constant: return lr;
    case LrSchedule::wsd: {
      const int decay_from = t.steps - t.decay_steps;  // the last stable step
      if (step <= decay_from) return lr;
      return lr - (lr - min_lr) * std::min(1.0, double(step - decay_from) / std::max(1, t.decay_steps));
    }
  }
  return lr;
}

float clip_scale(double grad_norm, float grad_clip) {
  if (grad_clip <= 0 || !(grad_norm > grad_clip)) return 1.0f;
  return float(grad_clip / (grad_norm + 1e-6));
}

AdamW::AdamW(ParamStore& params, Backend& backend, const TrainConfig& cfg, size_t lo, size_t hi)
    : params_(params), be_(backend), cfg_(cfg), lo_(lo), hi_(hi), n_(hi - lo) {
  m_ = be_.alloc(std::max<size_t>(n_, 1), Mem::optim);
  v_ = be_.alloc(std::max<size_t>(n_, 1), Mem::optim);
}

AdamW::~AdamW() {
  be_.free_bytes(m_);
  be_.free_bytes(v_);
}

void AdamW::step(float* p, const float* g, int step, float lr, float grad_scale) {
  for (const ParamInfo& t : params_.infos()) {
    // The part of this tensor inside [lo, hi) (weight decay differs per tensor).
    const size_t a = std::max(lo_, t.offset), b = std::min(hi_, t.offset + t.numel());
    if (a >= b) continue;
    const size_t o = a - lo_;
    be_.adamw(p + o, g + o, m_ + o, v_ + o, b - a, lr, cfg_.beta1, cfg_.beta2, cfg_.eps,
              t.decay ? cfg_.weight_decay : 0.0f, grad_scale, step);
  }
}

}  // namespace pentad
