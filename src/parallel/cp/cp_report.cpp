// Context parallelism's start-up balance print, per-step attention metrics
// and the debug dump's logits gather (see cp_report.hpp).
#include "parallel/cp/cp_report.hpp"

#include <algorithm>
#include <cstdio>

#include "comm/host.hpp"

namespace pentad {

void print_cp_balance(const CpSplit& s) {
  auto ratio = [&](CpLayout layout) {
    const CpSplit x{s.seq_len, s.cp, layout};
    int64_t lo = x.causal_pairs(0), hi = lo;
    for (int r = 1; r < s.cp; ++r) {
      lo = std::min(lo, x.causal_pairs(r));
      hi = std::max(hi, x.causal_pairs(r));
    }
    return double(hi) / double(lo);
  };
  std::printf("context parallel: cp=%d %s, %d tokens of each sequence per rank; causal attention "
              "work per rank max/min: zigzag %.3f, contiguous %.3f\n",
              s.cp, s.layout == CpLayout::zigzag ? "zigzag" : "contiguous", s.local_len(),
              ratio(CpLayout::zigzag), ratio(CpLayout::contiguous));
}

void cp_attention_stats(const RingAttention& ring, Comm& cp, double out[4]) {
  // The minimum is minus the maximum of the negatives.
  double mx[2] = {ring.flops() / 1e9, ring.compute_ms()};
  double mn[2] = {-mx[0], -mx[1]};
  cp.allreduce_max_host(mx, 2);
  cp.allreduce_max_host(mn, 2);
  out[0] = mx[0];
  out[1] = -mn[0];
  out[2] = mx[1];
  out[3] = -mn[1];
}

void gather_cp_logits(const CpSplit& s, MPI_Comm cp, int cp_rank, int A, int b, int V,
                      std::vector<float>& logits) {
  if (s.cp == 1) return;
  const int n = int(logits.size());
  std::vector<float> all(cp_rank == 0 ? logits.size() * size_t(s.cp) : 0);  // (cp, A*b*T/cp, V)
  host::gather(cp, logits.data(), n, all.data(), 0);
  if (cp_rank != 0) return;
  logits.assign(all.size(), 0.0f);
  cp_unslice(s, all.data(), A, b, V, logits.data());
}

}  // namespace pentad
