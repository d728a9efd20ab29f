// The Trainer (see trainer.hpp). Loss normalisation happens in exactly one
// place: every micro-batch's gradient is scaled by 1 / (tokens of the global
// batch), so the sum over micro-batches and dp ranks is the gradient of the
// global mean loss. With context parallelism each cp rank takes its tokens
// of every sequence of its dp rank's batch; losses and gradients are summed
// over dp x cp.
#include "train/trainer.hpp"

#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>

#include "comm/host.hpp"
#include "comm/watchdog.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/text.hpp"
#include "infer/gather.hpp"
#include "tok/bpe.hpp"
#include "parallel/cp/cp_report.hpp"
#include "parallel/dp/optimizer.hpp"
#include "io/init_from.hpp"
#include "io/signals.hpp"
#include "train/memory_check.hpp"
#include "train/non_finite.hpp"
#include "train/step_metrics.hpp"

namespace pentad {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<>());
}

// Rank 0 checks that every output location can be written before any work.
// Collective over the job.
void check_outputs(const Config& cfg, const Topology& topo) {
  bool ok = true;
  std::string msg;
  if (topo.is_root()) {
    auto probe_dir = [&](const std::string& key, const std::string& dir) {
      if (!ok || dir.empty()) return;
      if (!make_dirs(dir)) {
        ok = false;
        msg = key + ": cannot create directory '" + dir + "': " + std::strerror(errno);
        return;
      }
      const std::string probe = dir + "/.pentad_write_test";
      std::FILE* f = std::fopen(probe.c_str(), "w");
      if (!f) {
        ok = false;
        msg = key + ": directory '" + dir + "' is not writable: " + std::strerror(errno);
        return;
      }
      std::fclose(f);
      std::remove(probe.c_str());
    };
    if (cfg.checkpoint.save_final || cfg.checkpoint.every > 0)
      probe_dir("checkpoint.dir", cfg.checkpoint.dir);
    if (!cfg.log.metrics.empty()) probe_dir("log.metrics", parent_dir(cfg.log.metrics));
    if (!cfg.log.dump.empty()) probe_dir("log.dump", parent_dir(cfg.log.dump));
    if (!cfg.log.trace.empty()) probe_dir("log.trace", parent_dir(cfg.log.trace));
  }
  agree_or_throw(ok, msg, topo.job);
}

// Open the files of a data key on every rank; a bad file is one error
// everywhere (the lowest failing rank's). Collective over job.
std::unique_ptr<TokenDataset> open_tokens(const char* key, const std::string& value,
                                          const std::vector<double>& weights, const Config& cfg, MPI_Comm job) {
  std::unique_ptr<TokenDataset> d;
  bool ok = true;
  std::string msg;
  try {
    // Each rank checks its share of the token ids: the job reads the data once.
    d = std::make_unique<TokenDataset>(key, value, weights, cfg.model.vocab_size, cfg.model.seq_len,
                                       host::rank(job), host::size(job));
  } catch (const InputError& e) {
    ok = false;
    msg = e.what();
  }
  agree_or_throw(ok, msg, job);
  return d;
}

ScheduleKind schedule_kind_of(const ParallelConfig& p) {
  return train_schedule_kind(p.pp, p.virtual_stages, p.schedule);
}

}  // namespace

// ---- setup ----

Trainer::Trainer(const Config& cfg, MPI_Comm job, const Placement& placement, Backend& be,
                 const CommFactory& make_comm)
    : cfg_(cfg),
      mc_(cfg.model),
      tc_(cfg.train),
      be_(be),
      t_start_(Clock::now()),
      topo_(job, cfg.parallel, cfg.model.n_kv_heads),
      root_(topo_.is_root()),
      cp_split_{cfg.model.seq_len, topo_.shape.cp, cfg.parallel.cp_layout},
      T_(mc_.seq_len),
      Tl_(cp_split_.local_len()),
      b_(tc_.micro_batch),
      A_(tc_.grad_accum),
      n_dp_(topo_.shape.dp),
      n_pp_(topo_.shape.pp),
      n_virtual_(cfg.parallel.virtual_stages),
      B_global_(int64_t(b_) * A_ * n_dp_),
      tokens_global_(double(B_global_) * T_),
      sched_kind_(schedule_kind_of(cfg.parallel)),
      moe_(mc_.n_experts > 0) {
  start_comm_watchdog(cfg.parallel.comm_timeout_s);  // MPI calls stuck this long end the job
  make_comms(make_comm);
  print_header(describe_placement(placement, topo_.shape));
  open_inputs();
  plan_validation();
  check_memory_fits(cfg_, topo_, be_);  // refuse a layout that cannot fit before allocating it
  // A blend's table holds one entry per sequence of the global batch: made
  // once the batch is known to fit. Every rank computes the same split, so a
  // refused one is the same error everywhere.
  if (train_data_) sampler_ = std::make_unique<BatchSampler>(*train_data_, cfg_.data.order, tc_.seed, B_global_);
  build_model(make_comm);
  install_signal_handlers();
  all_tensors_ = global_tensors(model_->params(), moe_ ? &model_->expert_params() : nullptr, topo_.pp);
  ckpt_tensors_ = checkpoint_tensors(model_->params(), *dpar_, moe_ ? &model_->expert_params() : nullptr,
                                     edpar_.get(), topo_, all_tensors_);
  signature_ = model_signature(mc_);
  resume();
  count_flops();
  print_model();
  if (!cfg_.log.dump.empty()) {
    const DumpSources src{.tensors = &all_tensors_, .params = &model_->params(), .dpar = dpar_.get(),
                          .experts = &model_->expert_params(), .edpar = edpar_.get(), .tp = tp_.get(),
                          .ep = ep_.get()};
    dump_ = std::make_unique<DebugDump>(cfg_.log.dump, cfg_.resolved_toml, topo_, src, B_global_, T_,
                                        mc_.vocab_size);
  }
  prepare_steps();
}

