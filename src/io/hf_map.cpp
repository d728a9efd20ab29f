// The pentad <-> Hugging Face rule tables and the config files (hf_map.hpp).
// Class structure and names as documented by Hugging Face for
// GPT2LMHeadModel (Conv1D weights (in, out), fused c_attn), LlamaForCausalLM,
// Qwen2ForCausalLM (Llama's modules with q/k/v_proj biases),
// Qwen3ForCausalLM (Llama's modules with self_attn.q_norm/k_norm),
// MixtralForCausalLM (block_sparse_moe.gate, experts.{e}.w1/w2/w3),
// Qwen3MoeForCausalLM (Qwen3's attention; mlp.gate,
// mlp.experts.{e}.gate_proj/up_proj/down_proj), Qwen2MoeForCausalLM (Qwen2's
// attention, Qwen3-MoE's experts, mlp.shared_expert.gate_proj/up_proj/
// down_proj and mlp.shared_expert_gate) and Phi3ForCausalLM (Llama's
// modules with q/k/v fused in self_attn.qkv_proj and gate/up in
// mlp.gate_up_proj, concatenated along the output rows) and GemmaForCausalLM
// (Llama's modules and names; GeGLU, RMSNorms scaling by 1 + w, scaled
// embeddings).
#include "io/hf_map.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "core/error.hpp"
#include "core/json.hpp"

