// The buffers the model allocates, as a pure function of the model, the
// recompute policy, the micro-batch and this rank's layout (no backend, no
// MPI). Model allocates exactly these lists (Model::alloc_shared and
// Model::acquire_slot bind each entry to its Acts/Scratch/Slot field) and the
// planner (plan/planner.cpp) sums the same lists, so its activation and
// scratch figures are the model's allocations by construction. Also the
// data-parallel bucket and ZeRO shard sizes, shared with DataParallel.
// Storage is fp32 for every dtype (bf16 rounds gemm operands only; its
// weight copies are counted with the parameters, weight_copy_bytes), except
// the activations only GEMMs (and the bf16 attention) read with train.bf16_activations
// (bf16_activation_bytes, MemoryPlan::holds).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "parallel/cp/context_parallel.hpp"
#include "parallel/pp/schedule.hpp"

namespace pentad {

// This rank's cut of the model, as far as buffer sizes go (model.hpp's
// ModelParallel without the communicators).
struct RankLayout {
  int tp = 1;
  bool sp = false;             // sequence parallelism (only with tp > 1)
  CpSplit cp;                  // seq_len, cp and layout (cp = 1: whole sequences)
  int pp_rank = 0, pp_size = 1;
  ChunkPlacement placement = ChunkPlacement::round_robin;  // which rank holds which chunk
  std::vector<int> chunk_blocks;  // n_chunks + 1 block boundaries; empty: one chunk
  // The backend's attention backward reads the stored probabilities
  // (Backend::attention_bwd_reads_probs); where it does not, recompute =
  // none keeps none.
  bool attention_probs = true;
  // Bytes per value of an activation held in GEMM form
  // (Backend::bf16_activation_bytes; MemoryPlan::holds says which); 0: all fp32.
  int bf16_act_bytes = 0;
};

// The planner's side of Backend::attention_bwd_reads_probs: the CPU backend
// reads the stored probabilities, CUDA's recomputes them.
inline bool attention_bwd_reads_probs(BackendKind backend) { return backend == BackendKind::cpu; }

// The planner's side of Backend::weight_copy_elem_bytes: the bytes per
// weight of the bf16 weight copies (train.bf16_weight_copies), 0 where the
// run keeps none. The CPU's emulation keeps floats rounded to bf16, CUDA
// bf16 values.
inline int weight_copy_bytes(const Config& cfg) {
  if (cfg.train.dtype != ComputeDtype::bf16 || !cfg.train.bf16_weight_copies) return 0;
  return cfg.backend == BackendKind::cpu ? 4 : 2;
}

// The planner's side of Backend::bf16_activation_bytes: the bytes per
// value of an activation held in GEMM form (train.bf16_activations), 0
// where activations stay fp32; the weight copies' form (weight_copy_bytes).
inline int bf16_activation_bytes(const Config& cfg) {
  if (cfg.train.dtype != ComputeDtype::bf16 || !cfg.train.bf16_activations) return 0;
  return cfg.backend == BackendKind::cpu ? 4 : 2;
}

// The local sizes of Model's constructor: T = seq_len/cp tokens per
// sequence; H, Hkv, F, V this tp rank's heads, KV heads, d_ff and vocabulary
// slice; N = B*T token rows, Nl = this rank's rows (N/tp with sp, else N).
struct LocalDims {
  int B = 0, T = 0, C = 0, H = 0, Hkv = 0, D = 0, F = 0, V = 0, L = 0;
  int N = 0, Nl = 0;
  // The tp ranks holding each key/value head: tp/n_kv_heads with fewer heads
  // than tp ranks (Hkv is then 1), else 1 (kv_part).
  int kv_copies = 1;
  bool gpt2 = false, sp = false;
  bool qk_norm = false;  // q and k normalized per head (ModelConfig::qk_norm)
};
LocalDims local_dims(const ModelConfig& cfg, int micro_batch, int tp, bool sp, const CpSplit& cp);

// One named buffer of the model. The names are the fields of model.cpp's
// Acts (one block's activations), Scratch (shared by all blocks), the
// head's loss buffers and Slot (one micro-batch through one chunk).
enum class Buf : uint8_t {
  // Acts
  ln1, ln1_mean, ln1_rstd, q, k, v, q_raw, k_raw, q_rstd, k_rstd, att, lse, probs, res_mid, ln2, ln2_mean,
  ln2_rstd, fc_pre, fc_up, fc_act,
  // Scratch (scratch_fc_act is Scratch::fc_act, the recomputed MLP activation)
  dres, d_ln, d_att, dq, dk, dv, d_fc_act, d_fc_pre, d_up, d_lnf, scratch_fc_act, part, gath_x, gath_dy, rep_grad,
  qk_norm_grad, logits_all,
  // the loss head's chunked logits and softmax statistics
  logits, xent_rowmax, xent_sumexp,
  // Slot
  tokens, targets, res, lnf, lnf_mean, lnf_rstd, losses,
};
constexpr bool is_acts_buf(Buf b) { return b <= Buf::fc_act; }

struct BufSpec {
  Buf buf;
  Mem mem;           // the backend's accounting category
  size_t elems;      // fp32 values, or int32 token ids when i32, or values in GEMM form
  int block = -1;    // Acts of a slot: the block; res: the block whose input it is (L: the output)
  bool i32 = false;
  // Held in GEMM form (Backend::hold_gemm_form), value_bytes per value
  // (RankLayout::bf16_act_bytes): with bf16_activations, the activations
  // MemoryPlan::holds names.
  bool gemm_form = false;
  uint8_t value_bytes = 4;
  // Allocated in one block with the next buffer, right before it: Q, K and V
  // (and Llama's gate and up outputs, and the gradients of both), so that
  // the grouped linear ops (ops.def linear_fwd_group) find them evenly spaced.
  bool with_next = false;
  size_t bytes() const { return elems * value_bytes; }  // fp32, int32 and the CPU's GEMM form: 4
};

size_t bytes_of(const std::vector<BufSpec>& bufs, Mem mem);

// Where Model puts planned buffers: one backend block per buffer, or per run
// of buffers joined by with_next (the run's category is its first's), each
// buffer at `offset` bytes into block `block`, in plan order.
struct BufPlace {
  size_t block = 0, offset = 0;
};
std::vector<BufPlace> place_buffers(const std::vector<BufSpec>& bufs, std::vector<size_t>& block_bytes);

class MemoryPlan {
 public:
  MemoryPlan() = default;
  MemoryPlan(const ModelConfig& cfg, Recompute recompute, int micro_batch, RankLayout layout);

