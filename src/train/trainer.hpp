// The Trainer: one object per `pentad train` run. setup (the constructor)
// builds the grid's comms, the model shard, its optimizer and pipeline, and
// resumes; step() runs one optimizer step over the global batch; evaluate(),
// log_step() and finish() do the rest. Every public method is collective
// over the job.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "comm/comm.hpp"
#include "comm/placement.hpp"
#include "comm/topology.hpp"
#include "config/config.hpp"
#include "io/checkpoint.hpp"
#include "io/choice_eval.hpp"
#include "io/dataset.hpp"
#include "io/dump.hpp"
#include "infer/train_sample.hpp"
#include "io/run_state.hpp"
#include "model/model.hpp"
#include "parallel/cp/context_parallel.hpp"
#include "parallel/dp/data_parallel.hpp"
#include "parallel/ep/moe_stats.hpp"
#include "parallel/pp/pipeline.hpp"
#include "parallel/pp/schedule.hpp"
#include "parallel/pp/tied_embedding.hpp"
#include "train/metrics.hpp"

namespace pentad {

class Trainer {
 public:
  // Setup: throws InputError (on every rank alike) for a bad data file, an
  // unwritable output, an unloadable checkpoint. Collective over job.
  Trainer(const Config& cfg, MPI_Comm job, const Placement& placement, Backend& be, const CommFactory& make_comm);
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // The steps from the start (1, or the resumed step + 1) to train.steps, or
  // to the step after a signal, then finish(). Returns the exit code: 0, or
  // kInterruptedExitCode after a SIGINT stop. Collective over the job.
  int run();

 private:
  using Clock = std::chrono::steady_clock;
  struct StepResult {
    float lr = 0;
    double loss = 0, grad_norm = 0, step_s = 0;
    double trained = 0;  // the global batch's trained targets (all of them without a loss mask)
    MoeStep moe;  // zeros without MoE
  };

  // Setup, in order.
  void make_comms(const CommFactory& make_comm);
  void print_header(const std::string& placement) const;  // placement: describe_placement's text
  void open_inputs();
  void plan_validation();
  void build_model(const CommFactory& make_comm);
  void resume();
  void resume_data_position(const CkptMeta& meta);
  void count_flops();
  void print_model() const;
  void prepare_steps();
  void load_validation();

  // The step and what follows it.
  StepResult step(int step);
  [[noreturn]] void throw_non_finite(int step, const StepResult& r, double local_loss_sum);
  void load_batch(int step);
  double global_loss(double loss_sum, double trained);
  // The trained targets of the step's global batch: every token, or with a
  // loss mask in data.train those whose bit is set. Collective over dp x cp
  // with a loss mask.
  double trained_targets();
  void dump_step(int step, const StepResult& r);
  void gather_stage_stats();
  double evaluate();
  // data.choice_eval: every row's loss sum, then the accuracy (root). Collective over the job.
  ChoiceScore evaluate_choices();
  void evaluate_loaded();  // no step run: one evaluation of the weights loaded
  // One evaluation of the windows in (M, b, T/cp) in and tg: the mean loss
  // over the valid windows' trained targets (`trained` of them; every token
  // without a loss mask). Collective over the job.
  double evaluate_set(const std::vector<int32_t>& in, const std::vector<int32_t>& tg, double trained,
                      const Schedule* forward_only);
  // val_windows of data into this rank's (M, b, T/cp) in and tg.
  void load_val_windows(const TokenShards& data, int64_t n, int mb, std::vector<int32_t>& in,
                        std::vector<int32_t>& tg) const;
  void log_step(int step, const StepResult& r, bool eval_now, const double cp_attn[4]);
  void reset_traffic();
  void print_sample(int step);
  bool checkpoint_or_stop(int step);
  CkptMeta meta_at(int step) const;
  CkptWriter writer() const { return {int64_t(cfg_.checkpoint.gather_below_mb) << 20}; }
  void save(int step);
  void finish();
  void print_pipeline_summary();
  void print_summary(int last_step) const;

