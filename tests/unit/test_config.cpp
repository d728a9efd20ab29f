// Input deck (src/config/config.cpp): defaults, overrides, every error class
// with its exact message (key name, path:line, suggestion), cross-key
// validation, the not-yet-supported gate (Comm capabilities; a backend this
// binary lacks, from app/runtime.cpp), and the resolved-deck round trip.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "config/config.hpp"
#include "core/error.hpp"
#include "runtime.hpp"

using pentad::BackendKind;
using pentad::Config;
using pentad::CpLayout;
using pentad::Family;
using pentad::Recompute;

namespace {

const std::string kPath = "input/tiny.toml";
const std::string kMinimal = "[data]\ntrain = \"x\"\n";

Config parse(const std::string& text, const std::vector<std::string>& overrides = {},
             int world_size = 1) {
  return pentad::parse_config(text, kPath, overrides, world_size);
}

// The InputError message, or a marker that makes the comparison fail.
std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {},
                     int world_size = 1) {
  try {
    pentad::parse_config(text, kPath, overrides, world_size);
  } catch (const pentad::InputError& e) {
    return e.what();
  }
  return "<no error thrown>";
}

// A deck that sets every key this build supports to a non-default value.
const std::string kFullDeck = R"(backend = "cpu"
[model]
family = "llama"
n_layers = 3
d_model = 96
n_heads = 6
n_kv_heads = 2
head_dim = 24
d_ff = 200
vocab_size = 300
seq_len = 32
norm_eps = 1e-6
rope_theta = 500000.0
rope_scaling = "llama3"
rope_scaling_factor = 32.0
rope_low_freq_factor = 2.0
rope_high_freq_factor = 6.0
rope_original_context = 4096
tied_embeddings = true
qk_norm = true
init_std = 0.01
[parallel]
dp = 2
tp = 1
pp = 1
cp = 1
ep = 1
zero = 0
sp = false
[train]
steps = 7
micro_batch = 3
grad_accum = 2
lr = 1e-3
min_lr = 1e-5
warmup_steps = 2
weight_decay = 0.05
beta1 = 0.8
beta2 = 0.99
eps = 1e-7
grad_clip = 0.5
seed = 9223372036854775807
recompute = "selective"
eval_every = 5
eval_batches = 2
dtype = "fp32"
threads = 3
[data]
train = "tok/train \"q\" \\ \u0001.bin"
val = "tok/val.bin"
[checkpoint]
dir = "out/ck"
every = 4
save_final = true
gather_below_mb = 64
[log]
every = 2
metrics = "m.jsonl"
dump = "d.h5"
peak_tflops = 12.5
)";

}  // namespace

// ---------------------------------------------------------------- defaults

TEST(Config, MinimalDeckGivesDefaults) {
  const Config c = parse(kMinimal);
  EXPECT_EQ(c.source, kPath);
  EXPECT_EQ(c.data.train, "x");
  EXPECT_EQ(c.backend, BackendKind::cpu);
  EXPECT_EQ(c.parallel, pentad::ParallelConfig{});
  EXPECT_EQ(c.train, pentad::TrainConfig{});
  EXPECT_EQ(c.checkpoint, pentad::CheckpointConfig{});
  EXPECT_EQ(c.log, pentad::LogConfig{});
  // Model: struct defaults plus the resolved family defaults.
  pentad::ModelConfig m;
  m.n_kv_heads = m.n_heads;
  m.d_head = m.d_model / m.n_heads;
  m.d_ff = 4 * m.d_model;
  m.tied_embeddings = 1;
  m.qkv_bias = 1;
  m.renormalize_top_k = 1;  // top_k 2
  EXPECT_EQ(c.model, m);
  EXPECT_TRUE(c.model.tied());
  EXPECT_EQ(c.model.head_dim(), 16);
  EXPECT_FALSE(c.resolved_toml.empty());
}

TEST(Config, LlamaDefaults) {
  const Config c = parse(kMinimal + "[model]\nfamily = \"llama\"\nd_model = 64\nn_heads = 4\n");
  EXPECT_EQ(c.model.family, Family::llama);
  EXPECT_EQ(c.model.d_ff, 192);  // round_up(8*64/3 = 170, 32)
  EXPECT_EQ(c.model.n_kv_heads, 4);
  EXPECT_EQ(c.model.tied_embeddings, 0);
  EXPECT_EQ(c.model.qkv_bias, 0);
  const Config c2 = parse(kMinimal + "[model]\nfamily = \"llama\"\nd_model = 96\nn_heads = 4\n");
  EXPECT_EQ(c2.model.d_ff, 256);  // round_up(256, 32)
}

TEST(Config, FullDeckSetsEveryKey) {
  const Config c = parse(kFullDeck, {}, 2);
  EXPECT_EQ(c.model.family, Family::llama);
  EXPECT_EQ(c.model.n_layers, 3);
  EXPECT_EQ(c.model.d_model, 96);
  EXPECT_EQ(c.model.n_heads, 6);
  EXPECT_EQ(c.model.n_kv_heads, 2);
  EXPECT_EQ(c.model.head_dim(), 24);
  EXPECT_EQ(c.model.d_ff, 200);
  EXPECT_EQ(c.model.vocab_size, 300);
  EXPECT_EQ(c.model.seq_len, 32);
  EXPECT_EQ(c.model.norm_eps, 1e-6f);
  EXPECT_EQ(c.model.rope_theta, 500000.0f);
  EXPECT_EQ(c.model.rope_scaling, pentad::RopeScaling::llama3);
  EXPECT_EQ(c.model.rope_scaling_factor, 32.0f);
  EXPECT_EQ(c.model.rope_low_freq_factor, 2.0f);
  EXPECT_EQ(c.model.rope_high_freq_factor, 6.0f);
  EXPECT_EQ(c.model.rope_original_context, 4096);
  EXPECT_EQ(c.model.tied_embeddings, 1);
  EXPECT_TRUE(c.model.qk_norm);
  EXPECT_EQ(c.model.init_std, 0.01f);
  EXPECT_EQ(c.parallel.dp, 2);
  EXPECT_EQ(c.train.steps, 7);
  EXPECT_EQ(c.train.micro_batch, 3);
  EXPECT_EQ(c.train.grad_accum, 2);
  EXPECT_EQ(c.train.lr, 1e-3f);
  EXPECT_EQ(c.train.min_lr, 1e-5f);
  EXPECT_EQ(c.train.warmup_steps, 2);
  EXPECT_EQ(c.train.weight_decay, 0.05f);
  EXPECT_EQ(c.train.beta1, 0.8f);
  EXPECT_EQ(c.train.beta2, 0.99f);
  EXPECT_EQ(c.train.eps, 1e-7f);
  EXPECT_EQ(c.train.grad_clip, 0.5f);
  EXPECT_EQ(c.train.seed, 9223372036854775807ull);
  EXPECT_EQ(c.train.recompute, Recompute::selective);
  EXPECT_EQ(c.train.eval_every, 5);
  EXPECT_EQ(c.train.eval_batches, 2);
  EXPECT_EQ(c.train.threads, 3);
  EXPECT_EQ(c.data.train, "tok/train \"q\" \\ \x01.bin");
  EXPECT_EQ(c.data.val, "tok/val.bin");
  EXPECT_EQ(c.checkpoint.dir, "out/ck");
  EXPECT_EQ(c.checkpoint.every, 4);
  EXPECT_TRUE(c.checkpoint.save_final);
  EXPECT_EQ(c.checkpoint.gather_below_mb, 64);
  EXPECT_EQ(c.log.every, 2);
  EXPECT_EQ(c.log.metrics, "m.jsonl");
  EXPECT_EQ(c.log.dump, "d.h5");
  EXPECT_EQ(c.log.peak_tflops, 12.5);
}