namespace pentad::hf {

namespace {

using json = nlohmann::json;

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// The double with the float's shortest decimal spelling (1e-5f -> 1e-05, not
// 9.99999974e-06), as a config written by hand would hold.
double tidy(float x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

// A LongRoPE model's max_position_embeddings in a Phi-3 config.json: its
// context extension times the original context (Phi3Config takes the
// extension, for the attention factor, as the ratio of the two).
int64_t phi3_positions(const ModelConfig& m) {
  return std::max<int64_t>(1, std::llround(tidy(m.rope_scaling_factor) * double(m.rope_original_context)));
}

// The attention factor transformers gives that Phi-3 config.json (whose
// rope_scaling has none of its own).
double phi3_attention_factor(const ModelConfig& m) {
  const double f = double(phi3_positions(m)) / m.rope_original_context;
  return f <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(f) / std::log(double(m.rope_original_context)));
}

// The Hugging Face row, within a head of D rows whose first R turn (R = D
// unless a partial rotary), of pentad's row j: pentad's pair (2i, 2i+1) is
// Hugging Face's (i, i + R/2); the rows from R on keep their place.
int64_t hf_row_in_head(int64_t j, int64_t D, int64_t R) {
  if (R <= 0 || R > D) R = D;
  return j >= R ? j : j % 2 == 0 ? j / 2 : R / 2 + j / 2;
}

// The piece of a rule: its pentad (rows, cols) and element offset in the pentad tensor.
struct Piece {
  int64_t rows = 1, cols = 1, offset = 0;
};

Piece piece_of(const Rule& r) {
  std::vector<int64_t> s = r.pentad_shape;
  Piece p;
  if (r.expert >= 0) {
    s.erase(s.begin());
    p.offset = r.expert * numel(s);
  }
  if (s.size() == 1 && r.op == Op::rope_rows) {  // a q/k bias: one element per row
    p.rows = s[0];
  } else if (s.size() == 1) {
    p.cols = s[0];
  } else {
    p.rows = s[0];
    p.cols = s[1];
  }
  return p;
}

// Calls at(pentad_index, hf_index) for every element of one rule's piece:
// the element offsets in the whole pentad tensor and the whole Hugging
// Face tensor.
template <class F>
void for_each_element(const Rule& r, F&& at) {
  const Piece p = piece_of(r);
  // Hugging Face columns (1-D: one; a 1-D piece other than a q/k bias is one row).
  const int64_t W = r.hf_shape.size() == 1 ? 1 : r.hf_shape.back();
  const int64_t D = r.op == Op::rope_rows ? p.rows / r.heads : 0;
  for (int64_t i = 0; i < p.rows; ++i) {
    const int64_t hi = r.op == Op::rope_rows ? (i / D) * D + hf_row_in_head(i % D, D, r.rotary) : i;
    for (int64_t c = 0; c < p.cols; ++c)
      at(p.offset + i * p.cols + c,
         r.op == Op::transpose ? c * W + r.hf_col0 + i : (r.hf_row0 + hi) * W + r.hf_col0 + c);
  }
}

struct Builder {
  const ModelConfig& m;
  std::vector<Rule> out;
  void add(const std::string& pen, std::vector<int64_t> pshape, const std::string& hf, std::vector<int64_t> hshape,
           Op op = Op::identity, int64_t col0 = 0, int expert = -1, int heads = 0) {
    out.push_back(Rule{pen, std::move(pshape), expert, hf, std::move(hshape), col0, op, heads});
    if (op == Op::rope_rows) out.back().rotary = m.rotary_channels();
  }
  // A (rows, cols) pentad matrix as the same-named Linear weight.
  void same(const std::string& pen, std::vector<int64_t> shape, const std::string& hf) { add(pen, shape, hf, shape); }
  // A (rows, cols) pentad matrix as rows [row0, row0 + rows) of the fused
  // Linear weight hf of shape hshape (Phi-3's qkv_proj, gate_up_proj).
  void rows_of(const std::string& pen, std::vector<int64_t> shape, const std::string& hf, std::vector<int64_t> hshape,
               int64_t row0, Op op = Op::identity, int heads = 0) {
    add(pen, std::move(shape), hf, std::move(hshape), op, 0, -1, heads);
    out.back().hf_row0 = row0;
  }
};

void gpt2_rules(Builder& b) {
  const ModelConfig& m = b.m;
  const int64_t C = m.d_model, F = m.d_ff, V = m.vocab_size, T = m.seq_len;
  b.same("model/wte", {V, C}, "transformer.wte.weight");
  b.same("model/wpe", {T, C}, "transformer.wpe.weight");
  for (int l = 0; l < m.n_layers; ++l) {
    const std::string p = "model/layers/" + std::to_string(l) + "/", h = "transformer.h." + std::to_string(l) + ".";
    b.same(p + "attn_norm/w", {C}, h + "ln_1.weight");
    b.same(p + "attn_norm/b", {C}, h + "ln_1.bias");
    const char* qkv[3] = {"q", "k", "v"};
    for (int k = 0; k < 3; ++k)
      b.add(p + "attn/w" + qkv[k], {C, C}, h + "attn.c_attn.weight", {C, 3 * C}, Op::transpose, k * C);
    for (int k = 0; k < 3; ++k) b.add(p + "attn/b" + qkv[k], {C}, h + "attn.c_attn.bias", {3 * C}, Op::identity, k * C);
    b.add(p + "attn/wo", {C, C}, h + "attn.c_proj.weight", {C, C}, Op::transpose);
    b.same(p + "attn/bo", {C}, h + "attn.c_proj.bias");
    b.same(p + "mlp_norm/w", {C}, h + "ln_2.weight");
    b.same(p + "mlp_norm/b", {C}, h + "ln_2.bias");
    b.add(p + "mlp/w_up", {F, C}, h + "mlp.c_fc.weight", {C, F}, Op::transpose);
    b.same(p + "mlp/b_up", {F}, h + "mlp.c_fc.bias");
    b.add(p + "mlp/w_down", {C, F}, h + "mlp.c_proj.weight", {F, C}, Op::transpose);
    b.same(p + "mlp/b_down", {C}, h + "mlp.c_proj.bias");
  }
  b.same("model/final_norm/w", {C}, "transformer.ln_f.weight");
  b.same("model/final_norm/b", {C}, "transformer.ln_f.bias");
  if (!m.tied()) b.same("model/lm_head", {V, C}, "lm_head.weight");
}

// moe: how an MoE block's tensors are named (none: every block dense).
enum class MoeNames { none, mixtral, qwen3, qwen2 };

// fused: Phi-3's names, q/k/v in self_attn.qkv_proj and gate/up in
// mlp.gate_up_proj (no biases, norms or experts then).
void llama_rules(Builder& b, MoeNames moe, bool qkv_bias, bool qk_norm, bool fused = false) {
  const ModelConfig& m = b.m;
  const int64_t C = m.d_model, F = m.d_ff, V = m.vocab_size, D = m.head_dim(), H = m.n_heads, K = m.n_kv_heads,
                E = m.n_experts;
  b.same("model/wte", {V, C}, "model.embed_tokens.weight");
  for (int l = 0; l < m.n_layers; ++l) {
    const std::string p = "model/layers/" + std::to_string(l) + "/", h = "model.layers." + std::to_string(l) + ".";
    b.same(p + "attn_norm/w", {C}, h + "input_layernorm.weight");
    if (fused) {
      const std::string qkv = h + "self_attn.qkv_proj.weight", gate_up = h + "mlp.gate_up_proj.weight";
      const std::vector<int64_t> qkv_shape = {(H + 2 * K) * D, C}, gate_up_shape = {2 * F, C};
      b.rows_of(p + "attn/wq", {H * D, C}, qkv, qkv_shape, 0, Op::rope_rows, int(H));
      b.rows_of(p + "attn/wk", {K * D, C}, qkv, qkv_shape, H * D, Op::rope_rows, int(K));
      b.rows_of(p + "attn/wv", {K * D, C}, qkv, qkv_shape, (H + K) * D);
      b.same(p + "attn/wo", {C, H * D}, h + "self_attn.o_proj.weight");
      b.same(p + "mlp_norm/w", {C}, h + "post_attention_layernorm.weight");
      b.rows_of(p + "mlp/w_gate", {F, C}, gate_up, gate_up_shape, 0);
      b.rows_of(p + "mlp/w_up", {F, C}, gate_up, gate_up_shape, F);
      b.same(p + "mlp/w_down", {C, F}, h + "mlp.down_proj.weight");
      continue;
    }
    b.add(p + "attn/wq", {H * D, C}, h + "self_attn.q_proj.weight", {H * D, C}, Op::rope_rows, 0, -1, int(H));
    b.add(p + "attn/wk", {K * D, C}, h + "self_attn.k_proj.weight", {K * D, C}, Op::rope_rows, 0, -1, int(K));
    b.same(p + "attn/wv", {K * D, C}, h + "self_attn.v_proj.weight");
    if (qkv_bias) {  // the q and k biases' rows are turned by RoPE as the weights' rows
      b.add(p + "attn/bq", {H * D}, h + "self_attn.q_proj.bias", {H * D}, Op::rope_rows, 0, -1, int(H));
      b.add(p + "attn/bk", {K * D}, h + "self_attn.k_proj.bias", {K * D}, Op::rope_rows, 0, -1, int(K));
      b.same(p + "attn/bv", {K * D}, h + "self_attn.v_proj.bias");
    }
    if (qk_norm) {  // the norms' weights run along a head's D rows: permuted as one head's
      b.add(p + "attn/q_norm", {D}, h + "self_attn.q_norm.weight", {D}, Op::rope_rows, 0, -1, 1);
      b.add(p + "attn/k_norm", {D}, h + "self_attn.k_norm.weight", {D}, Op::rope_rows, 0, -1, 1);
    }
    b.same(p + "attn/wo", {C, H * D}, h + "self_attn.o_proj.weight");
    b.same(p + "mlp_norm/w", {C}, h + "post_attention_layernorm.weight");
    if (moe != MoeNames::none && m.is_moe_block(l)) {
      // Mixtral: block_sparse_moe.experts.{e}.w1 (gate), w2 (down), w3 (up);
      // Qwen3-MoE: mlp.experts.{e}.gate_proj, down_proj, up_proj.
      const bool mx = moe == MoeNames::mixtral;
      const std::string x = h + (mx ? "block_sparse_moe." : "mlp.");
      b.same(p + "mlp/router/w", {E, C}, x + "gate.weight");
      for (int e = 0; e < int(E); ++e) {
        const std::string ex = x + "experts." + std::to_string(e) + ".";
        b.add(p + "mlp/experts/w_gate", {E, F, C}, ex + (mx ? "w1" : "gate_proj") + ".weight", {F, C}, Op::identity,
              0, e);
        b.add(p + "mlp/experts/w_down", {E, C, F}, ex + (mx ? "w2" : "down_proj") + ".weight", {C, F}, Op::identity,
              0, e);
        b.add(p + "mlp/experts/w_up", {E, F, C}, ex + (mx ? "w3" : "up_proj") + ".weight", {F, C}, Op::identity, 0,
              e);
      }
      if (moe == MoeNames::qwen2) {  // Qwen2-MoE's shared expert and its gate
        const int64_t Fs = m.shared_expert_ffn;
        b.same(p + "mlp/shared/w_gate", {Fs, C}, x + "shared_expert.gate_proj.weight");
        b.same(p + "mlp/shared/w_up", {Fs, C}, x + "shared_expert.up_proj.weight");
        b.same(p + "mlp/shared/w_down", {C, Fs}, x + "shared_expert.down_proj.weight");
        b.same(p + "mlp/shared/gate", {1, C}, x + "shared_expert_gate.weight");
      }
    } else {
      b.same(p + "mlp/w_gate", {F, C}, h + "mlp.gate_proj.weight");
      b.same(p + "mlp/w_up", {F, C}, h + "mlp.up_proj.weight");
      b.same(p + "mlp/w_down", {C, F}, h + "mlp.down_proj.weight");
    }
  }
  b.same("model/final_norm/w", {C}, "model.norm.weight");
  if (!m.tied()) b.same("model/lm_head", {V, C}, "lm_head.weight");
}

// The export's note on capacity: cls serves every choice.
void moe_notes(const ModelConfig& m, const std::string& cls, std::vector<std::string>* notes) {
  if (!m.dropless)
    notes->push_back("pentad drops the choices over each expert's capacity (model.capacity_factor = " +
                     std::to_string(m.capacity_factor) + "); " + cls +
                     " serves every choice: its outputs equal pentad's wherever pentad dropped nothing (always "
                     "with model.dropless = true)");
}

std::string z_loss_note(const ModelConfig& m, const std::string& family) {
  return m.z_loss_coef > 0 ? "; the router z-loss has no " + family + " counterpart (training only, dropped)"
                           : std::string();
}

// The export's notes for Qwen's MoE classes (cls, named family in the
// notes): capacity, and the routing rule with norm_topk_prob; extra after it.
void qwen_moe_notes(const ModelConfig& m, const std::string& cls, const std::string& family, const std::string& extra,
                    std::vector<std::string>* notes) {
  moe_notes(m, cls, notes);
  notes->push_back(std::string("routing kept as pentad's: softmax over all experts, top-") + std::to_string(m.top_k) +
                   (m.renormalizes_top_k() ? ", the chosen weights renormalised to sum 1 (norm_topk_prob = true)"
                                           : ", weighted by their probabilities (norm_topk_prob = false)") +
                   extra + "; router_aux_loss_coef = model.aux_loss_coef (training only)" + z_loss_note(m, family));
}

// A Llama with any of Gemma's three keys: GemmaForCausalLM when it has all
// three and nothing Gemma's class lacks, else an InputError naming why.
Arch gemma_arch(const ModelConfig& m, const std::string& what) {
  const bool all = m.mlp_act == GateAct::gelu_tanh && m.norm_plus_one && m.embed_scale;
  if (!all)
    throw InputError(what + ": model.mlp_act = \"" + deck_name(m.mlp_act) + "\", model.norm_plus_one = " +
                     (m.norm_plus_one ? "true" : "false") + ", model.embed_scale = " +
                     (m.embed_scale ? "true" : "false") +
                     ": no Hugging Face class has this mix (GemmaForCausalLM has \"gelu_tanh\" and both true, "
                     "LlamaForCausalLM \"silu\" and both false)");
  std::string lacks;
  if (m.qk_norm) lacks = "model.qk_norm (q/k norms)";
  else if (m.has_qkv_bias()) lacks = "model.qkv_bias (q/k/v biases)";
  else if (m.n_experts > 0) lacks = "model.n_experts (a mixture of experts)";
  else if (m.rope_scaling != RopeScaling::none)
    lacks = std::string("model.rope_scaling = \"") + deck_name(m.rope_scaling) +
            "\" (pentad writes Gemma's plain RoPE)";
  else if (m.rotary_channels() < m.head_dim()) lacks = "model.rotary_dim (RoPE on part of a head)";
  if (!lacks.empty()) throw InputError(what + ": GemmaForCausalLM has no " + lacks);
  return Arch::gemma;
}

}  // namespace

const char* arch_class(Arch a) {
  switch (a) {
    case Arch::gpt2: return "GPT2LMHeadModel";
    case Arch::llama: return "LlamaForCausalLM";
    case Arch::mixtral: return "MixtralForCausalLM";
    case Arch::qwen2: return "Qwen2ForCausalLM";
    case Arch::qwen3: return "Qwen3ForCausalLM";
    case Arch::qwen3_moe: return "Qwen3MoeForCausalLM";
    case Arch::qwen2_moe: return "Qwen2MoeForCausalLM";
    case Arch::phi3: return "Phi3ForCausalLM";
    case Arch::gemma: return "GemmaForCausalLM";
  }
  return "?";
}

Arch arch_of(const ModelConfig& m, const std::string& what, std::vector<std::string>* notes) {
  if (m.mlp_act != GateAct::silu || m.norm_plus_one || m.embed_scale) return gemma_arch(m, what);
  if (m.qk_norm && m.has_qkv_bias())
    throw InputError(what + ": model.qk_norm with model.qkv_bias: Qwen3ForCausalLM's attention biases (its "
                            "attention_bias) are on every projection, pentad's on q, k and v only, so this model has "
                            "no Hugging Face class");
  if (m.qk_norm && m.n_experts == 0) return Arch::qwen3;
  if (m.qk_norm && m.shared_expert_ffn > 0)
    throw InputError(what + ": model.qk_norm with a shared expert (model.shared_expert_ffn): Qwen3MoeForCausalLM "
                            "has no shared expert and Qwen2MoeForCausalLM no q/k norms, so this model has no Hugging "
                            "Face class");
  if (m.qk_norm) {
    // Qwen3-MoE: an MoE block where (l + 1) % decoder_sparse_step == 0 (as
    // model.moe_every), norm_topk_prob = renormalise the chosen weights
    // (model.renormalize_top_k).
    if (notes) qwen_moe_notes(m, "Qwen3MoeForCausalLM", "Qwen3-MoE", "", notes);
    return Arch::qwen3_moe;
  }
  if (m.n_experts == 0) return m.family == Family::gpt2 ? Arch::gpt2 : m.has_qkv_bias() ? Arch::qwen2 : Arch::llama;
  if (m.family == Family::gpt2)
    throw InputError(what + ": a GPT-2 mixture of experts has no Hugging Face class (GPT2LMHeadModel is dense); "
                            "the default export (model.h5) keeps it as pentad weights");
  if (m.shared_expert_ffn > 0) {
    // Qwen2-MoE: Qwen2's attention (q/k/v biases), a shared expert scaled
    // by its sigmoid gate in every MoE block, MoE blocks where (l + 1) %
    // decoder_sparse_step == 0 (model.moe_every), norm_topk_prob as
    // model.renormalize_top_k.
    if (!m.shared_expert_gate)
      throw InputError(what + ": a shared expert without model.shared_expert_gate: Qwen2MoeForCausalLM scales its "
                              "shared expert by sigmoid(shared_expert_gate x), so this model has no Hugging Face class");
    if (!m.has_qkv_bias())
      throw InputError(what + ": a shared expert without model.qkv_bias: Qwen2MoeForCausalLM's attention has "
                              "biases on q, k and v, so this model has no Hugging Face class");
    if (notes) qwen_moe_notes(m, "Qwen2MoeForCausalLM", "Qwen2-MoE", ", plus the gated shared expert", notes);
    return Arch::qwen2_moe;
  }
  if (m.moe_every != 1)
    throw InputError(what + ": model.moe_every = " + std::to_string(m.moe_every) +
                     " puts dense MLP blocks between the MoE blocks; MixtralForCausalLM has an MoE MLP in every "
                     "block, so this model has no Hugging Face class");
  if (m.has_qkv_bias())
    throw InputError(what + ": model.qkv_bias = true: MixtralForCausalLM's attention has no biases, so this mixture "
                            "of experts has no Hugging Face class");
  if (!m.renormalizes_top_k())
    throw InputError(what + ": model.renormalize_top_k = false: pentad weighs the chosen experts by their router "
                            "probabilities, MixtralForCausalLM renormalises them to sum 1, so the outputs would "
                            "differ");
  if (notes) {
    moe_notes(m, "MixtralForCausalLM", notes);
    notes->push_back("routing kept as pentad's: softmax over all experts, top-" + std::to_string(m.top_k) +
                     ", the chosen weights renormalised to sum 1 (Mixtral's rule); router_aux_loss_coef = "
                     "model.aux_loss_coef (training only)" + z_loss_note(m, "Mixtral"));
  }
  return Arch::mixtral;
}

Arch export_arch(const ModelConfig& m, const std::string& cls, const std::string& what,
                 std::vector<std::string>* notes) {
  const Arch a = arch_of(m, what, notes);
  const bool longrope = m.rope_scaling == RopeScaling::longrope;
  const bool partial = m.family == Family::llama && m.rotary_channels() < m.head_dim();
  if ((cls.empty() || cls == arch_class(a)) && !longrope && !partial) return a;
  const std::string others = a == Arch::llama ? std::string(" or Phi3ForCausalLM") : std::string();
  if ((longrope || partial) && cls != arch_class(Arch::phi3))
    throw InputError(what + ": " +
                     (longrope ? std::string("model.rope_scaling = \"longrope\"")
                               : "model.rotary_dim = " + std::to_string(m.rotary_dim) + " (RoPE on part of a head)") +
                     " is written as Phi3ForCausalLM only (--class Phi3ForCausalLM), not as " +
                     (cls.empty() ? arch_class(a) : cls));
  if (partial && int64_t(double(m.head_dim()) * (double(m.rotary_channels()) / m.head_dim())) != m.rotary_channels())
    throw InputError(what + ": --class Phi3ForCausalLM: model.rotary_dim = " + std::to_string(m.rotary_dim) +
                     " of head_dim " + std::to_string(m.head_dim()) +
                     " has no exact partial_rotary_factor (transformers takes int(head_dim * factor))");
  if (cls != arch_class(Arch::phi3) || a != Arch::llama)
    throw InputError(what + ": --class " + cls + ": this model is written as " + arch_class(a) + others);
  if (m.rope_scaling != RopeScaling::none && !longrope)
    throw InputError(what + ": --class Phi3ForCausalLM: model.rope_scaling = \"" + deck_name(m.rope_scaling) +
                     "\" has no Phi-3 form (Phi3ForCausalLM scales its RoPE as LongRoPE only)");
  if (longrope) {
    // Phi3Config's rope_scaling holds the two lists only: the attention
    // factor comes from max_position_embeddings / original_max_position_embeddings.
    const double mine = rope_attention_factor(m.rope()), phi3 = phi3_attention_factor(m);
    if (std::abs(mine - phi3) > 1e-6 * mine)
      throw InputError(what + ": --class Phi3ForCausalLM: model.rope_attention_factor = " +
                       json(tidy(m.rope_attention_factor)).dump() + " comes to " + json(mine).dump() +
                       " but a Phi-3 config.json gives " + json(phi3).dump() +
                       " (sqrt(1 + ln(f) / ln(original)), f = max_position_embeddings / "
                       "original_max_position_embeddings = " + std::to_string(phi3_positions(m)) + " / " +
                       std::to_string(m.rope_original_context) + "); its rope_scaling has no attention factor");
  }
  return Arch::phi3;
}

std::vector<Rule> rules(const ModelConfig& m, Arch a) {
  Builder b{m, {}};
  if (a == Arch::gpt2)
    gpt2_rules(b);
  else
    llama_rules(b,
                a == Arch::mixtral     ? MoeNames::mixtral
                : a == Arch::qwen3_moe ? MoeNames::qwen3
                : a == Arch::qwen2_moe ? MoeNames::qwen2
                                       : MoeNames::none,
                a == Arch::qwen2 || a == Arch::qwen2_moe, a == Arch::qwen3 || a == Arch::qwen3_moe,
                a == Arch::phi3);  // (gemma: Llama's)
  return b.out;
}

Arch import_arch(Arch deck_arch, const std::string& config_text,
                 const std::function<bool(const std::string&)>& has_tensor) {
  if (deck_arch != Arch::llama) return deck_arch;
  if (config_text.empty()) return has_tensor("model.layers.0.self_attn.qkv_proj.weight") ? Arch::phi3 : deck_arch;
  json j;
  try {
    j = json::parse(config_text);
  } catch (const json::exception&) {
    return deck_arch;  // check_config_json names the file's fault
  }
  const auto arch = j.is_object() ? j.find("architectures") : j.end();
  const bool phi3 = arch != j.end() && arch->is_array() && !arch->empty() && (*arch)[0] == "Phi3ForCausalLM";
  return phi3 ? Arch::phi3 : deck_arch;
}

std::vector<std::string> hf_names(const std::vector<Rule>& rs) {
  std::vector<std::string> out;
  for (const Rule& r : rs)
    if (out.empty() || out.back() != r.hf)
      if (std::find(out.begin(), out.end(), r.hf) == out.end()) out.push_back(r.hf);
  return out;
}

std::vector<float> build_hf(const std::vector<Rule>& rs, const std::string& hf_name,
                            const std::function<const std::vector<float>&(const std::string&)>& pentad) {
  std::vector<float> out;
  for (const Rule& r : rs) {
    if (r.hf != hf_name) continue;
    if (out.empty()) out.assign(size_t(numel(r.hf_shape)), 0.0f);
    const std::vector<float>& src = pentad(r.pentad);
    if (int64_t(src.size()) != numel(r.pentad_shape))
      PENTAD_FATAL("hf export: tensor '" + r.pentad + "' has " + std::to_string(src.size()) + " elements, not " +
                   shape_str(r.pentad_shape));
    for_each_element(r, [&](int64_t pi, int64_t hi) { out[size_t(hi)] = src[size_t(pi)]; });
  }
  return out;
}

std::vector<float> build_pentad(const std::vector<Rule>& rs, const std::string& name,
                                const std::function<const std::vector<float>&(const std::string&)>& hf) {
  std::vector<float> out;
  for (const Rule& r : rs) {
    if (r.pentad != name) continue;
    if (out.empty()) out.assign(size_t(numel(r.pentad_shape)), 0.0f);
    const std::vector<float>& src = hf(r.hf);
    if (int64_t(src.size()) != numel(r.hf_shape))
      PENTAD_FATAL("hf import: tensor '" + r.hf + "' has " + std::to_string(src.size()) + " elements, not " +
                   shape_str(r.hf_shape));
    for_each_element(r, [&](int64_t pi, int64_t hi) { out[size_t(pi)] = src[size_t(hi)]; });
  }
  return out;
}

// ---- config.json -----------------------------------------------------------

std::string config_json(const ModelConfig& m, Arch a, const std::string& dtype, SpecialIds ids) {
  json j;
  j["architectures"] = {arch_class(a)};
  j["vocab_size"] = m.vocab_size;
  if (ids.bos >= 0) j["bos_token_id"] = ids.bos;
  if (ids.eos >= 0) j["eos_token_id"] = ids.eos;
  j["initializer_range"] = tidy(m.init_std);
  j["tie_word_embeddings"] = m.tied();
  j["torch_dtype"] = dtype;
  j["use_cache"] = true;
  if (a == Arch::gpt2) {
    j["model_type"] = "gpt2";
    j["n_positions"] = m.seq_len;
    j["n_ctx"] = m.seq_len;
    j["n_embd"] = m.d_model;
    j["n_layer"] = m.n_layers;
    j["n_head"] = m.n_heads;
    j["n_inner"] = m.d_ff;
    j["activation_function"] = "gelu_new";  // the tanh approximation, as pentad's GELU
    j["layer_norm_epsilon"] = tidy(m.norm_eps);
    j["resid_pdrop"] = j["embd_pdrop"] = j["attn_pdrop"] = 0.0;
    j["scale_attn_weights"] = true;
    return j.dump(2) + "\n";
  }
  j["model_type"] = a == Arch::mixtral     ? "mixtral"
                    : a == Arch::qwen2     ? "qwen2"
                    : a == Arch::qwen3     ? "qwen3"
                    : a == Arch::qwen3_moe ? "qwen3_moe"
                    : a == Arch::qwen2_moe ? "qwen2_moe"
                    : a == Arch::phi3      ? "phi3"
                    : a == Arch::gemma     ? "gemma"
                                           : "llama";
  j["hidden_size"] = m.d_model;
  j["intermediate_size"] = m.d_ff;
  j["num_hidden_layers"] = m.n_layers;
  j["num_attention_heads"] = m.n_heads;
  j["num_key_value_heads"] = m.n_kv_heads;
  j["head_dim"] = m.head_dim();
  // Gemma's GELU in both keys: transformers 4.x reads hidden_activation, 5 hidden_act.
  j["hidden_act"] = a == Arch::gemma ? "gelu_pytorch_tanh" : "silu";
  if (a == Arch::gemma) j["hidden_activation"] = "gelu_pytorch_tanh";
  // YaRN's context, factor x original context, also when the deck trains a
  // shorter one: some transformers 4.x versions take YaRN's factor as
  // max_position_embeddings / original_max_position_embeddings.
  j["max_position_embeddings"] =
      m.rope_scaling == RopeScaling::yarn
          ? std::max<int64_t>(m.seq_len, std::llround(double(tidy(m.rope_scaling_factor)) * m.rope_original_context))
      : m.rope_scaling == RopeScaling::longrope ? phi3_positions(m)
                                                : m.seq_len;
  j["rms_norm_eps"] = tidy(m.norm_eps);
  j["rope_theta"] = tidy(m.rope_theta);
  if (m.rope_scaling == RopeScaling::llama3)
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", tidy(m.rope_scaling_factor)},
                         {"low_freq_factor", tidy(m.rope_low_freq_factor)},
                         {"high_freq_factor", tidy(m.rope_high_freq_factor)},
                         {"original_max_position_embeddings", m.rope_original_context}};
  else if (m.rope_scaling == RopeScaling::linear)
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", tidy(m.rope_scaling_factor)}};
  else if (m.rope_scaling == RopeScaling::yarn) {
    j["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", tidy(m.rope_scaling_factor)},
                         {"original_max_position_embeddings", m.rope_original_context},
                         {"beta_fast", tidy(m.rope_beta_fast)},
                         {"beta_slow", tidy(m.rope_beta_slow)},
                         {"truncate", m.rope_truncate}};
    if (m.rope_attention_factor > 0.0f) j["rope_scaling"]["attention_factor"] = tidy(m.rope_attention_factor);
  } else if (m.rope_scaling == RopeScaling::longrope) {  // (Phi-3 only: export_arch)
    j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", m.rope_short_factor},
                         {"long_factor", m.rope_long_factor}};
  } else
    j["rope_scaling"] = nullptr;
  j["attention_dropout"] = 0.0;
  if (a == Arch::llama) {
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
  } else if (a == Arch::gemma) {
    j["attention_bias"] = false;
  } else if (a == Arch::phi3) {  // (Phi3Config's keys: no biases, no window)
    j["original_max_position_embeddings"] =
        m.rope_scaling == RopeScaling::longrope ? m.rope_original_context : m.seq_len;
    if (m.rotary_channels() < m.head_dim())  // (export_arch: it reads back as rotary_dim)
      j["partial_rotary_factor"] = double(m.rotary_channels()) / m.head_dim();
    j["sliding_window"] = nullptr;
    j["resid_pdrop"] = j["embd_pdrop"] = 0.0;
  } else if (a == Arch::qwen2 || a == Arch::qwen3 || a == Arch::qwen3_moe || a == Arch::qwen2_moe) {
    // Qwen2's q/k/v biases, Qwen3's q/k norms: the class's own.
    if (a == Arch::qwen3 || a == Arch::qwen3_moe) j["attention_bias"] = false;  // Qwen3's would be on every projection
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = m.n_layers;
    if (a == Arch::qwen3_moe || a == Arch::qwen2_moe) {
      // The experts; the dense blocks' MLP (intermediate_size) as wide as an expert's.
      j["num_experts"] = m.n_experts;
      j["num_experts_per_tok"] = m.top_k;
      j["moe_intermediate_size"] = m.d_ff;
      j["decoder_sparse_step"] = m.moe_every;
      j["mlp_only_layers"] = json::array();
      j["norm_topk_prob"] = m.renormalizes_top_k();
      j["router_aux_loss_coef"] = tidy(m.aux_loss_coef);
      j["output_router_logits"] = false;
    }
    if (a == Arch::qwen2_moe) {  // (the biases: the key newer Qwen2MoeConfigs have, true as in every older one)
      j["qkv_bias"] = true;
      j["shared_expert_intermediate_size"] = m.shared_expert_ffn;
    }
  } else {
    j["num_local_experts"] = m.n_experts;
    j["num_experts_per_tok"] = m.top_k;
    j["router_aux_loss_coef"] = tidy(m.aux_loss_coef);
    j["router_jitter_noise"] = 0.0;
    j["output_router_logits"] = false;
    j["sliding_window"] = nullptr;
  }
  return j.dump(2) + "\n";
}