void Trainer::print_header(const std::string& placement) const {
  if (!root_) return;
  std::printf("pentad %s | %d ranks | grid %s | backend %s\n", "0.1.0", topo_.size, topo_.describe().c_str(),
              be_.name().c_str());
  std::fputs(placement.c_str(), stdout);
  std::printf("---- resolved deck (%s) ----\n%s---- end of deck ----\n", cfg_.source.c_str(),
              cfg_.resolved_toml.c_str());
  std::fflush(stdout);
}

// One Comm per group, in the same order on every rank (NCCL creates them collectively).
void Trainer::make_comms(const CommFactory& make_comm) {
  dp_cp_ = make_comm(topo_.dp_cp, "dp_cp");
  tp_ = make_comm(topo_.tp, "tp");
  pp_ = make_comm(topo_.pp, "pp");
  cp_ = make_comm(topo_.cp, "cp");
  ep_ = make_comm(topo_.ep, "ep");
  edp_ = make_comm(topo_.expert_dp, "expert_dp");
  if (topo_.kv_copies != MPI_COMM_NULL) kv_ = make_comm(topo_.kv_copies, "kv_copies");
}

// The token files, the output locations and the metrics file. Collective over the job.
void Trainer::open_inputs() {
  // data.train may be "" only with train.steps = 0 (config.cpp): no step reads it.
  if (!cfg_.data.train.empty())
    train_data_ = open_tokens("data.train", cfg_.data.train, data_weights(cfg_.data), cfg_, topo_.job);
  if (!cfg_.data.val.empty()) {
    // Several entries: one source each (evaluated alone too).
    const size_t n_entries = list_entries(cfg_.data.val).size();
    val_data_ = open_tokens("data.val", cfg_.data.val,
                            n_entries > 1 ? std::vector<double>(n_entries, 1.0) : std::vector<double>{}, cfg_,
                            topo_.job);
  }
  check_outputs(cfg_, topo_);
  std::string msg;
  try {
    if (root_ && !cfg_.log.metrics.empty()) metrics_ = std::make_unique<MetricsFile>(cfg_.log.metrics);
  } catch (const InputError& e) {
    msg = e.what();
  }
  agree_or_throw(msg.empty(), msg, topo_.job);
  if (!cfg_.data.choice_eval.empty()) {  // every rank reads it (3.6 MB for HellaSwag), so every rank can fail alike
    choice_ = std::make_unique<ChoiceEval>();
    try {
      choice_->examples = read_choice_file(cfg_.data.choice_eval, mc_.vocab_size);
    } catch (const InputError& e) {
      msg = std::string("data.choice_eval: ") + e.what();
    }
    agree_or_throw(msg.empty(), msg, topo_.job);
  }
}

// One evaluation reads the first train.eval_batches global batches' worth of
// windows of data.val, or all of them when the file is shorter: a count that
// depends on the global batch only, never on its split.
void Trainer::plan_validation() {
  const auto micro_batches = [this](int64_t n) {
    const int64_t per_dp = (n + n_dp_ - 1) / n_dp_;
    return int((per_dp + b_ - 1) / b_);
  };
  if (choice_) {
    const int64_t all = int64_t(choice_->examples.size());
    choice_->n = tc_.choice_examples > 0 ? std::min<int64_t>(tc_.choice_examples, all) : all;
    try {  // the same InputError on every rank
      choice_->rows = choice_rows(choice_->examples, choice_->n, T_);
    } catch (const InputError& e) {
      throw InputError("data.choice_eval '" + cfg_.data.choice_eval + "': " + e.what());
    }
    choice_->mb = micro_batches(choice_->rows.n_rows);
  }
  if (!val_data_) return;
  // A loss mask that leaves a validation set no trained target: the same
  // refusal on every rank (every rank reads the same windows).
  const auto trained = [this](const TokenShards& data, int64_t n, const std::string& what) {
    const int64_t t = data.trained_targets(n);
    if (t == 0)
      throw InputError(what + ": the loss mask trains no target in the " + std::to_string(n) +
                       " windows evaluated, so there is no loss to report");
    return double(t);
  };
  n_val_ = std::min(val_window_count(val_data_->all()), int64_t(tc_.eval_batches) * B_global_);
  val_trained_ = trained(val_data_->all(), n_val_, "data.val '" + cfg_.data.val + "'");
  eval_mb_ = micro_batches(n_val_);
  if (val_data_->sources().size() < 2) return;
  for (const TokenDataset::Source& s : val_data_->sources()) {
    ValSource v;
    v.n = std::min(val_window_count(s.shards), int64_t(tc_.eval_batches) * B_global_);  // >= 1: every file has T + 1 tokens
    v.trained = trained(s.shards, v.n, "data.val entry '" + s.spec + "'");
    v.mb = micro_batches(v.n);
    val_sources_.push_back(std::move(v));
  }
}