TEST(Config, IntegerAcceptedForFloatAndDottedKeysAtTopLevel) {
  const Config c = parse("model.n_layers = 5\ntrain.lr = 1\ntrain.min_lr = 0\n" + kMinimal);
  EXPECT_EQ(c.model.n_layers, 5);
  EXPECT_EQ(c.train.lr, 1.0f);
  EXPECT_EQ(c.train.min_lr, 0.0f);
}

TEST(Config, ExplicitTiedEmbeddingsOverridesFamilyDefault) {
  EXPECT_EQ(parse(kMinimal + "[model]\ntied_embeddings = false\n").model.tied_embeddings, 0);
  EXPECT_EQ(parse(kMinimal + "[model]\nfamily = \"llama\"\ntied_embeddings = true\n")
                .model.tied_embeddings, 1);
}

// model.renormalize_top_k: by default true with top_k > 1 and false with
// top_k = 1 (Switch's raw probability); either may be asked for, and the
// resolved deck says which.
TEST(Config, RenormalizeTopKFollowsTopKUnlessAsked) {
  const std::string moe = kMinimal + "[model]\nn_experts = 4\n";
  EXPECT_TRUE(parse(moe).model.renormalizes_top_k());
  EXPECT_EQ(parse(moe).model.renormalize_top_k, 1);
  EXPECT_FALSE(parse(moe + "top_k = 1\n").model.renormalizes_top_k());
  EXPECT_EQ(parse(moe + "top_k = 1\n").model.renormalize_top_k, 0);
  const Config raw = parse(moe + "renormalize_top_k = false\n");
  EXPECT_FALSE(raw.model.renormalizes_top_k());
  EXPECT_NE(raw.resolved_toml.find("renormalize_top_k = false"), std::string::npos) << raw.resolved_toml;
  EXPECT_TRUE(parse(moe + "top_k = 1\nrenormalize_top_k = true\n").model.renormalizes_top_k());
  EXPECT_NE(parse(moe).resolved_toml.find("renormalize_top_k = true"), std::string::npos);
}

// A shared expert: only in a MoE model; its gate only with it; with expert
// tp its width divides over tp like the experts' d_ff. Both keys round-trip.
TEST(Config, SharedExpertNeedsExpertsAndItsGateNeedsIt) {
  const std::string moe = kMinimal + "[model]\nn_experts = 4\n";
  const Config c = parse(moe + "shared_expert_ffn = 48\nshared_expert_gate = true\n");
  EXPECT_EQ(c.model.shared_expert_ffn, 48);
  EXPECT_TRUE(c.model.shared_expert_gate);
  EXPECT_NE(c.resolved_toml.find("shared_expert_ffn = 48"), std::string::npos) << c.resolved_toml;
  EXPECT_NE(c.resolved_toml.find("shared_expert_gate = true"), std::string::npos) << c.resolved_toml;
  EXPECT_EQ(parse(moe).model.shared_expert_ffn, 0);
  EXPECT_EQ(error_of(kMinimal + "[model]\nshared_expert_ffn = 48\n"),
            "input/tiny.toml: model.shared_expert_ffn=48 needs a mixture-of-experts model (model.n_experts > 0)");
  EXPECT_EQ(error_of(moe + "shared_expert_gate = true\n"),
            "input/tiny.toml: model.shared_expert_gate = true needs a shared expert (model.shared_expert_ffn > 0)");
  EXPECT_EQ(error_of(moe + "shared_expert_ffn = 50\n[parallel]\ntp = 4\nexpert_tp = true\n", {}, 4),
            "input/tiny.toml: model.shared_expert_ffn=50 is not divisible by parallel.tp=4 (parallel.expert_tp "
            "splits the shared expert too)");
  EXPECT_EQ(error_of(moe + "shared_expert_ffn = 50\n[parallel]\ntp = 4\n", {}, 4), "<no error thrown>");
}

// model.qkv_bias: gpt2 always has its q/k/v biases; a llama has them when
// asked (Qwen2), and the resolved deck says so.
TEST(Config, QkvBiasIsTheFamilysUnlessALlamaAsks) {
  EXPECT_TRUE(parse(kMinimal).model.has_qkv_bias());
  const Config q = parse(kMinimal + "[model]\nfamily = \"llama\"\nqkv_bias = true\n");
  EXPECT_TRUE(q.model.has_qkv_bias());
  EXPECT_NE(q.resolved_toml.find("qkv_bias = true"), std::string::npos) << q.resolved_toml;
  EXPECT_EQ(error_of(kMinimal + "[model]\nqkv_bias = false\n"),
            "input/tiny.toml: model.qkv_bias = false: gpt2's attention always has its biases (the key is for llama)");
}

// model.head_dim: d_model / n_heads unless a llama sets its own; q, k, v
// and the attention output are then H*D, Hkv*D, Hkv*D and H*D wide.
TEST(Config, HeadDimIsDModelOverHeadsUnlessALlamaSetsIt) {
  const Config d = parse(kMinimal + "[model]\nfamily = \"llama\"\nd_model = 64\nn_heads = 4\n");
  EXPECT_EQ(d.model.d_head, 16);
  EXPECT_NE(d.resolved_toml.find("head_dim = 16"), std::string::npos) << d.resolved_toml;
  const Config q = parse(kMinimal + "[model]\nfamily = \"llama\"\nd_model = 64\nn_heads = 4\nhead_dim = 32\n");
  EXPECT_EQ(q.model.head_dim(), 32);
  // Qwen3-0.6B's shape: 16 heads of 128 in a 1024-wide model.
  EXPECT_EQ(parse(kMinimal + "[model]\nfamily = \"llama\"\nd_model = 1024\nn_heads = 16\nn_kv_heads = 8\n"
                             "head_dim = 128\n").model.head_dim(), 128);
  // With head_dim set, d_model need not divide by n_heads.
  EXPECT_EQ(parse(kMinimal + "[model]\nfamily = \"llama\"\nd_model = 100\nn_heads = 3\nhead_dim = 32\n")
                .model.head_dim(), 32);
  EXPECT_EQ(error_of(kMinimal + "[model]\nhead_dim = 32\n"),
            "input/tiny.toml: model.head_dim=32: gpt2 needs head_dim = model.d_model=64 / model.n_heads=4 "
            "(a head dimension of its own is llama only)");
  EXPECT_EQ(parse(kMinimal + "[model]\nhead_dim = 16\n").model.head_dim(), 16);  // gpt2's own value is fine
  EXPECT_EQ(error_of(kMinimal + "[model]\nfamily = \"llama\"\nhead_dim = 9\n"),
            "input/tiny.toml: model.family = \"llama\" needs an even head dimension for RoPE, but model.head_dim=9");
  EXPECT_EQ(error_of(kMinimal, {"model.head_dim=-1"}), "--set model.head_dim=-1: must be >= 0 (got -1)");
  // A ModelConfig built in code (d_head 0) has the default.
  pentad::ModelConfig m;
  EXPECT_EQ(m.head_dim(), m.d_model / m.n_heads);
}

