// Builds the checkpoint's tensor list from the parameter store (see run_state.hpp).
#include "run_state.hpp"

#include <algorithm>
#include <sstream>

#include "error.hpp"

namespace pentad {

std::string model_signature(const ModelConfig& m) {
  return std::string(m.family == Family::gpt2 ? "gpt2" : "llama") + " L=" + std::to_string(m.n_layers) +
         " C=" + std::to_string(m.d_model) + " H=" + std::to_string(m.n_heads) +
         " Hkv=" + std::to_string(m.n_kv_heads) + " F=" + std::to_string(m.d_ff) +
         " V=" + std::to_string(m.vocab_size) + " T=" + std::to_string(m.seq_len) +
         " tied=" + std::to_string(m.tied() ? 1 : 0);
}

std::vector<GlobalTensor> global_tensors(const ParamStore& params, MPI_Comm pp) {
  int stage = 0, n_stages = 1;
  MPI_CHECK(MPI_Comm_rank(pp, &stage));
  MPI_CHECK(MPI_Comm_size(pp, &n_stages));
  // "unit name d0,d1,...\n" per owned tensor, gathered from every stage.
  std::string mine;
  for (const ParamInfo& p : params.infos()) {
    if (p.stage_copy) continue;
    mine += std::to_string(p.unit) + " " + p.name + " ";
    for (size_t d = 0; d < p.shape.size(); ++d) mine += (d ? "," : "") + std::to_string(p.shape[d]);
    mine += "\n";
  }
  const int len = int(mine.size());
  std::vector<int> lens(static_cast<size_t>(n_stages), 0), displs(static_cast<size_t>(n_stages), 0);
  MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, pp));
  int total = 0;
  for (int r = 0; r < n_stages; ++r) {
    displs[size_t(r)] = total;
    total += lens[size_t(r)];
  }
  std::string all(size_t(total), '\0');
  MPI_CHECK(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, pp));
  std::vector<GlobalTensor> out;
  for (int r = 0; r < n_stages; ++r) {
    std::istringstream in(all.substr(size_t(displs[size_t(r)]), size_t(lens[size_t(r)])));
    GlobalTensor t;
    std::string dims;
    while (in >> t.unit >> t.name >> dims) {
      t.stage = r;
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

std::vector<CkptTensor> checkpoint_tensors(ParamStore& params, DataParallel& dpar, const Topology& topo,
                                           const std::vector<GlobalTensor>& all) {
  std::vector<CkptTensor> out;
  for (const GlobalTensor& g : all) {
    const int i = params.find(g.name);
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
      const ParamInfo& p = params.info(i);
      const bool replicated_over_tp = p.local_shape == p.shape && topo.shape.tp > 1;
      t.local_start = p.local_start;
      t.local_shape = p.local_shape;
      t.writer = !p.stage_copy && topo.dp_rank() == 0 && topo.me.cp == 0 &&
                 (!replicated_over_tp || topo.me.tp == 0);
      return t;
    };
    CkptTensor w = make("");
    if (i >= 0) {
      w.get = [&dpar, i](float* h) { dpar.get_param(i, h); };
      w.set = [&dpar, i](const float* h) { dpar.set_param(i, h); };
    }
    out.push_back(std::move(w));
    for (int which = 0; which < 2; ++which) {
      CkptTensor m = make(which == 0 ? "optim/m/" : "optim/v/");
      if (i >= 0) {
        m.get = [&dpar, i, which](float* h) { dpar.get_moment(which, i, h); };
        m.set = [&dpar, i, which](const float* h) { dpar.set_moment(which, i, h); };
      }
      out.push_back(std::move(m));
    }
  }
  return out;
}

}  // namespace pentad
