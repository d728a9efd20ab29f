// The input deck: a TOML file with sections [model] [parallel] [train] [data]
// [checkpoint] [log] (plus top-level `backend`), overridable with
// `--set section.key=value`. Parsing is strict: unknown keys, wrong types and
// out-of-range values are errors that name the key and file:line.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/activation.hpp"
#include "core/rope.hpp"
#include "parallel/pp/schedule.hpp"  // ScheduleKind: parallel.schedule

namespace pentad {

// The keys with a fixed set of values are enums, parsed once by the schema;
// DeckNames below holds their deck spellings.
enum class Family { gpt2, llama };                // model.family
enum class Recompute { none, selective, full };   // train.recompute
enum class BackendKind { cpu, cuda };             // backend
enum class CommLib { automatic, mpi, nccl };      // parallel.comm ("auto" | "mpi" | "nccl")
enum class CpLayout { contiguous, zigzag };       // parallel.cp_layout (context_parallel.hpp)
// parallel.pp_p2p: how pipeline stages exchange messages: receives posted
// early and sends eager (MPI), or the grouped plan (parallel/pp/p2p_plan.hpp,
// NCCL's only way); auto picks eager where the comm has lone sends.
enum class PpP2p { automatic, eager, grouped };
// train.dtype; app/runtime.cpp hands it to the backend as its Dtype, which
// config (a lower layer) does not know.
enum class ComputeDtype { fp32, bf16 };
// train.lr_schedule: after the linear warmup, cosine or linear decay to
// min_lr, warmup-stable-decay (constant, then linear to min_lr over the last
// train.decay_steps), or constant (parallel/dp/optimizer.hpp: lr_at).
enum class LrSchedule { cosine, linear, wsd, constant };
// data.order: random starts drawn with replacement, or every window of the
// data once per epoch in a shuffled order (io/dataset.hpp).
enum class DataOrder { random, epoch };
// model.rope_scaling: RopeScaling (core/rope.hpp); model.mlp_act: GateAct
// (core/activation.hpp).

// The deck spelling of each value, indexed by the enum's value: the schema
// reads and prints these, and messages quote them. ScheduleKind::forward_only
// (evaluation) is no deck value and has no spelling here.
template <class E>
struct DeckNames;
template <> struct DeckNames<Family> {
  static constexpr std::array<const char*, 2> names = {"gpt2", "llama"};
};
template <> struct DeckNames<Recompute> {
  static constexpr std::array<const char*, 3> names = {"none", "selective", "full"};
};
template <> struct DeckNames<BackendKind> {
  static constexpr std::array<const char*, 2> names = {"cpu", "cuda"};
};
template <> struct DeckNames<CommLib> {
  static constexpr std::array<const char*, 3> names = {"auto", "mpi", "nccl"};
};
template <> struct DeckNames<PpP2p> {
  static constexpr std::array<const char*, 3> names = {"auto", "eager", "grouped"};
};
template <> struct DeckNames<CpLayout> {
  static constexpr std::array<const char*, 2> names = {"contiguous", "zigzag"};
};
template <> struct DeckNames<ComputeDtype> {
  static constexpr std::array<const char*, 2> names = {"fp32", "bf16"};
};
template <> struct DeckNames<LrSchedule> {
  static constexpr std::array<const char*, 4> names = {"cosine", "linear", "wsd", "constant"};
};
template <> struct DeckNames<DataOrder> {
  static constexpr std::array<const char*, 2> names = {"random", "epoch"};
};
template <> struct DeckNames<RopeScaling> {
  static constexpr std::array<const char*, 5> names = {"none", "llama3", "yarn", "linear", "longrope"};
};
template <> struct DeckNames<GateAct> {
  static constexpr std::array<const char*, 2> names = {"silu", "gelu_tanh"};
};
template <> struct DeckNames<ScheduleKind> {
  static constexpr std::array<const char*, 5> names = {"afab", "1f1b", "interleaved", "zbh1", "zbv"};
};

// "zigzag" for CpLayout::zigzag; "?" for a value without a deck spelling.
template <class E>
const char* deck_name(E e) {
  const auto i = static_cast<size_t>(e);
  return i < DeckNames<E>::names.size() ? DeckNames<E>::names[i] : "?";
}

struct ModelConfig {
  Family family = Family::gpt2;
  int n_layers = 2;
  int d_model = 64;          // C
  int n_heads = 4;           // H
  int n_kv_heads = 0;        // Hkv; 0 = n_heads (gpt2 requires n_heads)
  int d_head = 0;            // D, deck key head_dim; 0 = d_model / n_heads (gpt2 requires that)
  int d_ff = 0;              // F; 0 = 4*C (gpt2) or the Llama rule
  int vocab_size = 256;      // V
  // The embedding and head matrices hold round_up(V, pad_vocab_to * tp) rows
  // inside a run (each tp slice a multiple of pad_vocab_to rows, aligned for
  // the GPU's GEMMs); the extra rows are zero, never trained, and neither
  // checkpoints nor exports hold them. padded_vocab() below.
  int pad_vocab_to = 128;
  int seq_len = 64;          // T (global sequence length)
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling = RopeScaling::none;
  float rope_scaling_factor = 8.0f;     // llama3, yarn (long wavelengths), linear (all): how many times slower
  float rope_low_freq_factor = 1.0f;    // llama3: wavelengths above original_context / this are slowed
  float rope_high_freq_factor = 4.0f;   // llama3: wavelengths below original_context / this are kept
  int rope_original_context = 8192;     // llama3, yarn: the context the model was first trained on
  float rope_beta_fast = 32.0f;         // yarn: pairs turning more often than this over the context are kept
  float rope_beta_slow = 1.0f;          // yarn: pairs turning less often than this are slowed
  float rope_attention_factor = 0.0f;   // yarn, longrope: the rotated q and k scaled by this; 0 = derived
  bool rope_truncate = true;            // yarn: the ramp's ends rounded outwards to whole pairs
  // longrope: rotary_channels() / 2 factors each, pair i turning factor[i]
  // times slower; the short list within rope_original_context, the long beyond.
  std::vector<double> rope_short_factor, rope_long_factor;
  int rotary_dim = 0;  // channels of each head RoPE turns, the first ones (Phi-4-mini); 0 = head_dim
  int tied_embeddings = -1;  // -1 = family default (gpt2 tied, llama untied)
  int qkv_bias = -1;         // q/k/v projection biases; -1 = family default (gpt2 yes, llama no)
  bool qk_norm = false;      // RMSNorm over each head of q and k before RoPE (Qwen3; llama only)
  // Gemma's (llama only): the gated MLP's activation; every RMSNorm scaling
  // by 1 + w (its weight stored as the difference from 1, drawn as 0); the
  // token embeddings multiplied by sqrt(d_model) on the way in (not in the head).
  GateAct mlp_act = GateAct::silu;
  bool norm_plus_one = false;
  bool embed_scale = false;
  float init_std = 0.02f;
  // Mixture of experts (moe.hpp). n_experts = 0: every MLP is dense.
  int n_experts = 0;             // E
  int top_k = 2;                 // experts per token
  // The k chosen experts' weights renormalised to sum 1, or their raw router
  // probabilities; -1 = renormalised when top_k > 1 (Mixtral's rule), raw
  // when top_k = 1 (Switch's). renormalizes_top_k() below.
  int renormalize_top_k = -1;
  int moe_every = 1;             // block l is MoE when (l + 1) % moe_every == 0
  // A shared expert in every MoE block: an MLP of the family's form, of
  // hidden width shared_expert_ffn (0: none), that every token goes through
  // beside its routed experts; with shared_expert_gate its output is scaled
  // by sigmoid(x . w), w a (1, C) weight of its own (Qwen2-MoE's).
  int shared_expert_ffn = 0;
  bool shared_expert_gate = false;
  float capacity_factor = 1.25f; // per-expert capacity = ceil(cf * T * top_k / E) per sequence (> 0)
  bool dropless = false;         // no capacity: every choice is served (capacity_factor unused)
  float aux_loss_coef = 0.01f;   // load-balancing loss coefficient
  float z_loss_coef = 0.0f;      // router z-loss coefficient

