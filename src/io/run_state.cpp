// Builds the checkpoint's tensor list from the parameter store (see run_state.hpp).
#include "io/run_state.hpp"

#include <algorithm>
#include <functional>
#include <sstream>

#include "comm/host.hpp"
#include "core/error.hpp"
#include "parallel/tp/tensor_parallel.hpp"

namespace pentad {

std::string model_signature(const ModelConfig& m) {
  return std::string(m.family == Family::gpt2 ? "gpt2" : "llama") + " L=" + std::to_string(m.n_layers) +
         " C=" + std::to_string(m.d_model) + " H=" + std::to_string(m.n_heads) +
         " Hkv=" + std::to_string(m.n_kv_heads) +
         (int64_t(m.head_dim()) * m.n_heads != m.d_model ? " D=" + std::to_string(m.head_dim()) : std::string()) +
         " F=" + std::to_string(m.d_ff) +
         " V=" + std::to_string(m.vocab_size) + " T=" + std::to_string(m.seq_len) +
         " tied=" + std::to_string(m.tied() ? 1 : 0) + (m.qk_norm ? " qk_norm" : "") +
         (m.mlp_act != GateAct::silu ? std::string(" mlp_act=") + deck_name(m.mlp_act) : std::string()) +
         (m.norm_plus_one ? " norm_plus_one" : "") + (m.embed_scale ? " embed_scale" : "") +
         (m.n_experts > 0 ? " E=" + std::to_string(m.n_experts) + " k=" + std::to_string(m.top_k) +
                                " moe_every=" + std::to_string(m.moe_every) +
                                // the routing rule where it is not top_k's default (older signatures unchanged)
                                (m.renormalizes_top_k() != (m.top_k > 1)
                                     ? (m.renormalizes_top_k() ? " renormalized" : " probabilities")
                                     : "") +
                                (m.shared_expert_ffn > 0 ? " shared=" + std::to_string(m.shared_expert_ffn) +
                                                               (m.shared_expert_gate ? " gated" : "")
                                                         : std::string())
                          : std::string());
}

std::vector<GlobalTensor> global_tensors(const ParamStore& params, const ParamStore* experts, MPI_Comm pp) {
  // "unit expert name d0,d1,...\n" per owned tensor, gathered from every stage.
  std::string mine;
  auto list = [&](const ParamStore& store, int expert) {
    for (const ParamInfo& p : store.infos()) {
      if (p.stage_copy) continue;
      mine += std::to_string(p.unit) + " " + std::to_string(expert) + " " + p.name + " ";
      const std::vector<int64_t> shape = p.saved_shape();  // checkpoints hold no vocabulary padding
      for (size_t d = 0; d < shape.size(); ++d) {
        if (d) mine += ',';
        mine += std::to_string(shape[d]);
      }
      mine += "\n";
    }
  };
  list(params, 0);
  if (experts) list(*experts, 1);
  const std::vector<std::string> per_stage = host::allgather_strings(pp, mine);
  std::vector<GlobalTensor> out;
  for (int r = 0; r < int(per_stage.size()); ++r) {
    std::istringstream in(per_stage[size_t(r)]);
    GlobalTensor t;
    std::string dims;
    int expert = 0;
    while (in >> t.unit >> expert >> t.name >> dims) {
      t.stage = r;
      t.expert = expert != 0;
      t.shape.clear();
      std::istringstream ds(dims);
      std::string d;
      while (std::getline(ds, d, ',')) t.shape.push_back(std::stoll(d));
      out.push_back(t);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const GlobalTensor& a, const GlobalTensor& b) { return a.unit < b.unit; });
  return out;
}

std::vector<CkptTensor> checkpoint_tensors(ParamStore& params, DataParallel& dpar, ParamStore* experts,
                                           DataParallel* edpar, const Topology& topo,
                                           const std::vector<GlobalTensor>& all) {
  std::vector<CkptTensor> out;
  for (const GlobalTensor& g : all) {
    ParamStore& store = g.expert && experts ? *experts : params;
    DataParallel& dp = g.expert && edpar ? *edpar : dpar;
    const int i = g.expert && !experts ? -1 : store.find(g.name);
    auto make = [&](const std::string& prefix) {
      CkptTensor t;
      t.name = prefix + g.name;
      t.shape = g.shape;
      if (i < 0) {  // another stage's tensor: an empty block
        t.local_start.assign(g.shape.size(), 0);
        t.local_shape.assign(g.shape.size(), 0);
        t.writer = false;
        return t;
      }
      const ParamInfo& p = store.info(i);
      const bool replicated_over_tp = !split_over_tp(p) && topo.shape.tp > 1;
      t.local_start = p.local_start;
      t.local_shape = p.local_shape;
      // A vocabulary matrix's block without its padding rows (none, on a tp
      // rank that holds padding only): a prefix of the stored block.
      if (!t.local_shape.empty()) {
        t.local_start[0] = std::min(p.local_start[0], g.shape[0]);
        t.local_shape[0] = std::clamp<int64_t>(g.shape[0] - p.local_start[0], 0, p.local_shape[0]);
      }
      // An expert block is replicated over dp/ep (and cp): its dp/ep index 0 writes it.
      const bool first_replica = g.expert ? topo.me.dp_outer == 0 : topo.dp_rank() == 0;
      // A block replicated over tp (expert blocks too, but with expert tp
      // those cut along d_ff) is written by tp rank 0, a key/value head's
      // block held by several tp ranks by its copy 0.
      t.writer = !p.stage_copy && first_replica && topo.me.cp == 0 && (!replicated_over_tp || topo.me.tp == 0) &&
                 p.tp_copy == 0 && (t.local_shape.empty() || t.local_shape[0] > 0);
      return t;
    };
    // The stored block moves whole; a checkpoint sees its first `saved`
    // elements (padding rows, a suffix, are zero and stay zero).
    const size_t stored = i >= 0 ? store.info(i).numel() : 0;
    auto access = [stored](CkptTensor& t, std::function<void(float*)> get, std::function<void(const float*)> set) {
      size_t saved = 1;
      for (int64_t d : t.local_shape) saved *= size_t(d);
      if (saved == stored) {
        t.get = std::move(get);
        t.set = std::move(set);
        return;
      }
      t.get = [get, saved, stored](float* h) {
        std::vector<float> block(stored);
        get(block.data());
        std::copy_n(block.data(), saved, h);
      };
      t.set = [set, saved, stored](const float* h) {
        std::vector<float> block(stored, 0.0f);
        std::copy_n(h, saved, block.data());
        set(block.data());
      };
    };
    CkptTensor w = make("");
    if (i >= 0) access(w, [&dp, i](float* h) { dp.get_param(i, h); }, [&dp, i](const float* h) { dp.set_param(i, h); });
    out.push_back(std::move(w));
    for (int which = 0; which < 2; ++which) {
      CkptTensor m = make(which == 0 ? "optim/m/" : "optim/v/");
      if (i >= 0)
        access(m, [&dp, i, which](float* h) { dp.get_moment(which, i, h); },
               [&dp, i, which](const float* h) { dp.set_moment(which, i, h); });
      out.push_back(std::move(m));
    }
  }
  return out;
}

}  // namespace pentad
