// The input deck (config.hpp). One schema table, one row per key, drives
// everything: deck parsing, --set overrides, per-key range checks, the
// resolved TOML (config_to_toml) and "did you mean" suggestions. Checks that
// involve several keys live in validate(); layouts the chosen Comm cannot run
// are rejected in check_supported(), from the Comm capability table.
#include "config/config.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include <toml++/toml.h>

#include "comm/capability.hpp"
#include "core/error.hpp"
#include "parallel/pp/schedule.hpp"

namespace pentad {
namespace {

// ---------------------------------------------------------------------------
// Small formatting helpers

// Shortest text that reads back to the same value (float or double).
template <class T>
std::string fmt_number(T x) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, res.ptr);
}

// A float as a TOML float literal: always has a '.' or an exponent.
template <class T>
std::string toml_float(T x) {
  std::string s = fmt_number(x);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

// The double whose shortest text is the float's (0.003f -> 0.003, not
// 0.0030000000260770321), so the table prints and reads back as the deck
// would have written it.
template <class T>
double as_decimal_double(T x) {
  if constexpr (std::is_same_v<T, float>) {
    const std::string s = fmt_number(x);
    double d = 0;
    std::from_chars(s.data(), s.data() + s.size(), d);
    return d;
  } else {
    return static_cast<double>(x);
  }
}

// One value's TOML text. toml++ formats strings (escapes, on one line),
// integers and booleans; floats print as the shortest text that reads back
// to the same value, because toml++ 3.3 prints 17 significant digits (1e-05
// would read 1.0000000000000001e-05). `buf` is reused across values: the
// planner resolves a deck per candidate layout.
std::string toml_text(const toml::node& n, std::ostringstream& buf) {
  if (const auto* f = n.as_floating_point()) return toml_float(f->get());
  if (const auto* a = n.as_array()) {  // (a list of floats: each as above)
    std::string out = "[";
    for (const toml::node& e : *a) out += (out.size() > 1 ? ", " : "") + toml_text(e, buf);
    return out + "]";
  }
  buf.str({});
  buf << toml::toml_formatter(n, toml::format_flags::allow_unicode_strings);
  return buf.str();
}

// A TOML basic string literal (for messages).
std::string toml_quote(const std::string& s) {
  std::ostringstream buf;
  return toml_text(toml::value<std::string>(s), buf);
}

std::string a_type_name(toml::node_type t) {
  switch (t) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1u : 0u)});
      diag = up;
    }
  }
  return row[b.size()];
}

// ---------------------------------------------------------------------------
// The schema

enum class Kind { integer, floating, boolean, string, float_list };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::integer: return "an integer";
    case Kind::floating: return "a float";
    case Kind::boolean: return "a boolean";
    case Kind::string: return "a string";
    case Kind::float_list: return "an array of numbers";
  }
  return "?";
}

using Value = std::variant<int64_t, double, bool, std::string, std::vector<double>>;

struct Key {
  std::string section;  // "" = top level
  std::string name;
  Kind kind;
  // Store a value of `kind` into the config; returns "" or the problem
  // ("must be >= 1 (got 0)"), which the caller prefixes with where and what.
  std::function<std::string(Config&, const Value&)> set;
  // The current value (floats as as_decimal_double), for the resolved deck.
  std::function<Value(const Config&)> get;
  std::string help;

  std::string full() const { return section.empty() ? name : section + "." + name; }
};

// Section, key and accessor from one token pair, so that the deck key is by
// construction the name of the struct field it sets.
#define PENTAD_FIELD(sec, key) #sec, #key, [](auto& c) -> auto& { return c.sec.key; }

template <class Acc>
using FieldType = std::remove_cvref_t<decltype(std::declval<Acc>()(std::declval<Config&>()))>;

constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Integer key in [lo, hi] (hi is also capped by the field's type).
template <class Acc>
Key int_key(const char* sec, const char* name, Acc acc, int64_t lo, int64_t hi, const char* help) {
  using T = FieldType<Acc>;
  const int64_t type_max = static_cast<int64_t>(
      std::min<uint64_t>(std::numeric_limits<T>::max(), static_cast<uint64_t>(kNoMax)));
  const bool open_top = hi >= type_max;
  hi = std::min(hi, type_max);
  Key k{sec, name, Kind::integer, {}, {}, help};
  k.set = [acc, lo, hi, open_top](Config& c, const Value& v) -> std::string {
    const int64_t x = std::get<int64_t>(v);
    const std::string got = " (got " + std::to_string(x) + ")";
    if (!open_top && (x < lo || x > hi))
      return "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]" + got;
    if (x < lo) return "must be >= " + std::to_string(lo) + got;
    if (x > hi) return "must be <= " + std::to_string(hi) + got;
    acc(c) = static_cast<T>(x);
    return {};
  };
  k.get = [acc](const Config& c) -> Value { return static_cast<int64_t>(acc(c)); };
  return k;
}

// A bound of a float range: value and whether it is excluded.
struct Bound {
  double v;
  bool open;
};
constexpr Bound gt(double v) { return {v, true}; }
constexpr Bound ge(double v) { return {v, false}; }
constexpr Bound lt(double v) { return {v, true}; }
constexpr Bound none() { return {kInf, true}; }

template <class Acc>
Key float_key(const char* sec, const char* name, Acc acc, Bound lo, Bound hi, const char* help) {
  using T = FieldType<Acc>;
  Key k{sec, name, Kind::floating, {}, {}, help};
  k.set = [acc, lo, hi](Config& c, const Value& v) -> std::string {
    const double x = std::get<double>(v);
    const std::string got = " (got " + fmt_number(x) + ")";
    const bool below = lo.open ? !(x > lo.v) : !(x >= lo.v);
    const bool above = hi.open ? !(x < hi.v) : !(x <= hi.v);
    if (!std::isfinite(x) || !std::isfinite(static_cast<T>(x)))
      return "must be a finite number" + got;
    if (below || above) {
      if (hi.v == kInf) return std::string("must be ") + (lo.open ? "> " : ">= ") + fmt_number(lo.v) + got;
      return "must be in " + std::string(lo.open ? "(" : "[") + fmt_number(lo.v) + ", " +
             fmt_number(hi.v) + (hi.open ? ")" : "]") + got;
    }
    acc(c) = static_cast<T>(x);
    return {};
  };
  k.get = [acc](const Config& c) -> Value { return as_decimal_double(acc(c)); };
  return k;
}

// A list of finite numbers, each > 0 (any length; validate() checks it
// against the keys it goes with).
template <class Acc>
Key positive_list_key(const char* sec, const char* name, Acc acc, const char* help) {
  Key k{sec, name, Kind::float_list, {}, {}, help};
  k.set = [acc](Config& c, const Value& v) -> std::string {
    const auto& xs = std::get<std::vector<double>>(v);
    for (size_t i = 0; i < xs.size(); ++i)
      if (!std::isfinite(xs[i]) || !(xs[i] > 0))
        return "entry " + std::to_string(i) + " must be a finite number > 0 (got " + fmt_number(xs[i]) + ")";
    acc(c) = xs;
    return {};
  };
  k.get = [acc](const Config& c) -> Value { return acc(c); };
  return k;
}

template <class Acc>
Key bool_key(const char* sec, const char* name, Acc acc, const char* help) {
  Key k{sec, name, Kind::boolean, {}, {}, help};
  k.set = [acc](Config& c, const Value& v) -> std::string {
    acc(c) = std::get<bool>(v);
    return {};
  };
  k.get = [acc](const Config& c) -> Value { return bool(acc(c)); };
  return k;
}

template <class Acc>
Key string_key(const char* sec, const char* name, Acc acc, const char* help) {
  Key k{sec, name, Kind::string, {}, {}, help};
  k.set = [acc](Config& c, const Value& v) -> std::string {
    acc(c) = std::get<std::string>(v);
    return {};
  };
  k.get = [acc](const Config& c) -> Value { return acc(c); };
  return k;
}

// A string key with a fixed set of choices: an enum field whose values index
// its deck spellings (DeckNames in config.hpp).
template <class Acc>
Key enum_key(const char* sec, const char* name, Acc acc, const char* help) {
  using T = FieldType<Acc>;
  static_assert(std::is_enum_v<T>, "enum_key stores an enum");
  Key k{sec, name, Kind::string, {}, {}, help};
  k.set = [acc](Config& c, const Value& v) -> std::string {
    const auto& s = std::get<std::string>(v);
    const auto& choices = DeckNames<T>::names;
    const auto it = std::find(choices.begin(), choices.end(), std::string_view(s));
    if (it == choices.end()) {
      std::string list;
      for (const char* ch : choices) list += (list.empty() ? "" : ", ") + toml_quote(ch);
      return "must be one of " + list + " (got " + toml_quote(s) + ")";
    }
    acc(c) = static_cast<T>(it - choices.begin());
    return {};
  };
  k.get = [acc](const Config& c) -> Value {
    return std::string(DeckNames<T>::names.at(static_cast<size_t>(acc(c))));
  };
  return k;
}

// A bool key of [model] whose default is the family's (true for gpt2, false
// for llama): an int in the struct where -1 means "family default" (shown
// resolved). model.tied_embeddings and model.qkv_bias.
Key family_bool_key(const char* name, int ModelConfig::*field, const char* help) {
  Key k{"model", name, Kind::boolean, {}, {}, help};
  k.set = [field](Config& c, const Value& v) -> std::string {
    c.model.*field = std::get<bool>(v) ? 1 : 0;
    return {};
  };
  k.get = [field](const Config& c) -> Value {
    const int t = c.model.*field;
    return t == -1 ? c.model.family == Family::gpt2 : t == 1;
  };
  return k;
}

// [model]: the architecture, its sizes and the mixture of experts.
void add_model_keys(std::vector<Key>& s) {
  s.push_back(enum_key(PENTAD_FIELD(model, family), "architecture"));
  s.push_back(int_key(PENTAD_FIELD(model, n_layers), 1, kNoMax, "transformer blocks (L)"));
  s.push_back(int_key(PENTAD_FIELD(model, d_model), 1, kNoMax, "embedding width (C)"));
  s.push_back(int_key(PENTAD_FIELD(model, n_heads), 1, kNoMax, "attention heads (H)"));
  s.push_back(int_key(PENTAD_FIELD(model, n_kv_heads), 0, kNoMax,
                      "key/value heads (Hkv); 0 = n_heads"));
  s.push_back(int_key("model", "head_dim", [](auto& c) -> auto& { return c.model.d_head; }, 0, kNoMax,
                      "width of one attention head (D); 0 = d_model / n_heads (llama: any even D; q and the "
                      "attention output are H*D wide, k and v Hkv*D)"));
  s.push_back(int_key(PENTAD_FIELD(model, d_ff), 0, kNoMax,
                      "MLP width (F); 0 = 4*C (gpt2) or round_up(8*C/3, 32) (llama)"));
  s.push_back(int_key(PENTAD_FIELD(model, vocab_size), 2, kNoMax,
                      "vocabulary size (V); token files are uint16 up to 65536, uint32 above"));
  s.push_back(int_key(PENTAD_FIELD(model, pad_vocab_to), 1, 1 << 16,
                      "the embedding and head hold round_up(V, pad_vocab_to * tp) rows inside a run "
                      "(zero, untrained; checkpoints and exports hold V)"));
  s.push_back(int_key(PENTAD_FIELD(model, seq_len), 1, kNoMax, "global sequence length (T)"));
  s.push_back(float_key(PENTAD_FIELD(model, norm_eps), gt(0), none(), "LayerNorm/RMSNorm epsilon"));
  s.push_back(float_key(PENTAD_FIELD(model, rope_theta), gt(0), none(), "RoPE base (llama)"));
  s.push_back(enum_key(PENTAD_FIELD(model, rope_scaling),
                       "RoPE frequencies as they are, llama3: Llama 3.1's scaling, yarn: YaRN's (the keys "
                       "below), linear: every pair rope_scaling_factor times slower, or longrope: each pair "
                       "by its own factor (rope_short_factor, rope_long_factor)"));
  s.push_back(float_key(PENTAD_FIELD(model, rope_scaling_factor), ge(1), none(),
                        "llama3, yarn: long wavelengths turn this many times slower; linear: every pair; "
                        "longrope: the context extension (its attention factor)"));
  s.push_back(float_key(PENTAD_FIELD(model, rope_low_freq_factor), gt(0), none(),
                        "llama3: wavelengths above rope_original_context / this are slowed"));
  s.push_back(float_key(PENTAD_FIELD(model, rope_high_freq_factor), gt(0), none(),
                        "llama3: wavelengths below rope_original_context / this are kept"));
  s.push_back(int_key(PENTAD_FIELD(model, rope_original_context), 1, kNoMax,
                      "llama3, yarn, longrope: the context the model was first trained on"));
  s.push_back(float_key(PENTAD_FIELD(model, rope_beta_fast), gt(0), none(),
                        "yarn: pairs turning more than this many times over rope_original_context are kept"));
  s.push_back(float_key(PENTAD_FIELD(model, rope_beta_slow), gt(0), none(),
                        "yarn: pairs turning fewer than this many times are slowed rope_scaling_factor times"));
  s.push_back(float_key(PENTAD_FIELD(model, rope_attention_factor), ge(0), none(),
                        "yarn, longrope: rotated q and k multiplied by this; 0 = yarn: 0.1 ln(rope_scaling_factor)"
                        " + 1, longrope: sqrt(1 + ln(rope_scaling_factor) / ln(rope_original_context))"));
  s.push_back(bool_key(PENTAD_FIELD(model, rope_truncate),
                       "yarn: the ends of the ramp between kept and slowed pairs rounded outwards to whole pairs"));
  s.push_back(positive_list_key(PENTAD_FIELD(model, rope_short_factor),
                                "longrope: head_dim / 2 numbers, pair i turns this many times slower in a "
                                "context of at most rope_original_context positions"));
  s.push_back(positive_list_key(PENTAD_FIELD(model, rope_long_factor),
                                "longrope: the same in a longer context"));
  s.push_back(int_key(PENTAD_FIELD(model, rotary_dim), 0, kNoMax,
                      "channels of each head RoPE turns, the first ones (even, <= head_dim; llama); "
                      "0 = head_dim"));
  s.push_back(family_bool_key("tied_embeddings", &ModelConfig::tied_embeddings,
                              "share the token embedding with the output head (default: gpt2 true, llama false)"));
  s.push_back(family_bool_key("qkv_bias", &ModelConfig::qkv_bias,
                              "biases on the query, key and value projections (gpt2: always; llama: false, "
                              "true for Qwen2's attention)"));
  s.push_back(bool_key(PENTAD_FIELD(model, qk_norm),
                       "RMSNorm over each head of q and k before RoPE, one (head_dim) weight each (Qwen3; llama)"));
  s.push_back(enum_key(PENTAD_FIELD(model, mlp_act),
                       "the gated MLP's activation: act(gate) * up (llama; gelu_tanh: Gemma's GeGLU)"));
  s.push_back(bool_key(PENTAD_FIELD(model, norm_plus_one),
                       "every RMSNorm scales by 1 + w, its weight stored as the difference from 1 (Gemma; llama)"));
  s.push_back(bool_key(PENTAD_FIELD(model, embed_scale),
                       "token embeddings multiplied by sqrt(d_model) on the way in (Gemma; llama)"));
  s.push_back(float_key(PENTAD_FIELD(model, init_std), gt(0), none(),
                        "std of the normal weight init"));
  s.push_back(int_key(PENTAD_FIELD(model, n_experts), 0, kNoMax,
                      "experts per MoE block (E); 0 = dense model"));
  s.push_back(int_key(PENTAD_FIELD(model, top_k), 1, kNoMax, "experts each token is routed to"));
  {
    Key k{"model", "renormalize_top_k", Kind::boolean, {}, {},
          "the chosen experts' weights renormalised to sum 1, else their router probabilities "
          "(default: top_k > 1)"};
    k.set = [](Config& c, const Value& v) -> std::string {
      c.model.renormalize_top_k = std::get<bool>(v) ? 1 : 0;
      return {};
    };
    k.get = [](const Config& c) -> Value { return c.model.renormalizes_top_k(); };
    s.push_back(std::move(k));
  }
  s.push_back(int_key(PENTAD_FIELD(model, moe_every), 1, kNoMax,
                      "every k-th block is an MoE block (blocks k-1, 2k-1, ...)"));
  s.push_back(int_key(PENTAD_FIELD(model, shared_expert_ffn), 0, kNoMax,
                      "hidden width of a shared expert every token goes through in each MoE block; 0 = none"));
  s.push_back(bool_key(PENTAD_FIELD(model, shared_expert_gate),
                       "the shared expert's output scaled by sigmoid(x . w), a (1, d_model) weight (Qwen2-MoE)"));
  s.push_back(float_key(PENTAD_FIELD(model, capacity_factor), gt(0), none(),
                        "expert capacity per sequence = ceil(cf*T*top_k/E) (for no capacity: dropless = true)"));
  s.push_back(bool_key(PENTAD_FIELD(model, dropless), "no expert capacity: every routed choice is served"));
  s.push_back(float_key(PENTAD_FIELD(model, aux_loss_coef), ge(0), none(),
                        "load-balancing loss coefficient (Switch/GShard)"));
  s.push_back(float_key(PENTAD_FIELD(model, z_loss_coef), ge(0), none(),
                        "router z-loss coefficient"));
}

// [parallel]: the layout and its communication.
void add_parallel_keys(std::vector<Key>& s) {
  s.push_back(int_key(PENTAD_FIELD(parallel, dp), 1, kNoMax, "data-parallel ranks"));
  s.push_back(int_key(PENTAD_FIELD(parallel, tp), 1, kNoMax, "tensor-parallel ranks"));
  s.push_back(int_key(PENTAD_FIELD(parallel, pp), 1, kNoMax, "pipeline stages"));
  s.push_back(int_key(PENTAD_FIELD(parallel, cp), 1, kNoMax, "context-parallel ranks"));
  s.push_back(int_key(PENTAD_FIELD(parallel, ep), 1, kNoMax,
                      "expert-parallel ranks (divides dp)"));
  s.push_back(int_key(PENTAD_FIELD(parallel, zero), 0, 3, "ZeRO stage"));
  s.push_back(bool_key(PENTAD_FIELD(parallel, sp), "sequence parallelism (needs tp > 1)"));
  s.push_back(bool_key(PENTAD_FIELD(parallel, expert_tp),
                       "MoE: split each expert's d_ff over tp (needs tp > 1); false: experts replicated over tp"));
  s.push_back(float_key(PENTAD_FIELD(parallel, bucket_mb), gt(0), none(),
                        "gradient bucket size in MiB (reduction overlaps backward)"));
  s.push_back(enum_key(PENTAD_FIELD(parallel, schedule), "pipeline schedule"));
  s.push_back(int_key(PENTAD_FIELD(parallel, virtual_stages), 1, kNoMax,
                      "model chunks per pipeline rank (interleaved: >= 2; zbv: 2)"));
  s.push_back(string_key(PENTAD_FIELD(parallel, stage_layers),
                         "blocks per pipeline chunk (pp x virtual_stages counts), e.g. \"3,2,2,3\"; \"\" = balanced"));
  s.push_back(enum_key(PENTAD_FIELD(parallel, pp_p2p),
                       "pipeline messages: eager (receives posted early) or grouped (NCCL's); auto = eager where the comm can"));
  s.push_back(enum_key(PENTAD_FIELD(parallel, cp_layout), "how sequences are cut over the cp group"));
  s.push_back(enum_key(PENTAD_FIELD(parallel, comm),
                       "collectives library; auto = nccl with backend cuda, mpi with cpu"));
  s.push_back(float_key(PENTAD_FIELD(parallel, comm_timeout_s), gt(0), none(),
                        "seconds before a stuck collective ends the job (nccl and mpi)"));
  s.push_back(bool_key(PENTAD_FIELD(parallel, tp_across_nodes),
                       "allow a tp group to span nodes (refused by default: its all-reduces run every layer)"));
}

// [train]: the optimizer, schedule, precision and sampling.
void add_train_keys(std::vector<Key>& s) {
  s.push_back(int_key(PENTAD_FIELD(train, steps), 0, kNoMax, "optimizer steps"));
  s.push_back(int_key(PENTAD_FIELD(train, micro_batch), 1, kNoMax,
                      "sequences per micro-batch per data-parallel rank"));
  s.push_back(int_key(PENTAD_FIELD(train, grad_accum), 1, kNoMax, "micro-batches per step"));
  s.push_back(float_key(PENTAD_FIELD(train, lr), gt(0), none(), "peak learning rate"));
  s.push_back(float_key(PENTAD_FIELD(train, min_lr), ge(0), none(),
                        "final learning rate of the decay (<= lr)"));
  s.push_back(int_key(PENTAD_FIELD(train, warmup_steps), 0, kNoMax, "linear warmup steps"));
  s.push_back(enum_key(PENTAD_FIELD(train, lr_schedule),
                       "after warmup: cosine or linear to min_lr, wsd (constant, then linear), constant"));
  s.push_back(int_key(PENTAD_FIELD(train, decay_steps), 0, kNoMax,
                      "wsd: the last steps, where lr falls linearly to min_lr"));
  s.push_back(float_key(PENTAD_FIELD(train, weight_decay), ge(0), none(), "AdamW weight decay"));
  s.push_back(float_key(PENTAD_FIELD(train, beta1), ge(0), lt(1), "AdamW beta1"));
  s.push_back(float_key(PENTAD_FIELD(train, beta2), ge(0), lt(1), "AdamW beta2"));
  s.push_back(float_key(PENTAD_FIELD(train, eps), gt(0), none(), "AdamW epsilon"));
  s.push_back(float_key(PENTAD_FIELD(train, grad_clip), ge(0), none(),
                        "global gradient-norm clip; 0 = off"));
  s.push_back(int_key(PENTAD_FIELD(train, seed), 0, kNoMax, "random seed"));
  s.push_back(enum_key(PENTAD_FIELD(train, recompute), "activation recomputation"));
  s.push_back(int_key(PENTAD_FIELD(train, eval_every), 0, kNoMax,
                      "steps between evaluations; 0 = only at the end"));
  s.push_back(int_key(PENTAD_FIELD(train, eval_batches), 1, kNoMax, "batches per evaluation"));
  s.push_back(int_key(PENTAD_FIELD(train, choice_examples), 0, kNoMax,
                      "data.choice_eval: examples scored per evaluation (its first N); 0 = all"));
  s.push_back(enum_key(PENTAD_FIELD(train, dtype), "compute dtype"));
  s.push_back(bool_key(PENTAD_FIELD(train, bf16_weight_copies),
                       "bf16: one bf16 copy of the weights per update, not one per GEMM"));
  s.push_back(bool_key(PENTAD_FIELD(train, bf16_activations),
                       "bf16: the activations only GEMMs read stored in bf16"));
  s.push_back(int_key(PENTAD_FIELD(train, threads), 0, kNoMax,
                      "OpenMP/BLAS threads per rank; 0 = OMP_NUM_THREADS, else the node's cores / its ranks"));
  s.push_back(int_key(PENTAD_FIELD(train, sample_every), 0, kNoMax,
                      "steps between samples printed by rank 0 (seed train.seed); 0 = none"));
  s.push_back(int_key(PENTAD_FIELD(train, sample_tokens), 1, kNoMax, "tokens per sample"));
}

// [data], [checkpoint] and [log].
void add_io_keys(std::vector<Key>& s) {
  s.push_back(string_key(PENTAD_FIELD(data, train),
                         "training token files (pentad prep, llm.c shards): paths or globs, comma-separated; "
                         "\"\" only with train.steps = 0"));
  s.push_back(string_key(PENTAD_FIELD(data, val),
                         "validation token files, the same form; \"\" = none; several entries: val_loss_<k> each"));
  s.push_back(string_key(PENTAD_FIELD(data, choice_eval),
                         "multiple-choice eval file, llm.c's format (HellaSwag), scored at each evaluation; \"\" = none"));
  s.push_back(string_key(PENTAD_FIELD(data, weights),
                         "blend: one weight per data.train entry; \"\" = all files one body of text"));
  s.push_back(enum_key(PENTAD_FIELD(data, order),
                       "random: starts drawn with replacement; epoch: each window once per epoch"));
  s.push_back(string_key(PENTAD_FIELD(data, tokenizer),
                         "tokenizer of the data (a tiktoken rank file or a tokenizer.json), to decode train.sample_every samples; \"\" = none"));
  s.push_back(string_key(PENTAD_FIELD(data, tokenizer_pattern),
                         "pattern of data.tokenizer (gpt2, cl100k, llama3, qwen2); \"\" = from its rank count"));

  s.push_back(string_key(PENTAD_FIELD(checkpoint, dir), "checkpoint directory"));
  s.push_back(int_key(PENTAD_FIELD(checkpoint, every), 0, kNoMax,
                      "steps between checkpoints; 0 = none during training"));
  s.push_back(bool_key(PENTAD_FIELD(checkpoint, save_final), "write <dir>/final.h5 at the end"));
  s.push_back(int_key(PENTAD_FIELD(checkpoint, keep), 0, kNoMax,
                      "newest step checkpoints kept; 0 = keep all"));
  // At most 4 GiB: a gathered tensor travels as one message of under 2^31 floats.
  s.push_back(int_key(PENTAD_FIELD(checkpoint, gather_below_mb), 0, 4096,
                      "a checkpoint under this many MiB is written by rank 0 alone; larger, by every rank (MPI-IO); 0 = always every rank"));
  s.push_back(string_key(PENTAD_FIELD(checkpoint, resume),
                         "\"\" = fresh, \"latest\" = newest in dir (fresh if none), or a file"));
  s.push_back(string_key(PENTAD_FIELD(checkpoint, init_from),
                         "weights to start from: Hugging Face dir/.safetensors, llm.c .bin, or pentad checkpoint"));

  s.push_back(int_key(PENTAD_FIELD(log, every), 1, kNoMax, "steps between log lines"));
  s.push_back(string_key(PENTAD_FIELD(log, metrics), "JSON-lines metrics file; \"\" = none"));
  s.push_back(string_key(PENTAD_FIELD(log, dump), "debug HDF5 dump; \"\" = none"));
  s.push_back(float_key(PENTAD_FIELD(log, peak_tflops), ge(0), none(),
                        "peak TFLOP/s for MFU; 0 = measure sgemm at start"));
  s.push_back(string_key(PENTAD_FIELD(log, trace),
                         "Chrome-trace JSON timeline (Perfetto); \"\" = none"));
}

const std::vector<Key>& schema() {
  static const std::vector<Key> keys = [] {
    std::vector<Key> s;
    s.push_back(enum_key("", "backend", [](auto& c) -> auto& { return c.backend; }, "compute backend"));
    add_model_keys(s);
    add_parallel_keys(s);
    add_train_keys(s);
    add_io_keys(s);
    return s;
  }();
  return keys;
}

#undef PENTAD_FIELD

const Key* find_key(std::string_view full) {
  for (const auto& k : schema())
    if (k.full() == full) return &k;
  return nullptr;
}

std::vector<std::string> section_names() {
  std::vector<std::string> out;
  for (const auto& k : schema())
    if (!k.section.empty() && std::find(out.begin(), out.end(), k.section) == out.end())
      out.push_back(k.section);
  return out;
}

bool is_section(std::string_view name) {
  const auto secs = section_names();
  return std::find(secs.begin(), secs.end(), name) != secs.end();
}

// Closest candidate to `wrong`, or "" when nothing is close. A key whose
// last part names a key of another section suggests that key.
std::string closest(std::string_view wrong, const std::vector<std::string>& candidates) {
  const auto dot = wrong.rfind('.');
  const std::string_view leaf = dot == std::string_view::npos ? wrong : wrong.substr(dot + 1);
  for (const auto& c : candidates) {
    const auto cdot = c.rfind('.');
    if (cdot != std::string::npos && std::string_view(c).substr(cdot + 1) == leaf) return c;
  }
  std::string best;
  size_t best_d = std::max<size_t>(2, wrong.size() / 4) + 1;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(wrong, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view wrong, const std::vector<std::string>& candidates,
                         const char* pre = "", const char* post = "") {
  const std::string c = closest(wrong, candidates);
  if (c.empty()) return "";
  return std::string(" (did you mean '") + pre + c + post + "'?)";
}

std::string unknown_key(std::string_view full) {
  std::vector<std::string> all;
  for (const auto& k : schema()) all.push_back(k.full());
  return "unknown key '" + std::string(full) + "'" + did_you_mean(full, all);
}

// ---------------------------------------------------------------------------
// Deck and overrides

// A deck value as a Value of the key's kind, or "" + the problem.
std::pair<Value, std::string> from_node(const Key& k, const toml::node& n) {
  const std::string wrong = std::string("expected ") + kind_name(k.kind) + ", got " +
                            a_type_name(n.type());
  switch (k.kind) {
    case Kind::integer:
      if (auto* v = n.as_integer()) return {v->get(), ""};
      break;
    case Kind::floating:
      if (auto* v = n.as_floating_point()) return {v->get(), ""};
      if (auto* v = n.as_integer()) return {static_cast<double>(v->get()), ""};
      break;
    case Kind::boolean:
      if (auto* v = n.as_boolean()) return {v->get(), ""};
      break;
    case Kind::string:
      if (auto* v = n.as_string()) return {v->get(), ""};
      break;
    case Kind::float_list:
      if (auto* a = n.as_array()) {
        std::vector<double> xs;
        for (const toml::node& e : *a) {
          if (auto* f = e.as_floating_point())
            xs.push_back(f->get());
          else if (auto* i = e.as_integer())
            xs.push_back(static_cast<double>(i->get()));
          else
            return {Value{}, "entry " + std::to_string(xs.size()) + " is " + a_type_name(e.type()) + ", not a number"};
        }
        return {xs, ""};
      }
      break;
  }
  return {Value{}, wrong};
}

// An override's text as a Value of the key's kind, or "" + the problem.
std::pair<Value, std::string> from_text(const Key& k, const std::string& text) {
  switch (k.kind) {
    case Kind::integer: {
      errno = 0;
      char* end = nullptr;
      const long long x = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0') return {Value{}, "expected an integer"};
      if (errno == ERANGE) return {Value{}, "integer out of range"};
      return {static_cast<int64_t>(x), ""};
    }
    case Kind::floating: {
      char* end = nullptr;
      const double x = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0') return {Value{}, "expected a number"};
      return {x, ""};
    }
    case Kind::boolean:
      if (text == "true") return {true, ""};
      if (text == "false") return {false, ""};
      return {Value{}, "expected true or false"};
    case Kind::string:
      if (text.size() >= 2 && text.front() == '"' && text.back() == '"')
        return {text.substr(1, text.size() - 2), ""};
      return {text, ""};
    case Kind::float_list: {  // a TOML array, e.g. [1.0, 1.5]
      toml::table t;
      try {
        t = toml::parse("x = " + text);
      } catch (const toml::parse_error&) {
        return {Value{}, "expected an array of numbers, e.g. [1.0, 1.5]"};
      }
      return from_node(k, *t.get("x"));
    }
  }
  return {Value{}, "unsupported kind"};
}

std::string where(const std::string& path, uint32_t line) {
  return path + ":" + std::to_string(line) + ": ";
}

// One deck entry: a key (or a whole unknown/misplaced section) at a line.
struct Entry {
  std::string full;        // "model.n_layers", "backend", or a section name
  const toml::node* node;
  uint32_t line;
};

void apply_deck(Config& cfg, const toml::table& root, const std::string& path) {
  std::vector<Entry> entries;
  for (auto&& [k, node] : root) {
    const std::string name(k.str());
    const auto* sub = node.as_table();
    if (is_section(name) && sub) {
      for (auto&& [k2, node2] : *sub)
        entries.push_back({name + "." + std::string(k2.str()), &node2, k2.source().begin.line});
    } else {
      entries.push_back({name, &node, k.source().begin.line});
    }
  }
  // toml++ tables are ordered by key; report problems in file order.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.line < b.line; });

  for (const auto& e : entries) {
    const std::string at = where(path, e.line);
    if (const Key* key = find_key(e.full)) {
      auto [value, problem] = from_node(*key, *e.node);
      if (problem.empty()) problem = key->set(cfg, value);
      if (!problem.empty()) throw InputError(at + e.full + ": " + problem);
    } else if (is_section(e.full)) {
      throw InputError(at + e.full + ": expected a table [" + e.full + "], got " +
                       a_type_name(e.node->type()));
    } else if (e.node->is_table() && e.full.find('.') == std::string::npos) {
      throw InputError(at + "unknown section '[" + e.full + "]'" +
                       did_you_mean(e.full, section_names(), "[", "]"));
    } else {
      throw InputError(at + unknown_key(e.full));
    }
  }
}

void apply_override(Config& cfg, const std::string& arg) {
  const std::string at = "--set " + arg + ": ";
  const auto eq = arg.find('=');
  if (eq == std::string::npos)
    throw InputError(at + "expected section.key=value (e.g. --set model.n_layers=4)");
  const std::string full = arg.substr(0, eq);
  const Key* key = find_key(full);
  if (!key) throw InputError(at + unknown_key(full));
  auto [value, problem] = from_text(*key, arg.substr(eq + 1));
  if (problem.empty()) problem = key->set(cfg, value);
  if (!problem.empty()) throw InputError(at + problem);
}

// ---------------------------------------------------------------------------
// Defaults and checks that involve several keys

[[noreturn]] void fail(const Config& cfg, const std::string& msg) {
  throw InputError(cfg.source + ": " + msg);
}

std::string kv(const char* full, int64_t v) { return std::string(full) + "=" + std::to_string(v); }

void fill_defaults(Config& cfg) {
  ModelConfig& m = cfg.model;
  if (m.n_kv_heads == 0) m.n_kv_heads = m.n_heads;
  if (m.d_head == 0) {
    if (m.d_model % m.n_heads != 0)
      fail(cfg, kv("model.d_model", m.d_model) + " is not divisible by " + kv("model.n_heads", m.n_heads));
    m.d_head = m.d_model / m.n_heads;
  }
  if (m.tied_embeddings == -1) m.tied_embeddings = m.family == Family::gpt2 ? 1 : 0;
  if (m.qkv_bias == -1) m.qkv_bias = m.family == Family::gpt2 ? 1 : 0;
  if (m.renormalize_top_k == -1) m.renormalize_top_k = m.top_k > 1 ? 1 : 0;
  if (m.d_ff == 0) {
    const int64_t c = m.d_model;
    const int64_t f = m.family == Family::gpt2 ? 4 * c : (8 * c / 3 + 31) / 32 * 32;
    if (f > INT_MAX)
      fail(cfg, "model.d_ff: the default for " + kv("model.d_model", c) +
                    " is too large; set model.d_ff");
    m.d_ff = static_cast<int>(f);
  }
}

// The model's own consistency: heads, grouped-query attention, RoPE.
void validate_model(const Config& cfg) {
  const ModelConfig& m = cfg.model;
  if (m.n_heads % m.n_kv_heads != 0)
    fail(cfg, kv("model.n_heads", m.n_heads) + " is not divisible by " +
                  kv("model.n_kv_heads", m.n_kv_heads));
  if (m.family == Family::gpt2 && m.n_kv_heads != m.n_heads)
    fail(cfg, kv("model.n_kv_heads", m.n_kv_heads) + ": gpt2 needs n_kv_heads = " +
                  kv("model.n_heads", m.n_heads) + " (grouped-query attention is llama only)");
  if (m.family == Family::gpt2 && int64_t(m.d_head) * m.n_heads != m.d_model)
    fail(cfg, kv("model.head_dim", m.d_head) + ": gpt2 needs head_dim = " + kv("model.d_model", m.d_model) +
                  " / " + kv("model.n_heads", m.n_heads) + " (a head dimension of its own is llama only)");
  if (m.family == Family::gpt2 && m.qk_norm)
    fail(cfg, "model.qk_norm = true: gpt2 has no q/k norms (the key is for llama: Qwen3's attention)");
  if (m.family == Family::gpt2 && (m.mlp_act != GateAct::silu || m.norm_plus_one || m.embed_scale))
    fail(cfg, std::string(m.mlp_act != GateAct::silu ? "model.mlp_act = \"gelu_tanh\""
                          : m.norm_plus_one         ? "model.norm_plus_one = true"
                                                    : "model.embed_scale = true") +
                  ": gpt2 has LayerNorm and an ungated GELU MLP (the key is for llama: Gemma's)");
  if (m.family == Family::gpt2 && m.qkv_bias == 0)
    fail(cfg, "model.qkv_bias = false: gpt2's attention always has its biases (the key is for llama)");
  if (m.rope_scaling != RopeScaling::none && m.family != Family::llama)
    fail(cfg, "model.rope_scaling = \"" + std::string(deck_name(m.rope_scaling)) +
                  "\" scales RoPE, which model.family = \"gpt2\" does not use");
  if (m.rope_scaling == RopeScaling::llama3 && !(m.rope_high_freq_factor > m.rope_low_freq_factor))
    fail(cfg, "model.rope_high_freq_factor=" + fmt_number(m.rope_high_freq_factor) +
                  " must be > model.rope_low_freq_factor=" + fmt_number(m.rope_low_freq_factor) +
                  " (rope_scaling = \"llama3\")");
  if (m.rope_scaling == RopeScaling::yarn && !(m.rope_beta_fast > m.rope_beta_slow))
    fail(cfg, "model.rope_beta_fast=" + fmt_number(m.rope_beta_fast) + " must be > model.rope_beta_slow=" +
                  fmt_number(m.rope_beta_slow) + " (rope_scaling = \"yarn\")");
  if (m.rotary_dim != 0 && m.family != Family::llama)
    fail(cfg, kv("model.rotary_dim", m.rotary_dim) + ": model.family = \"gpt2\" has no RoPE");
  if (m.rotary_dim != 0 && (m.rotary_dim % 2 != 0 || m.rotary_dim > m.head_dim()))
    fail(cfg, kv("model.rotary_dim", m.rotary_dim) + " must be even and at most " +
                  kv("model.head_dim", m.head_dim()) + " (RoPE turns pairs of a head's first channels)");
  if (m.rope_scaling == RopeScaling::longrope) {
    const size_t pairs = size_t(m.rotary_channels() / 2);
    for (const auto& [key, list] : {std::pair{"rope_short_factor", &m.rope_short_factor},
                                    std::pair{"rope_long_factor", &m.rope_long_factor}})
      if (list->size() != pairs)
        fail(cfg, "model." + std::string(key) + " has " + std::to_string(list->size()) + " number" +
                      (list->size() == 1 ? "" : "s") +
                      " but rope_scaling = \"longrope\" needs one per pair of a head's channels RoPE turns: " +
                      (m.rotary_dim > 0 ? kv("model.rotary_dim", m.rotary_dim) : kv("model.head_dim", m.head_dim())) +
                      " / 2 = " + std::to_string(pairs));
    if (pairs > size_t(kRopeMaxPairs))
      fail(cfg, kv("model.head_dim", m.head_dim()) + ": rope_scaling = \"longrope\" turns at most " +
                    std::to_string(2 * kRopeMaxPairs) + " channels of a head (model.rotary_dim)");
  } else if (!m.rope_short_factor.empty() || !m.rope_long_factor.empty()) {
    fail(cfg, std::string("model.") + (m.rope_short_factor.empty() ? "rope_long_factor" : "rope_short_factor") +
                  " is given but model.rope_scaling = \"" + deck_name(m.rope_scaling) +
                  "\" (the per-pair factors are longrope's)");
  }
  if (m.family == Family::llama && m.head_dim() % 2 != 0)
    fail(cfg, "model.family = \"llama\" needs an even head dimension for RoPE, but " +
                  (int64_t(m.d_head) * m.n_heads == m.d_model
                       ? kv("model.d_model", m.d_model) + " / " + kv("model.n_heads", m.n_heads) + " = " +
                             std::to_string(m.head_dim())
                       : kv("model.head_dim", m.head_dim())));
}

// The parallel layout against the model and the job's size: the grid, tp's
// splits, experts, the pipeline's partition and schedule, sp and cp.
void validate_layout(const Config& cfg, int world_size) {
  const ModelConfig& m = cfg.model;
  const ParallelConfig& p = cfg.parallel;
  const TrainConfig& t = cfg.train;
  if (p.dp % p.ep != 0)
    fail(cfg, kv("parallel.dp", p.dp) + " is not divisible by " + kv("parallel.ep", p.ep));
  const int64_t ranks = int64_t{p.dp} * p.tp * p.pp * p.cp;
  if (ranks != world_size)
    fail(cfg, "parallel: dp*tp*pp*cp = " + std::to_string(ranks) + " but the job has " +
                  std::to_string(world_size) + " ranks (" + kv("parallel.dp", p.dp) + " " +
                  kv("parallel.tp", p.tp) + " " + kv("parallel.pp", p.pp) + " " +
                  kv("parallel.cp", p.cp) + ")");
  if (m.n_heads % p.tp != 0)
    fail(cfg, kv("model.n_heads", m.n_heads) + " is not divisible by " + kv("parallel.tp", p.tp));
  // Key/value heads are split over tp, or, with fewer heads than tp ranks,
  // each held whole by tp/n_kv_heads ranks (copied heads: KvCopies, kv_part).
  if (m.n_kv_heads % p.tp != 0 && p.tp % m.n_kv_heads != 0)
    fail(cfg, kv("model.n_kv_heads", m.n_kv_heads) + " and " + kv("parallel.tp", p.tp) +
                  " do not divide: key/value heads are split over tp (tp divides n_kv_heads) or "
                  "replicated over it (n_kv_heads divides tp)");
  if (m.d_ff % p.tp != 0)
    fail(cfg, kv("model.d_ff", m.d_ff) + " is not divisible by " + kv("parallel.tp", p.tp));
  if (int64_t(m.vocab_size) + int64_t(m.pad_vocab_to) * p.tp > INT32_MAX)
    fail(cfg, kv("model.vocab_size", m.vocab_size) + " padded to a multiple of " +
                  kv("model.pad_vocab_to", m.pad_vocab_to) + " * " + kv("parallel.tp", p.tp) +
                  " exceeds 2147483647 rows");
  // Mixture of experts and expert parallelism.
  if (p.ep > 1 && m.n_experts == 0)
    fail(cfg, kv("parallel.ep", p.ep) + " needs a mixture-of-experts model (model.n_experts > 0)");
  if (m.n_experts > 0) {
    if (m.top_k > m.n_experts)
      fail(cfg, kv("model.top_k", m.top_k) + " is larger than " + kv("model.n_experts", m.n_experts));
    if (m.n_experts % p.ep != 0)
      fail(cfg, kv("model.n_experts", m.n_experts) + " is not divisible by " + kv("parallel.ep", p.ep));
  }
  if (m.shared_expert_ffn > 0 && m.n_experts == 0)
    fail(cfg, kv("model.shared_expert_ffn", m.shared_expert_ffn) +
                  " needs a mixture-of-experts model (model.n_experts > 0)");
  if (m.shared_expert_gate && m.shared_expert_ffn == 0)
    fail(cfg, "model.shared_expert_gate = true needs a shared expert (model.shared_expert_ffn > 0)");
  if (p.expert_tp && m.shared_expert_ffn % p.tp != 0)
    fail(cfg, kv("model.shared_expert_ffn", m.shared_expert_ffn) + " is not divisible by " +
                  kv("parallel.tp", p.tp) + " (parallel.expert_tp splits the shared expert too)");
  // Pipeline: the partition of the blocks and the schedule's constraints.
  std::vector<int> chunk_blocks;
  try {
    chunk_blocks = partition_blocks(m.n_layers, p.pp * p.virtual_stages, p.stage_layers);
  } catch (const std::invalid_argument& e) {
    fail(cfg, e.what());
  }
  if (p.pp > 1 || p.virtual_stages > 1) {
    const std::string problem =
        schedule_problem(p.schedule, p.pp, p.virtual_stages, t.grad_accum);
    if (!problem.empty()) fail(cfg, problem);
    if (const std::string split = stage_split_problem(p.schedule, chunk_blocks); !split.empty())
      fail(cfg, split + " (parallel.stage_layers=\"" + p.stage_layers + "\")");
  }
  if (p.sp && p.tp <= 1)
    fail(cfg, "parallel.sp = true needs parallel.tp > 1 (got " + kv("parallel.tp", p.tp) + ")");
  if (p.expert_tp && (p.tp <= 1 || m.n_experts == 0))
    fail(cfg, "parallel.expert_tp = true needs parallel.tp > 1 and a mixture-of-experts model (got " +
                  kv("parallel.tp", p.tp) + ", " + kv("model.n_experts", m.n_experts) + ")");
  if (p.sp && p.cp == 1 && m.seq_len % p.tp != 0)
    fail(cfg, kv("model.seq_len", m.seq_len) + " is not divisible by " + kv("parallel.tp", p.tp) +
                  " (needed by parallel.sp = true)");
  // Context parallelism: every cp rank holds seq_len/cp tokens of each
  // sequence, cut in 2*cp chunks with the zig-zag layout.
  const bool zigzag = p.cp_layout == CpLayout::zigzag;
  const int cp_chunks = zigzag ? 2 * p.cp : p.cp;
  if (p.cp > 1 && m.seq_len % cp_chunks != 0)
    fail(cfg, kv("model.seq_len", m.seq_len) + " is not divisible by " +
                  (zigzag ? "2*" + kv("parallel.cp", p.cp) +
                                " (parallel.cp_layout = \"zigzag\" cuts each sequence into 2*cp chunks)"
                          : kv("parallel.cp", p.cp) + " (parallel.cp_layout = \"contiguous\")"));
  if (p.sp && p.cp > 1 && (m.seq_len / p.cp) % p.tp != 0)
    fail(cfg, kv("model.seq_len", m.seq_len) + " / " + kv("parallel.cp", p.cp) + " = " +
                  std::to_string(m.seq_len / p.cp) + " tokens per cp rank is not divisible by " +
                  kv("parallel.tp", p.tp) + " (needed by parallel.sp = true)");
}

// The learning-rate schedule and the data keys.
void validate_train_and_data(const Config& cfg) {
  const TrainConfig& t = cfg.train;
  if (t.min_lr > t.lr)
    fail(cfg, "train.min_lr=" + fmt_number(t.min_lr) + " must be <= train.lr=" + fmt_number(t.lr));
  if (t.lr_schedule == LrSchedule::wsd && t.decay_steps < 1)
    fail(cfg, "train.lr_schedule = \"wsd\" needs train.decay_steps >= 1 (the last steps, where lr falls to "
              "train.min_lr)");
  if (t.lr_schedule == LrSchedule::wsd && int64_t(t.warmup_steps) + t.decay_steps > t.steps)
    fail(cfg, kv("train.warmup_steps", t.warmup_steps) + " + " + kv("train.decay_steps", t.decay_steps) +
                  " is more than " + kv("train.steps", t.steps) + " (lr_schedule = \"wsd\")");
  if (t.lr_schedule != LrSchedule::wsd && t.decay_steps != 0)
    fail(cfg, kv("train.decay_steps", t.decay_steps) + " is read by train.lr_schedule = \"wsd\" only (got \"" +
                  deck_name(t.lr_schedule) + "\")");

  // train.steps = 0 runs no step: the loaded weights are evaluated (data.val,
  // data.choice_eval) or saved (save_final), and no training data is read.
  if (cfg.data.train.empty() && t.steps > 0)
    fail(cfg, "data.train: required: a token file made by `pentad prep`");
  const auto check_list = [&cfg](const char* key, const std::string& v) {
    const size_t n_commas = size_t(std::count(v.begin(), v.end(), ','));
    if (!v.empty() && list_entries(v).size() != n_commas + 1)
      fail(cfg, std::string(key) + "=\"" + v + "\": an empty entry (expected paths or glob patterns separated by commas)");
  };
  check_list("data.train", cfg.data.train);
  check_list("data.val", cfg.data.val);
  try {
    data_weights(cfg.data);
  } catch (const InputError& e) {
    fail(cfg, e.what());
  }
}

void validate(const Config& cfg, int world_size) {
  validate_model(cfg);
  if (!cfg.checkpoint.init_from.empty() && !cfg.checkpoint.resume.empty())
    fail(cfg, "checkpoint.init_from = \"" + cfg.checkpoint.init_from + "\" and checkpoint.resume = \"" +
                  cfg.checkpoint.resume + "\" are both set: init_from starts a new run from weights, resume "
                  "continues one (to resume a fine-tuning run, set checkpoint.init_from = \"\")");
  validate_layout(cfg, world_size);
  validate_train_and_data(cfg);
}

// What the schema accepts but the chosen implementations cannot run. The
// Comm's limits come from its capability table (comm/capability.hpp), so a
// feature that lands there lets its layouts through here. Whether this
// binary has the backend at all is the runtime's question (app/runtime.cpp).
void check_supported(const Config& cfg) {
  const ParallelConfig& p = cfg.parallel;
  const std::string backend = deck_name(cfg.backend);
  if (p.comm == CommLib::nccl && cfg.backend != BackendKind::cuda)
    fail(cfg, "parallel.comm = nccl needs backend = cuda (got backend = " + backend +
                  "); use parallel.comm = mpi or auto with the cpu backend");
  // Stage-to-stage messages need lone point-to-point calls, the cp ring paired
  // ones, expert dispatch an all-to-all; the host-staged MPI comm has every
  // operation.
  const CommImpl impl = comm_impl_of(cfg.backend, p.comm);
  const std::string lacking = std::string(", which ") + comm_impl_name(impl) +
                              " does not have yet; set parallel.comm = mpi";
  const bool lone = comm_supports(impl, CommOp::isend) && comm_supports(impl, CommOp::irecv);
  if (p.pp > 1 && p.pp_p2p == PpP2p::eager && !lone)
    fail(cfg, "parallel.pp_p2p = eager with backend = " + backend + " needs lone sends and receives" + lacking +
                  " or parallel.pp_p2p = grouped");
  if (p.pp > 1 && !lone && !comm_supports(impl, CommOp::group))
    fail(cfg, kv("parallel.pp", p.pp) + " with backend = " + backend +
                  " needs point-to-point messages between stages" + lacking);
  if (!comm_supports(impl, CommOp::isendrecv) && p.cp > 1)
    fail(cfg, kv("parallel.cp", p.cp) + " with backend = " + backend + " needs paired sends and receives" + lacking);
  if (!comm_supports(impl, CommOp::alltoallv) && p.ep > 1)
    fail(cfg, kv("parallel.ep", p.ep) + " with backend = " + backend + " needs an all-to-all" + lacking);
}

// Every key of the schema with its resolved value: top-level keys in the
// root, the others in one table per section.
toml::table config_table(const Config& cfg) {
  toml::table root;
  for (const auto& k : schema()) {
    toml::table* t = &root;
    if (!k.section.empty()) {
      if (!root.contains(k.section)) root.insert(k.section, toml::table{});
      t = root.get_as<toml::table>(k.section);
    }
    std::visit(
        [&](const auto& v) {
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(v)>, std::vector<double>>) {
            toml::array a;
            for (double x : v) a.push_back(x);
            t->insert(k.name, std::move(a));
          } else {
            t->insert(k.name, v);
          }
        },
        k.get(cfg));
  }
  return root;
}

}  // namespace