  const LocalDims& dims() const { return d_; }
  int n_chunks() const { return int(chunk_begin_.size()) - 1; }
  bool owns_chunk(int g) const { return chunk_owner(layout_.placement, layout_.pp_size, g) == layout_.pp_rank; }
  bool has_head() const { return owns_chunk(n_chunks() - 1); }

  // Model::alloc_shared, in allocation order: the gradient scratch, with
  // full recompute the block set every block shares, and the loss head's
  // buffers (scratch). Not listed: Buf::logits_all, see dump_logits.
  std::vector<BufSpec> shared_buffers() const;
  // One pooled slot of chunk g (Model::acquire_slot), in allocation order:
  // token ids (first chunk), targets (last chunk), the residual stream at
  // every block input and the chunk's output, the blocks' Acts (none /
  // selective), and on the last chunk the final norm and per-token losses.
  std::vector<BufSpec> slot_buffers(int g) const;
  size_t slot_bytes(int g) const { return bytes_of(slot_buffers(g), Mem::activations); }
  // What a slot of chunk g keeps for its deferred W (schedules that split
  // the backward; Model::alloc_wstash, activations): per block the output
  // gradients of the matmuls (the MLP's only in dense blocks), with full
  // recompute also the matmul inputs B recomputed.
  size_t wstash_bytes(int g) const;
  // Rows of logits the loss head processes at once (0 without the head).
  int head_rows() const;
  // The all-gathered logits the head allocates on the first debug dump
  // with tp > 1 (scratch; 0 elements otherwise).
  BufSpec dump_logits() const;
  // One pipeline boundary buffer (Pipeline allocates them): (Nl, C).
  size_t boundary_elems() const { return size_t(d_.Nl) * size_t(d_.C); }
  // Is activation b of block `block` (-1: full recompute's shared set, or
  // the scratch MLP activation) held in GEMM form (bf16_activations)? The
  // ones only GEMMs read, from their first value: the MLP activation always;
  // the two norm outputs (ln1, ln2) except under sp, where they are
  // all-gathered into a buffer shared with the final norm's, and ln2 before
  // an MoE layer, whose router and dispatch read its rows (the shared set:
  // when any block is one). The final norm's output is read in row chunks by
  // the loss head: fp32. Also the attention output, which besides the GEMMs
  // only the attention backward's row sums read, and those read it rounded
  // to bf16 in every bf16 run (precision.md); not with cp > 1, where ring
  // attention merges partial outputs into it. And q, k, v, which only the
  // bf16 attention reads, rounding them to bf16 on load anyway: Model
  // stores them rounded after RoPE (Model::block_fwd); not with cp > 1,
  // where k and v travel the ring as fp32. And the MLP activation's
  // inputs (GPT-2's GELU input, Llama's gate and up), which in a bf16 run
  // the activation reads rounded to bf16 both ways (ops.def), likewise
  // stored rounded by Model::block_fwd (unused in an MoE block).
  bool holds(Buf b, int block) const;
  // Its bytes per value: layout.bf16_act_bytes where held, else 4.
  size_t value_bytes(Buf b, int block) const {
    return holds(b, block) ? size_t(layout_.bf16_act_bytes) : sizeof(float);
  }

 private:
  void add_block_acts(std::vector<BufSpec>& out, Mem mem, int block, bool kept) const;
  void mark_form(BufSpec& b) const;  // gemm_form and value_bytes from holds

  LocalDims d_;
  Recompute recompute_ = Recompute::none;
  RankLayout layout_;
  std::vector<int> chunk_begin_;
  std::vector<bool> moe_block_;  // per block
};

// ---- data parallelism (DataParallel's sizes) --------------------------------

// Rank r of dp owns [r*S, (r+1)*S) of the flat buffers, padded to S*dp:
// S = ceil(n/dp) rounded up to 16 elements.
size_t zero_shard_elems(size_t n, int dp);

// Gradient buckets of whole units, formed in the order backward finishes
// them (the head's unit first, the embedding's last), each of at least
// bucket_mb MiB of fp32 (the last may be smaller). Units without
// parameters here (other pipeline stages') join no bucket.
struct UnitBucket {
  int unit_first = 0, unit_last = 0;  // units [first, last] (ascending)
  int units = 0;                      // units with parameters in [first, last]
  size_t elems = 0;
};
std::vector<UnitBucket> grad_buckets(const std::vector<size_t>& unit_elems, double bucket_mb);

}  // namespace pentad