// model.qk_norm: Qwen3's per-head q/k norms, a llama's only.
TEST(Config, QkNormIsALlamas) {
  EXPECT_FALSE(parse(kMinimal).model.qk_norm);
  const Config q = parse(kMinimal + "[model]\nfamily = \"llama\"\nqk_norm = true\n");
  EXPECT_TRUE(q.model.qk_norm);
  EXPECT_NE(q.resolved_toml.find("qk_norm = true"), std::string::npos) << q.resolved_toml;
  EXPECT_EQ(error_of(kMinimal + "[model]\nqk_norm = true\n"),
            "input/tiny.toml: model.qk_norm = true: gpt2 has no q/k norms (the key is for llama: Qwen3's attention)");
}

// --------------------------------------------------------------- overrides

TEST(Config, OverridesApplyAfterDeckInOrder) {
  const Config c = parse(kMinimal + "[model]\nn_layers = 3\n",
                         {"model.n_layers=6", "model.n_layers=8", "train.lr=0.5", "train.min_lr=1",
                          "train.min_lr=0.25", "checkpoint.save_final=true", "log.metrics=a b.jsonl",
                          "data.val=\"v.bin\"", "train.recompute=full", "model.family=llama",
                          "train.seed=42", "log.peak_tflops=1e3"});
  EXPECT_EQ(c.model.n_layers, 8);
  EXPECT_EQ(c.train.lr, 0.5f);
  EXPECT_EQ(c.train.min_lr, 0.25f);  // min_lr=1 > lr in between is fine: checked at the end
  EXPECT_TRUE(c.checkpoint.save_final);
  EXPECT_EQ(c.log.metrics, "a b.jsonl");
  EXPECT_EQ(c.data.val, "v.bin");
  EXPECT_EQ(c.train.recompute, Recompute::full);
  EXPECT_EQ(c.model.family, Family::llama);
  EXPECT_EQ(c.model.tied_embeddings, 0);
  EXPECT_EQ(c.train.seed, 42u);
  EXPECT_EQ(c.log.peak_tflops, 1000.0);
}

TEST(Config, OverrideCanSupplyRequiredKey) {
  EXPECT_EQ(parse("", {"data.train=t.bin"}).data.train, "t.bin");
}

TEST(Config, OverrideErrors) {
  EXPECT_EQ(error_of(kMinimal, {"model.n_heads=x"}), "--set model.n_heads=x: expected an integer");
  EXPECT_EQ(error_of(kMinimal, {"model.n_heads=3.5"}),
            "--set model.n_heads=3.5: expected an integer");
  EXPECT_EQ(error_of(kMinimal, {"model.n_heads="}), "--set model.n_heads=: expected an integer");
  EXPECT_EQ(error_of(kMinimal, {"model.n_heads=99999999999999999999"}),
            "--set model.n_heads=99999999999999999999: integer out of range");
  EXPECT_EQ(error_of(kMinimal, {"foo.bar=1"}), "--set foo.bar=1: unknown key 'foo.bar'");
  EXPECT_EQ(error_of(kMinimal, {"model.n_layer=3"}),
            "--set model.n_layer=3: unknown key 'model.n_layer' (did you mean 'model.n_layers'?)");
  EXPECT_EQ(error_of(kMinimal, {"model.n_heads=0"}), "--set model.n_heads=0: must be >= 1 (got 0)");
  EXPECT_EQ(error_of(kMinimal, {"train.lr=fast"}), "--set train.lr=fast: expected a number");
  EXPECT_EQ(error_of(kMinimal, {"train.sample_tokens=0"}), "--set train.sample_tokens=0: must be >= 1 (got 0)");
  EXPECT_EQ(error_of(kMinimal, {"train.sample_every=-2"}), "--set train.sample_every=-2: must be >= 0 (got -2)");
  EXPECT_EQ(parse(kMinimal, {"train.sample_every=50", "train.sample_tokens=8"}).train.sample_every, 50);
  EXPECT_EQ(error_of(kMinimal, {"checkpoint.save_final=yes"}),
            "--set checkpoint.save_final=yes: expected true or false");
  EXPECT_EQ(error_of(kMinimal, {"train.dtype=fp16"}),
            "--set train.dtype=fp16: must be one of \"fp32\", \"bf16\" (got \"fp16\")");
  const std::string e = error_of(kMinimal, {"model.n_heads"});
  EXPECT_NE(e.find("--set model.n_heads: "), std::string::npos) << e;
  EXPECT_NE(e.find("section.key=value"), std::string::npos) << e;
  // The first bad override is the one reported.
  EXPECT_EQ(error_of(kMinimal, {"model.n_layers=2", "train.steps=-1", "foo=1"}),
            "--set train.steps=-1: must be >= 0 (got -1)");
}

// ------------------------------------------------------------- deck errors

TEST(Config, RangeErrorNamesFileLineAndKey) {
  const std::string deck =
      "# tiny\n"
      "backend = \"cpu\"\n"
      "[data]\n"
      "train = \"x\"\n"
      "[model]\n"
      "n_layers = 2\n"
      "n_heads = 0\n";
  EXPECT_EQ(error_of(deck), "input/tiny.toml:7: model.n_heads: must be >= 1 (got 0)");
}

TEST(Config, RangeErrors) {
  auto at3 = [](const std::string& sec, const std::string& kv) {
    return error_of(kMinimal + "[" + sec + "]\n" + kv + "\n");
  };
  EXPECT_EQ(at3("model", "vocab_size = 2147483648"),
            "input/tiny.toml:4: model.vocab_size: must be <= 2147483647 (got 2147483648)");
  EXPECT_EQ(at3("model", "vocab_size = 1"),
            "input/tiny.toml:4: model.vocab_size: must be >= 2 (got 1)");
  EXPECT_EQ(at3("model", "pad_vocab_to = 0"), "input/tiny.toml:4: model.pad_vocab_to: must be in [1, 65536] (got 0)");
  EXPECT_EQ(at3("model", "n_layers = 3000000000"),
            "input/tiny.toml:4: model.n_layers: must be <= 2147483647 (got 3000000000)");
  EXPECT_EQ(at3("model", "n_kv_heads = -1"),
            "input/tiny.toml:4: model.n_kv_heads: must be >= 0 (got -1)");
  EXPECT_EQ(at3("model", "d_ff = -4"), "input/tiny.toml:4: model.d_ff: must be >= 0 (got -4)");
  EXPECT_EQ(at3("model", "norm_eps = 0"), "input/tiny.toml:4: model.norm_eps: must be > 0 (got 0)");
  EXPECT_EQ(at3("model", "norm_eps = 1e39"),
            "input/tiny.toml:4: model.norm_eps: must be a finite number (got 1e+39)");
  EXPECT_EQ(at3("model", "rope_theta = nan"),
            "input/tiny.toml:4: model.rope_theta: must be a finite number (got nan)");
  EXPECT_EQ(at3("model", "init_std = -0.1"),
            "input/tiny.toml:4: model.init_std: must be > 0 (got -0.1)");
  EXPECT_EQ(at3("parallel", "zero = 4"), "input/tiny.toml:4: parallel.zero: must be in [0, 3] (got 4)");
  EXPECT_EQ(at3("parallel", "ep = 0"), "input/tiny.toml:4: parallel.ep: must be >= 1 (got 0)");
  EXPECT_EQ(at3("train", "beta1 = 1"), "input/tiny.toml:4: train.beta1: must be in [0, 1) (got 1)");
  EXPECT_EQ(at3("train", "beta2 = -0.5"),
            "input/tiny.toml:4: train.beta2: must be in [0, 1) (got -0.5)");
  EXPECT_EQ(at3("train", "seed = -1"), "input/tiny.toml:4: train.seed: must be >= 0 (got -1)");
  EXPECT_EQ(at3("train", "micro_batch = 0"),
            "input/tiny.toml:4: train.micro_batch: must be >= 1 (got 0)");
  EXPECT_EQ(at3("train", "lr = 0"), "input/tiny.toml:4: train.lr: must be > 0 (got 0)");
  EXPECT_EQ(at3("train", "grad_clip = -1"),
            "input/tiny.toml:4: train.grad_clip: must be >= 0 (got -1)");
  EXPECT_EQ(at3("train", "recompute = \"some\""),
            "input/tiny.toml:4: train.recompute: must be one of \"none\", \"selective\", \"full\" "
            "(got \"some\")");
  EXPECT_EQ(at3("checkpoint", "every = -1"),
            "input/tiny.toml:4: checkpoint.every: must be >= 0 (got -1)");
  EXPECT_EQ(at3("checkpoint", "gather_below_mb = 4097"),
            "input/tiny.toml:4: checkpoint.gather_below_mb: must be in [0, 4096] (got 4097)");
  EXPECT_EQ(at3("log", "every = 0"), "input/tiny.toml:4: log.every: must be >= 1 (got 0)");
  EXPECT_EQ(at3("log", "peak_tflops = -2"),
            "input/tiny.toml:4: log.peak_tflops: must be >= 0 (got -2)");
  EXPECT_EQ(error_of("backend = \"tpu\"\n" + kMinimal),
            "input/tiny.toml:1: backend: must be one of \"cpu\", \"cuda\" (got \"tpu\")");
}