// This rank's model shard, its DataParallel(s), the pipeline and the tied
// embedding pair. Collective over the job.
void Trainer::build_model(const CommFactory& make_comm) {
  // Pipeline: pp * virtual_stages chunks of blocks; chunk g on stage g % pp
  // (zbv: down the stages and back up, schedule.hpp).
  ModelParallel mpar;
  mpar.tp = tp_.get();
  mpar.kv_copies = kv_.get();
  mpar.sp = cfg_.parallel.sp;
  mpar.cp = cp_.get();
  mpar.cp_layout = cp_split_.layout;
  mpar.pp_rank = topo_.me.pp;
  mpar.pp_size = n_pp_;
  mpar.placement = chunk_placement(sched_kind_);
  mpar.ep = ep_.get();
  mpar.expert_tp = cfg_.parallel.expert_tp;
  mpar.chunk_blocks = partition_blocks(mc_.n_layers, n_pp_ * n_virtual_, cfg_.parallel.stage_layers);
  model_ = std::make_unique<Model>(mc_, tc_.recompute, b_, be_, mpar);
  model_->set_routing_loss_scale(float(1.0 / tokens_global_));  // every token routed, trained or not
  dpar_ = std::make_unique<DataParallel>(model_->params(), be_, *dp_cp_, tc_, cfg_.parallel.zero,
                                         cfg_.parallel.bucket_mb);
  dpar_->init(tc_.seed);
  // MoE experts: their own store, reduced over expert_dp (a stage without
  // MoE blocks has none).
  ParamStore& experts = model_->expert_params();
  if (experts.numel() > 0) {
    edpar_ = std::make_unique<DataParallel>(experts, be_, *edp_, tc_, cfg_.parallel.zero, cfg_.parallel.bucket_mb);
    edpar_->init(tc_.seed);
    dpar_->set_partner(edpar_.get());
  }
  model_->set_hooks(dpar_.get());
  // parallel.pp_p2p: eager where the comm has lone sends, unless the deck asks for groups.
  const bool grouped = pp_messages_grouped(comm_impl_of(cfg_.backend, cfg_.parallel.comm), cfg_.parallel.pp_p2p);
  pipe_ = std::make_unique<Pipeline>(*model_, be_, *pp_, *dpar_, make_schedule(sched_kind_, n_pp_, n_virtual_, A_),
                                     make_schedule(ScheduleKind::forward_only, n_pp_, n_virtual_, eval_mb_,
                                                   mpar.placement),
                                     grouped);
  for (ValSource& v : val_sources_)
    v.forward_only = std::make_unique<Schedule>(
        make_schedule(ScheduleKind::forward_only, n_pp_, n_virtual_, v.mb, mpar.placement));
  if (choice_)
    choice_->forward_only = std::make_unique<Schedule>(
        make_schedule(ScheduleKind::forward_only, n_pp_, n_virtual_, choice_->mb, mpar.placement));
  tied_ = std::make_unique<TiedEmbedding>(mc_, topo_, model_->params(), *dpar_, make_comm);
}

// checkpoint.init_from: weights from a Hugging Face, llm.c or pentad file.
// checkpoint.resume: "latest" starts fresh when the directory has no
// committed checkpoint yet. Collective over the job.
void Trainer::resume() {
  const CheckpointConfig& ck = cfg_.checkpoint;
  if (!ck.init_from.empty()) {  // weights only (the deck refuses it together with resume)
    const std::string loaded = load_init_weights(ck.init_from, mc_, signature_, ckpt_tensors_, topo_.job);
    if (root_) std::printf("checkpoint.init_from: %s; optimizer and step start fresh\n", loaded.c_str());
  }
  if (!ck.resume.empty()) {
    const bool fresh = ck.resume == "latest" && latest_checkpoint(ck.dir).empty();
    if (!fresh) {
      const std::string path = resolve_checkpoint(ck.resume, ck.dir);
      const CkptMeta meta = load_checkpoint(path, signature_, ckpt_tensors_, topo_.job);
      start_step_ = int(meta.step) + 1;
      resume_data_position(meta);
      if (root_) {
        std::printf("resumed from %s (written at step %lld under %s)\n", path.c_str(), (long long)meta.step,
                    meta.layout.c_str());
        if (meta.seed != tc_.seed)
          std::printf("warning: train.seed %llu differs from the checkpoint's %llu: the data order changes\n",
                      (unsigned long long)tc_.seed, (unsigned long long)meta.seed);
      }
    } else if (root_) {
      std::printf("checkpoint.resume = latest: no checkpoint in %s yet, starting fresh\n", ck.dir.c_str());
    }
  }
  if (start_step_ > 1 && !cfg_.log.dump.empty())
    throw InputError("log.dump records a run from step 1; it cannot be combined with a resumed run (checkpoint.resume)");
}

// The epoch order goes on from the checkpoint's per-source sequence counts
// (io/dataset.hpp), so a resume under another global batch or other weights
// neither repeats nor skips windows of the epoch. A checkpoint without them
// (older) or with another number of sources: the counts this deck's batch
// implies at that step, with a warning in the second case.
void Trainer::resume_data_position(const CkptMeta& meta) {
  if (!sampler_) return;  // no data.train: no step will run
  const size_t n_sources = train_data_->sources().size();
  if (meta.data_sequences.size() == n_sources) {
    sampler_->resume_from(meta.step, meta.data_sequences);
    return;
  }
  std::vector<int64_t> implied;
  for (size_t k = 0; k < n_sources; ++k) implied.push_back(meta.step * sampler_->per_batch(k));
  sampler_->resume_from(meta.step, implied);
  if (root_ && !meta.data_sequences.empty())
    std::printf("warning: the checkpoint's data position counts %zu data sources, data.train has %zu: the "
                "epoch order restarts from what this batch implies at step %lld\n",
                meta.data_sequences.size(), n_sources, (long long)meta.step);
}

// FLOPs per token from the parameters a token uses, and the peak rate MFU
// divides by (deck, or measured). Collective over the job.
void Trainer::count_flops() {
  // Parameters of the whole model (every pipeline stage's; a tied copy is
  // listed once by global_tensors).
  for (const GlobalTensor& g : all_tensors_) n_params_ += double(numel_of(g.shape));
  // A token uses top_k of n_experts experts.
  n_active_ = n_params_;
  for (const GlobalTensor& g : all_tensors_)
    if (g.expert) n_active_ -= (1.0 - double(mc_.top_k) / mc_.n_experts) * double(numel_of(g.shape));
  fpt_ = flops_per_token(mc_, n_active_);

  peak_tflops_ = cfg_.log.peak_tflops;
  if (peak_tflops_ <= 0) {
    // Every rank measures at the same moment (after a barrier), as they will run.
    host::barrier(topo_.job);
    peak_tflops_ = measure_peak_tflops(be_);
    // Ranks sharing a node measure different rates; use the job's mean.
    double s = peak_tflops_;
    host::allreduce(topo_.job, &s, 1, host::Op::sum);
    peak_tflops_ = s / topo_.size;
    be_.reset_peaks();  // the measurement's buffers are not part of training
  }
}

