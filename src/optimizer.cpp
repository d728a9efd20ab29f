// AdamW over the flat buffers, one backend call per tensor (decay differs).
#include "optimizer.hpp"

#include <algorithm>
#include <cmath>

namespace pentad {

double lr_at(const TrainConfig& t, int step) {
  if (t.warmup_steps > 0 && step <= t.warmup_steps) return double(t.lr) * step / t.warmup_steps;
  const double span = std::max(1, t.steps - t.warmup_steps);
  const double progress = std::clamp((step - t.warmup_steps) / span, 0.0, 1.0);
  return t.min_lr + 0.5 * (double(t.lr) - t.min_lr) * (1.0 + std::cos(M_PI * progress));
}

float clip_scale(double grad_norm, float grad_clip) {
  if (grad_clip <= 0 || !(grad_norm > grad_clip)) return 1.0f;
  return float(grad_clip / (grad_norm + 1e-6));
}

AdamW::AdamW(ParamStore& params, Backend& backend, const TrainConfig& cfg)
    : params_(params), be_(backend), cfg_(cfg), n_(params.numel()) {
  m_ = be_.alloc(n_, Mem::optim);
  v_ = be_.alloc(n_, Mem::optim);
}

AdamW::~AdamW() {
  be_.free_bytes(m_);
  be_.free_bytes(v_);
}

void AdamW::step(int step, float lr, float grad_scale) {
  for (const ParamInfo& p : params_.infos()) {
    const size_t o = p.offset;
    be_.adamw(params_.params() + o, params_.grads() + o, m_ + o, v_ + o, p.numel(), lr, cfg_.beta1,
              cfg_.beta2, cfg_.eps, p.decay ? cfg_.weight_decay : 0.0f, grad_scale, step);
  }
}

}  // namespace pentad
