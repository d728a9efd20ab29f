// The training driver: builds the grid, the backend, the model shard and the
// optimizer, then runs steps of (micro-batches of forward/backward, gradient
// reduction over dp, clipping, AdamW), evaluation and logging.
// Loss normalisation happens in exactly one place: every micro-batch's
// gradient is scaled by 1 / (tokens of the global batch), so the sum over
// micro-batches and dp ranks is the gradient of the global mean loss.
// With context parallelism each cp rank takes its tokens of every sequence
// of its dp rank's batch; losses and gradients are summed over dp x cp.
#include "train/train.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "comm/comm.hpp"
#include "parallel/cp/context_parallel.hpp"
#include "io/data.hpp"
#include "parallel/dp/data_parallel.hpp"
#include "core/error.hpp"
#include "io/h5io.hpp"
#include "train/metrics.hpp"
#include "model/model.hpp"
#include "parallel/tp/tensor_parallel.hpp"
#include "parallel/dp/optimizer.hpp"
#include "parallel/pp/pipeline.hpp"
#include "parallel/pp/schedule.hpp"
#include "io/run_state.hpp"
#include "comm/host.hpp"
#include "comm/topology.hpp"

namespace pentad {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
  return buf;
}

// mkdir -p; returns false (errno set) on failure.
bool make_dirs(const std::string& dir) {
  if (dir.empty()) return true;
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      struct stat st{};
      if (!cur.empty() && ::stat(cur.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return false;
      }
      if (!cur.empty() && ::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
    }
    if (i < dir.size()) cur += dir[i];
  }
  struct stat st{};
  if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return true;
  errno = ENOTDIR;
  return false;
}

std::string parent_dir(const std::string& path) {
  const auto p = path.rfind('/');
  return p == std::string::npos ? std::string() : path.substr(0, p);
}

// Rank 0 checks that every output location can be written before any work.
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

// Open the data files on every rank; a bad file is the same error everywhere.
std::unique_ptr<TokenFile> open_tokens(const std::string& path, const Config& cfg, MPI_Comm job) {
  std::unique_ptr<TokenFile> f;
  bool ok = true;
  std::string msg;
  try {
    f = std::make_unique<TokenFile>(path, cfg.model.vocab_size, int64_t(cfg.model.seq_len) + 1);
  } catch (const InputError& e) {
    ok = false;
    msg = e.what();
  }
  agree_or_throw(ok, msg, job);
  return f;
}

// Collective over the job (ZeRO-3 gathers shards): every rank calls it for
// every tensor; only the rank holding a writer (w != nullptr) writes.
// Tensors split over tp are assembled into their global shape (collective
// over tp), and a later pipeline stage's tensors are sent to the writer.
// MoE expert tensors (expert store, edpar) are split over ep along dim 0 and
// assembled over ep the same way.
void write_params(H5Writer* w, const std::string& prefix, const std::vector<GlobalTensor>& all,
                  ParamStore& params, DataParallel& dpar, ParamStore* experts, DataParallel* edpar, Comm* tp,
                  Comm* ep, const Topology& topo, bool grads) {
  std::vector<float> host, global;
  const bool sender = topo.dp_rank() == 0 && topo.me.tp == 0 && topo.me.cp == 0;
  for (const GlobalTensor& g : all) {
    global.resize(size_t(std::accumulate(g.shape.begin(), g.shape.end(), int64_t(1), std::multiplies<>())));
    if (topo.me.pp == g.stage) {
      ParamStore& store = g.expert ? *experts : params;
      DataParallel& dp = g.expert ? *edpar : dpar;
      const int i = store.find(g.name);
      const ParamInfo& p = store.info(i);
      host.resize(p.numel());
      if (grads)
        dp.get_grad(i, host.data());
      else
        dp.get_param(i, host.data());
      gather_global(g.expert ? ep : tp, p, host.data(), global);
      if (g.stage != 0 && sender)
        MPI_CHECK(MPI_Send(global.data(), int(global.size()), MPI_FLOAT, 0, 7, topo.pp));
    } else if (w && g.stage != 0) {
      MPI_CHECK(MPI_Recv(global.data(), int(global.size()), MPI_FLOAT, g.stage, 7, topo.pp, MPI_STATUS_IGNORE));
    }
    if (w) w->write(prefix + g.name, global.data(), g.shape);
  }
}

// Causal attention work per cp rank for both layouts (index math), printed at start.
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