std::vector<std::string> list_entries(const std::string& value) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= value.size()) {
    const size_t comma = std::min(value.find(',', pos), value.size());
    std::string item = value.substr(pos, comma - pos);
    const size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");
    item = a == std::string::npos ? "" : item.substr(a, b - a + 1);
    if (!item.empty()) out.push_back(item);
    pos = comma + 1;
  }
  return out;
}

std::vector<double> data_weights(const DataConfig& d) {
  const std::vector<std::string> items = list_entries(d.weights);
  std::vector<double> w;
  const std::string key = "data.weights=\"" + d.weights + "\"";
  if (d.weights.find_first_not_of(" \t") == std::string::npos) return w;
  const size_t n_commas = size_t(std::count(d.weights.begin(), d.weights.end(), ','));
  if (items.size() != n_commas + 1) throw InputError(key + ": an empty entry (expected numbers separated by commas)");
  for (const auto& item : items) {
    size_t used = 0;
    double v = NAN;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || !std::isfinite(v) || !(v > 0))
      throw InputError(key + ": '" + item + "' is not a weight (expected finite numbers > 0 separated by commas)");
    w.push_back(v);
  }
  const size_t n_train = list_entries(d.train).size();
  if (w.size() != n_train)
    throw InputError(key + " gives " + std::to_string(w.size()) + " weights for the " + std::to_string(n_train) +
                     " entries of data.train=\"" + d.train + "\" (one weight per comma-separated entry)");
  return w;
}

