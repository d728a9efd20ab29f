// Backend interface: the coarse operations the model is written in, listed
// once in ops.def (with their shapes), plus memory tracked per category and a
// capability query (supports), as ggml's backends do. src/ never includes a
// BLAS, CUDA or NCCL header; cpu/ and cuda/ implement this interface (same
// file basename per op family in both). All tensors are row-major and live in
// the backend's memory ("device" pointers).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/activation.hpp"
#include "core/rope.hpp"

namespace pentad {

// What a block of backend memory holds; peaks are tracked per category.
enum class Mem : int { params = 0, grads, optim, activations, comm, scratch, count };
const char* mem_name(Mem m);

// Precision of the matrix products (train.dtype). Storage is fp32 (master
// weights, moments, gradients, activations) except the activations held in
// GEMM form (hold_gemm_form); with bf16 the operands A and B of
// gemm/gemm_batched are rounded to bfloat16 (round to nearest even) and the
// products accumulate in fp32 into an fp32 C. An operand that lies in a
// range of weights with a weight copy (keep_weight_copy) is read from the
// copy, which holds the same rounded values; one held in GEMM form is read
// in place.
enum class Dtype : int { fp32 = 0, bf16 };

struct MemStats {
  std::array<size_t, static_cast<int>(Mem::count)> cur_bytes{};
  std::array<size_t, static_cast<int>(Mem::count)> peak_bytes{};
  size_t total_cur_bytes = 0;
  size_t total_peak_bytes = 0;
};

// One of several linear layers that read the same input (Q, K and V):
// linear_fwd_group and its gradients (ops.def). Row-major, as every op.
struct LinearPart {
  float* y = nullptr;           // (N, n_out): the forward's output
  const float* w = nullptr;     // (n_out, n_in)
  const float* bias = nullptr;  // (n_out), or null
  int n_out = 0;
};
struct LinearGradPart {
  const float* dy = nullptr;  // (N, n_out): the output's gradient
  const float* w = nullptr;   // (n_out, n_in): what the input gradient reads
  float* dw = nullptr;        // (n_out, n_in), accumulated
  float* dbias = nullptr;     // (n_out), accumulated, or null
  int n_out = 0;
};

// The memory of the device a rank computes on, as the device reports it now.
struct DeviceMemory {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  int device = 0;  // the device's index on its host (ranks on one device share it)
};

// Every op of the interface (ops.def), for the capability query.
enum class Op : int {
#define PENTAD_OP(ret, name, params) name,
#define PENTAD_OP_HOST_FALLBACK(ret, name, params) name,
#include "backend/ops.def"
  count
};
const char* op_name(Op op);

class Backend {
 public:
  // A derived backend releases its blocks in its own destructor
  // (release_all_blocks): this one can no longer reach the device.
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Does this backend run `op` itself? True for every op it overrides; false
  // for an op it leaves to Backend's host fallback (slow: copies through the
  // host). Backends answer with implements_op<Self> (below).
  virtual bool supports(Op op) const;

  // ---- memory: blocks tracked per category, zero-filled ------------------
  // Backend's versions take the memory from device_alloc and keep the block
  // map and the accounting; a backend that wraps another (a decorator such
  // as bench/cuda_mfu.cpp's timer) overrides them to forward instead.
  virtual void* alloc_bytes(size_t n_bytes, Mem category);
  virtual void free_bytes(void* p);  // p from alloc_bytes (nullptr: nothing)
  const MemStats& mem_stats() const { return mem_; }
  // The free memory of this rank's device (cudaMemGetInfo on CUDA), for the
  // memory refusal (src/train/memory_check.hpp). nullopt where the backend's
  // memory is host RAM (cpu): the refusal then reads MemAvailable instead.
  virtual std::optional<DeviceMemory> device_memory() const { return std::nullopt; }
  // Does attention_bwd read the probabilities attention_fwd stored (with
  // recompute = none)? The CPU's does; CUDA's recomputes them, so the model
  // neither allocates nor writes them there (model/memory_plan.hpp's
  // attention_bwd_reads_probs(BackendKind) is the same answer for the
  // planner, and test_backend_ops checks the two agree).
  virtual bool attention_bwd_reads_probs() const { return true; }
  // Forget the peaks (e.g. after a start-up measurement): peak := current.
  void reset_peaks() {
    mem_.peak_bytes = mem_.cur_bytes;
    mem_.total_peak_bytes = mem_.total_cur_bytes;
  }

  void set_compute_dtype(Dtype d) { compute_dtype_ = d; }
  Dtype compute_dtype() const { return compute_dtype_; }