// Metrics of the step's ring attention: GFLOP of this rank's attention
// (max, min over cp) and its kernel time (max, min). Collective over cp.
constexpr const char* kCpAttnKeys[4] = {"cp_attn_gflop_max", "cp_attn_gflop_min", "cp_attn_ms_max",
                                        "cp_attn_ms_min"};
void cp_attention_stats(const RingAttention& ring, Comm& cp, double out[4]) {
  double mx[2] = {ring.flops() / 1e9, ring.compute_ms()};
  double mn[2] = {-mx[0], -mx[1]};
  cp.allreduce_max_host(mx, 2);
  cp.allreduce_max_host(mn, 2);
  out[0] = mx[0];
  out[1] = -mn[0];
  out[2] = mx[1];
  out[3] = -mn[1];
}

// Step-1 logits of the cp group in global token order on cp rank 0:
// logits (A*b*T/cp, V) in cp_slice order -> (A*b, T, V). Collective over cp.
void gather_cp_logits(const CpSplit& s, MPI_Comm cp, int cp_rank, int A, int b, int V,
                      std::vector<float>& logits) {
  if (s.cp == 1) return;
  const int n = int(logits.size());
  std::vector<float> all(cp_rank == 0 ? logits.size() * size_t(s.cp) : 0);
  MPI_CHECK(MPI_Gather(logits.data(), n, MPI_FLOAT, all.data(), n, MPI_FLOAT, 0, cp));
  if (cp_rank != 0) return;
  logits.assign(all.size(), 0.0f);
  cp_unslice(s, all.data(), A, b, V, logits.data());
}

// Debug dump for the PyTorch oracle and the layout parity harness: initial
// parameters, the step-1 gradients and logits, every step's global batch,
// per-step metrics and the final parameters, all as global tensors.
struct Dump {
  std::unique_ptr<H5Writer> w;  // rank 0 only
  std::vector<int32_t> inputs, targets;  // (steps, B_global, T)
  std::vector<double> loss, lr, grad_norm, aux_loss;
};

// One step's MoE routing summary over the global batch (every rank).
struct MoeStep {
  double aux_loss = 0;      // aux_loss_coef * mean_seq aux_s + z_loss_coef * mean_tok lse^2, summed over blocks
  double balance = 0;       // mean over blocks and sequences of E sum_e f_e P_e (1 = uniform)
  double tok_min = 0, tok_max = 0, tok_mean = 0;  // kept assignments per (block, expert)
  double dropped = 0;       // fraction of assignments over capacity
  // Receive load (MoeStats::recv_load_max): rows received in one MoE call
  // over the uniform share, the most over this step's calls: the root's
  // (beside its peak_mem_*) and the busiest rank's (what to plan with).
  double recv_load_root = 0, recv_load_max = 0;
};

// Sums the model's routing statistics over dp x cp (each rank's tokens) and
// pp (each stage's blocks); tp ranks hold the same (the receive load: the
// maximum). Collective over both.
MoeStep moe_step(const MoeStats& st, const ModelConfig& mc, Comm& dp_cp, Comm& pp, double seqs, double tokens) {
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

}  // namespace

