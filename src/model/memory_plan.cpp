// The model's buffer lists and the data-parallel sizes (see memory_plan.hpp).
// The lists are the allocation code: Model walks them, so a buffer added
// here is allocated, bound and counted by the planner at once, and one not
// listed here does not exist.
#include "model/memory_plan.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace pentad {

LocalDims local_dims(const ModelConfig& cfg, int micro_batch, int tp, bool sp, const CpSplit& cp) {
  LocalDims d;
  d.B = micro_batch;
  d.T = cp.local_len();
  d.C = cfg.d_model;
  d.H = cfg.n_heads / tp;
  d.kv_copies = tp > cfg.n_kv_heads ? tp / cfg.n_kv_heads : 1;
  d.Hkv = d.kv_copies > 1 ? 1 : cfg.n_kv_heads / tp;  // a copied head: one on each copy
  d.D = cfg.head_dim();
  d.F = cfg.d_ff / tp;
  d.V = cfg.padded_vocab(tp) / tp;
  d.L = cfg.n_layers;
  d.gpt2 = cfg.family == Family::gpt2;
  d.sp = sp && tp > 1;
  d.qk_norm = cfg.qk_norm;
  d.N = d.B * d.T;
  d.Nl = d.sp ? d.N / tp : d.N;
  return d;
}

size_t bytes_of(const std::vector<BufSpec>& bufs, Mem mem) {
  size_t n = 0;
  for (const BufSpec& b : bufs)
    if (b.mem == mem) n += b.bytes();
  return n;
}

std::vector<BufPlace> place_buffers(const std::vector<BufSpec>& bufs, std::vector<size_t>& block_bytes) {
  std::vector<BufPlace> out;
  block_bytes.clear();
  for (size_t i = 0; i < bufs.size(); ++i) {
    const bool joined = i > 0 && bufs[i - 1].with_next;
    if (joined && bufs[i].mem != bufs[i - 1].mem)
      throw std::logic_error("MemoryPlan: buffers of different categories joined in one block");
    if (!joined) block_bytes.push_back(0);
    out.push_back({block_bytes.size() - 1, block_bytes.back()});
    block_bytes.back() += bufs[i].bytes();
  }
  return out;
}

MemoryPlan::MemoryPlan(const ModelConfig& cfg, Recompute recompute, int micro_batch, RankLayout layout)
    : d_(local_dims(cfg, micro_batch, layout.tp, layout.sp, layout.cp)),
      recompute_(recompute),
      layout_(std::move(layout)) {
  chunk_begin_ = layout_.chunk_blocks.empty() ? std::vector<int>{0, d_.L} : layout_.chunk_blocks;
  for (int l = 0; l < d_.L; ++l) moe_block_.push_back(cfg.is_moe_block(l));
}

size_t MemoryPlan::wstash_bytes(int g) const {
  const size_t N = size_t(d_.N), C = size_t(d_.C), F = size_t(d_.F);
  const size_t HD = size_t(d_.H) * d_.D, KD = size_t(d_.Hkv) * d_.D;
  const bool full = recompute_ == Recompute::full;
  size_t bytes = 0;
  // With full recompute, B's copies of the matmul inputs from the shared
  // set, in its forms.
  const size_t NlC = size_t(d_.Nl) * C;
  const size_t ins =
      full ? NlC * (value_bytes(Buf::ln1, -1) + value_bytes(Buf::ln2, -1)) + N * HD * value_bytes(Buf::att, -1) : 0;
  for (int l = chunk_begin_[size_t(g)]; l < chunk_begin_[size_t(g) + 1]; ++l) {
    if (!moe_block_[size_t(l)]) {
      bytes += (N * C + N * F * (d_.gpt2 ? 1 : 2)) * sizeof(float);
      if (full) bytes += N * F * value_bytes(Buf::fc_act, -1);
    }
    bytes += (N * C + N * HD + 2 * N * KD) * sizeof(float) + ins;
  }
  return bytes;
}

bool MemoryPlan::holds(Buf b, int block) const {
  if (layout_.bf16_act_bytes <= 0) return false;
  switch (b) {
    case Buf::fc_act:
    case Buf::scratch_fc_act:
    case Buf::fc_pre:
    case Buf::fc_up: return true;
    case Buf::att: return layout_.cp.cp == 1;  // ring attention merges partial outputs into it
    case Buf::q:
    case Buf::k:
    case Buf::v: return layout_.cp.cp == 1;  // k and v travel the ring in fp32
    case Buf::ln1: return !d_.sp;
    case Buf::ln2:
      if (d_.sp) return false;
      if (block >= 0) return !moe_block_[size_t(block)];
      return std::find(moe_block_.begin(), moe_block_.end(), true) == moe_block_.end();
    default: return false;
  }
}

