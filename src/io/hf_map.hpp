// The mapping between pentad's global parameter tensors and Hugging Face's
// GPT2LMHeadModel, LlamaForCausalLM, MixtralForCausalLM and the Qwen classes
// (docs/huggingface.md).
// One table of rules serves export and import: each rule ties a piece of a
// pentad tensor (the whole tensor, or expert e of an (E, ...) tensor) to a
// column range of a Hugging Face tensor, through identity, a transpose
// (GPT-2's Conv1D stores (in, out)) or the per-head RoPE row permutation.
//
// RoPE: pentad rotates the interleaved pairs (2i, 2i+1) of each head (as
// Meta's reference Llama does); Hugging Face's rotate_half rotates (i, i+D/2).
// Both use the frequency theta^(-2i/D) for pair i, so the Hugging Face q/k
// row h*D + j is pentad's row h*D + (j < D/2 ? 2j : 2(j - D/2) + 1), per
// head (k with n_kv_heads): the scores q.k are unchanged because q and k
// get the same permutation.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace pentad::hf {

// qwen2: pentad's Llama with model.qkv_bias (Qwen2ForCausalLM: the Llama
// modules and names, biases on q_proj, k_proj and v_proj). qwen3: pentad's
// Llama with model.qk_norm (Qwen3ForCausalLM: the Llama modules and names,
// self_attn.q_norm and k_norm, RMSNorms over each head of q and k).
// qwen3_moe: that Llama as a mixture of experts (Qwen3MoeForCausalLM:
// Qwen3's attention, mlp.gate and mlp.experts.{e}.{gate,up,down}_proj).
// qwen2_moe: a Qwen2 (q/k/v biases) mixture of experts with a gated shared
// expert, model.shared_expert_ffn and model.shared_expert_gate
// (Qwen2MoeForCausalLM: Qwen3-MoE's expert names, mlp.shared_expert.
// {gate,up,down}_proj and the (1, C) mlp.shared_expert_gate).
// phi3: pentad's Llama stored fused (Phi3ForCausalLM: self_attn.qkv_proj
// holds q_proj's, k_proj's and v_proj's rows in that order, mlp.gate_up_proj
// gate_proj's then up_proj's); read where the files are Phi-3's
// (import_arch), written when asked for (export_arch).
// gemma: pentad's Llama with Gemma's model.mlp_act = "gelu_tanh",
// model.norm_plus_one and model.embed_scale (GemmaForCausalLM: the Llama
// modules and names; its RMSNorm weights stored as their difference from 1,
// as pentad's are then).
enum class Arch { gpt2, llama, mixtral, qwen2, qwen3, qwen3_moe, qwen2_moe, phi3, gemma };
const char* arch_class(Arch a);  // "GPT2LMHeadModel", ...

// The Hugging Face class of a pentad model, or an InputError saying why it
// has none (GPT-2 MoE, MoE blocks between dense ones, top_k = 1). notes:
// what the class does differently and is kept anyway (e.g. capacity).
Arch arch_of(const ModelConfig& m, const std::string& what, std::vector<std::string>* notes);

// The class an export writes: arch_of's, or the one named (cls, "" = that
// one): Phi3ForCausalLM for a model whose arch_of is LlamaForCausalLM and
// that has no RoPE scaling (Phi-3's only scaled RoPE is LongRoPE). Any other
// name is an InputError naming the classes this model can be written as.
Arch export_arch(const ModelConfig& m, const std::string& cls, const std::string& what,
                 std::vector<std::string>* notes);

enum class Op { identity, transpose, rope_rows };

struct Rule {
  std::string pentad;                // "model/layers/0/attn/wq"
  std::vector<int64_t> pentad_shape; // the whole pentad tensor
  int expert = -1;                   // >= 0: the piece is pentad[expert] of an (E, ...) tensor
  std::string hf;                    // "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> hf_shape;     // the whole Hugging Face tensor
  int64_t hf_col0 = 0;               // the piece's first column in hf (1-D tensors: first element)
  Op op = Op::identity;
  int heads = 0;                     // rope_rows: heads in the tensor (n_heads for q, n_kv_heads for k)
  int64_t hf_row0 = 0;               // the piece's first row in hf (Phi-3's fused qkv_proj, gate_up_proj)
  int64_t rotary = 0;                // rope_rows: the rows of a head RoPE turns, the first ones (0: all)
};

