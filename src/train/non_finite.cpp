// What went non-finite first in a failed step (non_finite.hpp). The loss is
// checked per rank before its reduction, so the ranks named are those whose
// own micro-batches produced it. A gradient is checked after the dp x cp
// reduction (that is all a rank still holds), so the ranks named are those
// holding the tensor: its pipeline stage and tp ranks, over every dp rank.
#include "train/non_finite.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "comm/host.hpp"

namespace pentad {
namespace {

// "3 (pp 1 dp 1 cp 0 tp 0)": a rank and its grid coordinates.
std::string rank_coords(const Topology& t) {
  return std::to_string(t.rank) + " (pp " + std::to_string(t.me.pp) + " dp " + std::to_string(t.dp_rank()) +
         " cp " + std::to_string(t.me.cp) + " tp " + std::to_string(t.me.tp) + ")";
}

// "rank 3 (...)" or "ranks 0 (...), 1 (...)", the first four named.
std::string rank_list(const std::vector<std::string>& flagged) {
  constexpr size_t kNamed = 4;
  std::string out = flagged.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < flagged.size() && i < kNamed; ++i) out += (i ? ", " : "") + flagged[i];
  if (flagged.size() > kNamed) out += " and " + std::to_string(flagged.size() - kNamed) + " more";
  return out;
}

// Backward reaches units from the last to the first, and in a unit its
// tensors in reverse order of registration (forward order), the MoE
// experts before the dense tensors of the block (router, attention): the
// largest key is the gradient that went non-finite first.
int64_t backward_key(const ParamInfo& p, int index, bool expert) {
  return (int64_t(p.unit) << 32) | (expert ? int64_t(1) << 31 : 0) | int64_t(index);
}

// The key of the first non-finite gradient in `store` (-1: none) and its
// tensor's name. host: scratch, grown as needed. Collective over dp's group.
int64_t first_bad_grad(ParamStore& store, DataParallel& dp, bool expert, std::vector<float>& host,
                       std::string& name) {
  int64_t best = -1;
  for (int i = 0; i < int(store.infos().size()); ++i) {
    const ParamInfo& p = store.info(i);
    host.resize(std::max(host.size(), p.numel()));
    dp.get_grad(i, host.data());  // every rank of the group, every tensor, in the same order
    bool finite = true;
    for (size_t k = 0; k < p.numel() && finite; ++k) finite = std::isfinite(host[k]);
    const int64_t key = backward_key(p, i, expert);
    if (!finite && key > best) {
      best = key;
      name = p.name;
    }
  }
  return best;
}

}  // namespace

std::string describe_non_finite(const NonFiniteStep& s, const Topology& topo) {
  const bool my_loss_bad = !std::isfinite(s.local_loss_sum);
  const bool loss_bad = host::allreduce(topo.job, int(my_loss_bad), host::Op::max) != 0;
  std::string what;
  bool flagged = false;
  std::string name;  // the tensor, on the flagged ranks
  if (loss_bad) {
    what = "the loss";
    flagged = my_loss_bad;
  } else if (!std::isfinite(s.loss)) {
    what = "the loss (every rank's sum is finite, their total is not)";
  } else {
    std::vector<float> host;
    std::string dense_name, expert_name;
    const int64_t dense_key = first_bad_grad(*s.dense, *s.dense_dp, false, host, dense_name);
    const int64_t expert_key =
        s.experts_dp ? first_bad_grad(*s.experts, *s.experts_dp, true, host, expert_name) : int64_t(-1);
    const int64_t mine = std::max(dense_key, expert_key);
    name = expert_key > dense_key ? expert_name : dense_name;
    const int64_t first = host::allreduce(topo.job, mine, host::Op::max);
    if (first >= 0) {
      what = "the gradient of ";  // + the name, from a flagged rank
      flagged = mine == first;
    } else {
      what = "the gradient norm (every gradient is finite, the sum of their squares is not)";
    }
  }
  const std::vector<std::string> all =
      host::gather_strings(topo.job, flagged ? rank_coords(topo) + '\n' + name : std::string(), 0);
  std::string msg;
  if (topo.is_root()) {
    std::vector<std::string> ranks;
    for (const std::string& a : all) {
      if (a.empty()) continue;
      const size_t nl = a.find('\n');
      if (ranks.empty() && what == "the gradient of ") what += a.substr(nl + 1);
      ranks.push_back(a.substr(0, nl));
    }
    msg = "step " + std::to_string(s.step) + ": loss or gradient norm is not finite (loss " +
          std::to_string(s.loss) + ", grad norm " + std::to_string(s.grad_norm) + "); first non-finite: " + what +
          (ranks.empty() ? "" : ", on " + rank_list(ranks)) + "; lower train.lr or check the data";
  }
  return host::bcast_string(topo.job, msg, 0);
}

}  // namespace pentad
