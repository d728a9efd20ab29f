// The decoder-only transformer with hand-written forward and backward.
// One class covers GPT-2 (learned positions, LayerNorm, GELU, biases, tied
// embeddings) and Llama (RoPE, RMSNorm, SwiGLU, grouped-query attention,
// untied, no biases). Activations live in buffers allocated once for the
// micro-batch; the recompute policy decides which of them are kept:
//   none      keep everything, including attention probabilities;
//   selective keep matmul outputs, recompute attention probabilities (from
//             the saved log-sum-exp) and the MLP activation in backward;
//   full      keep only each block's input, recompute the block in backward.
// All three give bitwise-identical gradients.
// Tensor parallelism (Megatron-LM) splits Q/K/V and the MLP's first matrices
// by output (heads, d_ff), wo and the MLP's down matrix by input, and the
// vocabulary of the embedding and the head; sequence parallelism also splits
// the token rows (B*T flattened) of everything between the tp regions. The
// layers and the region boundaries are in parallel/tp/ (layers.hpp,
// vocab.hpp, regions.hpp); the split of each parameter in param_split.hpp,
// the list of the tensors a rank holds in param_list.hpp.
// Context parallelism gives each cp rank T/cp tokens of every sequence, in
// chunk-major order (context_parallel.hpp); positions are global, and the
// attention is ring attention over the cp group.
// Mixture of experts (moe.hpp): an MoE block's MLP is the MoE layer, whose
// router lives in params() and whose experts live in expert_params()
// (split over ep, replicated over tp; with sp the layer sees the all-gathered
// rows and each tp rank keeps its own rows of the output; with cp each cp
// rank routes its own tokens).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "parallel/cp/context_parallel.hpp"
#include "parallel/ep/moe.hpp"
#include "model/memory_plan.hpp"
#include "model/params.hpp"
#include "parallel/tp/regions.hpp"
#include "parallel/tp/vocab.hpp"

namespace pentad {

class Comm;

// How this rank's shard of the model is cut (tp = nullptr: whole model).
struct ModelParallel {
  Comm* tp = nullptr;   // tensor-parallel group
  // The tp ranks holding this rank's key/value head where tp > n_kv_heads > 1
  // (Topology::kv_copies); unused otherwise (one head: its copies are tp).
  Comm* kv_copies = nullptr;
  bool sp = false;      // sequence parallelism inside the tp group
  Comm* cp = nullptr;   // context-parallel group (periodic ring)
  CpLayout cp_layout = CpLayout::zigzag;
  Comm* ep = nullptr;   // expert-parallel group (MoE blocks; nullptr: every expert here)
  bool expert_tp = false;  // each expert's d_ff split over tp (parallel.expert_tp); else experts replicated over tp
  // Pipeline: the model is cut into chunks of consecutive blocks; chunk g
  // holds blocks [chunk_blocks[g], chunk_blocks[g+1]) and lives on pipeline
  // rank chunk_owner(placement, pp_size, g) (schedule.hpp). Empty: one
  // chunk, the whole model.
  int pp_rank = 0, pp_size = 1;
  ChunkPlacement placement = ChunkPlacement::round_robin;
  std::vector<int> chunk_blocks;
};

// Called by the model around each unit (0 = embedding, 1..L = blocks,
// L+1 = head) so data parallelism can overlap gradient reduction with
// backward and ZeRO-3 can gather a unit's parameters just before use.
// What a unit is acquired for: forward reads its parameters; backward reads
// them and writes gradients; weight_grads (a split backward's W) only writes
// gradients.
enum class UnitUse { forward, backward, weight_grads };

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  // The unit is about to be used (its parameters read, its gradients written).
  virtual void acquire(int unit, UnitUse use) {}
  virtual void release(int unit, UnitUse use) {}
  // This micro-batch's contribution to the unit's gradients is complete.
  virtual void grads_ready(int unit) {}
};