TEST(Config, TomlSyntaxError) {
  const std::string e = error_of(kMinimal + "[model]\nn_layers = = 3\n");
  EXPECT_EQ(e.rfind("input/tiny.toml:4: TOML syntax error: ", 0), 0u) << e;
  const std::string dup = error_of(kMinimal + "[model]\nn_layers = 3\nn_layers = 4\n");
  EXPECT_EQ(dup.rfind("input/tiny.toml:5: TOML syntax error: ", 0), 0u) << dup;
}

TEST(Config, UnknownKeySuggestsClosest) {
  EXPECT_EQ(error_of(kMinimal + "[model]\nn_layer = 3\n"),
            "input/tiny.toml:4: unknown key 'model.n_layer' (did you mean 'model.n_layers'?)");
  // A key in the wrong section points to the section that has it.
  EXPECT_EQ(error_of(kMinimal + "[train]\nn_layers = 3\n"),
            "input/tiny.toml:4: unknown key 'train.n_layers' (did you mean 'model.n_layers'?)");
  EXPECT_EQ(error_of("seq_len = 3\n" + kMinimal),
            "input/tiny.toml:1: unknown key 'seq_len' (did you mean 'model.seq_len'?)");
  EXPECT_EQ(error_of("backnd = \"cpu\"\n" + kMinimal),
            "input/tiny.toml:1: unknown key 'backnd' (did you mean 'backend'?)");
  // Nothing close: no suggestion.
  EXPECT_EQ(error_of(kMinimal + "[model]\nwibble_wobble = 3\n"),
            "input/tiny.toml:4: unknown key 'model.wibble_wobble'");
  EXPECT_EQ(error_of(kMinimal + "[model.extra]\nx = 1\n"),
            "input/tiny.toml:3: unknown key 'model.extra'");
}

TEST(Config, UnknownSectionSuggestsClosest) {
  EXPECT_EQ(error_of(kMinimal + "\n[modle]\nn_layers = 3\n"),
            "input/tiny.toml:4: unknown section '[modle]' (did you mean '[model]'?)");
  EXPECT_EQ(error_of(kMinimal + "[optimizer]\nlr = 3\n"),
            "input/tiny.toml:3: unknown section '[optimizer]'");
}

TEST(Config, WrongTypes) {
  EXPECT_EQ(error_of(kMinimal + "[model]\nn_layers = \"4\"\n"),
            "input/tiny.toml:4: model.n_layers: expected an integer, got a string");
  EXPECT_EQ(error_of(kMinimal + "[model]\nn_layers = 4.0\n"),
            "input/tiny.toml:4: model.n_layers: expected an integer, got a float");
  EXPECT_EQ(error_of(kMinimal + "[train]\nlr = \"1e-3\"\n"),
            "input/tiny.toml:4: train.lr: expected a float, got a string");
  EXPECT_EQ(error_of(kMinimal + "[checkpoint]\nsave_final = 1\n"),
            "input/tiny.toml:4: checkpoint.save_final: expected a boolean, got an integer");
  EXPECT_EQ(error_of(kMinimal + "[model]\ntied_embeddings = 1\n"),
            "input/tiny.toml:4: model.tied_embeddings: expected a boolean, got an integer");
  EXPECT_EQ(error_of(kMinimal + "[model]\nfamily = [\"gpt2\"]\n"),
            "input/tiny.toml:4: model.family: expected a string, got an array");
  EXPECT_EQ(error_of("[data]\ntrain = 3\n"),
            "input/tiny.toml:2: data.train: expected a string, got an integer");
  EXPECT_EQ(error_of("model = 3\n" + kMinimal),
            "input/tiny.toml:1: model: expected a table [model], got an integer");
  EXPECT_EQ(error_of(kMinimal + "[backend]\nname = \"cpu\"\n"),
            "input/tiny.toml:3: backend: expected a string, got a table");
}

TEST(Config, DeckErrorsAreReportedInFileOrder) {
  // toml++ orders keys by name; the report must follow the file.
  EXPECT_EQ(error_of(kMinimal + "[train]\nwarmup_steps = -1\nsteps = -1\n"),
            "input/tiny.toml:4: train.warmup_steps: must be >= 0 (got -1)");
  EXPECT_EQ(error_of("[train]\nzzz = 1\n[data]\naaa = 1\n"),
            "input/tiny.toml:2: unknown key 'train.zzz'");
}

// --------------------------------------------------- cross-key validation

TEST(Config, LayoutMustMatchWorldSize) {
  EXPECT_EQ(error_of(kMinimal + "[parallel]\ndp = 2\n", {}, 4),
            "input/tiny.toml: parallel: dp*tp*pp*cp = 2 but the job has 4 ranks "
            "(parallel.dp=2 parallel.tp=1 parallel.pp=1 parallel.cp=1)");
  EXPECT_EQ(error_of(kMinimal, {}, 2),
            "input/tiny.toml: parallel: dp*tp*pp*cp = 1 but the job has 2 ranks "
            "(parallel.dp=1 parallel.tp=1 parallel.pp=1 parallel.cp=1)");
  EXPECT_EQ(parse(kMinimal + "[parallel]\ndp = 4\n", {}, 4).parallel.dp, 4);
}

TEST(Config, ModelShapeChecks) {
  EXPECT_EQ(error_of(kMinimal + "[model]\nd_model = 100\nn_heads = 3\n"),
            "input/tiny.toml: model.d_model=100 is not divisible by model.n_heads=3");
  EXPECT_EQ(error_of(kMinimal + "[model]\nfamily = \"llama\"\nd_model = 64\nn_heads = 4\n"
                                "n_kv_heads = 3\n"),
            "input/tiny.toml: model.n_heads=4 is not divisible by model.n_kv_heads=3");
  EXPECT_EQ(error_of(kMinimal + "[model]\nn_kv_heads = 2\n"),
            "input/tiny.toml: model.n_kv_heads=2: gpt2 needs n_kv_heads = model.n_heads=4 "
            "(grouped-query attention is llama only)");
  EXPECT_EQ(error_of(kMinimal + "[model]\nfamily = \"llama\"\nd_model = 96\nn_heads = 32\n"),
            "input/tiny.toml: model.family = \"llama\" needs an even head dimension for RoPE, "
            "but model.d_model=96 / model.n_heads=32 = 3");
  // gpt2 has no RoPE: odd head dims are fine.
  EXPECT_EQ(parse(kMinimal + "[model]\nd_model = 96\nn_heads = 32\n").model.head_dim(), 3);
  EXPECT_EQ(error_of(kMinimal + "[model]\nd_model = 1000000000\nn_heads = 1\n"),
            "input/tiny.toml: model.d_ff: the default for model.d_model=1000000000 is too large; "
            "set model.d_ff");
}

