// Debug dump for the PyTorch oracle (tests/torch) and the layout parity
// harness (tests/parity/compare_dumps.py): initial parameters, the step-1
// gradients and logits, every step's global batch, per-step metrics and the
// final parameters, all as global tensors in one HDF5 file on the root,
// whatever the layout that produced them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "comm/topology.hpp"
#include "io/h5io.hpp"
#include "io/run_state.hpp"
#include "model/params.hpp"
#include "parallel/dp/data_parallel.hpp"

namespace pentad {

// Where the dump reads this rank's parameters and gradients.
struct DumpSources {
  const std::vector<GlobalTensor>* tensors = nullptr;  // every tensor of the model (global_tensors)
  ParamStore* params = nullptr;
  DataParallel* dpar = nullptr;
  ParamStore* experts = nullptr;   // the MoE expert store
  DataParallel* edpar = nullptr;   // its DataParallel (nullptr: no experts on this stage)
  Comm* tp = nullptr;              // assembles tp-split tensors
  Comm* ep = nullptr;              // assembles the expert tensors (split over ep along dim 0)
};

class DebugDump {
 public:
  // The root creates the file (throws InputError naming it), then every rank
  // writes the initial parameters. Collective over the job.
  // batch_global, seq_len, vocab: B (sequences of the global batch), T, V.
  DebugDump(const std::string& path, const std::string& config_toml, const Topology& topo, const DumpSources& src,
            int64_t batch_global, int seq_len, int vocab);

  // Every tensor under prefix ("init/", "grad/", "final/"): parameters, or
  // their gradients. Collective over the job (ZeRO-3 gathers shards).
  void write_params(const std::string& prefix, bool grads);
  // This dp rank's step batch, n_local tokens of whole sequences ((A*b, T)),
  // gathered in global sequence order on the root. Collective over the job
  // (only the root's tp and cp slice of the first stage takes part).
  void record_batch(int step, const int32_t* inputs, const int32_t* targets, int n_local);
  // The step-1 logits (A*b, T, V) in global token order on cp rank 0 of the
  // head's stage, gathered over dp and sent to the root. Collective over the job.
  void write_logits(const std::vector<float>& logits, int n_local);
  void record_metrics(double loss, double lr, double grad_norm, double aux_loss);  // local
  // The last multiple-choice evaluation: each row's loss sum and its scored
  // tokens (data.choice_eval; root's values), written by finish.
  void record_choices(const std::vector<double>& row_loss, const std::vector<int>& row_tokens);
  // The final parameters, then the batches and metrics of `steps` steps;
  // commits the file. Collective over the job.
  void finish(int steps, bool moe);

 private:
  const Topology& topo_;
  DumpSources src_;
  int64_t batch_global_;
  int seq_len_, vocab_;
  std::unique_ptr<H5Writer> w_;          // root only
  std::vector<int32_t> inputs_, targets_;  // (steps, B_global, T), root only
  std::vector<double> loss_, lr_, grad_norm_, aux_loss_;  // (steps)
  std::vector<double> choice_loss_;     // the last multiple-choice evaluation (rows)
  std::vector<int32_t> choice_tokens_;
};

}  // namespace pentad