void Trainer::print_model() const {
  if (!root_) return;
  std::printf("model: %s, %.3fM parameters, %.3g FLOP/token; global batch %lld x %d tokens "
              "(micro_batch %d x grad_accum %d x dp %d); peak %.3f TFLOP/s per rank%s\n",
              mc_.family == Family::gpt2 ? "gpt2" : "llama", n_params_ / 1e6, fpt_, (long long)B_global_, T_, b_,
              A_, n_dp_, peak_tflops_, cfg_.log.peak_tflops > 0 ? " (deck)" : " (measured sgemm)");
  if (cfg_.backend == BackendKind::cpu) {  // app/runtime.cpp's default_threads
    const char* env = std::getenv("OMP_NUM_THREADS");
    std::printf("threads: %d per rank (train.threads = %d%s)\n", omp_get_max_threads(), tc_.threads,
                tc_.threads > 0                  ? ""
                : env != nullptr && *env != '\0' ? ": OMP_NUM_THREADS"
                                                 : ": the node's cores / its ranks");
  }
  if (cp_split_.cp > 1) print_cp_balance(cp_split_);
  if (moe_)
    std::printf("moe: %d experts, top-%d, every %d block(s), capacity %s, ep=%d (%d experts per rank), "
                "%.3fM parameters active per token\n",
                mc_.n_experts, mc_.top_k, mc_.moe_every,
                mc_.dropless ? "dropless" : std::to_string(mc_.capacity_factor).c_str(), topo_.shape.ep,
                mc_.n_experts / topo_.shape.ep, n_active_ / 1e6);
  if (sampler_) std::fputs(sampler_->describe().c_str(), stdout);
  else std::printf("data: no data.train (train.steps = 0: no step runs)\n");
  if (val_data_) {
    const int64_t asked = int64_t(tc_.eval_batches) * B_global_;
    for (size_t k = 0; k < val_sources_.size(); ++k)
      std::printf("validation source %zu: %s, %lld windows (val_loss_%zu)\n", k,
                  val_data_->sources()[k].spec.c_str(), (long long)val_sources_[k].n, k);
    if (n_val_ < asked)
      std::printf("validation: all %lld windows of %d tokens of %s (train.eval_batches = %d global batches "
                  "would be %lld)\n",
                  (long long)n_val_, T_, cfg_.data.val.c_str(), tc_.eval_batches, (long long)asked);
    else
      std::printf("validation: the first %lld windows of %d tokens of %s (train.eval_batches = %d global "
                  "batches)\n",
                  (long long)n_val_, T_, cfg_.data.val.c_str(), tc_.eval_batches);
  }
  if (choice_)
    std::printf("multiple-choice eval: the first %lld of %zu examples of %s, %lld rows (one per ending), "
                "%d context(s) cut to fit seq_len %d\n",
                (long long)choice_->n, choice_->examples.size(), cfg_.data.choice_eval.c_str(),
                (long long)choice_->rows.n_rows, choice_->rows.truncated, T_);
  std::fflush(stdout);
}

// The step's host buffers and per-stage statistics, allocated once.
void Trainer::prepare_steps() {
  seq_in_.resize(size_t(A_) * b_ * T_);
  seq_tg_.resize(size_t(A_) * b_ * T_);
  in_.resize(size_t(A_) * b_ * Tl_);
  tg_.resize(size_t(A_) * b_ * Tl_);
  first_seq_ = int64_t(topo_.dp_rank()) * A_ * b_;
  trace_steps_ = cfg_.log.trace.empty() ? 0 : 8;  // the first steps of the run
  stage_stats_.assign(size_t(kStageStats) * n_pp_, 0.0);
  for (int g = 0; g < model_->n_chunks(); ++g)
    if (model_->owns_chunk(g)) my_slot_bytes_ += model_->slot_bytes(g);
  be_.reset_peaks();  // slot_bytes may have allocated a pooled slot before any step
  load_validation();
  if (tc_.sample_every > 0) {
    // Every rank loads it, so a bad rank file is the same error everywhere.
    if (!cfg_.data.tokenizer.empty()) {
      sample_tokenizer_ = load_tokenizer(cfg_.data.tokenizer, cfg_.data.tokenizer_pattern);
      if (sample_tokenizer_->vocab_size() > mc_.vocab_size)
        throw InputError("data.tokenizer '" + cfg_.data.tokenizer + "': the model does not match the tokenizer: " +
                         sample_tokenizer_->describe() + " has " + std::to_string(sample_tokenizer_->vocab_size()) +
                         " ids, model.vocab_size=" + std::to_string(mc_.vocab_size));
    }
    if (root_ && (val_data_ || train_data_))
      sample_prompt_ = train_sample_prompt(val_data_ ? val_data_->first_file() : train_data_->first_file(), T_,
                                           sample_tokenizer_.get());
  }
}