TEST(Config, ParallelChecks) {
  EXPECT_EQ(error_of(kMinimal + "[parallel]\ndp = 4\nep = 3\n", {}, 4),
            "input/tiny.toml: parallel.dp=4 is not divisible by parallel.ep=3");
  EXPECT_EQ(error_of(kMinimal + "[model]\nd_model = 48\nn_heads = 3\n[parallel]\ntp = 2\n", {}, 2),
            "input/tiny.toml: model.n_heads=3 is not divisible by parallel.tp=2");
  // Fewer key/value heads than tp ranks: each is held by tp/n_kv_heads ranks.
  EXPECT_EQ(parse(kMinimal + "[model]\nfamily = \"llama\"\nn_heads = 4\nn_kv_heads = 1\n"
                             "[parallel]\ntp = 2\n", {}, 2).parallel.tp, 2);
  EXPECT_EQ(error_of(kMinimal + "[model]\nfamily = \"llama\"\nd_model = 48\nn_heads = 12\nn_kv_heads = 4\n"
                                "[parallel]\ntp = 6\n", {}, 6),
            "input/tiny.toml: model.n_kv_heads=4 and parallel.tp=6 do not divide: key/value heads are "
            "split over tp (tp divides n_kv_heads) or replicated over it (n_kv_heads divides tp)");
  EXPECT_EQ(error_of(kMinimal + "[model]\nn_heads = 8\nd_ff = 100\n[parallel]\ntp = 8\n", {}, 8),
            "input/tiny.toml: model.d_ff=100 is not divisible by parallel.tp=8");
  // The vocabulary need not divide by tp: the embedding and head are padded
  // to a multiple of pad_vocab_to * tp rows.
  const Config v300 = parse(kMinimal + "[model]\nn_heads = 8\nvocab_size = 300\n[parallel]\ntp = 8\n", {}, 8);
  EXPECT_EQ(v300.model.pad_vocab_to, 128);
  EXPECT_EQ(v300.model.padded_vocab(8), 1024);
  EXPECT_EQ(v300.model.padded_vocab(1), 384);
  const Config gpt2 = parse(kMinimal + "[model]\nvocab_size = 50257\npad_vocab_to = 64\n[parallel]\ntp = 2\n", {}, 2);
  EXPECT_EQ(gpt2.model.padded_vocab(2), 50304);
  EXPECT_EQ(gpt2.model.padded_vocab(1), 50304);
  const Config unpadded = parse(kMinimal + "[model]\nvocab_size = 50257\npad_vocab_to = 1\n[parallel]\ntp = 2\n", {}, 2);
  EXPECT_EQ(unpadded.model.padded_vocab(1), 50257);
  EXPECT_EQ(unpadded.model.padded_vocab(2), 50258);
  EXPECT_EQ(error_of(kMinimal + "[model]\nvocab_size = 2147483600\n[parallel]\ntp = 2\n", {}, 2),
            "input/tiny.toml: model.vocab_size=2147483600 padded to a multiple of model.pad_vocab_to=128 * "
            "parallel.tp=2 exceeds 2147483647 rows");
  // Supported layouts parse.
  EXPECT_EQ(parse(kMinimal + "[parallel]\ntp = 4\nsp = true\n", {}, 4).parallel.tp, 4);
  EXPECT_TRUE(parse(kMinimal + "[parallel]\ntp = 2\ndp = 2\nsp = true\n", {}, 4).parallel.sp);
  EXPECT_EQ(error_of(kMinimal + "[parallel]\nsp = true\n"),
            "input/tiny.toml: parallel.sp = true needs parallel.tp > 1 (got parallel.tp=1)");
  EXPECT_TRUE(parse(kMinimal + "[model]\nn_experts = 4\n[parallel]\ntp = 2\nexpert_tp = true\n", {}, 2)
                  .parallel.expert_tp);
  EXPECT_EQ(error_of(kMinimal + "[model]\nn_experts = 4\n[parallel]\nexpert_tp = true\n"),
            "input/tiny.toml: parallel.expert_tp = true needs parallel.tp > 1 and a mixture-of-experts model "
            "(got parallel.tp=1, model.n_experts=4)");
  EXPECT_EQ(error_of(kMinimal + "[parallel]\ntp = 2\nexpert_tp = true\n", {}, 2),
            "input/tiny.toml: parallel.expert_tp = true needs parallel.tp > 1 and a mixture-of-experts model "
            "(got parallel.tp=2, model.n_experts=0)");
  EXPECT_EQ(error_of(kMinimal + "[model]\nseq_len = 65\n[parallel]\ntp = 2\nsp = true\n", {}, 2),
            "input/tiny.toml: model.seq_len=65 is not divisible by parallel.tp=2 "
            "(needed by parallel.sp = true)");
  EXPECT_EQ(error_of(kMinimal + "[parallel]\npp = 4\n[train]\ngrad_accum = 4\n", {}, 4),
            "input/tiny.toml: model.n_layers=2 is fewer than the 4 pipeline chunks (parallel.pp x "
            "parallel.virtual_stages); give parallel.stage_layers to allow chunks without blocks");
}

TEST(Config, PipelineChecks) {
  EXPECT_EQ(parse(kMinimal + "[parallel]\npp = 2\n[train]\ngrad_accum = 2\n", {}, 2).parallel.pp, 2);
  EXPECT_EQ(error_of(kMinimal + "[parallel]\npp = 2\n", {}, 2),
            "input/tiny.toml: train.grad_accum=1 gives 1 micro-batches, fewer than parallel.pp=2 stages: "
            "the pipeline would never fill (use train.grad_accum >= parallel.pp)");
  EXPECT_EQ(error_of(kMinimal + "[model]\nn_layers = 4\n[parallel]\npp = 2\nvirtual_stages = 2\n[train]\ngrad_accum = 2\n", {}, 2),
            "input/tiny.toml: parallel.virtual_stages=2 needs parallel.schedule=interleaved (got "
            "parallel.schedule=1f1b)");
  // ZeRO-2/3 compose with every schedule (the parity suite's pp x dp cases).
  for (const char* sched : {"afab", "1f1b", "zbh1"})
    EXPECT_EQ(parse(kMinimal + "[parallel]\npp = 2\nzero = 3\nschedule = \"" + sched + "\"\n[train]\ngrad_accum = 2\n",
                    {}, 2).parallel.zero, 3);
  EXPECT_EQ(error_of(kMinimal + "[parallel]\npp = 2\nstage_layers = \"1\"\n[train]\ngrad_accum = 2\n", {}, 2),
            "input/tiny.toml: parallel.stage_layers=\"1\" gives 1 counts for 2 pipeline chunks "
            "(parallel.pp x parallel.virtual_stages)");
}