std::string generation_config_json(const ModelConfig& m, SpecialIds ids) {
  json j = {{"_from_model_config", true}, {"max_length", m.seq_len}};
  if (ids.bos >= 0) j["bos_token_id"] = ids.bos;
  if (ids.eos >= 0) j["eos_token_id"] = ids.eos;
  return j.dump(2) + "\n";
}

namespace {

// Phi3Config's defaults where they differ from LlamaConfig's: 4096
// positions, rms_norm_eps 1e-5 (no sliding window unless given).
constexpr double kPhi3Positions = 4096, kPhi3NormEps = 1e-5;

bool is_phi3_config(const json& j) {
  const auto a = j.find("architectures");
  return a != j.end() && a->is_array() && !a->empty() && (*a)[0] == "Phi3ForCausalLM";
}

// A Phi3ForCausalLM's "rope_scaling" (`rs`, of type `kind`) read into *r as
// transformers reads it: LongRoPE, whether its type says "longrope" or (as
// older files do) "su" or "yarn"; "short_factor" and "long_factor", one
// number per pair of a head; the original context from
// "original_max_position_embeddings" (else the object's own) and the
// extension (for the attention factor) as "max_position_embeddings" over it,
// both Phi3Config's 4096 when missing; an "attention_factor" when given. ""
// when read.
std::string longrope_of_config(const json& j, const json& rs, const std::string& kind, const std::string& where,
                               ModelConfig* r) {
  const std::string key = where + ": \"rope_scaling\"";
  if (kind != "longrope" && kind != "su" && kind != "yarn")
    return key + " of type \"" + kind + "\": Phi3ForCausalLM's scaled RoPE is LongRoPE (\"longrope\", or \"su\" "
                 "and \"yarn\", which transformers reads as LongRoPE)";
  for (const auto& [name, list] : {std::pair{"short_factor", &r->rope_short_factor},
                                   std::pair{"long_factor", &r->rope_long_factor}}) {
    const auto it = rs.find(name);
    if (it == rs.end() || !it->is_array() || it->empty())
      return key + " has no list of numbers \"" + name + "\" (LongRoPE's per-pair factors)";
    list->clear();
    for (const json& x : *it) {
      if (!x.is_number() || !(x.get<double>() > 0))
        return key + ": \"" + name + "\" holds " + x.dump() + ", not a number > 0";
      list->push_back(x.get<double>());
    }
  }
  // A positive integer of the file's (transformers 5 keeps it in the
  // rope_parameters object), or dflt when missing; "" or the message.
  const auto positive = [&](const char* name, double dflt, double* out) -> std::string {
    const json* v = nullptr;
    if (const auto it = j.find(name); it != j.end() && !it->is_null()) v = &*it;
    else if (const auto in = rs.find(name); in != rs.end() && !in->is_null()) v = &*in;
    *out = v == nullptr ? dflt : v->is_number() ? v->get<double>() : 0.0;
    if (*out >= 1 && *out == std::floor(*out) && *out <= 2147483647.0) return {};
    return where + ": \"" + name + "\" = " + v->dump() + " is not a positive integer";
  };
  double original = 0, positions = 0;
  if (std::string e = positive("original_max_position_embeddings", kPhi3Positions, &original); !e.empty()) return e;
  if (std::string e = positive("max_position_embeddings", kPhi3Positions, &positions); !e.empty()) return e;
  r->rope_scaling = RopeScaling::longrope;
  r->rope_original_context = int(original);
  r->rope_scaling_factor = float(std::max(1.0, positions / original));  // (at most 1: no attention factor)
  const auto att = rs.find("attention_factor");
  if (att != rs.end() && !att->is_null() && !(att->is_number() && att->get<double>() > 0))
    return key + " has \"attention_factor\" = " + att->dump() + ", not a number > 0";
  r->rope_attention_factor = att != rs.end() && att->is_number() ? float(att->get<double>()) : 0.0f;
  return {};
}

// config.json's "rope_scaling" read into the model.rope_* keys of *r, as
// Hugging Face reads it: null (or rope_type "default") is "none"; "linear"
// needs "factor"; "llama3" needs its four numbers; "yarn" needs "factor", takes
// "original_max_position_embeddings" (else "max_position_embeddings"),
// "beta_fast" 32 and "beta_slow" 1 when missing or null, "truncate" true,
// and "attention_factor" when given, else derived from "mscale" and
// "mscale_all_dim" when both are, else left 0 (0.1 ln(factor) + 1). A
// Phi3ForCausalLM's is LongRoPE (longrope_of_config). Any other kind is
// named. "" when read.
std::string rope_of_config(const json& j, const std::string& where, ModelConfig* r) {
  r->rope_scaling = RopeScaling::none;
  const auto rs = j.find("rope_scaling");
  if (rs == j.end() || rs->is_null()) return {};
  const auto t = rs->is_object() ? (rs->contains("rope_type") ? rs->find("rope_type") : rs->find("type")) : rs->end();
  if (t == rs->end() || !t->is_string())
    return where + ": \"rope_scaling\" = " + rs->dump().substr(0, 200) + " names no \"rope_type\"";
  const std::string kind = t->get<std::string>();
  if (kind == "default") return {};
  if (is_phi3_config(j)) return longrope_of_config(j, *rs, kind, where, r);
  if (kind != "llama3" && kind != "yarn" && kind != "linear")
    return where + ": \"rope_scaling\" = " + rs->dump().substr(0, 200) +
           ": pentad's RoPE scales as \"linear\", \"llama3\" or \"yarn\" only (and as \"longrope\" in a "
           "Phi3ForCausalLM)";
  std::string err;
  // A number of rope_scaling's: dflt when missing or null (NaN: required).
  const auto number = [&](const char* key, double dflt) {
    const auto it = rs->find(key);
    if (it != rs->end() && it->is_number()) return it->get<double>();
    if ((it == rs->end() || it->is_null()) && !std::isnan(dflt)) return dflt;
    if (err.empty())
      err = where + ": \"rope_scaling\" has " +
            (it == rs->end() || it->is_null() ? "no number \"" + std::string(key) + "\""
                                                : "\"" + std::string(key) + "\" = " + it->dump() + ", not a number");
    return 0.0;
  };
  constexpr double kNeeded = std::numeric_limits<double>::quiet_NaN();
  r->rope_scaling_factor = float(number("factor", kNeeded));
  if (kind == "linear") {
    r->rope_scaling = RopeScaling::linear;
    return err;
  }
  if (kind == "llama3") {
    r->rope_scaling = RopeScaling::llama3;
    r->rope_low_freq_factor = float(number("low_freq_factor", kNeeded));
    r->rope_high_freq_factor = float(number("high_freq_factor", kNeeded));
    r->rope_original_context = int(number("original_max_position_embeddings", kNeeded));
    return err;
  }
  r->rope_scaling = RopeScaling::yarn;
  const auto positions = j.find("max_position_embeddings");
  r->rope_original_context = int(number("original_max_position_embeddings",
                                        positions != j.end() && positions->is_number() ? positions->get<double>()
                                                                                        : kNeeded));
  // (transformers reads a 0 here as its default too: `or 32`.)
  r->rope_beta_fast = float(number("beta_fast", 32.0));
  r->rope_beta_slow = float(number("beta_slow", 1.0));
  if (r->rope_beta_fast == 0.0f) r->rope_beta_fast = 32.0f;
  if (r->rope_beta_slow == 0.0f) r->rope_beta_slow = 1.0f;
  const auto tr = rs->find("truncate");
  if (tr != rs->end() && !tr->is_null() && !tr->is_boolean() && err.empty())
    err = where + ": \"rope_scaling\" has \"truncate\" = " + tr->dump() + ", not true or false";
  r->rope_truncate = tr == rs->end() || !tr->is_boolean() || tr->get<bool>();
  r->rope_attention_factor = float(number("attention_factor", 0.0));
  const double mscale = number("mscale", 0.0), mscale_all_dim = number("mscale_all_dim", 0.0);
  if (r->rope_attention_factor == 0.0f && mscale != 0.0 && mscale_all_dim != 0.0) {
    const double f = r->rope_scaling_factor;
    const auto m = [f](double s) { return f <= 1.0 ? 1.0 : 0.1 * s * std::log(f) + 1.0; };
    r->rope_attention_factor = float(m(mscale) / m(mscale_all_dim));
  }
  return err;
}

// config.json's "rope_scaling" against the deck's model.rope_scaling and its
// keys (rope_of_config): the same kind, and the same values for the kind's
// keys (YaRN's attention factor as the factor it comes to). "" when they agree.
std::string check_rope_scaling(const json& j, const std::string& where, const ModelConfig& m) {
  ModelConfig file;
  if (std::string e = rope_of_config(j, where, &file); !e.empty()) return e;
  const std::string deck = deck_name(m.rope_scaling);
  if (file.rope_scaling != m.rope_scaling) {
    const auto rs = j.find("rope_scaling");
    return where + ": \"rope_scaling\" is " +
           (file.rope_scaling == RopeScaling::none ? std::string("null") : rs->dump()) +
           " but the deck has model.rope_scaling = \"" + deck + "\"";
  }
  struct Key {
    const char* json_key;
    double file, deck;
    const char* deck_key;
  };
  std::vector<Key> keys;
  if (m.rope_scaling != RopeScaling::none)
    keys.push_back({"factor", tidy(file.rope_scaling_factor), tidy(m.rope_scaling_factor), "rope_scaling_factor"});
  if (m.rope_scaling == RopeScaling::llama3 || m.rope_scaling == RopeScaling::yarn ||
      m.rope_scaling == RopeScaling::longrope)
    keys.push_back({"original_max_position_embeddings", double(file.rope_original_context),
                    double(m.rope_original_context), "rope_original_context"});
  if (m.rope_scaling == RopeScaling::llama3) {
    keys.push_back({"low_freq_factor", tidy(file.rope_low_freq_factor), tidy(m.rope_low_freq_factor),
                    "rope_low_freq_factor"});
    keys.push_back({"high_freq_factor", tidy(file.rope_high_freq_factor), tidy(m.rope_high_freq_factor),
                    "rope_high_freq_factor"});
  }
  if (m.rope_scaling == RopeScaling::yarn) {
    keys.push_back({"beta_fast", tidy(file.rope_beta_fast), tidy(m.rope_beta_fast), "rope_beta_fast"});
    keys.push_back({"beta_slow", tidy(file.rope_beta_slow), tidy(m.rope_beta_slow), "rope_beta_slow"});
    keys.push_back({"attention_factor", rope_attention_factor(file.rope()), rope_attention_factor(m.rope()),
                    "rope_attention_factor (0: 0.1 ln(factor) + 1)"});
    keys.push_back({"truncate", double(file.rope_truncate), double(m.rope_truncate), "rope_truncate (1: true)"});
  }
  if (m.rope_scaling == RopeScaling::longrope) {
    keys.push_back({"attention_factor", rope_attention_factor(file.rope()), rope_attention_factor(m.rope()),
                    "rope_attention_factor (0: sqrt(1 + ln(factor) / ln(original context)))"});
    for (const auto& [name, f, d] : {std::tuple{"short_factor", &file.rope_short_factor, &m.rope_short_factor},
                                     std::tuple{"long_factor", &file.rope_long_factor, &m.rope_long_factor}}) {
      if (f->size() != d->size())
        return where + ": \"rope_scaling\" has " + std::to_string(f->size()) + " numbers in \"" + name +
               "\" but the deck's model.rope_" + name + " has " + std::to_string(d->size());
      for (size_t i = 0; i < f->size(); ++i)
        if (std::abs((*f)[i] - (*d)[i]) > 1e-6 * std::abs((*d)[i]))
          return where + ": \"rope_scaling\" has \"" + name + "\"[" + std::to_string(i) + "] = " +
                 json((*f)[i]).dump() + " but the deck's model.rope_" + name + " has " + json((*d)[i]).dump();
    }
  }
  for (const Key& k : keys)
    if (std::abs(k.file - k.deck) > 1e-6 * std::abs(k.deck))
      return where + ": \"rope_scaling\" comes to \"" + k.json_key + "\" = " + json(k.file).dump() +
             " but the deck has model." + k.deck_key + " = " + json(k.deck).dump();
  return {};
}

}  // namespace