class Model {
 public:
  Model(const ModelConfig& cfg, Recompute recompute, int micro_batch, Backend& backend,
        ModelParallel par = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  ParamStore& params() { return params_; }
  // MoE experts: this ep rank's experts, reduced over expert_dp, not dp.
  // Same unit numbering as params(); empty for a dense model.
  ParamStore& expert_params() { return expert_params_; }
  // Routing statistics of the training forwards since the last reset.
  const MoeStats& moe_stats() const { return moe_stats_; }
  void reset_moe_stats() {
    moe_stats_.reset(L_, cfg_.n_experts);
    if (moe_) moe_->reset_times();
  }
  // Time spent in the MoE layers since the last reset (zeros for a dense model).
  MoeLayer::Times moe_times() const { return moe_ ? moe_->times() : MoeLayer::Times{}; }
  void set_hooks(UnitHooks* hooks) { hooks_ = hooks ? hooks : &no_hooks_; }
  int n_units() const { return L_ + 2; }
  const ModelConfig& config() const { return cfg_; }
  int micro_batch() const { return B_; }
  // Token ids per micro-batch on this rank: B x seq_len/cp.
  size_t tokens_per_micro_batch() const { return size_t(N_); }

  // One micro-batch: forward, loss and backward. inputs/targets are host
  // arrays of (B, T) token ids; with cp > 1 this rank's (n_chunks, B, m)
  // tokens of the B sequences (cp_slice), and logits_out rows are in that order. Gradients ACCUMULATE into params().grads(),
  // scaled by loss_scale (1 / tokens of the global batch) so the sum over
  // micro-batches and ranks is the gradient of the mean loss. Returns the SUM
  // of the per-token losses of this micro-batch (unscaled). If logits_out is
  // not null it receives the (B, T, V) logits (debug dumps).
  double forward_backward(const int32_t* inputs, const int32_t* targets, float loss_scale,
                          float* logits_out = nullptr);
  // Forward and loss only (evaluation); returns the sum of per-token losses.
  double forward_loss(const int32_t* inputs, const int32_t* targets);

  // Bytes of activation memory this policy keeps for one micro-batch
  // through this rank's part of the model (every chunk it holds).
  // Allocates a pooled slot per chunk not yet used.
  size_t activation_bytes();
  // Every buffer the model allocates, by name and size (the planner
  // evaluates the same function for a layout).
  const MemoryPlan& memory_plan() const { return plan_; }

  // ---- pipeline interface (pipeline.hpp drives it) ---------------------------
  // A slot is one micro-batch's activations through one chunk, live from its
  // forward to its backward. Slots are pooled: a new one is allocated only
  // when every slot of the chunk is in use, so the activation peak is the
  // schedule's in-flight high-water mark times slot_bytes(chunk).
  int n_chunks() const { return int(chunk_begin_.size()) - 1; }
  bool owns_chunk(int g) const { return chunk_owner(par_.placement, pp_size_, g) == pp_rank_; }
  int chunk_first_block(int g) const { return chunk_begin_[size_t(g)]; }
  int chunk_end_block(int g) const { return chunk_begin_[size_t(g) + 1]; }
  size_t slot_bytes(int g);  // allocates the chunk's first slot if none exists
  int acquire_slot(int chunk);
  void release_slot(int slot);
  int slots_allocated() const { return int(slots_.size()); }
  // The residual stream at the chunk's input (where a received activation
  // goes) and at its output (what is sent on); (Nl, C) each.
  float* slot_input(int slot);
  const float* slot_output(int slot);
  size_t boundary_elems() const { return plan_.boundary_elems(); }
  // The gradient at a chunk boundary, (Nl, C): before backward_chunk, the
  // gradient of the chunk's output (filled by the caller unless the chunk is
  // the last); after it, the gradient of the chunk's input.
  float* boundary_grad();
  // Forward of one chunk. inputs (first chunk) and targets (last chunk) are
  // host (B, T) token ids; train = false drops what only backward needs.
  void forward_chunk(int slot, const int32_t* inputs, const int32_t* targets, bool train);
  // Backward of one chunk; the last chunk first runs the head (its forward
  // and backward together) and returns the micro-batch's loss sum, others 0.
  // loss_scale weighs one trained target's loss (and, unless
  // set_routing_loss_scale says otherwise, one token in the MoE's routing
  // losses).
  double backward_chunk(int slot, float loss_scale, float* logits_out);
  // One token's weight in the MoE's load-balancing and z losses, which
  // every token routed adds to, trained target or not (a loss mask makes
  // the two scales differ); 0: loss_scale's.
  void set_routing_loss_scale(float s) { routing_loss_scale_ = s; }
  // backward_chunk in two halves (zero-bubble schedules): B computes the
  // chunk's input gradient (boundary_grad), the head, the norms' and the MoE
  // layers' gradients, and keeps in the slot what W needs (the output
  // gradients of the block matmuls; with full recompute also their inputs);
  // W computes the matmuls' weight and bias gradients from it and calls
  // grads_ready for the chunk's blocks. The slot is released after W. B then
  // W gives bitwise backward_chunk's gradients. Collective over tp, as
  // backward_chunk (every tp rank runs the same actions in the same order).
  double backward_input_chunk(int slot, float loss_scale, float* logits_out);
  void backward_weight_chunk(int slot);
  // Bytes a slot keeps for its deferred W (0 until its first B).
  size_t deferred_w_bytes(int slot) { return slot_w_bytes(slot); }
  // Evaluation on the last chunk after forward_chunk: the loss sum. With
  // row_losses (B values) also each sequence's sum over this rank's tokens
  // of it (the T/cp of its cp slice, in cp_slice's order), ignored targets
  // adding 0.
  double loss_chunk(int slot, double* row_losses = nullptr);
  // Ring attention accounting (nullptr without context parallelism).
  RingAttention* ring() { return ring_.get(); }

 private:
  struct Block;      // one block's layers (typed parameter handles)
  struct Acts;       // activation pointers of one block
  struct Scratch;    // gradient scratch shared by all blocks
  struct Slot;       // one micro-batch's activations through one chunk
  struct WStash;     // what one block's deferred W needs
  struct Norm {      // LayerNorm (w, b) or RMSNorm (w; b not held), weights replicated over tp
    ParamId w, b;
  };

  // The handle of a registered tensor by name (ParamId{} if not registered).
  using ParamLookup = std::function<ParamId(const std::string&)>;
  void build_params();
  void bind_block(int l, const ParamLookup& id);
  // Allocate plan_.shared_buffers(); acquire_slot allocates plan_.slot_buffers().
  void alloc_shared();
  void alloc_planned(const std::vector<BufSpec>& bufs, std::vector<void*>& owned,
                     const std::function<void(const BufSpec&, void*)>& place);
  void bind(const BufSpec& b, void* p, Slot* s);  // point b's field (of s, for slot buffers) at p
  Slot& slot(int s) { return *slots_[size_t(s)]; }
  Acts& acts_for(Slot& s, int l);
  void block_fwd(int l, Acts& a, const float* in, bool keep_probs);
  // w null: the fused backward; else B only, keeping W's inputs in *w.
  void block_bwd(int l, Acts& a, const float* in, WStash* w = nullptr);
  void block_wgrad(int l, Acts& a, const WStash& w);  // W of block l
  void alloc_wstash(Slot& S);
  size_t slot_w_bytes(int slot);
  // The hooks around a chunk's backward: the head first (last chunk), the
  // blocks in reverse (block_step(l)), the embedding (first chunk).
  double chunk_backward_head(Slot& S, float loss_scale, float* logits_out);
  void chunk_backward_embedding(Slot& S);
  void mlp_act_fwd(Acts& a);
  void moe_fwd(MoeCtxPtr& ctx, int l, float* out, Acts& a, MoeStats* stats);
  // Attention of one block: the local kernel, or ring attention over cp.
  void attention_fwd(Acts& a, bool keep_probs);
  void attention_bwd(Acts& a);
  // RoPE on x (B*T rows of n_heads*D), chunk by chunk at global positions.
  void rope(float* x, int n_heads, bool backward);
  double head(Slot& s, float loss_scale, bool backward, float* logits_out, double* row_losses = nullptr);
  // Norms run on this rank's token rows (Nl, C); their weight gradients go
  // where sp_norm_grads_ says (staging slot `slot`, and slot + 1 for the
  // bias, with sp) until the unit's sp_norm_grads_.sync().
  void norm_fwd(const Norm& n, float* out, float* mean, float* rstd, const float* x);
  void norm_bwd(const Norm& n, float* dx, const float* dout, const float* x, const float* mean,
                const float* rstd, int slot);
  // Qwen3's q/k norms (model.qk_norm): RMSNorm over each head's D values of
  // q and k, before RoPE; the backward turns dq, dk (after RoPE's backward)
  // into the gradients of the projections' outputs.
  void qk_norm_fwd(const Block& b, Acts& a, float* q, float* k);
  void qk_norm_bwd(const Block& b, Acts& a);

  ModelConfig cfg_;
  Recompute recompute_;
  ModelParallel par_;
  UnitHooks no_hooks_;
  UnitHooks* hooks_ = &no_hooks_;
  Backend& be_;
  ParamStore params_;
  ParamStore expert_params_;
  std::unique_ptr<MoeLayer> moe_;
  std::vector<MoeParams> moe_p_;                // per block (MoE blocks only)
  std::vector<std::vector<MoeCtxPtr>> moe_ctx_;  // [slot][block]
  MoeStats moe_stats_;
  int cur_slot_ = 0;
  float cur_loss_scale_ = 0;      // the MoE's routing losses' (backward_chunk)
  float routing_loss_scale_ = 0;  // set_routing_loss_scale
  // H_, Hkv_, F_, V_ are this tp rank's counts (heads, d_ff, vocab slice: padded rows included).
  int B_, T_, C_, H_, Hkv_, D_, F_, V_, L_;
  bool gpt2_;
  int tp_size_ = 1, tp_rank_ = 0;
  bool sp_ = false;
  int N_ = 0;            // token rows of the micro-batch (B*T)
  int Nl_ = 0;           // this rank's token rows: N/tp with sp, else N
  CpSplit cp_split_;     // T_ = cp_split_.local_len() tokens per sequence here
  int cp_rank_ = 0;
  std::unique_ptr<RingAttention> ring_;  // cp > 1

  // Tensor parallelism: the region boundaries and the layers that call them.
  TpRegions tp_;
  SpNormGrads sp_norm_grads_;
  SpNormGrads qk_norm_grads_;  // the q/k norm weights, partial over the heads with tp > 1
  KvCopies kv_copies_;         // key/value heads held by several tp ranks (tp > n_kv_heads)
  VocabParallelEmbedding embedding_;  // first chunk only
  VocabParallelHead lm_head_;         // last chunk only
  Norm final_norm_;
  std::vector<Block> blocks_;  // every block; default (not held) where on another stage

  // Pipeline partition.
  int pp_rank_ = 0, pp_size_ = 1;
  std::vector<int> chunk_begin_;  // n_chunks + 1 block boundaries
  bool has_embedding_ = true, has_head_ = true;

  // Activations: pooled slots, plus the block set shared by all blocks with
  // full recompute; every buffer is one of plan_'s.
  MemoryPlan plan_;
  std::vector<std::unique_ptr<Slot>> slots_;
  Acts* shared_acts_ = nullptr;
  float* logits_ = nullptr;         // (chunk, V/tp)
  float* xent_rowmax_ = nullptr;    // (chunk)
  float* xent_sumexp_ = nullptr;    // (2*chunk) sum of exp, then target logits
  int chunk_rows_ = 0;
  Scratch* scratch_ = nullptr;
  std::vector<void*> owned_;        // every shared allocation
};

}  // namespace pentad