TEST(Config, TrainAndDataChecks) {
  EXPECT_EQ(error_of(kMinimal + "[train]\nlr = 0.01\nmin_lr = 0.1\n"),
            "input/tiny.toml: train.min_lr=0.1 must be <= train.lr=0.01");
  EXPECT_EQ(error_of(""), "input/tiny.toml: data.train: required: a token file made by `pentad prep`");
  EXPECT_EQ(error_of("[data]\ntrain = \"\"\n"),
            "input/tiny.toml: data.train: required: a token file made by `pentad prep`");
  EXPECT_EQ(error_of("[data]\ntrain = \"\"\n[train]\nsteps = 1\n"),
            "input/tiny.toml: data.train: required: a token file made by `pentad prep`");
  // train.steps = 0 runs no step: it evaluates or saves the loaded weights, and needs no training data.
  EXPECT_EQ(parse("[data]\nval = \"v.bin\"\n[train]\nsteps = 0\n").data.train, "");
  EXPECT_EQ(error_of("[data]\nweights = \"1\"\n[train]\nsteps = 0\n"),
            "input/tiny.toml: data.weights=\"1\" gives 1 weights for the 0 entries of data.train=\"\" (one weight per "
            "comma-separated entry)");
}

TEST(Config, RopeScalingChecks) {
  const std::pair<std::string, std::string> refused[] = {
      {"rope_scaling = \"llama3\"\n",
       "input/tiny.toml: model.rope_scaling = \"llama3\" scales RoPE, which model.family = \"gpt2\" does not use"},
      {"family = \"llama\"\nrope_scaling = \"llama3\"\nrope_low_freq_factor = 4\n",
       "input/tiny.toml: model.rope_high_freq_factor=4 must be > model.rope_low_freq_factor=4 (rope_scaling = "
       "\"llama3\")"},
      {"family = \"llama\"\nrope_scaling = \"yarn\"\nrope_beta_fast = 1\n",
       "input/tiny.toml: model.rope_beta_fast=1 must be > model.rope_beta_slow=1 (rope_scaling = \"yarn\")"},
      {"rope_scaling = \"yarn\"\n",
       "input/tiny.toml: model.rope_scaling = \"yarn\" scales RoPE, which model.family = \"gpt2\" does not use"},
      {"rope_scaling = \"dynamic\"\n",
       "input/tiny.toml:4: model.rope_scaling: must be one of \"none\", \"llama3\", \"yarn\", \"linear\", "
       "\"longrope\" (got \"dynamic\")"},
      // LongRoPE: one factor per pair of a head (here 16 channels: 8 pairs) in each list.
      {"family = \"llama\"\nrope_scaling = \"longrope\"\nrope_short_factor = [1, 1, 1, 1, 1, 1, 1, 1]\n"
       "rope_long_factor = [2, 2, 2]\n",
       "input/tiny.toml: model.rope_long_factor has 3 numbers but rope_scaling = \"longrope\" needs one per pair of "
       "a head's channels RoPE turns: model.head_dim=16 / 2 = 8"},
      {"family = \"llama\"\nrope_scaling = \"longrope\"\nrope_long_factor = [2, 2, 2, 2, 2, 2, 2, 2]\n",
       "input/tiny.toml: model.rope_short_factor has 0 numbers but rope_scaling = \"longrope\" needs one per pair of "
       "a head's channels RoPE turns: model.head_dim=16 / 2 = 8"},
      {"family = \"llama\"\nrope_short_factor = [1, 1, 1, 1]\n",
       "input/tiny.toml: model.rope_short_factor is given but model.rope_scaling = \"none\" (the per-pair factors "
       "are longrope's)"},
      {"family = \"llama\"\nrope_scaling = \"longrope\"\nrope_short_factor = [1, 0, 1, 1]\n",
       "input/tiny.toml:6: model.rope_short_factor: entry 1 must be a finite number > 0 (got 0)"},
      {"family = \"llama\"\nrope_scaling = \"longrope\"\nrope_short_factor = [1, \"a\"]\n",
       "input/tiny.toml:6: model.rope_short_factor: entry 1 is a string, not a number"},
      {"family = \"llama\"\nrope_short_factor = 1.5\n",
       "input/tiny.toml:5: model.rope_short_factor: expected an array of numbers, got a float"}};
  for (const auto& [model, message] : refused) EXPECT_EQ(error_of(kMinimal + "[model]\n" + model), message);
  const Config c = parse(kMinimal + "[model]\nfamily = \"llama\"\nrope_theta = 500000\nrope_scaling = \"llama3\"\n");
  const pentad::Rope r = c.model.rope();
  EXPECT_EQ(r.scaling, pentad::RopeScaling::llama3);
  EXPECT_EQ(r.theta, 500000.0);
  EXPECT_EQ(r.factor, 8.0);  // Llama 3.1's values are the defaults
  EXPECT_EQ(r.low_freq_factor, 1.0);
  EXPECT_EQ(r.high_freq_factor, 4.0);
  EXPECT_EQ(r.original_context, 8192.0);
  EXPECT_EQ(parse(kMinimal).model.rope().scaling, pentad::RopeScaling::none);
  // YaRN as Qwen3 documents it: factor 4 over 32768 positions; beta 32 and 1,
  // truncation and the derived attention factor are the defaults.
  const pentad::Rope y = parse(kMinimal +
                               "[model]\nfamily = \"llama\"\nrope_scaling = \"yarn\"\nrope_scaling_factor = 4\n"
                               "rope_original_context = 32768\n")
                             .model.rope();
  EXPECT_EQ(y.scaling, pentad::RopeScaling::yarn);
  EXPECT_EQ(y.factor, 4.0);
  EXPECT_EQ(y.original_context, 32768.0);
  EXPECT_EQ(y.beta_fast, 32.0);
  EXPECT_EQ(y.beta_slow, 1.0);
  EXPECT_EQ(y.attention_factor, 0.0);
  EXPECT_TRUE(y.truncate);
  const pentad::Rope y2 = parse(kMinimal +
                                "[model]\nfamily = \"llama\"\nrope_scaling = \"yarn\"\nrope_beta_fast = 16\n"
                                "rope_beta_slow = 2\nrope_attention_factor = 1.25\nrope_truncate = false\n")
                              .model.rope();
  EXPECT_EQ(y2.beta_fast, 16.0);
  EXPECT_EQ(y2.beta_slow, 2.0);
  EXPECT_EQ(y2.attention_factor, 1.25);
  EXPECT_FALSE(y2.truncate);
  const pentad::Rope lin =
      parse(kMinimal + "[model]\nfamily = \"llama\"\nrope_scaling = \"linear\"\nrope_scaling_factor = 4\n").model.rope();
  EXPECT_EQ(lin.scaling, pentad::RopeScaling::linear);
  EXPECT_EQ(lin.factor, 4.0);
  // LongRoPE: the call's context picks the list, the short one up to the
  // original context; a training run's context is seq_len (64 here).
  const std::string longrope = kMinimal +
                               "[model]\nfamily = \"llama\"\nrope_scaling = \"longrope\"\nrope_scaling_factor = 32\n"
                               "rope_original_context = 32\nrope_short_factor = [1, 1.5, 2, 2.5, 3, 3, 3, 3]\n"
                               "rope_long_factor = [3, 4, 5.5, 8, 9, 9, 9, 9]\n";
  const pentad::ModelConfig lm = parse(longrope).model;
  const pentad::Rope at32 = lm.rope(32), at33 = lm.rope(33), run = lm.rope();
  EXPECT_EQ(at32.scaling, pentad::RopeScaling::longrope);
  EXPECT_EQ(at32.factor, 32.0);
  EXPECT_EQ(at32.original_context, 32.0);
  const double short_f[] = {1, 1.5, 2, 2.5, 3, 3, 3, 3}, long_f[] = {3, 4, 5.5, 8, 9, 9, 9, 9};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(at32.pair_factor[i], short_f[i]) << i;
    EXPECT_EQ(at33.pair_factor[i], long_f[i]) << i;
    EXPECT_EQ(run.pair_factor[i], long_f[i]) << i;  // seq_len 64 > 32
  }
  EXPECT_EQ(parse(longrope, {"model.rope_original_context=64"}).model.rope().pair_factor[3], 2.5);
  // The lists as --set takes them, and back through the resolved deck.
  const Config set = parse(longrope, {"model.rope_long_factor=[1, 2.25, 3, 4e1, 5, 6, 7, 8]"});
  EXPECT_EQ(set.model.rope_long_factor, (std::vector<double>{1, 2.25, 3, 40, 5, 6, 7, 8}));
  EXPECT_NE(set.resolved_toml.find("rope_long_factor = [1.0, 2.25, 3.0, 40.0, 5.0, 6.0, 7.0, 8.0]"),
            std::string::npos);
  EXPECT_EQ(parse(set.resolved_toml).model, set.model);
  EXPECT_EQ(error_of(longrope, {"model.rope_long_factor=1, 2"}),
            "--set model.rope_long_factor=1, 2: expected an array of numbers, e.g. [1.0, 1.5]");
  // A partial rotary: the lists are one per pair of the channels RoPE turns.
  const std::string partial = "[model]\nfamily = \"llama\"\nrotary_dim = 8\nrope_scaling = \"longrope\"\n"
                              "rope_short_factor = [1, 1, 1, 1]\nrope_long_factor = [2, 2, 2, 2]\n";
  EXPECT_EQ(parse(kMinimal + partial).model.rope().rotary_dim, 8);
  EXPECT_EQ(parse(kMinimal + partial).model.rotary_channels(), 8);
  EXPECT_EQ(parse(kMinimal + "[model]\nfamily = \"llama\"\n").model.rotary_channels(), 16);
  EXPECT_EQ(error_of(kMinimal + "[model]\nfamily = \"llama\"\nrotary_dim = 7\n"),
            "input/tiny.toml: model.rotary_dim=7 must be even and at most model.head_dim=16 (RoPE turns pairs of a "
            "head's first channels)");
  EXPECT_EQ(error_of(kMinimal + "[model]\nfamily = \"llama\"\nrotary_dim = 18\n"),
            "input/tiny.toml: model.rotary_dim=18 must be even and at most model.head_dim=16 (RoPE turns pairs of a "
            "head's first channels)");
  EXPECT_EQ(error_of(kMinimal + "[model]\nrotary_dim = 8\n"),
            "input/tiny.toml: model.rotary_dim=8: model.family = \"gpt2\" has no RoPE");
}