  // Resolved values (after finalize): never 0 / -1.
  // (0, unresolved, as the default: a ModelConfig built in code.)
  int head_dim() const { return d_head > 0 ? d_head : d_model / n_heads; }
  // RoPE for positions 0 .. context-1 (longrope's factors depend on it:
  // the long list when context > rope_original_context, as Hugging Face
  // picks them per forward call from its largest position + 1); rope() is
  // for a training run's whole sequence, seq_len.
  Rope rope(int64_t context) const {
    Rope r{.theta = rope_theta, .scaling = rope_scaling, .factor = rope_scaling_factor,
           .low_freq_factor = rope_low_freq_factor, .high_freq_factor = rope_high_freq_factor,
           .original_context = double(rope_original_context), .beta_fast = rope_beta_fast,
           .beta_slow = rope_beta_slow, .attention_factor = rope_attention_factor, .truncate = rope_truncate};
    const std::vector<double>& f = context > rope_original_context ? rope_long_factor : rope_short_factor;
    if (rope_scaling == RopeScaling::longrope)
      for (size_t i = 0; i < f.size() && i < size_t(kRopeMaxPairs); ++i) r.pair_factor[i] = f[i];
    r.rotary_dim = rotary_dim;
    return r;
  }
  // The channels of each head RoPE turns (rotary_dim resolved).
  int rotary_channels() const { return rotary_dim > 0 ? rotary_dim : head_dim(); }
  Rope rope() const { return rope(seq_len); }
  bool tied() const { return tied_embeddings == 1; }
  float norm_offset() const { return norm_plus_one ? 1.0f : 0.0f; }  // RMSNorm's w_offset (ops.def)
  // What the token embeddings are multiplied by on the way in: sqrt(d_model)
  // in float, as Gemma's normalizer (1 without model.embed_scale).
  float embedding_multiplier() const { return embed_scale ? float(std::sqrt(double(d_model))) : 1.0f; }
  // (-1, unresolved, as the family: a ModelConfig built in code keeps GPT-2's biases.)
  bool has_qkv_bias() const { return qkv_bias == 1 || (qkv_bias == -1 && family == Family::gpt2); }
  // (-1, unresolved, as top_k: a ModelConfig built in code keeps the default rule.)
  bool renormalizes_top_k() const { return renormalize_top_k == 1 || (renormalize_top_k == -1 && top_k > 1); }
  bool is_moe_block(int l) const { return n_experts > 0 && (l + 1) % moe_every == 0; }
  // Rows of the embedding and head matrices over a tp group of `tp` ranks:
  // vocab_size rounded up to a multiple of pad_vocab_to * tp.
  int padded_vocab(int tp) const {
    const int64_t m = int64_t(pad_vocab_to) * tp;
    return int((int64_t(vocab_size) + m - 1) / m * m);
  }