void MemoryPlan::mark_form(BufSpec& b) const {
  b.gemm_form = holds(b.buf, b.block);
  b.value_bytes = uint8_t(value_bytes(b.buf, b.block));
}

// One block's Acts. kept: a slot's (the attention probabilities with
// recompute = none, no ring attention, which recomputes its per-key-block
// probabilities, and a backend whose attention backward reads them; fc_act
// with none); the shared full-recompute set keeps
// neither (its fc_act is the scratch one).
void MemoryPlan::add_block_acts(std::vector<BufSpec>& out, Mem mem, int block, bool kept) const {
  const size_t BT = size_t(d_.N), HD = size_t(d_.H) * d_.D, KD = size_t(d_.Hkv) * d_.D;
  const size_t Nl = size_t(d_.Nl), NlC = Nl * d_.C, BHT = size_t(d_.B) * d_.H * d_.T;
  auto add = [&](Buf b, size_t n) {
    out.push_back({b, mem, n, block});
    mark_form(out.back());
  };
  add(Buf::ln1, NlC);         // (Nl, C)
  add(Buf::ln1_mean, Nl);     // (Nl)
  add(Buf::ln1_rstd, Nl);     // (Nl)
  add(Buf::q, BT * HD);       // (B, T, H*D)
  out.back().with_next = true;
  add(Buf::k, BT * KD);       // (B, T, Hkv*D)
  out.back().with_next = true;
  add(Buf::v, BT * KD);       // (B, T, Hkv*D)
  if (d_.qk_norm) {           // q and k before their norms, and the norms' 1/rms
    add(Buf::q_raw, BT * HD);                // (B, T, H*D)
    add(Buf::k_raw, BT * KD);                // (B, T, Hkv*D)
    add(Buf::q_rstd, BT * size_t(d_.H));     // (B, T, H)
    add(Buf::k_rstd, BT * size_t(d_.Hkv));   // (B, T, Hkv)
  }
  add(Buf::att, BT * HD);     // (B, T, H*D)
  add(Buf::lse, BHT);         // (B, H, T)
  const bool none = recompute_ == Recompute::none;
  if (kept && none && layout_.cp.cp == 1 && layout_.attention_probs) add(Buf::probs, BHT * size_t(d_.T));  // (B, H, T, T)
  add(Buf::res_mid, NlC);     // (Nl, C)
  add(Buf::ln2, NlC);         // (Nl, C)
  add(Buf::ln2_mean, Nl);     // (Nl)
  add(Buf::ln2_rstd, Nl);     // (Nl)
  add(Buf::fc_pre, BT * d_.F);                   // (B, T, F)
  out.back().with_next = !d_.gpt2;               // with fc_up
  if (!d_.gpt2) add(Buf::fc_up, BT * d_.F);      // (B, T, F)
  if (kept && none) add(Buf::fc_act, BT * d_.F);  // (B, T, F)
}

std::vector<BufSpec> MemoryPlan::shared_buffers() const {
  const size_t BT = size_t(d_.N), BTC = BT * d_.C, HD = size_t(d_.H) * d_.D, KD = size_t(d_.Hkv) * d_.D;
  const size_t NlC = size_t(d_.Nl) * d_.C, BTF = BT * d_.F;
  std::vector<BufSpec> out;
  auto add = [&](Buf b, size_t n) {
    out.push_back({b, Mem::scratch, n});
    mark_form(out.back());
  };
  add(Buf::dres, NlC);
  add(Buf::d_ln, NlC);
  add(Buf::d_att, BT * HD);
  add(Buf::dq, BT * HD);
  out.back().with_next = true;
  add(Buf::dk, BT * KD);
  out.back().with_next = true;
  add(Buf::dv, BT * KD);
  // GPT-2's MLP goes from dL/d(output) to dL/d(GELU input) in one op
  // (linear_bwd_input_gelu): only SwiGLU keeps dL/d(activation).
  if (!d_.gpt2) add(Buf::d_fc_act, BTF);
  add(Buf::d_fc_pre, BTF);
  out.back().with_next = !d_.gpt2;  // with d_up
  if (!d_.gpt2) add(Buf::d_up, BTF);
  if (has_head()) add(Buf::d_lnf, BTC);
  if (recompute_ != Recompute::none) add(Buf::scratch_fc_act, BTF);
  if (layout_.tp > 1) add(Buf::part, BTC);
  if (d_.sp) {
    add(Buf::gath_x, BTC);
    add(Buf::gath_dy, BTC);
    add(Buf::rep_grad, 4 * size_t(d_.C));  // (4, C): a unit's norm weights and biases
  }
  // The q/k norm weights' gradients, partial over this rank's heads.
  if (d_.qk_norm && layout_.tp > 1) add(Buf::qk_norm_grad, 2 * size_t(d_.D));  // (2, D)
  // Full recompute: one block set, shared by all blocks, in scratch.
  if (recompute_ == Recompute::full) add_block_acts(out, Mem::scratch, -1, false);
  if (has_head()) {
    const size_t rows = size_t(head_rows());
    add(Buf::logits, rows * d_.V);   // (rows, V/tp)
    add(Buf::xent_rowmax, rows);     // (rows)
    add(Buf::xent_sumexp, 2 * rows);  // (2*rows) sum of exp, then target logits
  }
  return out;
}