// This dp rank's validation windows, cp-sliced once: every evaluation reads
// the same ones.
void Trainer::load_validation() {
  if (choice_) {
    ChoiceEval& c = *choice_;
    const size_t n_seq = size_t(c.mb) * b_;
    std::vector<int32_t> whole_in(n_seq * T_), whole_tg(n_seq * T_);  // (M, b, T): this dp rank's rows only
    fill_choice_rows(c.examples, c.rows, int64_t(topo_.dp_rank()) * int64_t(n_seq), int64_t(n_seq), whole_in.data(),
                     whole_tg.data());
    c.in.resize(n_seq * Tl_);
    c.tg.resize(n_seq * Tl_);
    cp_slice(cp_split_, topo_.me.cp, whole_in.data(), c.mb, b_, c.in.data());
    cp_slice(cp_split_, topo_.me.cp, whole_tg.data(), c.mb, b_, c.tg.data());
  }
  if (!val_data_) return;
  load_val_windows(val_data_->all(), n_val_, eval_mb_, val_in_, val_tg_);
  for (size_t k = 0; k < val_sources_.size(); ++k) {
    ValSource& v = val_sources_[k];
    load_val_windows(val_data_->sources()[k].shards, v.n, v.mb, v.in, v.tg);
  }
}

void Trainer::load_val_windows(const TokenShards& data, int64_t n, int mb, std::vector<int32_t>& in,
                               std::vector<int32_t>& tg) const {
  const size_t n_seq = size_t(mb) * b_;
  std::vector<int32_t> whole_in(n_seq * T_), whole_tg(n_seq * T_);  // (M, b, T)
  val_windows(data, int64_t(topo_.dp_rank()) * int64_t(n_seq), int(n_seq), n, whole_in.data(), whole_tg.data());
  in.resize(n_seq * Tl_);
  tg.resize(n_seq * Tl_);
  cp_slice(cp_split_, topo_.me.cp, whole_in.data(), mb, b_, in.data());
  cp_slice(cp_split_, topo_.me.cp, whole_tg.data(), mb, b_, tg.data());
}

// ---- the step ----

int Trainer::run() {
  for (int s = start_step_; s <= tc_.steps; ++s) {
    set_watchdog_step(s);
    const StepResult r = step(s);
    // Ring attention work and kernel time, the extremes over the cp group
    // (read before the evaluation adds its forward passes).
    double cp_attn[4] = {0, 0, 0, 0};
    if (model_->ring()) cp_attention_stats(*model_->ring(), *cp_, cp_attn);
    const bool eval_now =
        (val_data_ || choice_) && ((tc_.eval_every > 0 && s % tc_.eval_every == 0) || s == tc_.steps);
    const auto t_eval = Clock::now();
    if (eval_now && val_data_) last_val_ = evaluate();
    if (eval_now && choice_) last_choice_ = evaluate_choices();
    last_eval_s_ = std::chrono::duration<double>(Clock::now() - t_eval).count();
    if (root_) log_step(s, r, eval_now, cp_attn);
    if (tc_.sample_every > 0 && s % tc_.sample_every == 0) print_sample(s);
    reset_traffic();
    if (checkpoint_or_stop(s)) break;
  }
  if (start_step_ > tc_.steps && (val_data_ || choice_)) evaluate_loaded();
  finish();
  return interrupted_ ? kInterruptedExitCode : 0;
}

// No step to run (train.steps = 0, or a checkpoint already at train.steps):
// the loaded weights are evaluated once, so a deck with checkpoint.init_from
// and train.steps = 0 scores a model as it is. Collective over the job.
void Trainer::evaluate_loaded() {
  StepRecord rec;
  rec.step = start_step_ - 1;
  rec.has_val = val_data_ != nullptr;
  const auto t_eval = Clock::now();
  if (val_data_) rec.val_loss = last_val_ = evaluate();
  rec.val_sources = last_val_sources_;
  rec.has_choice = choice_ != nullptr;
  if (choice_) last_choice_ = evaluate_choices();
  rec.eval_s = std::chrono::duration<double>(Clock::now() - t_eval).count();
  rec.choice_acc_norm = last_choice_.acc_norm();
  rec.choice_acc = last_choice_.acc();
  if (!root_) return;
  print_eval_line(rec);
  if (metrics_) metrics_->write(eval_row(rec));
}

// One optimizer step over the global batch. Collective over the job.
Trainer::StepResult Trainer::step(int step) {
  const auto t0 = Clock::now();
  StepResult r;
  r.lr = float(lr_at(tc_, step));
  load_batch(step);
  if (model_->ring()) model_->ring()->reset_stats();
  dpar_->begin_step();
  model_->reset_moe_stats();
  const bool want_logits = dump_ && step == 1;
  if (want_logits) logits_.assign(size_t(A_) * b_ * Tl_ * mc_.vocab_size, 0.0f);
  pipe_->set_tracing(step - start_step_ < trace_steps_, step);

  // Forward and backward of every micro-batch, in the pipeline schedule's
  // order; the loss is the mean over the trained targets (a step whose
  // batch the loss mask leaves none computes no gradient but the MoE's).
  r.trained = trained_targets();
  const double loss_sum = pipe_->train_step(in_.data(), tg_.data(), r.trained > 0 ? float(1.0 / r.trained) : 0.0f,
                                            want_logits && topo_.holds_head() ? logits_.data() : nullptr);
  tied_->sum_grads();       // the tied embedding's two copies: one gradient
  dpar_->finish_backward(); // the dp reduction, launched bucket by bucket during the last backward
  r.loss = global_loss(loss_sum, r.trained);
  r.grad_norm = dpar_->grad_norm(tp_.get(), pp_.get(), ep_.get());
  if (moe_) r.moe = moe_step(model_->moe_stats(), mc_, *dp_cp_, *pp_, double(B_global_), tokens_global_);
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) throw_non_finite(step, r, loss_sum);
  if (dump_) dump_step(step, r);
  dpar_->optimizer_step(step, r.lr, clip_scale(r.grad_norm, tc_.grad_clip));
  be_.synchronize();

  r.step_s = seconds_since(t0);
  step_times_.push_back(r.step_s);
  bubbles_.push_back(pipe_->bubble());
  gather_stage_stats();
  last_loss_ = r.loss;
  return r;
}