int run_train(const Config& cfg, MPI_Comm job_comm, Backend& be, const CommFactory& make_comm) {
  const auto t_start = Clock::now();
  Topology topo(job_comm, cfg.parallel);
  const bool root = topo.is_root();
  // Gradients, ZeRO shards and loss sums go over dp x cp (the cp ranks hold
  // other tokens of the same sequences); with cp = 1 that is the dp group.
  auto dp = make_comm(topo.dp_cp, "dp_cp");
  auto tp = make_comm(topo.tp, "tp");
  auto pp = make_comm(topo.pp, "pp");
  auto cp = make_comm(topo.cp, "cp");
  const CpSplit cp_split{cfg.model.seq_len, topo.shape.cp, cp_layout_of(cfg.parallel.cp_layout)};
  auto ep = make_comm(topo.ep, "ep");
  auto edp = make_comm(topo.expert_dp, "expert_dp");

  const ModelConfig& mc = cfg.model;
  const TrainConfig& tc = cfg.train;
  const int T = mc.seq_len, Tl = cp_split.local_len(), b = tc.micro_batch, A = tc.grad_accum, n_dp = topo.shape.dp;
  const int64_t B_global = int64_t(b) * A * n_dp;
  const double tokens_global = double(B_global) * T;

  if (root) {
    std::printf("pentad %s | %d ranks | grid %s | backend %s\n", "0.1.0", topo.size,
                topo.describe().c_str(), be.name().c_str());
    std::printf("---- resolved deck (%s) ----\n%s---- end of deck ----\n", cfg.source.c_str(),
                cfg.resolved_toml.c_str());
    std::fflush(stdout);
  }

  auto train_data = open_tokens(cfg.data.train, cfg, topo.job);
  std::unique_ptr<TokenFile> val_data;
  if (!cfg.data.val.empty()) val_data = open_tokens(cfg.data.val, cfg, topo.job);
  check_outputs(cfg, topo);

  std::unique_ptr<MetricsFile> metrics;
  {
    std::string msg;
    try {
      if (root && !cfg.log.metrics.empty()) metrics = std::make_unique<MetricsFile>(cfg.log.metrics);
    } catch (const InputError& e) {
      msg = e.what();
    }
    agree_or_throw(msg.empty(), msg, topo.job);
  }

  // Pipeline: pp * virtual_stages chunks of blocks; chunk g on stage g % pp.
  const int n_pp = topo.shape.pp, n_virtual = cfg.parallel.virtual_stages;
  ModelParallel mpar;
  mpar.tp = tp.get();
  mpar.sp = cfg.parallel.sp;
  mpar.cp = cp.get();
  mpar.cp_layout = cp_split.layout;
  mpar.pp_rank = topo.me.pp;
  mpar.pp_size = n_pp;
  mpar.ep = ep.get();
  mpar.chunk_blocks = partition_blocks(mc.n_layers, n_pp * n_virtual, cfg.parallel.stage_layers);
  Model model(mc, tc.recompute, b, be, mpar);
  ParamStore& params = model.params();
  DataParallel dpar(params, be, *dp, tc, cfg.parallel.zero, cfg.parallel.bucket_mb);
  dpar.init(tc.seed);
  // MoE experts: their own store, reduced over expert_dp (a stage without
  // MoE blocks has none).
  ParamStore& experts = model.expert_params();
  std::unique_ptr<DataParallel> edpar;
  if (experts.numel() > 0) {
    edpar = std::make_unique<DataParallel>(experts, be, *edp, tc, cfg.parallel.zero, cfg.parallel.bucket_mb);
    edpar->init(tc.seed);
    dpar.set_partner(edpar.get());
  }
  const bool moe = mc.n_experts > 0;
  model.set_hooks(&dpar);
  const ScheduleKind sched_kind = n_pp == 1 && n_virtual == 1 ? ScheduleKind::one_f_one_b
                                                              : parse_schedule_kind(cfg.parallel.schedule);
  Pipeline pipe(model, be, *pp, dpar, make_schedule(sched_kind, n_pp, n_virtual, A),
                make_schedule(ScheduleKind::forward_only, n_pp, n_virtual, tc.eval_batches));
  // Tied embeddings over pipeline stages: the first stage's wte and the last
  // stage's copy sum their gradients (before the dp reduction, which then
  // yields the same sum on both) and stay identical.
  const bool tied_stages = mc.tied() && n_pp > 1;
  const int tied_unit = topo.is_first_stage() ? 0 : mc.n_layers + 1;
  const bool in_tied_pair = tied_stages && (topo.is_first_stage() || topo.is_last_stage());
  std::unique_ptr<Comm> emb;
  {
    MPI_Comm c = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_split(topo.pp, in_tied_pair ? 0 : MPI_UNDEFINED, topo.me.pp, &c));
    if (c != MPI_COMM_NULL) emb = make_comm(c, "emb");
  }
  if (in_tied_pair) dpar.hold_unit(tied_unit);
  install_signal_handlers();
  const std::vector<GlobalTensor> all_tensors = global_tensors(params, moe ? &experts : nullptr, topo.pp);
  const std::vector<CkptTensor> ckpt_tensors =
      checkpoint_tensors(params, dpar, moe ? &experts : nullptr, edpar.get(), topo, all_tensors);
  const std::string signature = model_signature(mc);
  auto meta_at = [&](int step) {
    CkptMeta meta;
    meta.step = step;
    meta.seed = tc.seed;
    meta.config_toml = cfg.resolved_toml;
    meta.layout = topo.describe() + " zero=" + std::to_string(cfg.parallel.zero);
    meta.model_signature = signature;
    return meta;
  };
  auto save = [&](int step) {
    const std::string path =
        save_checkpoint(cfg.checkpoint.dir, meta_at(step), ckpt_tensors, cfg.checkpoint.keep, topo.job);
    if (root) {
      std::printf("checkpoint: step %d written to %s\n", step, path.c_str());
      std::fflush(stdout);
    }
  };

  // Resume: "latest" starts fresh when the directory has no committed checkpoint yet.
  int start_step = 1;
  if (!cfg.checkpoint.resume.empty()) {
    std::string path;
    bool fresh = false;
    if (cfg.checkpoint.resume == "latest") fresh = latest_checkpoint(cfg.checkpoint.dir).empty();
    if (!fresh) {
      path = resolve_checkpoint(cfg.checkpoint.resume, cfg.checkpoint.dir);
      const CkptMeta meta = load_checkpoint(path, signature, ckpt_tensors, topo.job);
      start_step = int(meta.step) + 1;
      if (root) {
        std::printf("resumed from %s (written at step %lld under %s)\n", path.c_str(),
                    (long long)meta.step, meta.layout.c_str());
        if (meta.seed != tc.seed)
          std::printf("warning: train.seed %llu differs from the checkpoint's %llu: the data order changes\n",
                      (unsigned long long)tc.seed, (unsigned long long)meta.seed);
      }
    } else if (root) {
      std::printf("checkpoint.resume = latest: no checkpoint in %s yet, starting fresh\n",
                  cfg.checkpoint.dir.c_str());
    }
  }
  if (start_step > 1 && !cfg.log.dump.empty())
    throw InputError("log.dump records a run from step 1; it cannot be combined with a resumed run (checkpoint.resume)");
  // Parameters of the whole model (every pipeline stage's; a tied copy is
  // listed once by global_tensors), for FLOPs per token.
  double n_params = 0;
  for (const GlobalTensor& g : all_tensors)
    n_params += double(std::accumulate(g.shape.begin(), g.shape.end(), int64_t(1), std::multiplies<>()));
  // FLOPs per token count the parameters a token uses: top_k of n_experts.
  double n_active = n_params;
  for (const GlobalTensor& g : all_tensors)
    if (g.expert)
      n_active -= (1.0 - double(mc.top_k) / mc.n_experts) *
                  double(std::accumulate(g.shape.begin(), g.shape.end(), int64_t(1), std::multiplies<>()));
  const double fpt = flops_per_token(mc, n_active);

  double peak_tflops = cfg.log.peak_tflops;
  if (peak_tflops <= 0) {
    // Every rank measures at the same moment (after a barrier), as they will run.
    MPI_CHECK(MPI_Barrier(topo.job));
    peak_tflops = measure_peak_tflops(be);
    // Ranks sharing a node measure different rates; use the job's mean.
    double s = peak_tflops;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, topo.job));
    peak_tflops = s / topo.size;
    be.reset_peaks();  // the measurement's buffers are not part of training
  }
  if (root) {
    std::printf("model: %s, %.3fM parameters, %.3g FLOP/token; global batch %lld x %d tokens "
                "(micro_batch %d x grad_accum %d x dp %d); peak %.3f TFLOP/s per rank%s\n",
                mc.family == Family::gpt2 ? "gpt2" : "llama", n_params / 1e6, fpt,
                (long long)B_global, T, b, A, n_dp, peak_tflops,
                cfg.log.peak_tflops > 0 ? " (deck)" : " (measured sgemm)");
    if (cp_split.cp > 1) print_cp_balance(cp_split);
    if (moe)
      std::printf("moe: %d experts, top-%d, every %d block(s), capacity %s, ep=%d (%d experts per rank), "
                  "%.3fM parameters active per token\n",
                  mc.n_experts, mc.top_k, mc.moe_every,
                  mc.dropless ? "dropless" : std::to_string(mc.capacity_factor).c_str(),
                  topo.shape.ep, mc.n_experts / topo.shape.ep, n_active / 1e6);
    std::fflush(stdout);
  }

  Dump dump;
  const bool dumping = !cfg.log.dump.empty();
  if (dumping) {
    if (root) {
      dump.w = std::make_unique<H5Writer>(cfg.log.dump);
      dump.w->attr("config", cfg.resolved_toml);
    }
    write_params(dump.w.get(), "init/", all_tensors, params, dpar, &experts, edpar.get(), tp.get(), ep.get(), topo, false);
  }

  // Host buffers for this rank's micro-batches (b sequences each): the whole
  // sequences (seq_*), and this cp rank's tokens of them (cp_slice order).
  std::vector<int32_t> seq_in(size_t(A) * b * T), seq_tg(size_t(A) * b * T);
  std::vector<int32_t> in(size_t(A) * b * Tl), tg(size_t(A) * b * Tl);
  std::vector<float> logits;  // (A*b*T/cp, V) this rank's step-1 logits when dumping
  const int64_t first_seq = int64_t(topo.dp_rank()) * A * b;

  auto evaluate = [&]() -> double {
    // Whole sequences, then this cp rank's tokens of them, one micro-batch
    // per evaluation batch through the forward-only schedule.
    const size_t bt = size_t(b) * T, btl = size_t(b) * Tl;
    std::vector<int32_t> whole_in(bt), whole_tg(bt);
    std::vector<int32_t> ein(size_t(tc.eval_batches) * btl), etg(size_t(tc.eval_batches) * btl);
    for (int e = 0; e < tc.eval_batches; ++e) {
      eval_batch(*val_data, e, int64_t(topo.dp_rank()) * b, b, b * n_dp, T, whole_in.data(), whole_tg.data());
      cp_slice(cp_split, topo.me.cp, whole_in.data(), 1, b, ein.data() + e * btl);
      cp_slice(cp_split, topo.me.cp, whole_tg.data(), 1, b, etg.data() + e * btl);
    }
    double sum = pipe.eval(ein.data(), etg.data());  // the last stage's
    dp->allreduce_sum_host(&sum, 1);                 // over dp x cp
    pp->allreduce_sum_host(&sum, 1);
    return sum / (double(tc.eval_batches) * bt * n_dp);
  };
  const int trace_steps = cfg.log.trace.empty() ? 0 : 8;  // the first steps of the run

  std::vector<double> step_times, bubbles;
  // Per pipeline stage, gathered to the root's pp group: bubble, peak
  // in-flight activation slots, activation peak bytes, slot bytes.
  constexpr int kStageStats = 4;
  std::vector<double> stage_stats(size_t(kStageStats) * n_pp);
  size_t my_slot_bytes = 0;
  for (int g = 0; g < model.n_chunks(); ++g)
    if (model.owns_chunk(g)) my_slot_bytes += model.slot_bytes(g);
  be.reset_peaks();  // slot_bytes may have allocated a pooled slot before any step
  double last_loss = NAN, last_val = NAN;
  for (int step = start_step; step <= tc.steps; ++step) {
    const auto t0 = Clock::now();
    const float lr = float(lr_at(tc, step));
    sample_batch(*train_data, tc.seed, step, first_seq, A * b, T, seq_in.data(), seq_tg.data());
    cp_slice(cp_split, topo.me.cp, seq_in.data(), A, b, in.data());
    cp_slice(cp_split, topo.me.cp, seq_tg.data(), A, b, tg.data());
    if (model.ring()) model.ring()->reset_stats();
    dpar.begin_step();
    model.reset_moe_stats();
    const bool want_logits = dumping && step == 1;
    if (want_logits) logits.assign(size_t(A) * b * Tl * mc.vocab_size, 0.0f);
    pipe.set_tracing(step - start_step < trace_steps, step);
    double loss_sum = pipe.train_step(in.data(), tg.data(), float(1.0 / tokens_global),
                                      want_logits && topo.is_last_stage() ? logits.data() : nullptr);
    if (in_tied_pair) {
      const int i = params.find("model/wte");
      emb->allreduce_sum(params.grad(i), params.info(i).numel());
      dpar.release_held(tied_unit);
    }
    // Gradient reduction over dp was launched bucket by bucket during the
    // last backward (sum of already-scaled gradients); wait for it.
    dpar.finish_backward();
    dp->allreduce_sum_host(&loss_sum, 1);
    pp->allreduce_sum_host(&loss_sum, 1);
    const double loss = loss_sum / tokens_global;
    const double grad_norm = dpar.grad_norm(tp.get(), pp.get(), ep.get());
    const MoeStep ms_moe = moe ? moe_step(model.moe_stats(), mc, *dp, *pp, double(B_global), tokens_global) : MoeStep{};
    if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
      throw InputError("step " + std::to_string(step) + ": loss or gradient norm is not finite (loss " +
                       std::to_string(loss) + ", grad norm " + std::to_string(grad_norm) +
                       "); lower train.lr or check the data");
    }
    if (dumping) {
      // Gather this step's batch (and step-1 logits) in global sequence order.
      const int n_local = A * b * T;  // whole sequences
      if (root) {
        dump.inputs.resize(dump.inputs.size() + size_t(B_global) * T);
        dump.targets.resize(dump.targets.size() + size_t(B_global) * T);
      }
      int32_t* gin = root ? dump.inputs.data() + size_t(step - 1) * B_global * T : nullptr;
      int32_t* gtg = root ? dump.targets.data() + size_t(step - 1) * B_global * T : nullptr;
      // Only the dp group of tp rank 0 and cp rank 0 (the root's) gathers;
      // the other tp ranks hold copies of the same batch and logits, the
      // other cp ranks the same sequences. The logits come from the last
      // pipeline stage.
      const bool gatherer = topo.me.tp == 0 && topo.me.cp == 0;
      if (gatherer && topo.is_first_stage()) {
        MPI_CHECK(MPI_Gather(seq_in.data(), n_local, MPI_INT32_T, gin, n_local, MPI_INT32_T, 0, topo.dp));
        MPI_CHECK(MPI_Gather(seq_tg.data(), n_local, MPI_INT32_T, gtg, n_local, MPI_INT32_T, 0, topo.dp));
      }
      if (step == 1) {
        const size_t n_glog = size_t(B_global) * T * mc.vocab_size;
        const bool stage_root = topo.dp_rank() == 0 && gatherer;
        std::vector<float> glog(stage_root ? n_glog : 0);
        if (topo.me.tp == 0 && topo.is_last_stage())
          gather_cp_logits(cp_split, topo.cp, topo.me.cp, A, b, mc.vocab_size, logits);
        if (gatherer && topo.is_last_stage())
          MPI_CHECK(MPI_Gather(logits.data(), n_local * mc.vocab_size, MPI_FLOAT, glog.data(),
                               n_local * mc.vocab_size, MPI_FLOAT, 0, topo.dp));
        if (n_pp > 1 && stage_root && topo.is_last_stage())
          MPI_CHECK(MPI_Send(glog.data(), int(n_glog), MPI_FLOAT, 0, 8, topo.pp));
        if (n_pp > 1 && root)
          MPI_CHECK(MPI_Recv(glog.data(), int(n_glog), MPI_FLOAT, n_pp - 1, 8, topo.pp, MPI_STATUS_IGNORE));
        if (root) dump.w->write("logits", glog.data(), {B_global, T, mc.vocab_size});
        write_params(dump.w.get(), "grad/", all_tensors, params, dpar, &experts, edpar.get(), tp.get(), ep.get(), topo, true);
      }
      dump.loss.push_back(loss);
      dump.lr.push_back(lr);
      dump.grad_norm.push_back(grad_norm);
      dump.aux_loss.push_back(ms_moe.aux_loss);
    }
    dpar.optimizer_step(step, lr, clip_scale(grad_norm, tc.grad_clip));
    be.synchronize();
    const double dt = seconds_since(t0);
    step_times.push_back(dt);
    bubbles.push_back(pipe.bubble());
    {
      const double mine[kStageStats] = {pipe.bubble(), double(pipe.peak_inflight()),
                                        double(be.mem_stats().peak_bytes[int(Mem::activations)]),
                                        double(my_slot_bytes)};
      MPI_CHECK(MPI_Gather(mine, kStageStats, MPI_DOUBLE, stage_stats.data(), kStageStats, MPI_DOUBLE, 0, topo.pp));
    }
    last_loss = loss;

    // Ring attention work and kernel time, the extremes over the cp group
    // (read before the evaluation adds its forward passes).
    double cp_attn[4] = {0, 0, 0, 0};
    if (model.ring()) cp_attention_stats(*model.ring(), *cp, cp_attn);
    const bool eval_now = val_data && ((tc.eval_every > 0 && step % tc.eval_every == 0) || step == tc.steps);
    if (eval_now) last_val = evaluate();

    if (root) {
      const double tok_s = tokens_global / dt;
      const double tflops = tok_s * fpt / 1e12;
      const double mfu = tflops / (peak_tflops * topo.size);
      const MemStats& ms = be.mem_stats();
      if (step % cfg.log.every == 0 || step == 1 || step == tc.steps) {
        std::printf("step %5d/%d | loss %.4f | lr %.3e | grad norm %.4f | %.0f tok/s | "
                    "%.3f TFLOP/s | MFU %.1f%% | mem %s | %.1f ms%s\n",
                    step, tc.steps, loss, lr, grad_norm, tok_s, tflops, 100 * mfu,
                    human_bytes(double(ms.total_peak_bytes)).c_str(), dt * 1e3,
                    eval_now ? (" | val loss " + std::to_string(last_val)).c_str() : "");
        if (moe)
          std::printf("           moe | aux loss %.5f | balance %.4f | tokens/expert min %.0f max %.0f mean %.1f | "
                      "dropped %.2f%% | ep %s sent\n",
                      ms_moe.aux_loss, ms_moe.balance, ms_moe.tok_min, ms_moe.tok_max, ms_moe.tok_mean,
                      100 * ms_moe.dropped, human_bytes(ep->bytes_sent()).c_str());
        std::fflush(stdout);
      }
      std::vector<std::pair<std::string, double>> row = {
          {"step", step}, {"loss", loss}, {"lr", lr}, {"grad_norm", grad_norm},
          {"tokens_per_s", tok_s}, {"tflops", tflops}, {"mfu", mfu},
          {"peak_mem_bytes", double(ms.total_peak_bytes)}, {"step_ms", dt * 1e3},
          {"dp_bytes_sent", dp->bytes_sent()}, {"tp_bytes_sent", tp->bytes_sent()},
          {"dp_blocked_ms", dp->seconds_blocked() * 1e3}, {"tp_blocked_ms", tp->seconds_blocked() * 1e3},
          {"pp_bytes_sent", pp->bytes_sent()}, {"pp_blocked_ms", pp->seconds_blocked() * 1e3},
          {"pp_bubble_formula", n_pp > 1 ? bubble_formula(sched_kind, n_pp, n_virtual, A) : 0.0},
          {"cp_bytes_sent", cp->bytes_sent()}, {"cp_blocked_ms", cp->seconds_blocked() * 1e3},
          {"dp_reductions", double(dpar.reductions())},
          {"dp_buckets", double(dpar.n_buckets())}, {"dp_comm_hidden", dpar.hidden_fraction()},
          {"param_elems", double(params.numel())}, {"shard_elems", double(dpar.shard_elems())}};
      for (int c = 0; c < int(Mem::count); ++c)
        row.emplace_back(std::string("peak_mem_") + mem_name(Mem(c)), double(ms.peak_bytes[size_t(c)]));
      double worst_bubble = 0;
      for (int q = 0; q < n_pp; ++q) {
        const double* st = stage_stats.data() + size_t(q) * kStageStats;
        const std::string k = "pp" + std::to_string(q) + "_";
        row.emplace_back(k + "bubble", st[0]);
        row.emplace_back(k + "inflight", st[1]);
        row.emplace_back(k + "act_peak_bytes", st[2]);
        row.emplace_back(k + "slot_bytes", st[3]);
        worst_bubble = std::max(worst_bubble, st[0]);
      }
      row.emplace_back("pp_bubble", worst_bubble);
      if (moe) {
        row.emplace_back("aux_loss", ms_moe.aux_loss);
        row.emplace_back("moe_balance", ms_moe.balance);
        row.emplace_back("moe_tokens_per_expert_min", ms_moe.tok_min);
        row.emplace_back("moe_tokens_per_expert_max", ms_moe.tok_max);
        row.emplace_back("moe_tokens_per_expert_mean", ms_moe.tok_mean);
        row.emplace_back("moe_dropped_fraction", ms_moe.dropped);
        row.emplace_back("moe_recv_load", ms_moe.recv_load_root);
        row.emplace_back("moe_recv_load_max", ms_moe.recv_load_max);
        row.emplace_back("ep_bytes_sent", ep->bytes_sent());
        row.emplace_back("ep_blocked_ms", ep->seconds_blocked() * 1e3);
        row.emplace_back("expert_dp_bytes_sent", edp->bytes_sent());
        const MoeLayer::Times mt = model.moe_times();  // the root's
        row.emplace_back("moe_comm_ms", mt.comm_s * 1e3);
        row.emplace_back("moe_expert_ms", mt.expert_s * 1e3);
        row.emplace_back("moe_route_ms", mt.route_s * 1e3);
      }
      if (eval_now) row.emplace_back("val_loss", last_val);
      if (model.ring())
        for (int i = 0; i < 4; ++i) row.emplace_back(kCpAttnKeys[i], cp_attn[i]);
      if (metrics) metrics->write(row);
    }
    dp->reset_bytes();
    tp->reset_bytes();
    pp->reset_bytes();
    cp->reset_bytes();
    ep->reset_bytes();
    edp->reset_bytes();

    // Checkpoint every N steps, and on SIGUSR1/SIGTERM at a step all ranks agree on.
    int stop = signal_received() ? 1 : 0;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &stop, 1, MPI_INT, MPI_MAX, topo.job));
    if ((cfg.checkpoint.every > 0 && step % cfg.checkpoint.every == 0) || stop) save(step);
    if (stop) {
      if (root) std::printf("signal received: stopped after step %d with a checkpoint; exiting\n", step);
      break;
    }
  }

  if (dumping) write_params(dump.w.get(), "final/", all_tensors, params, dpar, &experts, edpar.get(), tp.get(), ep.get(), topo, false);
  if (dumping && root) {
    const int64_t S = tc.steps;
    dump.w->write("batch/inputs", dump.inputs.data(), {S, B_global, T});
    dump.w->write("batch/targets", dump.targets.data(), {S, B_global, T});
    dump.w->write("metrics/loss", dump.loss.data(), {S});
    dump.w->write("metrics/lr", dump.lr.data(), {S});
    dump.w->write("metrics/grad_norm", dump.grad_norm.data(), {S});
    if (moe) dump.w->write("metrics/aux_loss", dump.aux_loss.data(), {S});
    dump.w->commit();
  }
  int last_step = start_step + int(step_times.size()) - 1;
  if (cfg.checkpoint.save_final) {
    // The final state as a checkpoint file (weights and AdamW moments, global
    // tensors): resumable, and readable as plain weights under model/.
    const std::string path = cfg.checkpoint.dir + "/final.h5";
    write_checkpoint_file(path, meta_at(last_step), ckpt_tensors, topo.job);
    if (root) std::printf("weights written to %s\n", path.c_str());
  }

  if (!cfg.log.trace.empty()) {
    const std::string label = "rank " + std::to_string(topo.rank) + " (pp " + std::to_string(topo.me.pp) +
                              ", dp " + std::to_string(topo.dp_rank()) + ", tp " + std::to_string(topo.me.tp) + ")";
    write_trace(cfg.log.trace, pipe.trace_events(topo.rank, label), 0, topo.job);
    if (root) std::printf("trace of steps %d to %d written to %s (open in Perfetto or chrome://tracing)\n",
                          start_step, std::min(last_step, start_step + trace_steps - 1), cfg.log.trace.c_str());
  }
  if (n_pp > 1) {
    // Median bubble per stage over the steps after the first.
    std::vector<double> bs(bubbles.begin() + (bubbles.size() > 1 ? 1 : 0), bubbles.end());
    std::sort(bs.begin(), bs.end());
    double med = bs.empty() ? 0.0 : bs[bs.size() / 2];
    std::vector<double> all(static_cast<size_t>(n_pp), 0.0);
    MPI_CHECK(MPI_Gather(&med, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, 0, topo.pp));
    if (root) {
      std::string per;
      for (int q = 0; q < n_pp; ++q) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%s%.3f", q ? ", " : "", all[size_t(q)]);
        per += buf;
      }
      std::printf("pipeline: %s pp=%d virtual_stages=%d micro-batches=%d | bubble (idle/busy, median) per stage "
                  "[%s] | formula %s = %.3f\n",
                  schedule_name(sched_kind), n_pp, n_virtual, A, per.c_str(),
                  sched_kind == ScheduleKind::interleaved ? "(pp-1)/(v m)" : "(pp-1)/m",
                  bubble_formula(sched_kind, n_pp, n_virtual, A));
    }
  }
  if (root) {
    std::vector<double> sorted(step_times.begin() + (step_times.size() > 1 ? 1 : 0), step_times.end());
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted.empty() ? NAN : sorted[sorted.size() / 2];
    const MemStats& ms = be.mem_stats();
    std::printf("summary: %d steps (%d to %d) in %.1f s | final loss %.4f%s | median step %.1f ms | "
                "%.0f tok/s | %.3f TFLOP/s | MFU %.1f%% | peak tracked memory %s "
                "(params %s, grads %s, optim %s, activations %s, scratch %s) | max RSS %s\n",
                int(step_times.size()), start_step, last_step,
                seconds_since(t_start), last_loss,
                std::isfinite(last_val) ? (" | val loss " + std::to_string(last_val)).c_str() : "",
                median * 1e3, tokens_global / median, tokens_global / median * fpt / 1e12,
                100 * tokens_global / median * fpt / 1e12 / (peak_tflops * topo.size),
                human_bytes(double(ms.total_peak_bytes)).c_str(),
                human_bytes(double(ms.peak_bytes[int(Mem::params)])).c_str(),
                human_bytes(double(ms.peak_bytes[int(Mem::grads)])).c_str(),
                human_bytes(double(ms.peak_bytes[int(Mem::optim)])).c_str(),
                human_bytes(double(ms.peak_bytes[int(Mem::activations)])).c_str(),
                human_bytes(double(ms.peak_bytes[int(Mem::scratch)])).c_str(),
                human_bytes(double(max_rss_bytes())).c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace pentad