std::vector<BufSpec> MemoryPlan::slot_buffers(int g) const {
  const size_t BT = size_t(d_.N), Nl = size_t(d_.Nl), NlC = Nl * d_.C;
  const int G = n_chunks(), l0 = chunk_begin_[size_t(g)], l1 = chunk_begin_[size_t(g) + 1];
  const Mem A = Mem::activations;
  std::vector<BufSpec> out;
  if (g == 0) out.push_back({Buf::tokens, A, BT, -1, true});      // (B*T) token ids
  if (g == G - 1) out.push_back({Buf::targets, A, BT, -1, true});  // (B*T)
  // The block inputs l0..l1-1 and the chunk's output l1 (the head's input
  // on the last chunk); full recompute keeps only these.
  for (int l = l0; l <= l1; ++l) out.push_back({Buf::res, A, NlC, l});
  if (recompute_ != Recompute::full)
    for (int l = l0; l < l1; ++l) add_block_acts(out, A, l, true);
  if (g == G - 1) {
    out.push_back({Buf::lnf, A, NlC});
    out.push_back({Buf::lnf_mean, A, Nl});
    out.push_back({Buf::lnf_rstd, A, Nl});
    out.push_back({Buf::losses, A, BT});
  }
  return out;
}

// Logits are processed in chunks of rows of at most 16 Mi values (~64 MiB),
// the N rows cut into equal chunks: a short last chunk (25 of 1024 rows at
// GPT-2 124M, B 4, T 256 with 333-row chunks) costs its three head GEMMs a
// whole pass over the (V, C) weight and its gradient for a few rows, and
// ran the head ~15% below the even cut (docs/benchmarks.md, issue 23).
int MemoryPlan::head_rows() const {
  if (!has_head()) return 0;
  const size_t N = size_t(d_.N);
  const size_t cap = std::clamp<size_t>((size_t(16) << 20) / size_t(d_.V), 1, N);
  const size_t chunks = (N + cap - 1) / cap;
  return int((N + chunks - 1) / chunks);
}

BufSpec MemoryPlan::dump_logits() const {
  const size_t n = layout_.tp > 1 ? size_t(head_rows()) * d_.V * layout_.tp : 0;
  return {Buf::logits_all, Mem::scratch, n};  // (tp, rows, V/tp)
}

// ---- data parallelism --------------------------------------------------------

size_t zero_shard_elems(size_t n, int dp) {
  const size_t P = size_t(dp);
  return ((n + P - 1) / P + 15) / 16 * 16;
}

std::vector<UnitBucket> grad_buckets(const std::vector<size_t>& unit_elems, double bucket_mb) {
  const size_t bucket_elems = std::max<size_t>(1, size_t(bucket_mb * (1 << 20) / sizeof(float)));
  std::vector<UnitBucket> out;
  for (int u = int(unit_elems.size()) - 1; u >= 0;) {
    if (unit_elems[size_t(u)] == 0) {
      --u;
      continue;
    }
    UnitBucket b;
    b.unit_last = u;
    while (u >= 0 && (b.elems == 0 || b.elems < bucket_elems)) {
      if (unit_elems[size_t(u)] > 0) {
        b.elems += unit_elems[size_t(u)];
        b.unit_first = u;
        ++b.units;
      }
      --u;
    }
    out.push_back(b);
  }
  return out;
}

}  // namespace pentad