namespace {
constexpr double kRequired = -1.0;  // Want::dflt of a key with no default

// transformers 5 writes RoPE as "rope_parameters" ({"rope_theta": ...,
// "rope_type": "default" | "llama3", and the scaling's numbers}) instead of
// "rope_theta" and "rope_scaling". Puts them under the older keys, which the
// readers below read, or says why not: two spellings that differ, RoPE per
// layer type.
std::string read_rope_parameters(json& j, const std::string& where) {
  const auto rp = j.find("rope_parameters");
  if (rp == j.end() || rp->is_null()) return {};
  const std::string key = where + ": \"rope_parameters\"";
  if (!rp->is_object()) return key + " is not an object";
  const auto theta = rp->find("rope_theta");
  if (theta == rp->end() || !theta->is_number())
    return key + " has no number \"rope_theta\" (RoPE per layer type? pentad's RoPE is one for every layer)";
  if (const auto f = rp->find("partial_rotary_factor"); f != rp->end() && !f->is_null()) {
    const auto top = j.find("partial_rotary_factor");  // (rotary_of_config reads it there)
    if (top != j.end() && !top->is_null() && *top != *f)
      return where + ": \"partial_rotary_factor\" = " + top->dump() + " but \"rope_parameters\" has " + f->dump();
    j["partial_rotary_factor"] = *f;
  }
  if (const auto old = j.find("rope_theta"); old != j.end() && old->is_number() &&
                                             std::abs(old->get<double>() - theta->get<double>()) >
                                                 1e-6 * std::abs(theta->get<double>()))
    return where + ": \"rope_theta\" = " + old->dump() + " but \"rope_parameters\" has " + theta->dump();
  j["rope_theta"] = *theta;
  const auto t = rp->contains("rope_type") ? rp->find("rope_type") : rp->find("type");
  const std::string kind = t != rp->end() && t->is_string() ? t->get<std::string>() : "default";
  const auto scaling = j.find("rope_scaling");
  const bool has_scaling = scaling != j.end() && !scaling->is_null();
  if (has_scaling) {
    const auto st = scaling->contains("rope_type") ? scaling->find("rope_type") : scaling->find("type");
    const std::string old_kind = st != scaling->end() && st->is_string() ? st->get<std::string>() : "default";
    if (old_kind != kind)
      return where + ": \"rope_scaling\" is of type \"" + old_kind + "\" but \"rope_parameters\" of \"" + kind + "\"";
  } else if (kind != "default") {
    j["rope_scaling"] = *rp;
  }
  return {};
}

// config.json's object into *j (RoPE under the older keys:
// read_rope_parameters), or the message why it is none.
std::string parse_config_object(const std::string& text, const std::string& where, json* j) {
  try {
    *j = parse_json(text, where);
  } catch (const InputError& e) {
    return e.what();
  }
  if (!j->is_object()) return where + " is not a JSON object";
  return read_rope_parameters(*j, where);
}

// Qwen2's, Qwen3's or Qwen3-MoE's class (their configs share the defaults
// read here: positions and the sliding window).
bool is_qwen(const std::string& cls) {
  return cls == "Qwen2ForCausalLM" || cls == "Qwen3ForCausalLM" || cls == "Qwen3MoeForCausalLM" ||
         cls == "Qwen2MoeForCausalLM";
}

// The key/value heads a missing "num_key_value_heads" stands for: Mistral's
// 8, Qwen2's and Qwen3's 32, Qwen3-MoE's 4, Qwen2-MoE's 16, else the query heads (also
// theirs for an explicit null).
double kv_heads_default(const json& j, const std::string& cls) {
  const auto kv = j.find("num_key_value_heads");
  if (kv == j.end() && cls == "MistralForCausalLM") return 8;
  if (kv == j.end() && cls == "Qwen3MoeForCausalLM") return 4;
  if (kv == j.end() && cls == "Qwen2MoeForCausalLM") return 16;
  if (kv == j.end() && is_qwen(cls)) return 32;
  const auto heads = j.find("num_attention_heads");
  return heads != j.end() && heads->is_number() ? heads->get<double>() : kRequired;
}

// The class config.json names, into *cls, and how pentad reads it, into *a:
// MistralForCausalLM as Llama (the same modules and tensor names; its
// sliding window is checked by the callers), Qwen2ForCausalLM as Llama with
// model.qkv_bias. Or the message why not.
std::string config_arch(const json& j, const std::string& where, std::string* cls, Arch* a) {
  const auto arch = j.find("architectures");
  if (arch == j.end() || !arch->is_array() || arch->empty() || !(*arch)[0].is_string())
    return where + " has no \"architectures\" list";
  *cls = (*arch)[0].get<std::string>();
  if (*cls == "GPT2LMHeadModel") *a = Arch::gpt2;
  else if (*cls == "LlamaForCausalLM" || *cls == "MistralForCausalLM") *a = Arch::llama;
  else if (*cls == "MixtralForCausalLM") *a = Arch::mixtral;
  else if (*cls == "Qwen2ForCausalLM") *a = Arch::qwen2;
  else if (*cls == "Qwen3ForCausalLM") *a = Arch::qwen3;
  else if (*cls == "Qwen3MoeForCausalLM") *a = Arch::qwen3_moe;
  else if (*cls == "Qwen2MoeForCausalLM") *a = Arch::qwen2_moe;
  else if (*cls == "Phi3ForCausalLM") *a = Arch::phi3;
  else if (*cls == "GemmaForCausalLM") *a = Arch::gemma;
  else
    return where + ": architecture \"" + *cls +
           "\" is not one pentad reads (GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM, "
           "Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, Qwen2MoeForCausalLM, Phi3ForCausalLM, "
           "GemmaForCausalLM)";
  return {};
}

// MistralConfig's defaults where they differ from LlamaConfig's (and 8
// key/value heads: kv_heads_default): 131072 positions, a sliding window of
// 4096 (a null one: none).
constexpr double kMistralPositions = 131072, kMistralWindow = 4096;

// Qwen2Config's (and Qwen3Config's, Qwen3MoeConfig's) defaults where they
// differ from LlamaConfig's (and the key/value heads: kv_heads_default):
// 32768 positions, a window of 4096 when "use_sliding_window" is true;
// Qwen3Config's head_dim is 128 (the others' hidden_size /
// num_attention_heads, Qwen3MoeConfig's too). Qwen3MoeConfig's experts:
// 128, top 8, 768 wide, every block MoE, norm_topk_prob false.
constexpr double kQwen2Positions = 32768, kQwen2Window = 4096, kQwen3HeadDim = 128;
constexpr double kQwen3MoeExperts = 128, kQwen3MoeTopK = 8, kQwen3MoeWidth = 768, kQwen3MoeDenseWidth = 6144;
// Qwen2MoeConfig's: 60 experts, top 4, 1408 wide, a shared expert 5632
// wide, dense blocks 5632 wide, every block MoE, norm_topk_prob false, q/k/v
// biases (qkv_bias, where the key exists).
constexpr double kQwen2MoeSharedWidth = 5632;
// The two classes' expert defaults: count, top-k, expert and dense widths.
struct QwenMoeDefaults {
  double experts, top_k, width, dense_width;
};
const QwenMoeDefaults& qwen_moe_defaults(Arch a) {
  static constexpr QwenMoeDefaults qwen3{kQwen3MoeExperts, kQwen3MoeTopK, kQwen3MoeWidth, kQwen3MoeDenseWidth},
      qwen2{60, 4, 1408, 5632};
  return a == Arch::qwen2_moe ? qwen2 : qwen3;
}


// The rms_norm_eps a missing key stands for.
double norm_eps_default(const std::string& cls) { return cls == "Phi3ForCausalLM" ? kPhi3NormEps : 1e-6; }

// The channels of each head of head_dim that RoPE turns, from config.json's
// "partial_rotary_factor" f as transformers takes it, int(head_dim * f),
// into *rotary (head_dim when f is missing, null or 1). Only
// Phi3ForCausalLM turns part of a head (Phi-4-mini's 0.75); the count must
// be even. "" or the message.
std::string rotary_of_config(const json& j, const std::string& where, const std::string& cls, int64_t head_dim,
                             int64_t* rotary) {
  *rotary = head_dim;
  const auto f = j.find("partial_rotary_factor");
  if (f == j.end() || f->is_null() || (f->is_number() && f->get<double>() == 1.0)) return {};
  const std::string key = where + ": \"partial_rotary_factor\" = " + f->dump();
  if (cls != "Phi3ForCausalLM") return key + ": pentad turns part of a head as Phi3ForCausalLM only, not as " + cls;
  if (!f->is_number() || !(f->get<double>() > 0.0 && f->get<double>() < 1.0))
    return key + " is not a number in (0, 1]";
  *rotary = int64_t(double(head_dim) * f->get<double>());
  if (*rotary < 2 || *rotary % 2 != 0)
    return key + " turns " + std::to_string(*rotary) + " of a head's " + std::to_string(head_dim) +
           " channels: RoPE turns pairs (an even count of at least 2)";
  return {};
}

// GemmaConfig's defaults where they differ from LlamaConfig's: heads of
// 256, 8192 positions, a tied head, the tanh GELU.
constexpr double kGemmaHeadDim = 256, kGemmaPositions = 8192;

// The head_dim a missing (or null) "head_dim" stands for.
int64_t head_dim_default(const std::string& cls, int64_t hidden, int64_t heads) {
  if (cls == "Qwen3ForCausalLM") return int64_t(kQwen3HeadDim);
  if (cls == "GemmaForCausalLM") return int64_t(kGemmaHeadDim);
  return heads > 0 ? hidden / heads : 0;
}

// The gated MLP's activation of a Llama-family config.json, into *act: SiLU
// ("silu") for every class but Gemma's, whose GELU is the tanh form. Gemma's
// is named by "hidden_activation" where given (transformers 4.x reads it),
// else by "hidden_act" (transformers 5 reads only that), else GemmaConfig's
// default (the tanh form): "gelu_pytorch_tanh" or "gelu_new"; and "gelu" in
// "hidden_act" (Gemma's published files) is read as the tanh form too, as
// transformers 4.x reads such a file and as Gemma was trained. "" or the
// message.
std::string gate_act_of_config(const json& j, const std::string& where, Arch a, GateAct* act) {
  *act = a == Arch::gemma ? GateAct::gelu_tanh : GateAct::silu;
  const auto ha = j.find("hidden_activation");
  const bool from_activation = a == Arch::gemma && ha != j.end() && !ha->is_null();
  const auto it = from_activation ? ha : j.find("hidden_act");
  if (it == j.end() || it->is_null()) return {};
  const std::string key =
      where + ": \"" + (from_activation ? "hidden_activation" : "hidden_act") + "\" = " + it->dump();
  if (a != Arch::gemma)
    return it->is_string() && *it == "silu" ? std::string() : key + ": pentad's Llama uses SiLU (SwiGLU)";
  if (it->is_string() && (*it == "gelu_pytorch_tanh" || *it == "gelu_new" || (*it == "gelu" && !from_activation)))
    return {};
  return key + ": pentad's Gemma uses the tanh GELU (gelu_pytorch_tanh)";
}

// The sliding window of a Mistral or Qwen2 file (0: none; a missing key is
// the class's default). Qwen2's applies only with "use_sliding_window" (and
// only to some layers: taken as all of them). Within it, the attention is
// the whole causal context, as pentad's.
int64_t sliding_window(const json& j, const std::string& cls) {
  const bool mistral = cls == "MistralForCausalLM";
  if (is_qwen(cls)) {
    const auto use = j.find("use_sliding_window");
    if (use == j.end() || !use->is_boolean() || !use->get<bool>()) return 0;
  } else if (cls == "Phi3ForCausalLM") {
    const auto sw = j.find("sliding_window");  // Phi3Config's default: none
    return sw != j.end() && sw->is_number_integer() && sw->get<int64_t>() > 0 ? sw->get<int64_t>() : 0;
  } else if (!mistral) {
    return 0;
  }
  const auto sw = j.find("sliding_window");
  if (sw == j.end()) return int64_t(mistral ? kMistralWindow : kQwen2Window);
  return sw->is_number_integer() && sw->get<int64_t>() > 0 ? sw->get<int64_t>() : 0;
}
// Qwen3-MoE's dense blocks named by index, and its routing switch,
// norm_topk_prob: model.renormalize_top_k. "" when they agree.
std::string check_qwen3_moe_routing(const json& j, const std::string& where, const ModelConfig& m) {
  const auto only = j.find("mlp_only_layers");
  if (only != j.end() && !only->is_null() && !(only->is_array() && only->empty()))
    return where + ": \"mlp_only_layers\" = " + only->dump() +
           ": pentad places its dense blocks by model.moe_every (decoder_sparse_step), not by a list";
  const auto norm = j.find("norm_topk_prob");
  if (norm != j.end() && !norm->is_null() && !norm->is_boolean())
    return where + ": \"norm_topk_prob\" = " + norm->dump() + " is not true or false";
  const bool file_norm = norm != j.end() && norm->is_boolean() && norm->get<bool>();  // the class's: false
  if (file_norm == m.renormalizes_top_k()) return {};
  return where + ": \"norm_topk_prob\" = " + std::string(file_norm ? "true" : "false") +
         (norm == j.end() || norm->is_null() ? " (missing: the class's default)" : "") +
         " but the deck's model.renormalize_top_k = " + (m.renormalizes_top_k() ? "true" : "false");
}
// A Llama-family config.json's heads and RoPE against the deck: head_dim
// (a missing or null one is the class's default: Qwen3's 128, every other's
// hidden_size / num_attention_heads), the channels RoPE turns
// (partial_rotary_factor) and rope_scaling. "" when they agree.
std::string check_heads_and_rope(const json& j, const std::string& where, const std::string& cls,
                                 const ModelConfig& m, Arch a) {
  const auto hd = j.find("head_dim");
  if (hd != j.end() && !hd->is_null() && !hd->is_number()) return where + ": \"head_dim\" is not a number";
  const bool hd_missing = hd == j.end() || hd->is_null();
  const int64_t file_hd = hd_missing ? head_dim_default(cls, m.d_model, m.n_heads) : hd->get<int64_t>();
  const bool own_default = a == Arch::qwen3 || a == Arch::gemma;  // a width of the class's, not hidden / heads
  const bool uneven = hd_missing && !own_default && int64_t(m.head_dim()) * m.n_heads != m.d_model;
  if (file_hd != m.head_dim() || uneven)
    return where + ": \"head_dim\" = " +
           (hd_missing ? "(missing: " +
                             (own_default ? std::to_string(head_dim_default(cls, m.d_model, m.n_heads))
                                          : std::string("hidden_size / num_attention_heads")) +
                             ")"
                       : hd->dump()) +
           " but the deck has model.head_dim = " + std::to_string(m.head_dim());
  int64_t rotary = 0;
  if (std::string e = rotary_of_config(j, where, cls, file_hd, &rotary); !e.empty()) return e;
  if (rotary != m.rotary_channels())
    return where + ": RoPE turns " + std::to_string(rotary) + " of a head's " + std::to_string(file_hd) +
           " channels (\"partial_rotary_factor\") but the deck's " +
           (m.rotary_dim > 0 ? "model.rotary_dim = " + std::to_string(m.rotary_dim)
                             : "model.rotary_dim = 0 (all " + std::to_string(m.head_dim()) + ")");
  return check_rope_scaling(j, where, m);
}

}  // namespace

