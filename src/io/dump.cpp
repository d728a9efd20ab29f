// The debug dump (see dump.hpp). Tensors are assembled over tp (and ep for
// experts) by gather_global, and a later pipeline stage's tensors are sent
// to the root; batches and logits are gathered over dp.
#include "io/dump.hpp"

#include <functional>
#include <numeric>

#include "comm/host.hpp"
#include "core/error.hpp"
#include "parallel/tp/tensor_parallel.hpp"

namespace pentad {
namespace {
// Message tags over the pp group: one tensor to the root, the step-1 logits.
constexpr int kTagDumpTensor = 7;
constexpr int kTagDumpLogits = 8;
}  // namespace

DebugDump::DebugDump(const std::string& path, const std::string& config_toml, const Topology& topo,
                     const DumpSources& src, int64_t batch_global, int seq_len, int vocab)
    : topo_(topo), src_(src), batch_global_(batch_global), seq_len_(seq_len), vocab_(vocab) {
  // The root alone creates the file; its failure is raised on every rank, or
  // the others would wait for it in write_params' collectives.
  std::string err;
  if (topo_.is_root()) {
    try {
      w_ = std::make_unique<H5Writer>(path);
      w_->attr("config", config_toml);
    } catch (const InputError& e) {
      err = e.what();
    }
  }
  agree_or_throw(err.empty(), err, topo_.job);
  write_params("init/", false);
}

void DebugDump::write_params(const std::string& prefix, bool grads) {
  std::vector<float> host, global;
  // The tensor's holder on a later stage that sends it: the root's dp, tp and cp coordinates.
  const bool sender = topo_.dp_rank() == 0 && topo_.me.tp == 0 && topo_.me.cp == 0;
  for (const GlobalTensor& g : *src_.tensors) {
    global.resize(size_t(std::accumulate(g.shape.begin(), g.shape.end(), int64_t(1), std::multiplies<>())));
    if (topo_.me.pp == g.stage) {
      ParamStore& store = g.expert ? *src_.experts : *src_.params;
      DataParallel& dp = g.expert ? *src_.edpar : *src_.dpar;
      const int i = store.find(g.name);
      const ParamInfo& p = store.info(i);
      host.resize(p.numel());  // p.local_shape
      if (grads)
        dp.get_grad(i, host.data());
      else
        dp.get_param(i, host.data());
      gather_global(holder_groups(p, g.expert, src_.tp, src_.ep), p, host.data(), global);
      if (g.stage != 0 && sender) host::send(topo_.pp, global.data(), int(global.size()), 0, kTagDumpTensor);
    } else if (w_ && g.stage != 0) {
      host::recv(topo_.pp, global.data(), int(global.size()), g.stage, kTagDumpTensor);
    }
    if (w_) w_->write(prefix + g.name, global.data(), g.shape);
  }
}

void DebugDump::record_batch(int step, const int32_t* inputs, const int32_t* targets, int n_local) {
  const bool root = topo_.is_root();
  const size_t n_step = size_t(batch_global_) * seq_len_;  // (B_global, T)
  if (root) {
    inputs_.resize(inputs_.size() + n_step);
    targets_.resize(targets_.size() + n_step);
  }
  int32_t* gin = root ? inputs_.data() + size_t(step - 1) * n_step : nullptr;
  int32_t* gtg = root ? targets_.data() + size_t(step - 1) * n_step : nullptr;
  // Only the dp group of tp rank 0 and cp rank 0 (the root's) gathers; the
  // other tp ranks hold copies of the same batch, the other cp ranks the
  // same sequences.
  if (topo_.me.tp == 0 && topo_.me.cp == 0 && topo_.is_first_stage()) {
    host::gather(topo_.dp, inputs, n_local, gin, 0);
    host::gather(topo_.dp, targets, n_local, gtg, 0);
  }
}

void DebugDump::write_logits(const std::vector<float>& logits, int n_local) {
  const int n_pp = topo_.shape.pp;
  const size_t n_glog = size_t(batch_global_) * seq_len_ * vocab_;
  const bool gatherer = topo_.me.tp == 0 && topo_.me.cp == 0;
  const bool stage_root = topo_.dp_rank() == 0 && gatherer;
  std::vector<float> glog(stage_root ? n_glog : 0);  // (B_global, T, V)
  const bool sent = n_pp > 1 && topo_.head_stage != 0;  // the root is on stage 0
  if (gatherer && topo_.holds_head())
    host::gather(topo_.dp, logits.data(), n_local * vocab_, glog.data(), 0);
  if (sent && stage_root && topo_.holds_head())
    host::send(topo_.pp, glog.data(), int(n_glog), 0, kTagDumpLogits);
  if (sent && w_) host::recv(topo_.pp, glog.data(), int(n_glog), topo_.head_stage, kTagDumpLogits);
  if (w_) w_->write("logits", glog.data(), {batch_global_, seq_len_, vocab_});
}

void DebugDump::record_metrics(double loss, double lr, double grad_norm, double aux_loss) {
  loss_.push_back(loss);
  lr_.push_back(lr);
  grad_norm_.push_back(grad_norm);
  aux_loss_.push_back(aux_loss);
}

void DebugDump::record_choices(const std::vector<double>& row_loss, const std::vector<int>& row_tokens) {
  choice_loss_ = row_loss;
  choice_tokens_.assign(row_tokens.begin(), row_tokens.end());
}

void DebugDump::finish(int steps, bool moe) {
  write_params("final/", false);
  if (!w_) return;
  const int64_t S = steps;
  w_->write("batch/inputs", inputs_.data(), {S, batch_global_, seq_len_});
  w_->write("batch/targets", targets_.data(), {S, batch_global_, seq_len_});
  w_->write("metrics/loss", loss_.data(), {S});
  w_->write("metrics/lr", lr_.data(), {S});
  w_->write("metrics/grad_norm", grad_norm_.data(), {S});
  if (moe) w_->write("metrics/aux_loss", aux_loss_.data(), {S});
  if (!choice_loss_.empty()) {
    const int64_t R = int64_t(choice_loss_.size());
    w_->write("choice/row_loss", choice_loss_.data(), {R});
    w_->write("choice/row_tokens", choice_tokens_.data(), {R});
  }
  w_->commit();
}

}  // namespace pentad