TEST(Config, ContextParallelChecks) {
  // Accepted: seq_len 64 = 2*cp chunks of 16 (zig-zag, the default layout).
  const Config c = parse(kMinimal + "[parallel]\ncp = 2\n", {}, 2);
  EXPECT_EQ(c.parallel.cp, 2);
  EXPECT_EQ(c.parallel.cp_layout, CpLayout::zigzag);
  EXPECT_EQ(error_of(kMinimal + "[parallel]\ncp = 3\n", {}, 3),
            "input/tiny.toml: model.seq_len=64 is not divisible by 2*parallel.cp=3 "
            "(parallel.cp_layout = \"zigzag\" cuts each sequence into 2*cp chunks)");
  EXPECT_EQ(error_of(kMinimal + "[parallel]\ncp = 3\ncp_layout = \"contiguous\"\n", {}, 3),
            "input/tiny.toml: model.seq_len=64 is not divisible by parallel.cp=3 "
            "(parallel.cp_layout = \"contiguous\")");
  EXPECT_EQ(error_of(kMinimal + "[model]\nseq_len = 20\n[parallel]\ncp = 2\ntp = 4\nsp = true\n", {}, 8),
            "input/tiny.toml: model.seq_len=20 / parallel.cp=2 = 10 tokens per cp rank is not "
            "divisible by parallel.tp=4 (needed by parallel.sp = true)");
  EXPECT_EQ(parse(kMinimal + "[model]\nseq_len = 32\n[parallel]\ncp = 2\ntp = 4\nsp = true\n", {}, 8)
                .parallel.cp, 2);
}

// --------------------------------------------- mixture of experts

TEST(Config, MoeChecks) {
  const std::string moe = "[model]\nn_experts = 4\n";
  EXPECT_EQ(error_of(kMinimal + "[parallel]\ndp = 2\nep = 2\n", {}, 2),
            "input/tiny.toml: parallel.ep=2 needs a mixture-of-experts model (model.n_experts > 0)");
  EXPECT_EQ(error_of(kMinimal + moe + "[parallel]\ndp = 2\nep = 4\n", {}, 2),
            "input/tiny.toml: parallel.dp=2 is not divisible by parallel.ep=4");
  EXPECT_EQ(error_of(kMinimal + "[model]\nn_experts = 6\n[parallel]\ndp = 4\nep = 4\n", {}, 4),
            "input/tiny.toml: model.n_experts=6 is not divisible by parallel.ep=4");
  EXPECT_EQ(error_of(kMinimal + "[model]\nn_experts = 2\ntop_k = 3\n"),
            "input/tiny.toml: model.top_k=3 is larger than model.n_experts=2");
  EXPECT_NE(error_of(kMinimal + moe + "capacity_factor = -0.5\n").find("model.capacity_factor"), std::string::npos);
  // MoE composes with sp (the layer sees the all-gathered rows) and cp.
  EXPECT_EQ(error_of(kMinimal + moe + "[parallel]\ntp = 2\nsp = true\n", {}, 2), "<no error thrown>");
  EXPECT_EQ(error_of(kMinimal + moe + "[parallel]\ncp = 2\ndp = 2\nep = 2\n", {}, 4), "<no error thrown>");
  EXPECT_EQ(error_of(kMinimal + moe + "[parallel]\ntp = 2\n", {}, 2), "<no error thrown>");
  EXPECT_EQ(error_of(kMinimal + moe + "[parallel]\ndp = 4\nep = 2\nzero = 3\n", {}, 4), "<no error thrown>");
  // Valid: dp 4 = 2 x ep 2, dropless.
  EXPECT_EQ(error_of(kMinimal + moe + "dropless = true\n[parallel]\ndp = 4\nep = 2\nzero = 1\n", {}, 4), "<no error thrown>");
  // A capacity factor must be positive; no capacity is its own key.
  EXPECT_NE(error_of(kMinimal + moe + "capacity_factor = 0\n").find("model.capacity_factor"), std::string::npos);
}

// --------------------------------------------- not yet in this build

TEST(Config, UnsupportedFeaturesNameTheKey) {
  // bf16 is supported (emulated by rounding on the cpu backend).
  EXPECT_EQ(error_of(kMinimal + "[train]\ndtype = \"bf16\"\n"), "<no error thrown>");
  EXPECT_EQ(error_of(kMinimal + "[parallel]\ncomm = \"nccl\"\n"),
            "input/tiny.toml: parallel.comm = nccl needs backend = cuda (got backend = cpu); "
            "use parallel.comm = mpi or auto with the cpu backend");
  // A binary without the CUDA backend refuses it where the backend is made
  // (app/runtime.cpp), on every rank alike, before anything touches a device.
  if (!pentad::backend_built(BackendKind::cuda)) {
    const Config c = parse("backend = \"cuda\"\n" + kMinimal);
    std::string err = "<no error thrown>";
    try {
      pentad::make_backend(c, MPI_COMM_SELF);
    } catch (const pentad::InputError& e) {
      err = e.what();
    }
    EXPECT_EQ(err, "input/tiny.toml: backend = cuda: this binary was built without the CUDA backend");
  }
}