std::string check_config_json(const std::string& text, const std::string& where, const ModelConfig& m, Arch a) {
  json j;
  if (std::string e = parse_config_object(text, where, &j); !e.empty()) return e;
  std::string cls;
  Arch file_arch = Arch::gpt2;
  if (std::string e = config_arch(j, where, &cls, &file_arch); !e.empty()) return e;
  if (file_arch != a)
    return where + ": architecture \"" + cls + "\", but the deck's model is a " + arch_class(a);
  if (const int64_t window = sliding_window(j, cls); window > 0 && window < m.seq_len)
    return where + ": \"sliding_window\" = " + std::to_string(window) + " is shorter than the deck's model.seq_len = " +
           std::to_string(m.seq_len) + ": pentad's attention sees the whole causal context, " + cls + "'s the last " +
           std::to_string(window) + " positions";
  // (config key, the deck's value, the deck key); a missing key takes the
  // class's default where Hugging Face has one.
  struct Want {
    const char* key;
    double deck;
    const char* deck_key;
    bool is_float;
    double dflt = kRequired;  // the class's default for a missing key
  };
  std::vector<Want> want;
  const bool gpt2 = a == Arch::gpt2;
  if (gpt2) {
    want = {{"n_layer", double(m.n_layers), "model.n_layers", false},
            {"n_embd", double(m.d_model), "model.d_model", false},
            {"n_head", double(m.n_heads), "model.n_heads", false},
            {"layer_norm_epsilon", tidy(m.norm_eps), "model.norm_eps", true, 1e-5}};
  } else {
    const double kv_default = kv_heads_default(j, cls);  // kRequired (-1) if no heads either
    want = {{"num_hidden_layers", double(m.n_layers), "model.n_layers", false},
            {"hidden_size", double(m.d_model), "model.d_model", false},
            {"num_attention_heads", double(m.n_heads), "model.n_heads", false},
            {"num_key_value_heads", double(m.n_kv_heads), "model.n_kv_heads", false, kv_default},
            {"rms_norm_eps", tidy(m.norm_eps), "model.norm_eps", true, norm_eps_default(cls)},
            {"rope_theta", tidy(m.rope_theta), "model.rope_theta", true, 10000.0}};
    if (a != Arch::qwen3_moe && a != Arch::qwen2_moe)
      want.push_back({"intermediate_size", double(m.d_ff), "model.d_ff", false});
    if (a == Arch::mixtral) {
      want.push_back({"num_local_experts", double(m.n_experts), "model.n_experts", false});
      want.push_back({"num_experts_per_tok", double(m.top_k), "model.top_k", false, 2.0});
    }
    if (a == Arch::qwen3_moe || a == Arch::qwen2_moe) {
      // The experts' width is moe_intermediate_size; intermediate_size is
      // the dense blocks' (pentad's are as wide), unused when there are none.
      const QwenMoeDefaults& d = qwen_moe_defaults(a);
      want.push_back({"num_experts", double(m.n_experts), "model.n_experts", false, d.experts});
      want.push_back({"num_experts_per_tok", double(m.top_k), "model.top_k", false, d.top_k});
      want.push_back({"moe_intermediate_size", double(m.d_ff), "model.d_ff", false, d.width});
      want.push_back({"decoder_sparse_step", double(m.moe_every), "model.moe_every", false, 1.0});
      if (m.moe_every > 1)
        want.push_back({"intermediate_size", double(m.d_ff), "model.d_ff", false, d.dense_width});
    }
    if (a == Arch::qwen2_moe)
      want.push_back({"shared_expert_intermediate_size", double(m.shared_expert_ffn), "model.shared_expert_ffn",
                      false, kQwen2MoeSharedWidth});
  }
  want.push_back({"vocab_size", double(m.vocab_size), "model.vocab_size", false});
  for (const Want& w : want) {
    const auto it = j.find(w.key);
    const bool missing = it == j.end() || it->is_null();
    if (missing && w.dflt == kRequired)
      return where + " has no \"" + w.key + "\" (the deck's " + w.deck_key + " = " + json(w.deck).dump() + ")";
    if (!missing && !it->is_number()) return where + ": \"" + w.key + "\" is not a number";
    const double v = missing ? w.dflt : it->get<double>();
    const bool same = w.is_float ? std::abs(v - w.deck) <= 1e-6 * std::abs(w.deck) : v == w.deck;
    if (!same)
      return where + ": \"" + w.key + "\" = " + (missing ? json(v).dump() + " (missing: the class's default)" : it->dump()) +
             " but the deck has " + w.deck_key + " = " + json(w.deck).dump();
  }
  if (!gpt2) {
    if (std::string e = check_heads_and_rope(j, where, cls, m, a); !e.empty()) return e;
    GateAct act = GateAct::silu;
    if (std::string e = gate_act_of_config(j, where, a, &act); !e.empty()) return e;
    if (a == Arch::qwen3_moe || a == Arch::qwen2_moe)
      if (std::string e = check_qwen3_moe_routing(j, where, m); !e.empty()) return e;
    if (a == Arch::qwen2_moe) {
      const auto qb = j.find("qkv_bias");
      if (qb != j.end() && qb->is_boolean() && !qb->get<bool>())
        return where + ": \"qkv_bias\" = false: pentad reads Qwen2MoeForCausalLM with its q/k/v biases "
                       "(model.qkv_bias)";
    }
    // Qwen2's biases are its class's (q, k, v); a Llama's or Mixtral's would
    // be on every projection.
    for (const char* bias : {"attention_bias", "mlp_bias"}) {
      const auto b = j.find(bias);
      if (a != Arch::qwen2 && a != Arch::qwen2_moe && b != j.end() && b->is_boolean() && b->get<bool>())
        return where + ": \"" + std::string(bias) + "\" = true: pentad's Llama has biases on q, k and v only, as "
                       "Qwen2ForCausalLM";
    }
  }
  if (gpt2) {
    const auto act = j.find("activation_function");
    if (act != j.end() && act->is_string() && *act != "gelu_new" && *act != "gelu_pytorch_tanh")
      return where + ": \"activation_function\" = " + act->dump() +
             ": pentad's GPT-2 uses the tanh GELU (gelu_new)";
    // A longer position table is fine: its first seq_len rows are taken.
    const auto pos = j.find("n_positions");
    if (pos != j.end() && pos->is_number_integer() && pos->get<int64_t>() < m.seq_len)
      return where + ": \"n_positions\" = " + pos->dump() + " is shorter than the deck's model.seq_len = " +
             std::to_string(m.seq_len);
    const auto inner = j.find("n_inner");
    const int64_t f = (inner == j.end() || inner->is_null()) ? 4 * int64_t(m.d_model) : inner->get<int64_t>();
    if (f != m.d_ff)
      return where + ": \"n_inner\" = " + std::to_string(f) + " but the deck has model.d_ff = " + std::to_string(m.d_ff);
  }
  const auto tie = j.find("tie_word_embeddings");
  // The classes' defaults: GPT-2 and Gemma tied, Llama and Mixtral not.
  const bool tied = tie == j.end() || !tie->is_boolean() ? gpt2 || a == Arch::gemma : tie->get<bool>();
  if (tied != m.tied())
    return where + ": \"tie_word_embeddings\" = " + std::string(tied ? "true" : "false") +
           " but the deck has model.tied_embeddings = " + std::string(m.tied() ? "true" : "false");
  return {};
}