// Every rank agrees (both values are global): name what went non-finite
// first and where. Nothing is written: the checkpoints of earlier steps stay
// the last ones. Collective over the job.
void Trainer::throw_non_finite(int step, const StepResult& r, double local_loss_sum) {
  NonFiniteStep s;
  s.step = step;
  s.loss = r.loss;
  s.grad_norm = r.grad_norm;
  s.local_loss_sum = local_loss_sum;
  s.dense = &model_->params();
  s.dense_dp = dpar_.get();
  s.experts = edpar_ ? &model_->expert_params() : nullptr;
  s.experts_dp = edpar_.get();
  throw InputError(describe_non_finite(s, topo_));
}

// This dp rank's sequences of the step's global batch, then this cp rank's tokens of them.
void Trainer::load_batch(int step) {
  sampler_->fill(step, first_seq_, A_ * b_, seq_in_.data(), seq_tg_.data());
  cp_slice(cp_split_, topo_.me.cp, seq_in_.data(), A_, b_, in_.data());
  cp_slice(cp_split_, topo_.me.cp, seq_tg_.data(), A_, b_, tg_.data());
}

// The mean loss over the global batch's trained targets from this rank's
// sum (non-zero on the last stage); 0 when there are none. Collective over
// dp x cp and pp.
double Trainer::global_loss(double loss_sum, double trained) {
  dp_cp_->allreduce_sum_host(&loss_sum, 1);
  pp_->allreduce_sum_host(&loss_sum, 1);
  return trained > 0 ? loss_sum / trained : 0.0;
}

// This cp rank's tokens of this dp rank's sequences (tg_) hold a part of the
// global batch that no other rank of dp x cp holds; an exact count in a double.
double Trainer::trained_targets() {
  if (!train_data_->has_loss_mask()) return tokens_global_;
  double mine = double(std::count_if(tg_.begin(), tg_.end(), [](int32_t t) { return t >= 0; }));
  dp_cp_->allreduce_sum_host(&mine, 1);
  return mine;
}

// The step's batch (and the step-1 logits and gradients) into the debug
// dump, in global order. Collective over the job.
void Trainer::dump_step(int step, const StepResult& r) {
  const int n_local = A_ * b_ * T_;  // whole sequences
  dump_->record_batch(step, seq_in_.data(), seq_tg_.data(), n_local);
  if (step == 1) {
    // The other tp ranks hold copies of the same logits; they come from the last stage.
    if (topo_.me.tp == 0 && topo_.holds_head())
      gather_cp_logits(cp_split_, topo_.cp, topo_.me.cp, A_, b_, mc_.vocab_size, logits_);
    dump_->write_logits(logits_, n_local);
    dump_->write_params("grad/", true);
  }
  dump_->record_metrics(r.loss, r.lr, r.grad_norm, r.moe.aux_loss);
}

// Per-stage numbers of the step to the root's pp group. Collective over pp.
void Trainer::gather_stage_stats() {
  const double mine[kStageStats] = {pipe_->bubble(), double(pipe_->peak_inflight()),
                                    double(be_.mem_stats().peak_bytes[int(Mem::activations)]),
                                    double(my_slot_bytes_), double(pipe_->peak_deferred_w()),
                                    double(pipe_->peak_deferred_w_bytes())};
  host::gather(topo_.pp, mine, kStageStats, stage_stats_.data(), 0);
}

// The validation loss: the mean over the trained targets of the n_val_ windows
// (padding targets add nothing), through the forward-only schedule.
// Collective over the job.
double Trainer::evaluate() {
  last_val_sources_.clear();
  for (const ValSource& v : val_sources_)
    last_val_sources_.push_back(evaluate_set(v.in, v.tg, v.trained, v.forward_only.get()));
  return evaluate_set(val_in_, val_tg_, val_trained_, nullptr);
}

// Each row's loss sum: dp rank d's rows sit at [d*M*b, (d+1)*M*b) of the
// whole; the cp ranks hold parts of the same rows (their sums add up), the
// other stages zeros, the tp ranks the same values.
ChoiceScore Trainer::evaluate_choices() {
  ChoiceEval& c = *choice_;
  const size_t n_seq = size_t(c.mb) * b_;
  std::vector<double> mine(n_seq, 0.0), all(n_seq * size_t(n_dp_), 0.0);
  pipe_->eval(c.in.data(), c.tg.data(), *c.forward_only, mine.data());
  std::copy(mine.begin(), mine.end(), all.begin() + std::ptrdiff_t(size_t(topo_.dp_rank()) * n_seq));
  dp_cp_->allreduce_sum_host(all.data(), int(all.size()));
  pp_->allreduce_sum_host(all.data(), int(all.size()));
  all.resize(size_t(c.rows.n_rows));
  const ChoiceScore score = score_choices(c.examples, c.n, all, c.rows.tokens);
  if (root_) c.row_loss = std::move(all);
  return score;
}

double Trainer::evaluate_set(const std::vector<int32_t>& in, const std::vector<int32_t>& tg, double trained,
                             const Schedule* forward_only) {
  double sum = forward_only ? pipe_->eval(in.data(), tg.data(), *forward_only)
                            : pipe_->eval(in.data(), tg.data());  // the last stage's
  dp_cp_->allreduce_sum_host(&sum, 1);
  pp_->allreduce_sum_host(&sum, 1);
  return sum / trained;
}