  const Config& cfg_;
  const ModelConfig& mc_;
  const TrainConfig& tc_;
  Backend& be_;
  const Clock::time_point t_start_;
  Topology topo_;
  const bool root_;
  // Gradients, ZeRO shards and loss sums go over dp x cp (the cp ranks hold
  // other tokens of the same sequences); with cp = 1 that is the dp group.
  std::unique_ptr<Comm> dp_cp_, tp_, pp_, cp_, ep_, edp_;
  std::unique_ptr<Comm> kv_;  // the copies of this rank's key/value head (Topology::kv_copies); may be null
  const CpSplit cp_split_;
  // T, T/cp, micro-batch b, micro-batches A, dp, pp, virtual stages.
  const int T_, Tl_, b_, A_, n_dp_, n_pp_, n_virtual_;
  const int64_t B_global_;      // sequences of the global batch (b * A * dp)
  const double tokens_global_;  // B_global * T
  const ScheduleKind sched_kind_;
  const bool moe_;

  std::unique_ptr<TokenDataset> train_data_, val_data_;
  std::unique_ptr<BatchSampler> sampler_;  // the global batch of every step, over train_data_
  std::unique_ptr<MetricsFile> metrics_;  // root only
  std::unique_ptr<Model> model_;
  std::unique_ptr<DataParallel> dpar_;   // the dense parameters, over dp x cp
  std::unique_ptr<DataParallel> edpar_;  // the MoE experts, over expert_dp (nullptr: none here)
  std::unique_ptr<Pipeline> pipe_;
  std::unique_ptr<TiedEmbedding> tied_;
  std::vector<GlobalTensor> all_tensors_;
  std::vector<CkptTensor> ckpt_tensors_;
  std::string signature_;
  int start_step_ = 1;
  double n_params_ = 0, n_active_ = 0;  // of the whole model; active: top_k of n_experts
  double fpt_ = 0;                      // training FLOPs per token
  double peak_tflops_ = 0;              // per rank
  std::unique_ptr<DebugDump> dump_;     // log.dump set

  // Host buffers for this rank's micro-batches (b sequences each): the whole
  // sequences (seq_*, (A*b, T)), and this cp rank's tokens of them (cp_slice
  // order, (A*b, T/cp)).
  std::vector<int32_t> seq_in_, seq_tg_, in_, tg_;
  std::vector<float> logits_;  // (A*b*T/cp, V) this rank's step-1 logits when dumping
  // Validation: the first n_val_ windows of data.val (val_windows), the same
  // whatever the layout and batch split; dp rank d takes windows [d*M*b,
  // (d+1)*M*b) in M micro-batches of b, padded past n_val_ with ignored
  // targets. Loaded once, this cp rank's tokens: (M, b, T/cp).
  int64_t n_val_ = 0;
  double val_trained_ = 0;  // the trained targets of the n_val_ windows
  int eval_mb_ = 1;  // M
  std::vector<int32_t> val_in_, val_tg_;
  // With several entries in data.val, each entry (a source) is also
  // evaluated alone, by the same rule: its first train.eval_batches global
  // batches' worth of windows, or all of them.
  struct ValSource {
    int64_t n = 0;
    double trained = 0;  // the trained targets of its n windows
    int mb = 1;
    std::vector<int32_t> in, tg;
    std::unique_ptr<Schedule> forward_only;
  };
  std::vector<ValSource> val_sources_;
  std::vector<double> last_val_sources_;
  // data.choice_eval: its examples, the first n of them scored as rows (one
  // per ending, choice_rows), which dp rank d takes as windows [d*M*b,
  // (d+1)*M*b) like the validation windows, padded with ignored rows.
  struct ChoiceEval {
    std::vector<ChoiceExample> examples;
    int64_t n = 0;
    ChoiceRows rows;  // every row's place; this rank's windows are in, tg
    int mb = 1;
    std::vector<int32_t> in, tg;  // (M, b, T/cp) of this rank
    std::unique_ptr<Schedule> forward_only;
    std::vector<double> row_loss;  // the last evaluation's, every row (root)
  };
  std::unique_ptr<ChoiceEval> choice_;
  ChoiceScore last_choice_;
  int64_t first_seq_ = 0;      // this dp rank's first sequence of the global batch
  int trace_steps_ = 0;        // the first steps of the run, when log.trace is set

  std::vector<double> step_times_, bubbles_;  // per step run
  std::vector<double> stage_stats_;           // (pp, kStageStats) on the root's pp group
  size_t my_slot_bytes_ = 0;
  std::vector<int32_t> sample_prompt_;  // train.sample_every: the samples' prompt (root)
  std::unique_ptr<Tokenizer> sample_tokenizer_;  // data.tokenizer (train.sample_every > 0), or null
  double last_loss_ = NAN, last_val_ = NAN;
  double last_eval_s_ = 0;  // seconds the step's evaluations took
  bool interrupted_ = false;  // stopped by SIGINT (agreed over the job)
};

}  // namespace pentad