namespace {

// A number as TOML reads it for a float key: always with a point or an exponent.
std::string toml_float(double x) {
  char buf[40];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

// The deck lines of config.json's "rope_scaling" (rope_of_config): none for
// none.
std::string rope_scaling_keys(const json& j, const std::string& where) {
  ModelConfig r;
  if (std::string e = rope_of_config(j, where, &r); !e.empty()) throw InputError(e);
  if (r.rope_scaling == RopeScaling::none) return {};
  std::string lines = "rope_scaling = \"" + std::string(deck_name(r.rope_scaling)) + "\"\nrope_scaling_factor = " +
                      toml_float(tidy(r.rope_scaling_factor)) + "\n";
  if (r.rope_scaling == RopeScaling::linear) return lines;
  lines += "rope_original_context = " + std::to_string(r.rope_original_context) + "\n";
  if (r.rope_scaling == RopeScaling::longrope) {
    const auto list = [](const std::vector<double>& xs) {
      std::string out = "[";
      for (double x : xs) out += (out.size() > 1 ? ", " : "") + toml_float(x);
      return out + "]";
    };
    return lines + "rope_attention_factor = " + toml_float(tidy(r.rope_attention_factor)) +
           "\nrope_short_factor = " + list(r.rope_short_factor) + "\nrope_long_factor = " +
           list(r.rope_long_factor) + "\n";
  }
  if (r.rope_scaling == RopeScaling::llama3)
    return lines + "rope_low_freq_factor = " + toml_float(tidy(r.rope_low_freq_factor)) +
           "\nrope_high_freq_factor = " + toml_float(tidy(r.rope_high_freq_factor)) + "\n";
  return lines + "rope_beta_fast = " + toml_float(tidy(r.rope_beta_fast)) +
         "\nrope_beta_slow = " + toml_float(tidy(r.rope_beta_slow)) +
         "\nrope_attention_factor = " + toml_float(tidy(r.rope_attention_factor)) +
         "\nrope_truncate = " + (r.rope_truncate ? "true" : "false") + "\n";
}

// config.json's keys written as a deck's [model] lines
// (model_of_config_json): each read as a required number (dflt null) or
// the class's default.
struct DeckWriter {
  const json& j;
  const std::string& where;
  std::string deck = "[model]\n";
  double number(const char* key, const json& dflt) const {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      if (dflt.is_null()) throw InputError(where + " has no \"" + key + "\"");
      return dflt.get<double>();
    }
    if (!it->is_number()) throw InputError(where + ": \"" + key + "\" = " + it->dump() + " is not a number");
    return it->get<double>();
  }
  int64_t integer(const char* key, const json& dflt) const {
    const double v = number(key, dflt);
    if (v != double(int64_t(v)) || v < 1 || v > 2147483647.0)
      throw InputError(where + ": \"" + key + "\" = " + j.at(key).dump() + " is not a positive integer");
    return int64_t(v);
  }
  bool flag(const char* key, bool dflt) const {
    const auto it = j.find(key);
    return it == j.end() || !it->is_boolean() ? dflt : it->get<bool>();
  }
  void put(const std::string& key, const std::string& value) { deck += key + " = " + value + "\n"; }
};

// The experts' keys of the MoE classes (Mixtral, Qwen3-MoE, Qwen2-MoE): every
// choice served, as they serve them.
void put_moe_keys(DeckWriter& w, Arch a) {
  if (a == Arch::mixtral) {
    w.put("n_experts", std::to_string(w.integer("num_local_experts", nullptr)));
    w.put("top_k", std::to_string(w.integer("num_experts_per_tok", 2)));
    w.put("moe_every", "1");
    w.put("dropless", "true");           // Mixtral serves every choice
    w.put("renormalize_top_k", "true");  // and always renormalises the chosen weights
  }
  if (a == Arch::qwen3_moe || a == Arch::qwen2_moe) {
    const QwenMoeDefaults& d = qwen_moe_defaults(a);
    w.put("n_experts", std::to_string(w.integer("num_experts", d.experts)));
    w.put("top_k", std::to_string(w.integer("num_experts_per_tok", d.top_k)));
    w.put("moe_every", std::to_string(w.integer("decoder_sparse_step", 1)));
    w.put("dropless", "true");  // Qwen's MoE blocks serve every choice
    w.put("renormalize_top_k", w.flag("norm_topk_prob", false) ? "true" : "false");
  }
  if (a == Arch::qwen2_moe) {
    w.put("shared_expert_ffn", std::to_string(w.integer("shared_expert_intermediate_size", kQwen2MoeSharedWidth)));
    w.put("shared_expert_gate", "true");
  }
}

}  // namespace