  // ---- weight copies (train.dtype = bf16, train.bf16_weight_copies) --------
  // A GEMM in bf16 reads its operands rounded to bf16. The weights change
  // once per optimizer step but are read by many GEMMs (every micro-batch,
  // forward and backward, every logits chunk), so a range of weights
  // registered here gets one copy in the GEMMs' form (Mem::params,
  // weight_copy_elem_bytes() per value). The copy is made by the first GEMM
  // that reads the range after it changed and read by every GEMM after it
  // until it changes again. What marks a copy stale: the backend's own
  // writes into the range (from_host, copy_bytes, fill, adamw), and
  // weights_written, which a writer outside the backend (a collective that
  // lands in the range) must call. free_bytes of the range drops its copy.
  void set_weight_copies(bool on) { weight_copies_on_ = on; }
  bool keeps_weight_copies() const { return weight_copies_on_ && compute_dtype_ == Dtype::bf16; }
  // Register [w, w + n) (a block from alloc) for a copy, made stale; a range
  // already registered keeps its copy. Does nothing unless keeps_weight_copies().
  // These four are virtual for a decorator, which forwards them (the
  // copies live in the backend that runs the GEMMs).
  virtual void keep_weight_copy(const float* w, size_t n);
  virtual void drop_weight_copy(const float* w);  // frees the copy of the range starting at w, if any
  virtual void weights_written(const void* p, size_t n_bytes);  // marks stale every copy it overlaps
  virtual size_t weight_copies_made() const { return weight_copies_made_; }  // copies made so far
  virtual size_t weight_copy_elem_bytes() const { return sizeof(float); }

  // ---- bf16 activations (train.dtype = bf16, train.bf16_activations) -------
  // An activation that only GEMMs read (the MLP's GELU or SwiGLU output, the
  // norm outputs), or only ops that read it rounded to bf16 anyway in a bf16
  // run (q, k, v; the GELU or SwiGLU inputs; model/memory_plan.hpp's
  // MemoryPlan::holds says which) is
  // stored in the form a bf16 GEMM reads, the weight copies' form
  // (weight_copy_elem_bytes() per value: floats rounded to bf16 on the CPU,
  // __nv_bfloat16 on CUDA), instead of fp32 converted at every GEMM that
  // reads it. The GEMM reads the same rounded values either way, so results
  // do not change; on CUDA the buffer is half the size and no GEMM converts
  // it. A held buffer is written only by the ops that say so in ops.def
  // (linear_fwd's act_out, gelu_fwd, glu_fwd, layernorm_fwd,
  // rmsnorm_fwd, attention_fwd's out: they round what they write;
  // to_gemm_form) and copy_bytes, and read only as a GEMM operand (gemm,
  // gemm_batched, linear_fwd's x and the group ops), from its first value,
  // or by the bf16 attention: its q, k and v (qkv_held) and its output's
  // row sums (attention_bwd), or by the MLP activations' inputs (gelu_fwd,
  // gelu_bwd, glu_fwd, glu_bwd, linear_bwd_input_gelu's gelu_in).
  void set_bf16_activations(bool on) { bf16_activations_on_ = on; }
  bool keeps_bf16_activations() const { return bf16_activations_on_ && compute_dtype_ == Dtype::bf16; }
  // Bytes per value of a held activation; 0 where activations are not held
  // (fp32 storage, 4 bytes). The planner's side: bf16_activation_bytes.
  virtual size_t bf16_activation_bytes() const { return keeps_bf16_activations() ? weight_copy_elem_bytes() : 0; }
  // Hold [p, p + n values), a block (or the start of one) of n *
  // bf16_activation_bytes() bytes, in GEMM form until the block is freed.
  // Does nothing unless keeps_bf16_activations(). Virtual for a decorator.
  virtual void hold_gemm_form(const float* p, size_t n);
  // Is p the first value of a held activation? (what a writer asks)
  bool held_in_gemm_form(const void* p);
  // Are attention's q, k and v held (all three)? Some but not all: the run
  // stops, as no attention kernel reads operands of mixed forms.
  bool qkv_held(const void* q, const void* k, const void* v);
  // GEMM operands read in place from held activations so far.
  virtual size_t held_activation_reads() const { return held_reads_; }
  // linear_fwd calls whose bias (and GELU) ran inside the GEMM's epilogue,
  // and the ones that could not and ran as separate ops (always 0 on a
  // backend without epilogues: its linear_fwd is the separate ops).
  virtual size_t epilogues_fused() const { return 0; }
  virtual size_t epilogues_unfused() const { return 0; }
  // attention_fwd and attention_bwd calls that ran fused attention kernels
  // (always 0 on a backend without them).
  virtual size_t attention_fused() const { return 0; }
  // Group ops (linear_fwd_group and its gradients) that ran in fewer GEMMs
  // than they have parts (always 0 on a backend that runs each part alone).
  virtual size_t linear_groups_batched() const { return 0; }

  float* alloc(size_t n, Mem category) {
    return static_cast<float*>(alloc_bytes(n * sizeof(float), category));
  }
  int32_t* alloc_i32(size_t n, Mem category) {
    return static_cast<int32_t*>(alloc_bytes(n * sizeof(int32_t), category));
  }

  // ---- the ops (documented in ops.def) -------------------------------------
#define PENTAD_OP(ret, name, params) virtual ret name params = 0;
#define PENTAD_OP_HOST_FALLBACK(ret, name, params) virtual ret name params;
#include "backend/ops.def"

