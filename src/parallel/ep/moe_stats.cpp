// The step's MoE routing summary (see moe_stats.hpp): one sum over the ranks
// holding other tokens and other blocks, then the formulas on every rank.
#include "parallel/ep/moe_stats.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pentad {

MoeStep moe_step(const MoeStats& st, const ModelConfig& mc, Comm& dp_cp, Comm& pp, double seqs, double tokens) {
  // (4 + L*E): aux_sum, z_sum, assigned, dropped, then per (block, expert).
  std::vector<double> v = {st.aux_sum, st.z_sum, st.assigned, st.dropped};
  v.insert(v.end(), st.per_expert.begin(), st.per_expert.end());
  dp_cp.allreduce_sum_host(v.data(), int(v.size()));
  pp.allreduce_sum_host(v.data(), int(v.size()));
  MoeStep r;
  int n_moe = 0;
  for (int l = 0; l < mc.n_layers; ++l) n_moe += mc.is_moe_block(l) ? 1 : 0;
  r.aux_loss = mc.aux_loss_coef * v[0] / seqs + mc.z_loss_coef * v[1] / tokens;
  r.balance = n_moe ? v[0] / seqs / n_moe : 0;
  r.dropped = v[2] > 0 ? v[3] / v[2] : 0;
  r.tok_min = INFINITY;
  r.tok_max = 0;
  double sum = 0;
  for (int l = 0; l < mc.n_layers; ++l) {
    if (!mc.is_moe_block(l)) continue;
    for (int e = 0; e < mc.n_experts; ++e) {
      const double c = v[4 + size_t(l) * mc.n_experts + size_t(e)];
      r.tok_min = std::min(r.tok_min, c);
      r.tok_max = std::max(r.tok_max, c);
      sum += c;
    }
  }
  r.tok_mean = n_moe ? sum / (double(n_moe) * mc.n_experts) : 0;
  if (!n_moe) r.tok_min = 0;
  r.recv_load_root = r.recv_load_max = st.recv_load_max;
  dp_cp.allreduce_max_host(&r.recv_load_max, 1);
  pp.allreduce_max_host(&r.recv_load_max, 1);
  return r;
}

}  // namespace pentad
