// The planner (src/planner.cpp) without MPI: machine files are parsed
// strictly, sizes parse with units, and the parameter/optimizer terms of the
// memory model agree with the textbook counts of REFERENCE.md (fp32: 4 bytes
// per parameter and gradient, 8 for the AdamW moments) derived by hand for a
// GPT-2 whose tensors need no padding. The allocation-by-allocation check
// against measured peaks is tests/planner/memory_model.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "config/config.hpp"
#include "core/error.hpp"
#include "model/memory_plan.hpp"
#include "model/param_list.hpp"
#include "parallel/pp/p2p_plan.hpp"
#include "plan/planner.hpp"

namespace {

const std::string kMachine =
    "[machine]\nname = \"m\"\ndevices_per_node = 4\nmemory = \"2GiB\"\npeak_tflops = 1.5\n";

std::string machine_error(const std::string& text) {
  try {
    pentad::parse_machine(text, "m.toml");
  } catch (const pentad::InputError& e) {
    return e.what();
  }
  return "<no error>";
}

// GPT-2, L=2, C=32, V=256, T=16: every tensor is a multiple of 16 elements,
// so the flat buffer holds exactly Psi = V C + T C + L (12 C^2 + 13 C) + 2 C.
const std::string kDeck =
    "[model]\nfamily = \"gpt2\"\nn_layers = 2\nd_model = 32\nn_heads = 4\nvocab_size = 256\nseq_len = 16\n"
    "[train]\nmicro_batch = 2\n[data]\ntrain = \"x\"\n";
const double kPsi = 256 * 32 + 16 * 32 + 2 * (12 * 32 * 32 + 13 * 32) + 2 * 32;

pentad::MemBytes root_bytes(const std::vector<std::string>& sets, int ranks) {
  const pentad::Config cfg = pentad::parse_config(kDeck, "t.toml", sets, ranks);
  return pentad::estimate_memory(cfg).stages[0].bytes;
}

}  // namespace