  // attention_merge on the host: four device -> host copies, the merge
  // (attention_merge_row), two copies back. What Backend::attention_merge
  // runs for a backend without its own (supports(Op::attention_merge) false).
  void attention_merge_host(float* out, float* lse, const float* out_part, const float* lse_part,
                            int B, int T, int H, int D);

 protected:
  // The backend's raw memory: at least n_bytes, zero-filled, a distinct
  // pointer even for 0 bytes (category: for error messages). Every backend
  // that owns memory overrides both; the defaults end the job (a decorator
  // that forwards alloc_bytes/free_bytes never reaches them).
  virtual void* device_alloc(size_t n_bytes, Mem category);
  virtual void device_free(void* p);
  // Calls release on every block still allocated and forgets them (derived
  // destructors; release must not fail fatally there).
  void release_all_blocks(void (*release)(void* p));
  // The copy of a GEMM operand at p (`batch` matrices of `rows` rows of
  // `cols` values, leading dimension ld, element stride between matrices)
  // when a registered range holds every value it reads (made first if
  // stale), as the same offset into the copy; nullptr otherwise.
  const void* weight_copy_for(const float* p, int rows, int cols, int ld, long stride, int batch);
  void track_alloc(size_t n_bytes, Mem category);
  void track_free(size_t n_bytes, Mem category);
  MemStats mem_;
  Dtype compute_dtype_ = Dtype::fp32;

 private:
  // A weight copy (src's n values, copied to `copy` when stale), or a held
  // activation (in_place: the n values at src are the copy, never stale).
  struct WeightCopy {
    const float* src;
    size_t n;
    void* copy;
    bool stale;
    bool in_place = false;
  };
  // Forgets the held activations whose first value lies in [p, p + n_bytes).
  void drop_held(const void* p, size_t n_bytes);
  // The registry is locked: free_bytes, which drops a range's copy, may be
  // called from several threads. A copy is allocated and freed outside the
  // lock (alloc_bytes and free_bytes take alloc_mutex_, and free_bytes
  // comes back here).
  std::mutex weight_copy_mutex_;
  std::vector<WeightCopy> weight_copies_;
  bool weight_copies_on_ = true;
  bool bf16_activations_on_ = true;
  size_t weight_copies_made_ = 0;
  size_t held_reads_ = 0;

  std::mutex alloc_mutex_;  // alloc_bytes / free_bytes may be called from several threads
  std::unordered_map<void*, std::pair<size_t, Mem>> allocs_;  // pointer -> (bytes, category)
};

// The grouped linear ops (ops.def) as the single-layer ops on each part in
// turn: their definition, what the CPU runs, and a backend's fallback.
// linear_fwd_each: linear_fwd(y_i, x, w_i, bias_i, beta 0, no GELU).
// linear_bwd_input_each: gemm dx = dy_i w_i + (i == 0 ? beta : 1) dx.
// linear_bwd_weight_each: gemm dw_i += dy_i^T x, then bias_bwd into dbias_i.
void linear_fwd_each(Backend& be, const LinearPart* parts, int n, const float* x, int N, int n_in);
void linear_bwd_input_each(Backend& be, float* dx, const LinearGradPart* parts, int n, int N, int n_in, float beta);
void linear_bwd_weight_each(Backend& be, const LinearGradPart* parts, int n, const float* x, int N, int n_in);
// linear_bwd_input_gelu's definition: gemm dx = dy w, then gelu_bwd in place.
void linear_bwd_input_gelu_unfused(Backend& be, float* dx, const float* dy, const float* w, const float* gelu_in,
                                   int N, int n_out, int n_in);

// True when Impl runs `op` itself: every required op, and a host-fallback op
// when Impl declares its own override (then &Impl::op names Impl's member,
// not Backend's). For supports(): `return implements_op<Self>(op);`.
template <class Impl>
bool implements_op(Op op) {
  switch (op) {
#define PENTAD_OP(ret, name, params) \
  case Op::name:                     \
    return true;
#define PENTAD_OP_HOST_FALLBACK(ret, name, params) \
  case Op::name:                                   \
    return !std::is_same_v<decltype(&Impl::name), decltype(&Backend::name)>;
#include "backend/ops.def"
    case Op::count: break;
  }
  return false;
}

// One row of attention_merge: o(D), *l (the running result), op(D), lp (the part).
inline void attention_merge_row(float* o, float* l, const float* op, float lp, int D) {
  const float m = std::max(*l, lp);
  if (m == -std::numeric_limits<float>::infinity()) return;  // nothing visible yet
  const float wa = std::exp(*l - m), wb = std::exp(lp - m), s = wa + wb;
  const float ca = wa / s, cb = wb / s;
  for (int d = 0; d < D; ++d) o[d] = ca * o[d] + cb * op[d];
  *l = m + std::log(s);
}

}  // namespace pentad