  bool operator==(const ModelConfig&) const = default;
};

struct ParallelConfig {
  int dp = 1, tp = 1, pp = 1, cp = 1, ep = 1;
  int zero = 0;          // 0..3
  bool sp = false;       // sequence parallelism (needs tp > 1)
  // MoE: split every expert's MLP over the tp group (its d_ff, as a dense
  // MLP's); false: the MoE layer is replicated over tp.
  bool expert_tp = false;
  float bucket_mb = 25;  // gradient bucket size (MiB)
  // Pipeline parallelism.
  ScheduleKind schedule = ScheduleKind::one_f_one_b;  // afab | 1f1b | interleaved | zbh1 | zbv
  int virtual_stages = 1;    // model chunks per pipeline rank (interleaved)
  std::string stage_layers;  // "" = balanced; else blocks per stage, e.g. "3,2,2,3"
  PpP2p pp_p2p = PpP2p::automatic;  // auto | eager | grouped (see PpP2p)
  // Context parallelism.
  CpLayout cp_layout = CpLayout::zigzag;  // contiguous | zigzag
  // Communication library for the collectives.
  CommLib comm = CommLib::automatic;  // auto (nccl with cuda, mpi with cpu) | mpi | nccl
  float comm_timeout_s = 600;         // a collective stuck this long ends the job (nccl and mpi)
  // Placement (comm/placement.hpp): ranks are numbered node by node and a tp
  // group must sit inside one node, unless this allows it to cross nodes.
  bool tp_across_nodes = false;

