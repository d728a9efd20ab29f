// Rotary position embedding's frequencies (model.rope_theta,
// model.rope_scaling): pair i of a head of D channels turns by
// pos * rope_inv_freq(rope, i, D). Both backends evaluate this one
// definition, in double; the op tests check it against frequencies worked
// out by hand (test_backend_ops), not against itself.
#pragma once

#include <cmath>

#include "core/host_device.hpp"

namespace pentad {

struct Rope {
  double theta = 10000.0;  // base: the unscaled inverse frequency of pair i is theta^(-2i/D)
  // Llama 3.1's scaling (rope_scaling "llama3" in a Hugging Face config.json):
  // measured against the context the model was first trained on, a pair
  // whose wavelength 2*pi/f is shorter than original_context /
  // high_freq_factor keeps f, one longer than original_context /
  // low_freq_factor turns `factor` times slower, and one in between is
  // interpolated by s = (original_context / wavelength - low_freq_factor) /
  // (high_freq_factor - low_freq_factor): (1 - s) * f / factor + s * f.
  bool llama3 = false;
  double factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_context = 8192.0;
};

PENTAD_HD inline double rope_inv_freq(const Rope& r, int i, int D) {
  const double f = pow(r.theta, -2.0 * i / D);
  if (!r.llama3) return f;
  const double wavelength = 2.0 * 3.14159265358979323846 / f;
  if (wavelength < r.original_context / r.high_freq_factor) return f;
  if (wavelength > r.original_context / r.low_freq_factor) return f / r.factor;
  const double s = (r.original_context / wavelength - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  return (1.0 - s) * f / r.factor + s * f;
}

}  // namespace pentad