// The class whose tensors an import reads for the deck class deck_arch
// (arch_of): the deck's own, but phi3 for a Llama deck when config.json
// names Phi3ForCausalLM (config_text; "" when there is no config.json) or,
// without one, when the files hold Phi-3's fused
// "model.layers.0.self_attn.qkv_proj.weight" (has_tensor).
Arch import_arch(Arch deck_arch, const std::string& config_text,
                 const std::function<bool(const std::string&)>& has_tensor);

// Every rule of m's class, Hugging Face tensors in their natural order.
std::vector<Rule> rules(const ModelConfig& m, Arch a);

// Hugging Face tensor names in rule order, each once.
std::vector<std::string> hf_names(const std::vector<Rule>& rs);

// Export: the Hugging Face tensor `hf_name` from pentad global tensors
// (pentad(name) returns the whole tensor, row-major).
std::vector<float> build_hf(const std::vector<Rule>& rs, const std::string& hf_name,
                            const std::function<const std::vector<float>&(const std::string&)>& pentad);

// Import: the pentad global tensor `name` from Hugging Face tensors.
std::vector<float> build_pentad(const std::vector<Rule>& rs, const std::string& name,
                                const std::function<const std::vector<float>&(const std::string&)>& hf);

// The tokenizer's ids config.json and generation_config.json name
// (bos_token_id, eos_token_id); -1: not written (no tokenizer exported).
struct SpecialIds {
  int64_t bos = -1, eos = -1;
};

// config.json (dtype "float32" or "bfloat16") and generation_config.json.
std::string config_json(const ModelConfig& m, Arch a, const std::string& dtype, SpecialIds ids = {});
std::string generation_config_json(const ModelConfig& m, SpecialIds ids = {});

// Checks a config.json against the deck: the architecture must be a = the
// deck's class (MistralForCausalLM counts as Llama, with a sliding window no
// shorter than model.seq_len), and every size that fixes a tensor or the
// forward pass (layers, widths, heads, kv heads, vocabulary, eps,
// rope_theta, tying, experts) must match. "" or a message naming the key and
// both values.
std::string check_config_json(const std::string& text, const std::string& where, const ModelConfig& m, Arch a);

// The model a config.json describes (the inverse of config_json): its sizes,
// norm eps, RoPE (theta, llama3 scaling), tying (the class's default where the
// key is missing: GPT-2 tied, Llama and Mixtral not), experts (Mixtral:
// dropless, as Hugging Face serves every choice), and model.seq_len =
// max_position_embeddings (GPT-2: n_positions). MistralForCausalLM is read as
// Llama (the same modules; MistralConfig's defaults for missing keys), its
// positions cut to its sliding window, within which its attention sees the
// whole causal context as pentad's does; Phi3ForCausalLM likewise (its
// window only where config.json gives one; a scaled RoPE, which for Phi-3
// is LongRoPE, and a partial rotary factor refused). Qwen2ForCausalLM is read as Llama
// with model.qkv_bias, Qwen3ForCausalLM with model.qk_norm; head_dim as
// model.head_dim (missing: the class's default). Validated as a deck, then
// checked with check_config_json. InputError naming `where` and the key for
// what pentad's models do not have (another architecture or activation, a
// Llama sliding window, biases on every projection, an odd head_dim, ...).
ModelConfig model_of_config_json(const std::string& text, const std::string& where);

// The model of a checkpoint's resolved deck (its layout replaced by one
// rank, so any layout parses). InputError naming `where` if it does not.
ModelConfig model_of_deck(const std::string& toml, const std::string& where);

}  // namespace pentad::hf
