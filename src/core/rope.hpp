// Rotary position embedding's frequencies (model.rope_theta,
// model.rope_scaling): pair i of a head of D channels turns by
// pos * rope_inv_freq(rope, i, D), and the rotated pair is multiplied by
// rope_attention_factor(rope) (1 except under YaRN and LongRoPE). Both
// backends evaluate these definitions, in double; the op tests check them
// against values worked out by hand (test_backend_ops), not against
// themselves.
#pragma once

#include <cmath>

#include "core/host_device.hpp"

namespace pentad {

// model.rope_scaling: RoPE's frequencies as they are, Llama 3.1's scaling of
// them, YaRN's, all of them `factor` times slower, or each pair slowed by a
// factor of its own (rope_scaling "llama3", "yarn", "linear", "longrope" in a
// Hugging Face config.json).
enum class RopeScaling { none, llama3, yarn, linear, longrope };

// The most pairs longrope can turn (256 channels of a head).
constexpr int kRopeMaxPairs = 128;

struct Rope {
  double theta = 10000.0;  // base: the unscaled inverse frequency of pair i is f = theta^(-2i/D)
  RopeScaling scaling = RopeScaling::none;
  // linear (position interpolation, Chen et al. 2023): every pair turns
  // `factor` times slower, f / factor.
  // llama3 and yarn are measured against the context the model was first
  // trained on, original_context, and slow the long wavelengths `factor`
  // times.
  // llama3: a pair whose wavelength 2*pi/f is shorter than original_context /
  // high_freq_factor keeps f, one longer than original_context /
  // low_freq_factor turns `factor` times slower, and one in between is
  // interpolated by s = (original_context / wavelength - low_freq_factor) /
  // (high_freq_factor - low_freq_factor): (1 - s) * f / factor + s * f.
  double factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_context = 8192.0;
  // yarn (Peng et al. 2023, "YaRN", section 3.2): the pair index at which f
  // makes r turns over original_context positions is
  // d(r) = D * ln(original_context / (2*pi*r)) / (2 * ln(theta)); pairs below
  // lo = d(beta_fast) keep f, pairs above hi = d(beta_slow) turn `factor`
  // times slower, and in between the ramp s = (i - lo) / (hi - lo) mixes
  // (1 - s) * f + s * f / factor. With truncate, lo and hi are first rounded
  // outwards to whole pairs (floor, ceil); then lo is clamped to >= 0, hi
  // to <= D - 1, and hi = lo is moved to lo + 0.001. Every rotated pair is
  // multiplied by attention_factor (0 here: 0.1 * ln(factor) + 1, or 1 at
  // factor 1), which scales the attention logits by its square.
  double beta_fast = 32.0, beta_slow = 1.0, attention_factor = 0.0;
  bool truncate = true;
  // longrope (Ding et al. 2024, "LongRoPE"; Phi-3's 128k models): pair i
  // turns pair_factor[i] times slower, f / pair_factor[i]. The model has two
  // lists, one for contexts up to original_context and one for longer ones;
  // ModelConfig::rope(context) copies the one a call's context takes here.
  // Every rotated pair is multiplied by attention_factor (0 here:
  // sqrt(1 + ln(factor) / ln(original_context)), or 1 at factor <= 1).
  double pair_factor[kRopeMaxPairs] = {};
  // Partial rotary (Phi-4-mini): only the first rotary_dim channels of a
  // head (pairs 0 .. rotary_dim/2 - 1) turn, as a head of rotary_dim would
  // (D reads rotary_dim in every rule above); the others pass unchanged and
  // unscaled. 0: every channel.
  int rotary_dim = 0;
};

// The channels of a head of D that RoPE turns: the first rope_rotary_dim.
PENTAD_HD inline int rope_rotary_dim(const Rope& r, int D) {
  return r.rotary_dim > 0 && r.rotary_dim < D ? r.rotary_dim : D;
}

PENTAD_HD inline double rope_yarn_pair(const Rope& r, double rotations, int D) {
  return D * log(r.original_context / (2.0 * 3.14159265358979323846 * rotations)) / (2.0 * log(r.theta));
}

// Pair i (< rope_rotary_dim / 2) of a head of D channels.
PENTAD_HD inline double rope_inv_freq(const Rope& r, int i, int D) {
  D = rope_rotary_dim(r, D);
  const double f = pow(r.theta, -2.0 * i / D);
  if (r.scaling == RopeScaling::linear) return f / r.factor;
  if (r.scaling == RopeScaling::longrope) return f / r.pair_factor[i];
  if (r.scaling == RopeScaling::yarn) {
    double lo = rope_yarn_pair(r, r.beta_fast, D), hi = rope_yarn_pair(r, r.beta_slow, D);
    if (r.truncate) {
      lo = floor(lo);
      hi = ceil(hi);
    }
    lo = lo < 0.0 ? 0.0 : lo;
    hi = hi > D - 1.0 ? D - 1.0 : hi;
    if (lo == hi) hi += 0.001;
    double s = (i - lo) / (hi - lo);
    s = s < 0.0 ? 0.0 : s > 1.0 ? 1.0 : s;
    return (1.0 - s) * f + s * f / r.factor;
  }
  if (r.scaling != RopeScaling::llama3) return f;
  const double wavelength = 2.0 * 3.14159265358979323846 / f;
  if (wavelength < r.original_context / r.high_freq_factor) return f;
  if (wavelength > r.original_context / r.low_freq_factor) return f / r.factor;
  const double s = (r.original_context / wavelength - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  return (1.0 - s) * f / r.factor + s * f;
}

// The factor on every turned pair: 1 unless YaRN or LongRoPE.
PENTAD_HD inline double rope_attention_factor(const Rope& r) {
  if (r.scaling != RopeScaling::yarn && r.scaling != RopeScaling::longrope) return 1.0;
  if (r.attention_factor > 0.0) return r.attention_factor;
  if (r.factor <= 1.0) return 1.0;
  if (r.scaling == RopeScaling::longrope) return sqrt(1.0 + log(r.factor) / log(r.original_context));
  return 0.1 * log(r.factor) + 1.0;
}

}  // namespace pentad