// The console line (every log.every steps, the first and the last) and the
// metrics row. Root only.
void Trainer::log_step(int step, const StepResult& r, bool eval_now, const double cp_attn[4]) {
  StepRecord rec;
  rec.step = step;
  rec.steps = tc_.steps;
  rec.loss = r.loss;
  rec.lr = r.lr;
  rec.grad_norm = r.grad_norm;
  if (train_data_->has_loss_mask()) rec.trained_targets = r.trained;
  rec.step_s = r.step_s;
  rec.tokens_per_s = tokens_global_ / r.step_s;
  rec.tflops = rec.tokens_per_s * fpt_ / 1e12;
  rec.mfu = rec.tflops / (peak_tflops_ * topo_.size);
  rec.mem = &be_.mem_stats();
  rec.dp_cp = GroupTraffic::of(*dp_cp_);
  rec.tp = GroupTraffic::of(*tp_);
  if (kv_) rec.tp += GroupTraffic::of(*kv_);  // a part of the tp group
  rec.pp = GroupTraffic::of(*pp_);
  rec.cp = GroupTraffic::of(*cp_);
  rec.ep = GroupTraffic::of(*ep_);
  rec.expert_dp = GroupTraffic::of(*edp_);
  rec.pp_bubble_formula = n_pp_ > 1 ? bubble_formula(sched_kind_, n_pp_, n_virtual_, A_) : 0.0;
  rec.dp_reductions = double(dpar_->reductions());
  rec.dp_buckets = double(dpar_->n_buckets());
  rec.dp_comm_hidden = dpar_->hidden_fraction();
  rec.param_elems = double(model_->params().numel());
  rec.shard_elems = double(dpar_->shard_elems());
  rec.stage_stats = &stage_stats_;
  rec.moe = moe_ ? &r.moe : nullptr;
  if (moe_) rec.moe_times = model_->moe_times();
  rec.has_val = eval_now && val_data_;
  rec.has_choice = eval_now && choice_;
  rec.eval_s = last_eval_s_;
  rec.choice_acc_norm = last_choice_.acc_norm();
  rec.choice_acc = last_choice_.acc();
  rec.val_loss = last_val_;
  rec.val_sources = last_val_sources_;
  rec.cp_attn = model_->ring() ? cp_attn : nullptr;
  for (size_t k = 0; train_data_ && k < train_data_->sources().size(); ++k) rec.data_epochs.push_back(sampler_->epochs_read(k, step));
  if (step % cfg_.log.every == 0 || step == 1 || step == tc_.steps) print_step_line(rec);
  if (metrics_) metrics_->write(metrics_row(rec));
}

// train.sample_every: the global weights gathered on the root, which draws
// a sample (infer/train_sample.hpp) with the inference engine over them on
// this run's backend, decoded by data.tokenizer (without one: bytes for a
// vocabulary of 256, else token ids). Collective over the job.
void Trainer::print_sample(int step) {
  const DumpSources src{.tensors = &all_tensors_, .params = &model_->params(), .dpar = dpar_.get(),
                        .experts = &model_->expert_params(), .edpar = edpar_.get(), .tp = tp_.get(),
                        .ep = ep_.get()};
  const ModelWeights w = gather_model_weights(mc_, topo_, src);
  if (!root_) return;
  InferenceEngine engine(w, be_);
  std::printf("%s\n",
              train_sample_line(engine, step, sample_prompt_, tc_.sample_tokens, tc_.seed, sample_tokenizer_.get()).c_str());
  std::fflush(stdout);
}

void Trainer::reset_traffic() {
  for (Comm* c : {dp_cp_.get(), tp_.get(), pp_.get(), cp_.get(), ep_.get(), edp_.get()}) c->reset_bytes();
  if (kv_) kv_->reset_bytes();
}

// Checkpoint every N steps, and on SIGUSR1/SIGTERM/SIGINT at a step all
// ranks agree on; true: stop after this step. Collective over the job.
bool Trainer::checkpoint_or_stop(int step) {
  int stop[2] = {signal_received() ? 1 : 0, interrupt_received() ? 1 : 0};  // any signal, SIGINT
  host::allreduce(topo_.job, stop, 2, host::Op::max);
  if ((cfg_.checkpoint.every > 0 && step % cfg_.checkpoint.every == 0) || stop[0]) save(step);
  interrupted_ = stop[1] != 0;
  if (stop[0] && root_) {
    if (interrupted_)
      std::printf("signal received: stopped after step %d with a checkpoint; exiting with code %d (SIGINT)\n",
                  step, kInterruptedExitCode);
    else
      std::printf("signal received: stopped after step %d with a checkpoint; exiting\n", step);
  }
  return stop[0] != 0;
}

CkptMeta Trainer::meta_at(int step) const {
  CkptMeta meta;
  meta.step = step;
  meta.seed = tc_.seed;
  meta.config_toml = cfg_.resolved_toml;
  meta.layout = topo_.describe() + " zero=" + std::to_string(cfg_.parallel.zero);
  meta.model_signature = signature_;
  for (size_t k = 0; train_data_ && k < train_data_->sources().size(); ++k) meta.data_sequences.push_back(sampler_->seqs_done(k, step));
  return meta;
}

// Collective over the job.
void Trainer::save(int step) {
  const std::string path =
      save_checkpoint(cfg_.checkpoint.dir, meta_at(step), ckpt_tensors_, cfg_.checkpoint.keep, topo_.job, writer());
  if (root_) {
    std::printf("checkpoint: step %d written to %s\n", step, path.c_str());
    std::fflush(stdout);
  }
}

// ---- the end of the run ----