TEST(Planner, MachineParses) {
  const pentad::Machine m = pentad::parse_machine(kMachine + "compute_efficiency = 0.25\n", "m.toml");
  EXPECT_EQ(m.devices_per_node, 4);
  EXPECT_DOUBLE_EQ(m.memory_bytes, 2.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(m.peak_tflops, 1.5);
  EXPECT_DOUBLE_EQ(m.compute_efficiency, 0.25);
}

TEST(Planner, MachineErrorsNameKeyAndLine) {
  EXPECT_EQ(machine_error(kMachine + "speed = 3\n"),
            "m.toml:6: unknown key 'machine.speed' (known: name, devices_per_node, memory, peak_tflops, "
            "compute_efficiency, intra_node_gbs, inter_node_gbs, intra_node_latency_us, inter_node_latency_us, "
            "p2p_gbs)");
  EXPECT_EQ(machine_error(kMachine + "compute_efficiency = 1.5\n"),
            "m.toml:6: machine.compute_efficiency: must be in [0.000100, 1.000000] (got 1.500000)");
  EXPECT_EQ(machine_error(kMachine + "intra_node_gbs = \"fast\"\n"),
            "m.toml:6: machine.intra_node_gbs: expected a number");
  EXPECT_EQ(machine_error("[machine]\nname = \"m\"\n"),
            "m.toml: [machine] needs name, devices_per_node, memory and peak_tflops");
  EXPECT_EQ(machine_error(kMachine + "[gpu]\n"), "m.toml:6: unknown section or key 'gpu' (expected a [machine] table)");
  EXPECT_NE(machine_error("[machine\n").find("m.toml:1: TOML syntax error"), std::string::npos);
}

TEST(Planner, ParseBytes) {
  EXPECT_DOUBLE_EQ(pentad::parse_bytes("80GiB", "x"), 80.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(pentad::parse_bytes("1.5e9", "x"), 1.5e9);
  EXPECT_DOUBLE_EQ(pentad::parse_bytes("512MB", "x"), 512e6);
  EXPECT_THROW(pentad::parse_bytes("80Gb", "x"), pentad::InputError);
  EXPECT_THROW(pentad::parse_bytes("-1GiB", "x"), pentad::InputError);
  EXPECT_THROW(pentad::parse_bytes("lots", "x"), pentad::InputError);
}

// REFERENCE.md's table in fp32 (4 + 4 + 8 bytes per parameter), per ZeRO stage.
TEST(Planner, ZeroTermsMatchTheTextbookCounts) {
  using pentad::Mem;
  const auto P = int(Mem::params), G = int(Mem::grads), O = int(Mem::optim);
  const pentad::MemBytes z0 = root_bytes({}, 1);
  EXPECT_DOUBLE_EQ(z0[P], 4 * kPsi);
  EXPECT_DOUBLE_EQ(z0[G], 4 * kPsi);
  EXPECT_DOUBLE_EQ(z0[O], 8 * kPsi);
  // dp = 4: Psi = 34176 = 4 x 8544, and 8544 = 534 x 16: no shard padding.
  const double S = kPsi / 4;
  const pentad::MemBytes z1 = root_bytes({"parallel.dp=4", "parallel.zero=1"}, 4);
  EXPECT_DOUBLE_EQ(z1[P], 4 * kPsi);
  EXPECT_DOUBLE_EQ(z1[G], 4 * kPsi);
  EXPECT_DOUBLE_EQ(z1[O], 8 * S);
  const pentad::MemBytes z3 = root_bytes({"parallel.dp=4", "parallel.zero=3"}, 4);
  EXPECT_DOUBLE_EQ(z3[O], 8 * S);
  EXPECT_GE(z3[P], 4 * S);     // the shard plus gathered windows
  EXPECT_LT(z3[P], 4 * kPsi);  // but never the whole model
}

// 1f1b keeps at most pp - stage micro-batches alive, afab all m.
TEST(Planner, PipelineActivationsFollowTheSchedule) {
  using pentad::Mem;
  const auto A = int(Mem::activations);
  const auto est = [](const std::string& sched) {
    return pentad::estimate_memory(pentad::parse_config(
        kDeck, "t.toml", {"parallel.pp=2", "parallel.schedule=\"" + sched + "\"", "train.grad_accum=8"}, 2));
  };
  const auto afab = est("afab"), f1b = est("1f1b");
  for (int s = 0; s < 2; ++s) {
    EXPECT_DOUBLE_EQ(afab.stages[size_t(s)].bytes[A], 8 * afab.stages[size_t(s)].slot_bytes);
    EXPECT_DOUBLE_EQ(f1b.stages[size_t(s)].bytes[A], (2 - s) * f1b.stages[size_t(s)].slot_bytes);
  }
}

// Dropless MoE: the received rows R = min(moe_load, ep) x B*T*top_k set the
// MoE buffers. GPT-2 with full recompute, derived by hand from moe.cpp: one
// call holds the dispatched rows (M, C), the received rows and expert
// outputs 2 x (R, C) and the expert MLP's 2 x (R, d_ff) (activations);
// its backward the row gradients (M, C) + 2 x (R, C) and 1 x (R, d_ff)
// (scratch: dL/dh only, as the down projection's input gradient goes
// through the GELU in one op). So each received row costs 4 x (2 C +
// 2 d_ff) bytes of activations and 4 x (2 C + d_ff) of scratch.
TEST(Planner, DroplessMoeBuffersFollowTheReceiveLoad) {
  using pentad::Mem;
  const auto A = int(Mem::activations), Sc = int(Mem::scratch);
  const std::string moe = "[model]\nfamily = \"gpt2\"\nn_layers = 2\nd_model = 32\nd_ff = 64\nn_heads = 4\n"
                          "vocab_size = 256\nseq_len = 16\nn_experts = 4\ntop_k = 2\nmoe_every = 1\n"
                          "[train]\nmicro_batch = 2\nrecompute = \"full\"\n[data]\ntrain = \"x\"\n";
  const auto est = [&](const std::string& cf, int ep, double load) {
    return pentad::estimate_memory(
        pentad::parse_config(moe, "t.toml",
                             {cf == "0" ? std::string("model.dropless=true") : "model.capacity_factor=" + cf, "parallel.dp=2", "parallel.ep=" + std::to_string(ep)}, 2),
        load);
  };
  const double rows = 2 * 16 * 2;                    // B*T*top_k
  const double per_row_act = 4 * (2 * 32 + 2 * 64);  // bytes per received row: activations
  const double per_row_scratch = 4 * (2 * 32 + 64);  // and the backward's scratch
  const auto bal = est("0", 2, 1.0), skew = est("0", 2, 1.5);
  EXPECT_DOUBLE_EQ(skew.stages[0].bytes[A] - bal.stages[0].bytes[A], 0.5 * rows * per_row_act);
  EXPECT_DOUBLE_EQ(skew.stages[0].bytes[Sc] - bal.stages[0].bytes[Sc], 0.5 * rows * per_row_scratch);
  EXPECT_DOUBLE_EQ(bal.moe_load, 1.0);
  EXPECT_DOUBLE_EQ(skew.moe_load, 1.5);
  // At most ep x balanced: every rank sends this one all its rows.
  const auto capped = est("0", 2, 5.0), full = est("0", 2, 2.0);
  EXPECT_DOUBLE_EQ(capped.stages[0].total, full.stages[0].total);
  EXPECT_DOUBLE_EQ(capped.moe_load, 2.0);
  // ep = 1 keeps every row; with a capacity the load is not an input.
  EXPECT_DOUBLE_EQ(est("0", 1, 1.5).stages[0].total, est("0", 1, 1.0).stages[0].total);
  EXPECT_DOUBLE_EQ(est("0", 1, 1.5).moe_load, 0.0);
  EXPECT_DOUBLE_EQ(est("1.0", 2, 1.5).stages[0].total, est("1.0", 2, 1.0).stages[0].total);
  EXPECT_DOUBLE_EQ(est("1.0", 2, 1.5).moe_load, 0.0);
}

// With recompute = none the CPU backend keeps each block's attention
// probabilities (B, H, T, T) for its backward; CUDA's backward recomputes
// them, so neither the model nor the planner keeps them there: one slot is
// L x B H T^2 fp32 values smaller, and nothing else changes.
TEST(Planner, CudaKeepsNoAttentionProbabilities) {
  const auto est = [](const std::string& backend) {
    return pentad::estimate_memory(pentad::parse_config(
        kDeck, "t.toml", {"backend=\"" + backend + "\"", "train.recompute=\"none\""}, 1));
  };
  const auto cpu = est("cpu"), cuda = est("cuda");
  const double probs = 2.0 /*L*/ * 2 /*B*/ * 4 /*H*/ * 16 * 16 /*T^2*/ * 4 /*bytes*/;
  EXPECT_DOUBLE_EQ(cpu.stages[0].slot_bytes - cuda.stages[0].slot_bytes, probs);
  for (int c = 0; c < pentad::kMemCategories; ++c) {
    if (c == int(pentad::Mem::activations)) continue;
    EXPECT_DOUBLE_EQ(cpu.stages[0].bytes[size_t(c)], cuda.stages[0].bytes[size_t(c)]) << "category " << c;
  }
  EXPECT_DOUBLE_EQ(cpu.stages[0].bytes[size_t(pentad::Mem::activations)] -
                       cuda.stages[0].bytes[size_t(pentad::Mem::activations)],
                   probs);
  EXPECT_TRUE(pentad::attention_bwd_reads_probs(pentad::BackendKind::cpu));
  EXPECT_FALSE(pentad::attention_bwd_reads_probs(pentad::BackendKind::cuda));
}

// train.bf16_activations holds the activations only GEMMs read in GEMM
// form: 2 bytes a value on CUDA instead of 4, 4 on the CPU (floats rounded
// to bf16), and only with train.dtype = bf16. Here (GPT-2, no MoE, no cp)
// those are each block's MLP activation (B T, F), its two norm outputs
// (B T, C each) and its attention output (B T, this rank's H D). recompute =
// none: each slot keeps all four per block. selective: the slot keeps the
// norm outputs and the attention output, and the MLP activation is one
// scratch buffer rebuilt per block. full: one shared set of the four, in
// scratch. Under sp the norm outputs stay fp32 (they are all-gathered into
// a buffer the final norm's output shares). Nothing else changes.
TEST(Planner, Bf16ActivationsHalveTheHeldActivationsOnCuda) {
  const auto est = [](const std::string& backend, const std::string& dtype, bool on, const std::string& rc,
                      bool sp) {
    std::vector<std::string> sets = {"backend=\"" + backend + "\"", "train.dtype=\"" + dtype + "\"",
                                     std::string("train.bf16_activations=") + (on ? "true" : "false"),
                                     "train.recompute=\"" + rc + "\""};
    if (sp) sets.insert(sets.end(), {"parallel.tp=2", "parallel.sp=true"});
    return pentad::estimate_memory(pentad::parse_config(kDeck, "t.toml", sets, sp ? 2 : 1));
  };
  const int act = int(pentad::Mem::activations), scr = int(pentad::Mem::scratch);
  for (const bool sp : {false, true})
    for (const std::string rc : {"none", "selective", "full"}) {
      SCOPED_TRACE("recompute " + rc + (sp ? ", tp 2 with sp" : ""));
      const double L = 2, BT = 2 * 16, F = 128.0 / (sp ? 2 : 1), C = 32, HD = C / (sp ? 2 : 1);
      // Bytes saved per block: the MLP activation, the GELU input, the norm
      // outputs (not under sp), the attention output and q, k, v (this rank's
      // heads; GPT-2: as many KV heads as heads).
      const double mlp = BT * F * 2, pre = BT * F * 2, norms = sp ? 0.0 : 2 * BT * C * 2, attn = 4 * BT * HD * 2;
      const double kept = pre + norms + attn;  // the block's Acts besides the MLP activation
      const double slot = rc == "none" ? L * (mlp + kept) : rc == "selective" ? L * kept : 0.0;
      const double scratch = rc == "none" ? 0.0 : rc == "selective" ? mlp : mlp + kept;
      const auto on = est("cuda", "bf16", true, rc, sp), off = est("cuda", "bf16", false, rc, sp);
      EXPECT_DOUBLE_EQ(off.stages[0].slot_bytes - on.stages[0].slot_bytes, slot);
      for (int c = 0; c < pentad::kMemCategories; ++c)
        EXPECT_DOUBLE_EQ(off.stages[0].bytes[size_t(c)] - on.stages[0].bytes[size_t(c)],
                         c == act ? slot : c == scr ? scratch : 0.0)
            << "category " << c;
      // The CPU's form is 4 bytes; fp32 holds nothing.
      const auto cpu_on = est("cpu", "bf16", true, rc, sp), cpu_off = est("cpu", "bf16", false, rc, sp);
      const auto fp32 = est("cuda", "fp32", true, rc, sp);
      for (int c = 0; c < pentad::kMemCategories; ++c) {
        EXPECT_DOUBLE_EQ(cpu_on.stages[0].bytes[size_t(c)], cpu_off.stages[0].bytes[size_t(c)]) << "category " << c;
        if (c != int(pentad::Mem::params)) {  // bf16 adds the weight copies there
          EXPECT_DOUBLE_EQ(fp32.stages[0].bytes[size_t(c)], off.stages[0].bytes[size_t(c)]) << "category " << c;
        }
      }
    }
  pentad::Config cfg;
  cfg.train.dtype = pentad::ComputeDtype::bf16;
  cfg.backend = pentad::BackendKind::cuda;
  EXPECT_EQ(pentad::bf16_activation_bytes(cfg), 2);
  cfg.backend = pentad::BackendKind::cpu;
  EXPECT_EQ(pentad::bf16_activation_bytes(cfg), 4);
  cfg.train.bf16_activations = false;
  EXPECT_EQ(pentad::bf16_activation_bytes(cfg), 0);
}

// The loss head's rows are cut into the fewest chunks of at most 16 Mi
// logits, all of one size but the last, which is at most (chunks - 1) rows
// shorter: GPT-2 124M at B 4, T 256 (V padded to 50304) is 4 x 256 rows, not
// 333 + 333 + 333 + 25 (issue 23).
TEST(Planner, HeadRowsCutEvenly) {
  const auto rows_of = [](int V, int B, int T) {
    pentad::ModelConfig m;
    m.n_layers = 1;
    m.d_model = 64;
    m.n_heads = 4;
    m.n_kv_heads = 4;
    m.d_ff = 256;
    m.vocab_size = V;
    m.seq_len = T;
    pentad::RankLayout one_rank;
    one_rank.cp.seq_len = T;
    return pentad::MemoryPlan(m, pentad::Recompute::none, B, one_rank).head_rows();
  };
  EXPECT_EQ(rows_of(50257, 4, 256), 256);
  for (const int V : {256, 50257, 128256})
    for (const int B : {1, 3, 4, 8})
      for (const int T : {64, 256, 1024}) {
        const long N = long(B) * T, Vp = (V + 127) / 128 * 128;
        const long rows = rows_of(V, B, T), cap = std::max(1L, std::min(N, (16L << 20) / Vp));
        const long chunks = (N + rows - 1) / rows;
        SCOPED_TRACE("V=" + std::to_string(V) + " N=" + std::to_string(N));
        EXPECT_LE(rows, cap);                    // within the 16 Mi logits budget
        EXPECT_EQ(chunks, (N + cap - 1) / cap);  // no more chunks than the budget needs
        EXPECT_LT(rows * chunks - N, chunks);    // the last chunk is short by less than one row per chunk
      }
}

// Expert tp: each tp rank holds d_ff columns [r F/tp, (r+1) F/tp) of every
// expert tensor but b_down (whole on every tp rank), so the tp ranks' blocks
// cover each such tensor exactly once; without it every tp rank holds the
// whole experts.
TEST(Planner, ExpertTpCutsEachExpertAlongDff) {
  const std::string moe = "[model]\nfamily = \"gpt2\"\nn_layers = 1\nd_model = 32\nd_ff = 64\nn_heads = 4\n"
                          "vocab_size = 256\nseq_len = 16\nn_experts = 4\ntop_k = 2\nmoe_every = 1\n"
                          "[parallel]\ntp = 2\nexpert_tp = true\n[data]\ntrain = \"x\"\n";
  const pentad::Config cfg = pentad::parse_config(moe, "t.toml", {}, 2);
  for (const bool etp : {true, false}) {
    SCOPED_TRACE(etp ? "expert_tp" : "replicated");
    std::map<std::string, std::vector<pentad::ParamSpec>> cuts;  // expert tensor -> its tp ranks' blocks
    for (int r = 0; r < 2; ++r) {
      pentad::ParamRank pr;
      pr.tp_rank = r;
      pr.tp = 2;
      pr.expert_tp = etp;
      for (const pentad::ParamSpec& s : pentad::model_param_list(cfg.model, pr))
        if (s.expert) cuts[s.name].push_back(s);
    }
    ASSERT_EQ(cuts.size(), 4u);  // w_up, b_up, w_down, b_down
    for (const auto& [name, blocks] : cuts) {
      ASSERT_EQ(blocks.size(), 2u) << name;
      const bool b_down = name.find("b_down") != std::string::npos;
      const int dim = name.find("w_down") != std::string::npos ? 2 : 1;  // w_down (E, C, F); w_up, b_up (E, F, ...)
      for (int r = 0; r < 2; ++r) {
        const pentad::ParamSpec& s = blocks[size_t(r)];
        if (!etp || b_down) {
          EXPECT_EQ(s.local_shape, s.shape) << name;
          EXPECT_EQ(s.tp_dim, -1) << name;
          continue;
        }
        EXPECT_EQ(s.tp_dim, dim) << name;
        EXPECT_EQ(s.local_shape[size_t(dim)], 32) << name;
        EXPECT_EQ(s.local_start[size_t(dim)], 32 * r) << name;
        EXPECT_EQ(int64_t(s.local_numel()) * 2, s.global_numel()) << name;
      }
    }
  }
}

// Fewer key/value heads than tp ranks: each head's wk, wv, bk, bv block is
// held whole by tp/n_kv_heads ranks, copies numbered 0.., copy 0 the one that
// counts and writes; every other tensor is cut as usual. The local dims hold
// one key/value head, and the plan stages dK, dV only with several heads.
TEST(Planner, KeyValueHeadsCopiedOverTp) {
  const std::string deck = "[model]\nfamily = \"llama\"\nn_layers = 1\nd_model = 32\nn_heads = 4\n"
                           "vocab_size = 256\nseq_len = 16\nqkv_bias = true\n[data]\ntrain = \"x\"\n";
  struct Case {
    int kv_heads, tp;
  };
  for (const Case c : {Case{1, 2}, Case{2, 4}, Case{1, 4}, Case{2, 2}}) {
    SCOPED_TRACE("kv_heads " + std::to_string(c.kv_heads) + " tp " + std::to_string(c.tp));
    const pentad::Config cfg = pentad::parse_config(
        deck + "[parallel]\ntp = " + std::to_string(c.tp) + "\n", "t.toml",
        {"model.n_kv_heads=" + std::to_string(c.kv_heads)}, c.tp);
    const int D = 8, copies = c.tp > c.kv_heads ? c.tp / c.kv_heads : 1;
    std::map<std::string, int> writers;  // kv tensor -> ranks with tp_copy 0
    for (int r = 0; r < c.tp; ++r) {
      pentad::ParamRank pr;
      pr.tp_rank = r;
      pr.tp = c.tp;
      for (const pentad::ParamSpec& s : pentad::model_param_list(cfg.model, pr)) {
        const bool kv = s.name.find("attn/wk") != std::string::npos || s.name.find("attn/wv") != std::string::npos ||
                        s.name.find("attn/bk") != std::string::npos || s.name.find("attn/bv") != std::string::npos;
        if (!kv) {
          EXPECT_EQ(s.tp_copy, 0) << s.name;
          continue;
        }
        // This rank's head: r * kv_heads / tp (or its share of the heads).
        const int64_t rows = int64_t(std::max(1, c.kv_heads / c.tp)) * D;
        EXPECT_EQ(s.shape[0], int64_t(c.kv_heads) * D) << s.name;
        EXPECT_EQ(s.local_shape[0], rows) << s.name;
        EXPECT_EQ(s.local_start[0], int64_t(r / copies) * rows) << s.name;
        EXPECT_EQ(s.tp_copy, r % copies) << s.name;
        if (s.tp_copy == 0) ++writers[s.name];
      }
    }
    ASSERT_EQ(writers.size(), 4u);
    for (const auto& [name, n] : writers) EXPECT_EQ(n, std::min(c.kv_heads, c.tp)) << name;  // one per block
    const pentad::LocalDims d = pentad::local_dims(cfg.model, 2, c.tp, false, pentad::CpSplit{16, 1});
    EXPECT_EQ(d.Hkv, std::max(1, c.kv_heads / c.tp));
    EXPECT_EQ(d.kv_copies, copies);
    // The tp traffic: one all-reduce of this rank's dK, dV (N x D each)
    // over the copies of its head per block in backward beyond the same
    // layout with a head per rank.
    if (copies > 1) {
      const pentad::Machine m = pentad::parse_machine(kMachine, "m.toml");
      const pentad::Config split = pentad::parse_config(deck + "[parallel]\ntp = " + std::to_string(c.tp) + "\n",
                                                        "t.toml", {"model.n_kv_heads=" + std::to_string(c.tp)}, c.tp);
      // Per micro-batch (grad_accum of them), N = micro_batch x seq_len rows.
      const double A = cfg.train.grad_accum, N = cfg.train.micro_batch * 16.0;
      const double ar = 2.0 * (copies - 1) / copies * 4;  // bytes per float of a ring all-reduce over the copies
      EXPECT_DOUBLE_EQ(pentad::predict(cfg, m).comm[0].tp_bytes - pentad::predict(split, m).comm[0].tp_bytes,
                       A * ar * 2 * N * D);
      EXPECT_DOUBLE_EQ(pentad::predict(cfg, m).comm[0].tp_calls - pentad::predict(split, m).comm[0].tp_calls, A);
    }
  }
}

// The bubble the time model charges: the schedule's formula where messages
// move eagerly (MPI), the grouped plan's replay where they move in groups
// (NCCL, the cuda default). Since training waits for a group only where an
// action needs it, the replay is the formula for interleaved over two stages
// too (it was larger while every group was waited for where it started;
// docs/pipeline-parallel.md).
TEST(Planner, GroupedMessagesChargeTheirReplayedBubble) {
  const pentad::Machine m = pentad::parse_machine(kMachine, "m.toml");
  const auto bubble = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> sets = {"model.n_layers=4", "parallel.pp=2", "train.grad_accum=16"};
    sets.insert(sets.end(), extra.begin(), extra.end());
    return pentad::predict(pentad::parse_config(kDeck, "t.toml", sets, 2), m).time.bubble;
  };
  const std::vector<std::string> il = {"parallel.schedule=interleaved", "parallel.virtual_stages=2"};
  const std::vector<std::string> cuda = {"backend=\"cuda\""};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const double formula_1f1b = pentad::bubble_formula(pentad::ScheduleKind::one_f_one_b, 2, 1, 16);
  const double formula_il = pentad::bubble_formula(pentad::ScheduleKind::interleaved, 2, 2, 16);
  EXPECT_DOUBLE_EQ(bubble({}), formula_1f1b);
  EXPECT_DOUBLE_EQ(bubble(cuda), formula_1f1b);
  EXPECT_DOUBLE_EQ(bubble(il), formula_il);
  EXPECT_DOUBLE_EQ(bubble(with(il, {"backend=\"cuda\"", "parallel.comm=\"mpi\""})), formula_il);
  const pentad::Schedule s = pentad::make_schedule(pentad::ScheduleKind::interleaved, 2, 2, 16);
  const pentad::P2pCheck c = pentad::check_p2p_plan(s, pentad::make_p2p_plan(s));
  ASSERT_TRUE(c.ok()) << c.error;
  const double replayed = *std::max_element(c.sim_bubble.begin(), c.sim_bubble.end());
  EXPECT_DOUBLE_EQ(replayed, formula_il);
  EXPECT_DOUBLE_EQ(bubble(with(il, cuda)), replayed);
  EXPECT_DOUBLE_EQ(bubble(with(il, {"parallel.pp_p2p=\"grouped\""})), replayed);
}