ModelConfig model_of_config_json(const std::string& text, const std::string& where) {
  json j;
  if (std::string e = parse_config_object(text, where, &j); !e.empty()) throw InputError(e);
  std::string cls;
  Arch a = Arch::gpt2;
  if (std::string e = config_arch(j, where, &cls, &a); !e.empty()) throw InputError(e);
  const bool qwen2 = a == Arch::qwen2 || a == Arch::qwen2_moe,
             qwen = qwen2 || a == Arch::qwen3 || a == Arch::qwen3_moe;
  DeckWriter w{j, where};
  if (a == Arch::gpt2) {
    const auto act = j.find("activation_function");
    if (act != j.end() && act->is_string() && *act != "gelu_new" && *act != "gelu_pytorch_tanh")
      throw InputError(where + ": \"activation_function\" = " + act->dump() +
                       ": pentad's GPT-2 uses the tanh GELU (gelu_new)");
    const int64_t C = w.integer("n_embd", nullptr);
    w.put("family", "\"gpt2\"");
    w.put("n_layers", std::to_string(w.integer("n_layer", nullptr)));
    w.put("d_model", std::to_string(C));
    w.put("n_heads", std::to_string(w.integer("n_head", nullptr)));
    w.put("d_ff", std::to_string(w.integer("n_inner", 4 * C)));
    w.put("seq_len", std::to_string(w.integer("n_positions", 1024)));
    w.put("norm_eps", toml_float(w.number("layer_norm_epsilon", 1e-5)));
    w.put("tied_embeddings", w.flag("tie_word_embeddings", true) ? "true" : "false");
  } else {
    GateAct act = GateAct::silu;
    if (std::string e = gate_act_of_config(j, where, a, &act); !e.empty()) throw InputError(e);
    const auto sw = j.find("sliding_window");
    if (cls != "MistralForCausalLM" && !qwen && a != Arch::phi3 && sw != j.end() &&
        !sw->is_null())  // (their windows: sliding_window)
      throw InputError(where + ": \"sliding_window\" = " + sw->dump() +
                       ": pentad's attention sees the whole causal context");
    const int64_t H = w.integer("num_attention_heads", nullptr);
    w.put("family", "\"llama\"");
    w.put("n_layers", std::to_string(w.integer("num_hidden_layers", nullptr)));
    w.put("d_model", std::to_string(w.integer("hidden_size", nullptr)));
    w.put("n_heads", std::to_string(H));
    w.put("n_kv_heads", std::to_string(w.integer("num_key_value_heads", int64_t(kv_heads_default(j, cls)))));
    const auto hd = j.find("head_dim");
    const bool has_hd = (hd != j.end() && !hd->is_null()) || a == Arch::qwen3 || a == Arch::gemma;
    const double hd_default = a == Arch::gemma ? kGemmaHeadDim : kQwen3HeadDim;
    if (has_hd) w.put("head_dim", std::to_string(w.integer("head_dim", hd_default)));
    int64_t rotary = 0;
    const int64_t D = has_hd ? w.integer("head_dim", hd_default) : w.integer("hidden_size", nullptr) / H;
    if (std::string e = rotary_of_config(j, where, cls, D, &rotary); !e.empty()) throw InputError(e);
    if (rotary != D) w.put("rotary_dim", std::to_string(rotary));
    // Qwen3-MoE: pentad's d_ff is the experts' width (check_config_json
    // requires the dense blocks', if any, to be the same).
    if (a == Arch::qwen3_moe || a == Arch::qwen2_moe)
      w.put("d_ff", std::to_string(w.integer("moe_intermediate_size", qwen_moe_defaults(a).width)));
    else
      w.put("d_ff", std::to_string(w.integer("intermediate_size", nullptr)));
    // Mistral's (and a windowed Qwen2's) positions are cut to the sliding
    // window, within which the attention is pentad's (the whole causal context).
    const double default_positions = cls == "MistralForCausalLM" ? kMistralPositions
                                     : qwen                       ? kQwen2Positions
                                     : a == Arch::phi3            ? kPhi3Positions
                                     : a == Arch::gemma           ? kGemmaPositions
                                                                  : 2048;
    int64_t positions = w.integer("max_position_embeddings", default_positions);
    if (const int64_t window = sliding_window(j, cls); window > 0) positions = std::min(positions, window);
    w.put("seq_len", std::to_string(positions));
    w.put("norm_eps", toml_float(w.number("rms_norm_eps", norm_eps_default(cls))));
    w.put("rope_theta", toml_float(w.number("rope_theta", 10000.0)));
    w.put("tied_embeddings", w.flag("tie_word_embeddings", a == Arch::gemma) ? "true" : "false");
    if (qwen2) w.put("qkv_bias", "true");
    if (a == Arch::gemma) {
      w.put("mlp_act", "\"" + std::string(deck_name(act)) + "\"");
      w.put("norm_plus_one", "true");
      w.put("embed_scale", "true");
    }
    if (a == Arch::qwen3 || a == Arch::qwen3_moe) w.put("qk_norm", "true");
    w.deck += rope_scaling_keys(j, where);
    put_moe_keys(w, a);
  }
  w.put("vocab_size", std::to_string(w.integer("vocab_size", nullptr)));
  w.deck += "[train]\nsteps = 0\n[data]\ntrain = \"\"\n";
  ModelConfig m;
  try {
    m = parse_config(w.deck, where, {}, 1).model;
  } catch (const InputError& e) {
    throw InputError(where + ": pentad has no such model: " + e.what());
  }
  // The model must read back as the file: what check_config_json checks for
  // checkpoint.init_from (head_dim, biases, RoPE scaling kinds, ...).
  if (std::string err = check_config_json(text, where, m, a); !err.empty()) throw InputError(err);
  return m;
}

ModelConfig model_of_deck(const std::string& text, const std::string& where) {
  const std::vector<std::string> one_rank = {
      "backend=cpu",         "parallel.comm=mpi",         "parallel.dp=1",          "parallel.tp=1",
      "parallel.pp=1",       "parallel.cp=1",             "parallel.ep=1",          "parallel.zero=0",
      "parallel.sp=false",   "parallel.virtual_stages=1", "parallel.stage_layers=", "parallel.schedule=1f1b",
      "checkpoint.resume=",  "checkpoint.init_from="};
  try {
    return parse_config(text, where, one_rank, 1).model;
  } catch (const InputError& e) {
    throw InputError(where + ": its deck does not parse: " + e.what());
  }
}

}  // namespace pentad::hf