// The dump's last records, the final weights, the trace and the summaries.
// Collective over the job.
void Trainer::finish() {
  if (dump_ && choice_) dump_->record_choices(choice_->row_loss, choice_->rows.tokens);
  if (dump_) dump_->finish(tc_.steps, moe_);
  const int last_step = start_step_ + int(step_times_.size()) - 1;
  if (cfg_.checkpoint.save_final) {
    // The final state as a checkpoint file (weights and AdamW moments, global
    // tensors): resumable, and readable as plain weights under model/.
    const std::string path = cfg_.checkpoint.dir + "/final.h5";
    write_checkpoint_file(path, meta_at(last_step), ckpt_tensors_, topo_.job, writer());
    if (root_) std::printf("weights written to %s\n", path.c_str());
  }
  if (!cfg_.log.trace.empty()) {
    const std::string label = "rank " + std::to_string(topo_.rank) + " (pp " + std::to_string(topo_.me.pp) +
                              ", dp " + std::to_string(topo_.dp_rank()) + ", tp " + std::to_string(topo_.me.tp) + ")";
    write_trace(cfg_.log.trace, pipe_->trace_events(topo_.rank, label), 0, topo_.job);
    if (root_)
      std::printf("trace of steps %d to %d written to %s (open in Perfetto or chrome://tracing)\n", start_step_,
                  std::min(last_step, start_step_ + trace_steps_ - 1), cfg_.log.trace.c_str());
  }
  if (n_pp_ > 1) print_pipeline_summary();
  if (root_) print_summary(last_step);
}

// The median bubble per stage over the steps after the first, printed by
// the root. Collective over pp.
void Trainer::print_pipeline_summary() {
  if (bubbles_.empty()) return;  // no step run (the same on every rank)
  const std::vector<double> bs(bubbles_.begin() + (bubbles_.size() > 1 ? 1 : 0), bubbles_.end());
  const double med = bs.empty() ? 0.0 : median_of(bs);
  std::vector<double> all(static_cast<size_t>(n_pp_), 0.0);  // (pp)
  host::gather(topo_.pp, &med, 1, all.data(), 0);
  if (!root_) return;
  std::string per;
  for (int q = 0; q < n_pp_; ++q) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.3f", q ? ", " : "", all[size_t(q)]);
    per += buf;
  }
  std::printf("pipeline: %s pp=%d virtual_stages=%d micro-batches=%d | bubble (idle/busy, median) per stage "
              "[%s] | formula %s = %.3f | messages %s\n",
              schedule_name(sched_kind_), n_pp_, n_virtual_, A_, per.c_str(),
              sched_kind_ == ScheduleKind::interleaved ? "(pp-1)/(v m)"
              : sched_kind_ == ScheduleKind::zbh1      ? "(pp-1)/(3m)"
              : sched_kind_ == ScheduleKind::zbv       ? "(pp-1)/(6m)"
                                                       : "(pp-1)/m",
              bubble_formula(sched_kind_, n_pp_, n_virtual_, A_), pipe_->grouped() ? "grouped" : "eager");
}

// Root only: the run's summary line (the median step over the steps after the first).
void Trainer::print_summary(int last_step) const {
  if (step_times_.empty()) {
    // train.steps = 0, or a checkpoint already at train.steps: no step, no median to print.
    if (start_step_ > 1)
      std::printf("summary: no steps run (resumed at step %d, train.steps = %d) in %.1f s\n", start_step_ - 1,
                  tc_.steps, seconds_since(t_start_));
    else
      std::printf("summary: no steps run (train.steps = %d) in %.1f s\n", tc_.steps, seconds_since(t_start_));
    std::fflush(stdout);
    return;
  }
  const double median =
      median_of(std::vector<double>(step_times_.begin() + (step_times_.size() > 1 ? 1 : 0), step_times_.end()));
  const double tok_s = tokens_global_ / median;
  const MemStats& ms = be_.mem_stats();
  auto mem = [&](Mem m) { return format_bytes(double(ms.peak_bytes[int(m)]), 1); };
  std::printf("summary: %d steps (%d to %d) in %.1f s | final loss %.4f%s | median step %.1f ms | "
              "%.0f tok/s | %.3f TFLOP/s | MFU %.1f%% | peak tracked memory %s "
              "(params %s, grads %s, optim %s, activations %s, scratch %s) | max RSS %s%s%s%s%s%s\n",
              int(step_times_.size()), start_step_, last_step, seconds_since(t_start_), last_loss_,
              std::isfinite(last_val_) ? (" | val loss " + std::to_string(last_val_)).c_str() : "", median * 1e3,
              tok_s, tok_s * fpt_ / 1e12, 100 * tokens_global_ / median * fpt_ / 1e12 / (peak_tflops_ * topo_.size),
              format_bytes(double(ms.total_peak_bytes), 1).c_str(), mem(Mem::params).c_str(),
              mem(Mem::grads).c_str(), mem(Mem::optim).c_str(), mem(Mem::activations).c_str(),
              mem(Mem::scratch).c_str(), format_bytes(double(max_rss_bytes()), 1).c_str(),
              be_.keeps_weight_copies()
                  ? (" | bf16 weight copies made " + std::to_string(be_.weight_copies_made())).c_str()
                  : "",
              be_.keeps_bf16_activations()
                  ? (" | bf16 activations read in place " + std::to_string(be_.held_activation_reads())).c_str()
                  : "",
              // Only a backend with GEMM epilogues (CUDA's cuBLASLt) counts them.
              be_.epilogues_fused() + be_.epilogues_unfused() > 0
                  ? (" | GEMM epilogues fused " + std::to_string(be_.epilogues_fused()) + ", unfused " +
                     std::to_string(be_.epilogues_unfused()))
                        .c_str()
                  : "",
              // Likewise fused attention kernels (CUDA's, train.dtype = bf16).
              be_.attention_fused() > 0
                  ? (" | fused attention calls " + std::to_string(be_.attention_fused())).c_str()
                  : "",
              // And the grouped linear ops run as fewer GEMMs than layers (CUDA's).
              be_.linear_groups_batched() > 0
                  ? (" | batched linear groups " + std::to_string(be_.linear_groups_batched())).c_str()
                  : "");
  std::fflush(stdout);
}

}  // namespace pentad