Config parse_config(const std::string& text, const std::string& path,
                    const std::vector<std::string>& overrides, int world_size) {
  Config cfg;
  cfg.source = path;
  toml::table root;
  try {
    root = toml::parse(std::string_view(text), std::string_view(path));
  } catch (const toml::parse_error& e) {
    throw InputError(where(path, e.source().begin.line) + "TOML syntax error: " +
                     std::string(e.description()));
  }
  apply_deck(cfg, root, path);
  for (const auto& arg : overrides) apply_override(cfg, arg);
  fill_defaults(cfg);
  validate(cfg, world_size);
  check_supported(cfg);
  cfg.resolved_toml = config_to_toml(cfg);
  return cfg;
}

std::string config_to_toml(const Config& cfg) {
  // toml++ tables are ordered by key and carry no comments, so the lines are
  // laid out here: sections in schema order, top-level keys first (as TOML
  // requires), each value formatted from the table with the key's help as a
  // comment.
  const toml::table root = config_table(cfg);
  std::ostringstream buf;
  std::vector<std::string> order = {""};
  for (const auto& s : section_names()) order.push_back(s);

  std::string out = "# pentad resolved deck: every key, defaults filled in.\n";
  for (const auto& sec : order) {
    const toml::table& table = sec.empty() ? root : *root.get_as<toml::table>(sec);
    std::vector<std::pair<std::string, const Key*>> lines;
    size_t width = 0;
    for (const auto& k : schema()) {
      if (k.section != sec) continue;
      lines.emplace_back(k.name + " = " + toml_text(*table.get(k.name), buf), &k);
      width = std::max(width, lines.back().first.size());
    }
    if (!sec.empty()) out += "\n[" + sec + "]\n";
    for (const auto& [line, k] : lines)
      out += line + std::string(width - line.size() + 2, ' ') + "# " + k->help + "\n";
  }
  return out;
}

}  // namespace pentad
