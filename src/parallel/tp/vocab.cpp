// Vocab-parallel embedding and loss head: per-slice lookups and logits, the
// cross-entropy of tensor_parallel.hpp, and the debug gather of full logits.
#include "parallel/tp/vocab.hpp"

#include <algorithm>
#include <vector>

#include "comm/comm.hpp"
#include "parallel/tp/tensor_parallel.hpp"

namespace pentad {

VocabParallelEmbedding::VocabParallelEmbedding(ParamStore& params, Backend& be, const TpRegions& tp,
                                               ParamId wte, ParamId wpe, int n_embd, int vocab_local,
                                               int micro_batch, const CpSplit& cp_split, int cp_rank,
                                               float multiplier)
    : params_(&params), be_(&be), tp_(&tp), wte_(wte), wpe_(wpe), C_(n_embd), V_(vocab_local),
      B_(micro_batch), vocab_start_(tp.rank() * vocab_local), cp_rank_(cp_rank), multiplier_(multiplier),
      cp_split_(cp_split) {}

void VocabParallelEmbedding::fwd(float* out, const int32_t* tokens, float* part) const {
  const float* wpe = tp_->rank() == 0 ? params_->param(wpe_) : nullptr;
  // Without tp the rows are the output; with tp they are partial sums.
  float* rows = tp_->split() ? part : out;
  const int m = cp_split_.chunk_len();
  for (int c = 0; c < cp_split_.n_chunks(); ++c) {
    const size_t row = size_t(c) * B_ * m;
    be_->embedding_fwd(rows + row * C_, tokens + row, params_->param(wte_), wpe, B_, m, C_, vocab_start_,
                       V_, cp_split_.chunk_start(cp_rank_, c));
  }
  if (tp_->split()) {
    const float* sum = tp_->leave_fwd(part, out);
    if (sum != out) be_->copy_bytes(out, sum, size_t(tp_->n_rows_local()) * C_ * sizeof(float));
  }
  if (multiplier_ != 1.0f) be_->scale(out, multiplier_, size_t(tp_->n_rows_local()) * C_);
}

void VocabParallelEmbedding::bwd(float* dy_local, float* dy_full, const int32_t* tokens) const {
  if (multiplier_ != 1.0f) be_->scale(dy_local, multiplier_, size_t(tp_->n_rows_local()) * C_);
  const float* dy = tp_->leave_bwd(dy_local, dy_full);  // (N, C)
  const int m = cp_split_.chunk_len();
  for (int c = 0; c < cp_split_.n_chunks(); ++c) {
    const size_t row = size_t(c) * B_ * m;
    be_->embedding_bwd(params_->grad(wte_), params_->grad(wpe_), dy + row * C_, tokens + row, B_, m, C_,
                       vocab_start_, V_, cp_split_.chunk_start(cp_rank_, c));
  }
}

VocabParallelHead::VocabParallelHead(ParamStore& params, Backend& be, const TpRegions& tp, ParamId w,
                                     int n_embd, int vocab_local, int vocab)
    : params_(&params), be_(&be), tp_(&tp), w_(w), C_(n_embd), V_(vocab_local),
      vocab_start_(tp.rank() * vocab_local),
      V_real_(std::clamp(vocab - tp.rank() * vocab_local, 0, vocab_local)), V_global_(vocab) {}

namespace {

// The logits (n, Vp/tp) of a chunk of rows, gathered over the vocabulary
// slices of the tp group into logits_out (n, V) on the host, the padding
// columns dropped. Debug dumps only: training never holds full logits.
// Collective over tp.
void write_logits(Backend& be, Comm* tp, float* logits_out, const float* logits, float* gathered, int n,
                  int V_local, int V) {
  const size_t nv = size_t(n) * V_local;
  const int n_ranks = tp ? tp->size() : 1;
  std::vector<float> host(nv * size_t(n_ranks));
  if (n_ranks == 1) {
    be.to_host(host.data(), logits, nv * sizeof(float));
  } else {
    tp->allgather(logits, gathered, nv);
    be.to_host(host.data(), gathered, host.size() * sizeof(float));
  }
  for (int q = 0; q < n_ranks; ++q) {
    const int cols = std::clamp(V - q * V_local, 0, V_local);
    for (int i = 0; i < n; ++i)
      std::copy_n(host.data() + size_t(q) * nv + size_t(i) * V_local, cols,
                  logits_out + size_t(i) * V + size_t(q) * V_local);
  }
}

}  // namespace

void VocabParallelHead::fwd_bwd(float* losses, float* dx, const float* x, const int32_t* targets,
                                float loss_scale, float* logits_out, const HeadBuffers& buf) const {
  const int N = tp_->n_rows();
  const size_t V_global = size_t(V_global_);
  const float* W = params_->param(w_);  // (V/tp, C)
  float* dW = params_->grad(w_);
  float* logits = buf.logits;
  for (int r0 = 0; r0 < N; r0 += buf.chunk_rows) {
    const int n = std::min(buf.chunk_rows, N - r0);
    be_->gemm(false, true, n, V_, C_, 1.0f, x + size_t(r0) * C_, C_, W, C_, 0.0f, logits, V_);
    if (logits_out)
      write_logits(*be_, tp_->comm(), logits_out + size_t(r0) * V_global, logits, buf.logits_all, n, V_,
                   V_global_);
    vocab_parallel_xent(*be_, tp_->comm(), dx ? logits : nullptr, losses + r0, logits, buf.rowmax,
                        buf.sumexp_target, targets + r0, loss_scale, n, V_real_, V_, vocab_start_);
    if (dx) {
      // logits now holds dlogits (n, V/tp); dx gets this slice's share.
      be_->gemm(false, false, n, C_, V_, 1.0f, logits, V_, W, C_, 0.0f, dx + size_t(r0) * C_, C_);
      be_->gemm(true, false, V_, C_, n, 1.0f, logits, V_, x + size_t(r0) * C_, C_, 1.0f, dW, C_);
    }
  }
}

}  // namespace pentad