// The NCCL comm's limits come from the Comm capability table
// (comm/capability.hpp), asked at deck time: it has the cp ring's paired
// exchange, the all-to-all and the pipeline's grouped plan, not lone sends
// and receives (parallel.pp_p2p = eager); the MPI comms have them all.
TEST(Config, CommCapabilitiesGateTheLayout) {
  const std::string cuda = "backend = \"cuda\"\n" + kMinimal;
  const std::string pp2 = "[parallel]\npp = 2\n[train]\ngrad_accum = 2\n";
  const std::string ep2 = "[model]\nn_experts = 4\n[parallel]\ndp = 2\nep = 2\n";
  const std::string cp2 = "[parallel]\ncp = 2\n";
  EXPECT_EQ(error_of(cuda + pp2, {}, 2), "<no error thrown>");
  EXPECT_EQ(error_of(cuda + pp2, {"parallel.comm=nccl", "parallel.pp_p2p=grouped"}, 2), "<no error thrown>");
  EXPECT_EQ(error_of(cuda + pp2, {"parallel.pp_p2p=eager"}, 2),
            "input/tiny.toml: parallel.pp_p2p = eager with backend = cuda needs lone sends and receives, "
            "which the NCCL comm does not have yet; set parallel.comm = mpi or parallel.pp_p2p = grouped");
  EXPECT_EQ(error_of(cuda + pp2, {"parallel.comm=mpi", "parallel.pp_p2p=eager"}, 2), "<no error thrown>");
  EXPECT_EQ(error_of(kMinimal + pp2, {"parallel.pp_p2p=grouped"}, 2), "<no error thrown>");
  EXPECT_EQ(error_of(kMinimal + pp2, {"parallel.pp_p2p=lazy"}, 2),
            "--set parallel.pp_p2p=lazy: must be one of \"auto\", \"eager\", \"grouped\" (got \"lazy\")");
  EXPECT_EQ(error_of(cuda + cp2, {"parallel.comm=nccl"}, 2), "<no error thrown>");
  EXPECT_EQ(error_of(cuda + cp2, {}, 2), "<no error thrown>");
  EXPECT_EQ(error_of(cuda + ep2, {}, 2), "<no error thrown>");
  EXPECT_EQ(error_of(cuda + ep2, {"parallel.comm=nccl"}, 2), "<no error thrown>");
  EXPECT_EQ(error_of(cuda + pp2, {"parallel.comm=mpi"}, 2), "<no error thrown>");
  EXPECT_EQ(error_of(cuda + ep2, {"parallel.comm=mpi"}, 2), "<no error thrown>");
  // The cpu backend's MPI comm has every operation.
  EXPECT_EQ(error_of(kMinimal + pp2, {}, 2), "<no error thrown>");
  EXPECT_EQ(error_of(kMinimal + ep2, {}, 2), "<no error thrown>");
  EXPECT_EQ(error_of(kMinimal + cp2, {}, 2), "<no error thrown>");
}

// ------------------------------------------------------------ round trip

void expect_round_trip(const Config& c) {
  Config again = pentad::parse_config(c.resolved_toml, "resolved.toml", {},
                                      c.parallel.dp * c.parallel.tp * c.parallel.pp * c.parallel.cp);
  EXPECT_EQ(again.source, "resolved.toml");
  again.source = c.source;
  EXPECT_EQ(again, c) << "first:\n" << c.resolved_toml << "\nsecond:\n" << again.resolved_toml;
  EXPECT_EQ(pentad::config_to_toml(again), c.resolved_toml);
}

TEST(Config, ResolvedDeckRoundTrips) {
  expect_round_trip(parse(kMinimal));
  expect_round_trip(parse(kFullDeck, {}, 2));
  expect_round_trip(parse(kMinimal, {"model.family=llama", "train.lr=0.1", "train.min_lr=0.1",
                                     "model.norm_eps=3.3e-7", "log.peak_tflops=989.4"}));
}

// A plain TOML reader (tests/cli and the torch oracle use Python's tomllib)
// gets the deck's own decimals for the floats, and strings with quotes,
// backslashes, control and non-ASCII characters back intact, on one line.
TEST(Config, ResolvedDeckReadsBackWithAnyTomlParser) {
  const Config c = parse(kFullDeck, {"data.val=tok/v\u00e9\nl.bin", "train.lr=0.003"}, 2);
  const toml::table t = toml::parse(c.resolved_toml);
  EXPECT_EQ(t["train"]["lr"].value<double>(), 0.003);
  EXPECT_EQ(t["model"]["norm_eps"].value<double>(), 1e-6);
  EXPECT_EQ(t["log"]["peak_tflops"].value<double>(), 12.5);
  EXPECT_EQ(t["train"]["seed"].value<int64_t>(), INT64_MAX);
  EXPECT_EQ(t["data"]["train"].value<std::string>(), c.data.train);
  EXPECT_EQ(t["data"]["val"].value<std::string>(), c.data.val);
  EXPECT_NE(c.resolved_toml.find("val = \"tok/v\u00e9\\nl.bin\""), std::string::npos) << c.resolved_toml;
  expect_round_trip(c);
}

TEST(Config, ResolvedDeckListsEveryKeyResolved) {
  const Config c = parse(kMinimal + "[model]\nfamily = \"llama\"\n");
  const std::string& t = c.resolved_toml;
  for (const char* line : {"backend = \"cpu\"", "[model]", "family = \"llama\"", "n_kv_heads = 4",
                           "d_ff = 192", "tied_embeddings = false", "norm_eps = 1e-05",
                           "rope_theta = 10000.0", "[parallel]", "zero = 0", "sp = false",
                           "[train]", "seed = 1234", "recompute = \"none\"", "dtype = \"fp32\"",
                           "[data]", "train = \"x\"", "val = \"\"", "[checkpoint]",
                           "save_final = false", "[log]", "peak_tflops = 0.0"})
    EXPECT_NE(t.find(line), std::string::npos) << "missing '" << line << "' in\n" << t;
  EXPECT_LT(t.find("backend ="), t.find("[model]"));  // top-level keys before any table
  EXPECT_EQ(pentad::config_to_toml(c), t);
}

// Every line of the resolved deck, fed back as --set, leaves the config as
// it was: the override parser accepts every key's own printed value.
TEST(Config, EveryResolvedKeyIsSettable) {
  const Config c = parse(kFullDeck, {}, 2);
  std::vector<std::string> sets;
  std::istringstream in(c.resolved_toml);
  std::string section, line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.size() - 2);
      continue;
    }
    const auto eq = line.find(" = ");
    const auto hash = line.find("  #", eq);
    ASSERT_NE(eq, std::string::npos) << line;
    ASSERT_NE(hash, std::string::npos) << line;
    std::string value = line.substr(eq + 3, hash - eq - 3);
    while (!value.empty() && value.back() == ' ') value.pop_back();
    if (section == "data" && line.rfind("train", 0) == 0) value = "tok/x.bin";  // has escapes
    sets.push_back((section.empty() ? "" : section + ".") + line.substr(0, eq) + "=" + value);
  }
  EXPECT_EQ(sets.size(), 102u);  // 1 top-level + 41 model + 17 parallel + 24 train + 7 data + 7 checkpoint + 5 log
  Config expected = c;
  expected.data.train = "tok/x.bin";
  expected.resolved_toml = pentad::config_to_toml(expected);
  EXPECT_EQ(parse(kFullDeck, sets, 2), expected);
}