  bool operator==(const ParallelConfig&) const = default;
};

struct TrainConfig {
  int steps = 100;
  int micro_batch = 4;   // sequences per micro-batch per data-parallel rank
  int grad_accum = 1;    // micro-batches per step
  float lr = 3e-3f;
  float min_lr = 3e-4f;
  int warmup_steps = 10;
  LrSchedule lr_schedule = LrSchedule::cosine;
  int decay_steps = 0;  // wsd: the last steps, decaying to min_lr
  float weight_decay = 0.1f;
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float grad_clip = 1.0f;   // 0 = off
  uint64_t seed = 1234;
  Recompute recompute = Recompute::none;
  int eval_every = 0;       // 0 = only at the end (if val data given)
  int eval_batches = 4;
  int choice_examples = 0;  // data.choice_eval: its first N examples per evaluation; 0 = all
  ComputeDtype dtype = ComputeDtype::fp32;
  // With dtype bf16: keep one bf16 copy of the weights, made when they
  // change (the optimizer step, a load, a ZeRO-3 gather) instead of at every
  // GEMM. false converts them at every GEMM; both give bitwise-equal runs.
  bool bf16_weight_copies = true;
  // With dtype bf16: keep the activations that only GEMMs read (the MLP
  // activation, the norm outputs; MemoryPlan::holds) in bf16, as the GEMMs
  // read them, instead of fp32 converted at each; bitwise-equal runs, half
  // their memory on CUDA.
  bool bf16_activations = true;
  int threads = 0;          // OpenMP/BLAS threads per rank; 0 = default
  int sample_every = 0;     // rank 0 prints a sample (temperature 1, seed) every N steps; 0 = never
  int sample_tokens = 32;   // tokens per sample

  bool operator==(const TrainConfig&) const = default;
};

struct DataConfig {
  std::string train;   // llm.c-format token files: paths or glob patterns, comma-separated
  std::string val;     // the same form; optional
  std::string choice_eval;  // multiple-choice eval file (llm.c's format: HellaSwag); "" = none
  std::string weights; // "" = every data.train file one body of text; else one weight per entry
  DataOrder order = DataOrder::random;
  std::string tokenizer;          // tiktoken rank file the data was made with (training samples); "" = none
  std::string tokenizer_pattern;  // its pattern (tok/bpe.hpp); "" = inferred from the rank count

  bool operator==(const DataConfig&) const = default;
};

struct CheckpointConfig {
  std::string dir = "ckpt";
  int every = 0;           // 0 = none during training
  bool save_final = false; // write <dir>/final.h5 at the end
  int keep = 3;            // newest step files kept; 0 = keep all
  // A checkpoint under this many MiB is gathered to rank 0 and written by it
  // alone; a larger one by every rank with MPI-IO (io/checkpoint.hpp
  // CkptWriter). 0 = always every rank.
  int gather_below_mb = 256;
  std::string resume;      // "" = fresh, "latest" = newest in dir (fresh if none), or a file
  // Weights only (io/init_from.hpp): a Hugging Face directory or .safetensors
  // file, an llm.c GPT-2 .bin, or a pentad checkpoint; "" = none. The
  // optimizer state and the step start fresh.
  std::string init_from;

  bool operator==(const CheckpointConfig&) const = default;
};

struct LogConfig {
  int every = 1;
  std::string metrics;     // JSON-lines file, "" = none
  std::string dump;        // debug HDF5 dump (params, grads, batches), "" = none
  double peak_tflops = 0;  // 0 = measure sgemm at start
  std::string trace;       // Chrome-trace JSON of the pipeline timeline, "" = none

  bool operator==(const LogConfig&) const = default;
};

struct Config {
  BackendKind backend = BackendKind::cpu;
  ModelConfig model;
  ParallelConfig parallel;
  TrainConfig train;
  DataConfig data;
  CheckpointConfig checkpoint;
  LogConfig log;

  std::string source;          // deck path
  std::string resolved_toml;   // the resolved deck, as TOML text

  bool operator==(const Config&) const = default;
};

// Parse deck text (named `path` in messages), apply --set overrides
// ("section.key=value"), fill defaults, validate against world_size.
// Throws InputError with a message naming the key (and path:line for deck
// errors, or "--set section.key" for overrides).
Config parse_config(const std::string& text, const std::string& path,
                    const std::vector<std::string>& overrides, int world_size);

// The resolved deck as TOML text (every key, defaults filled in).
std::string config_to_toml(const Config& cfg);

// The entries of a comma-separated list key (data.train, data.val,
// data.weights), each trimmed of blanks; "" gives none.
std::vector<std::string> list_entries(const std::string& value);

// data.weights as numbers, one per data.train entry: {} for "" (no blend).
// Throws InputError naming data.weights for an entry that is not a finite
// number > 0 or for a count other than data.train's.
std::vector<double> data_weights(const DataConfig& d);

}  // namespace pentad
