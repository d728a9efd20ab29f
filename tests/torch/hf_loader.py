#!/usr/bin/python3
"""Independent loader for `pentad ckpt export --format hf` (tests/torch/hf_export.sh).

A float64 PyTorch implementation written from Hugging Face's documented module
structure, not from pentad's code: GPT2LMHeadModel (Conv1D weights stored
(in, out), q/k/v fused in attn.c_attn, tanh GELU), LlamaForCausalLM (RMSNorm,
SwiGLU, grouped-query attention, RoPE applied with rotate_half on the
half-split pairs (i, i + D/2)), Qwen2ForCausalLM (Llama's, with biases on
q_proj, k_proj and v_proj, added before RoPE), Qwen3ForCausalLM (Llama's, with
self_attn.q_norm and k_norm: RMSNorm over each head's head_dim values of q and
k, before RoPE), MixtralForCausalLM (block_sparse_moe: softmax
router, top-k, weights renormalised, experts w2(silu(w1 x) * w3 x)) and
Qwen3MoeForCausalLM (Qwen3's attention; an MoE MLP in block i when
(i + 1) % decoder_sparse_step == 0 and i is not in mlp_only_layers: mlp.gate,
top-k of the softmax, renormalised only if norm_topk_prob, experts
down_proj(silu(gate_proj x) * up_proj x); the other blocks' mlp dense),
Qwen2MoeForCausalLM (Qwen2's attention with its q/k/v biases; Qwen3-MoE's
sparse blocks, each adding its shared expert, mlp.shared_expert's
down_proj(silu(gate_proj x) * up_proj x) times sigmoid(mlp.shared_expert_gate x)
per token) and Phi3ForCausalLM (Llama's computation with self_attn.qkv_proj holding the q, k
and v rows in that order, mlp.gate_up_proj the gate's then the up's rows, cut
apart as its forward slices and chunks them; its rope_scaling LongRoPE,
longrope_scaled; with partial_rotary_factor, RoPE on the first
int(head_dim * factor) channels of each head only) and GemmaForCausalLM (Llama's
modules and names; the embeddings multiplied by sqrt(hidden_size) on the way
in, not in the tied head; every RMSNorm scaling by 1 + its weight; the MLP
down_proj(gelu_tanh(gate_proj x) * up_proj x), the GELU's tanh form named by
hidden_activation, else hidden_act). A config's sliding_window (when
it applies) masks the keys more than sliding_window - 1 positions back. The
sizes come from config.json, the tensors from the safetensors files by their
Hugging Face names (parsed here with struct + json + numpy).

Checks against a pentad debug dump (`--set log.dump=PATH`) of a run started
from the same export with checkpoint.init_from: the step-1 logits to
1e-5 of max|logits| and the step-1 loss to 1e-5 relative.
Usage: hf_loader.py HF_DIR DUMP.h5   (exit 1 on any failure)

Greedy mode, against `pentad sample HF_DIR --temperature 0 --ids` (pentad
reading the Hugging Face directory itself: config.json, safetensors):
  hf_loader.py greedy HF_DIR PROMPT "PENTAD IDS" [PROMPT "PENTAD IDS"]...
For each byte prompt (vocabulary 256), decodes as many tokens as pentad
printed, each by a full forward over the whole prefix (argmax, ties to the
lower id), and requires the same ids. Exit 1 on any difference. (Each
position's RoPE is the one a cached generation gives it: LongRoPE picks its
factors per forward call, the prompt's in one call, each new token's in its
own.)
"""
import json
import math
import os
import struct
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

LOGITS_REL = 1e-5   # max|diff| / max|ref|: pentad fp32 against this fp64 rebuild
LOSS_REL = 1e-5

torch.set_default_dtype(torch.float64)


def read_safetensors(path):
    """{name: float64 tensor} of one .safetensors file (F32, BF16, F16)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        buf = data[b:end]
        if e["dtype"] == "F32":
            a = np.frombuffer(buf, dtype="<f4")
        elif e["dtype"] == "BF16":
            a = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif e["dtype"] == "F16":
            a = np.frombuffer(buf, dtype="<f2")
        else:
            raise SystemExit(f"{path}: tensor {name}: dtype {e['dtype']} not handled")
        out[name] = torch.from_numpy(a.astype(np.float64).reshape(e["shape"]))
    return out


def read_model(d):
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for fn in files:
        w.update(read_safetensors(os.path.join(d, fn)))
    return w


def causal_attention(q, k, v, window=None):
    """q: (B, H, T, D), k/v: (B, H, T, D) -> (B, H, T, D), scores scaled by
    1/sqrt(D); with a window, query i sees keys j with i - window < j <= i."""
    T, D = q.shape[2], q.shape[3]
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    masked = torch.ones(T, T, dtype=torch.bool).triu(1)
    if window:
        masked |= torch.ones(T, T, dtype=torch.bool).tril(-window)
    s = s.masked_fill(masked, float("-inf"))
    return s.softmax(-1) @ v


def gpt2_forward(w, c, ids):
    """GPT2LMHeadModel: Conv1D y = x @ W + b with W (in, out)."""
    C, H = c["n_embd"], c["n_head"]
    D = C // H
    eps = c["layer_norm_epsilon"]
    pre = "transformer." if "transformer.wte.weight" in w else ""
    g = lambda n: w[pre + n]
    conv1d = lambda x, n: x @ g(n + ".weight") + g(n + ".bias")
    ln = lambda x, n: F.layer_norm(x, (C,), g(n + ".weight"), g(n + ".bias"), eps)
    B, T = ids.shape
    x = g("wte.weight")[ids] + g("wpe.weight")[:T][None]
    for i in range(c["n_layer"]):
        h = f"h.{i}."
        qkv = conv1d(ln(x, h + "ln_1"), h + "attn.c_attn")
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in qkv.split(C, dim=-1))
        a = causal_attention(q, k, v).transpose(1, 2).reshape(B, T, C)
        x = x + conv1d(a, h + "attn.c_proj")
        m = F.gelu(conv1d(ln(x, h + "ln_2"), h + "mlp.c_fc"), approximate="tanh")
        x = x + conv1d(m, h + "mlp.c_proj")
    x = ln(x, "ln_f")
    head = g("wte.weight") if c.get("tie_word_embeddings", True) else w["lm_head.weight"]
    return x @ head.T


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def llama3_scaled(inv_freq, rs):
    """config.json's rope_scaling of rope_type "llama3", as Hugging Face
    documents it: a pair whose wavelength 2 pi / f exceeds
    original_max_position_embeddings / low_freq_factor turns factor times
    slower, one shorter than original / high_freq_factor is kept, and one in
    between takes the smooth mix of the two."""
    L, lo, hi = rs["original_max_position_embeddings"], rs["low_freq_factor"], rs["high_freq_factor"]
    wavelen = 2 * math.pi / inv_freq
    slowed = inv_freq / rs["factor"]
    smooth = (L / wavelen - lo) / (hi - lo)
    mixed = (1 - smooth) * slowed + smooth * inv_freq
    out = torch.where(wavelen > L / lo, slowed, inv_freq)
    between = (wavelen >= L / hi) & (wavelen <= L / lo)
    return torch.where(between, mixed, out)


def yarn_scaled(inv_freq, rs, c, D):
    """config.json's rope_scaling of rope_type "yarn" as transformers reads it
    (an explicit factor; the original context from the object, else
    max_position_embeddings): with d(r) the pair index at which a pair turns r
    times over the original context, the pairs below d(beta_fast) keep f,
    those above d(beta_slow) take f / factor, linearly in between (the two
    indices floored and ceiled unless "truncate" is false); cos and sin are
    multiplied by attention_factor (else from mscale / mscale_all_dim, else
    0.1 ln(factor) + 1). Returns (inv_freq, attention factor)."""
    theta, factor = c["rope_theta"], rs["factor"]
    L = rs.get("original_max_position_embeddings") or c["max_position_embeddings"]
    fast, slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

    def index(turns):
        return D * math.log(L / (turns * 2 * math.pi)) / (2 * math.log(theta))

    lo, hi = index(fast), index(slow)
    if rs.get("truncate", True):
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, D - 1)
    if lo == hi:
        hi += 0.001
    ramp = torch.clamp((torch.arange(D // 2, dtype=torch.float64) - lo) / (hi - lo), 0, 1)
    out = inv_freq / factor * ramp + inv_freq * (1 - ramp)

    def mscale(s, m=1.0):
        return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0

    att = rs.get("attention_factor")
    if att is None:
        ms, msa = rs.get("mscale"), rs.get("mscale_all_dim")
        att = mscale(factor, ms) / mscale(factor, msa) if ms and msa else mscale(factor)
    return out, att


def longrope_scaled(inv_freq, rs, c, context):
    """A Phi3ForCausalLM's rope_scaling (type "longrope", or "su" / "yarn",
    which Phi3Config renames to it) as transformers reads it: pair i's
    frequency divided by short_factor[i] when the forward call's context (its
    largest position + 1) is at most original_max_position_embeddings, else
    by long_factor[i]; cos and sin multiplied by the attention factor
    (rope_scaling's "attention_factor", else sqrt(1 + ln f / ln original) for
    f = max_position_embeddings / original > 1, else 1). Returns (inv_freq,
    attention factor)."""
    original = c.get("original_max_position_embeddings", 4096)
    f = c.get("max_position_embeddings", 4096) / original
    ext = rs["long_factor"] if context > original else rs["short_factor"]
    att = rs.get("attention_factor") or (math.sqrt(1 + math.log(f) / math.log(original)) if f > 1 else 1.0)
    return inv_freq / torch.tensor(ext, dtype=torch.float64), att


def llama_forward(w, c, ids, prompt_len=None):
    """LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM / MixtralForCausalLM /
    Qwen3MoeForCausalLM / Qwen2MoeForCausalLM / Phi3ForCausalLM / GemmaForCausalLM with rotate_half RoPE. With
    prompt_len, the positions' RoPE is that of a generation with a cache: the
    first prompt_len positions computed in one forward call, every later one
    in a call of its own (what LongRoPE's per-call choice depends on)."""
    C, H, Hkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    D = c.get("head_dim") or C // H
    eps, theta = c["rms_norm_eps"], c["rope_theta"]
    mixtral = c["architectures"][0] == "MixtralForCausalLM"
    qwen2_moe = c["architectures"][0] == "Qwen2MoeForCausalLM"
    qwen2 = c["architectures"][0] == "Qwen2ForCausalLM" or (qwen2_moe and c.get("qkv_bias", True))
    qwen3_moe = c["architectures"][0] == "Qwen3MoeForCausalLM"
    qwen3 = c["architectures"][0] == "Qwen3ForCausalLM" or qwen3_moe
    phi3 = c["architectures"][0] == "Phi3ForCausalLM"
    gemma = c["architectures"][0] == "GemmaForCausalLM"
    window = c.get("sliding_window") if c["architectures"][0] in ("MistralForCausalLM", "Phi3ForCausalLM") else None
    B, T = ids.shape
    lin = lambda x, n: x @ w[n + ".weight"].T
    qkv = lambda x, n: lin(x, n) + w[n + ".bias"] if qwen2 else lin(x, n)
    unit = 1.0 if gemma else 0.0  # Gemma's RMSNorm: x_hat * (1 + weight)
    rms = lambda x, n: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (unit + w[n + ".weight"])
    act = F.silu
    if gemma:
        name = c.get("hidden_activation") or c.get("hidden_act", "gelu_pytorch_tanh")
        assert name in ("gelu_pytorch_tanh", "gelu_new"), f"Gemma activation {name}: this loader knows the tanh GELU"
        act = lambda t: F.gelu(t, approximate="tanh")
    # Phi-3's partial_rotary_factor: the first R = int(D * factor) channels
    # of each head turn (rotate_half over them), the rest pass.
    R = int(D * c.get("partial_rotary_factor", 1.0)) if phi3 else D
    inv_freq = 1.0 / theta ** (torch.arange(0, R, 2, dtype=torch.float64) / R)
    rs = c.get("rope_scaling")
    att = 1.0
    pos = torch.arange(T, dtype=torch.float64)
    freqs = pos[:, None] * inv_freq[None]                                       # (T, D/2)
    if rs is not None:
        kind = rs.get("rope_type", rs.get("type"))
        if phi3:
            assert kind in ("longrope", "su", "yarn"), f"rope_scaling {rs}: Phi-3's is LongRoPE"
            # each position's forward call: the whole sequence, or the prompt then one position per call
            calls = [T if prompt_len is None else max(prompt_len, p + 1) for p in range(T)]
            rows = []
            for p, context in enumerate(calls):
                f, att = longrope_scaled(inv_freq, rs, c, context)
                rows.append(p * f)
            freqs = torch.stack(rows)
        else:
            assert kind in ("llama3", "yarn", "linear"), f"rope_scaling {rs}: this loader knows llama3, yarn, linear"
            if kind == "linear":  # positions divided by the factor
                inv_freq = inv_freq / rs["factor"]
            elif kind == "llama3":
                inv_freq = llama3_scaled(inv_freq, rs)
            else:
                inv_freq, att = yarn_scaled(inv_freq, rs, c, D)
            freqs = pos[:, None] * inv_freq[None]
    emb = torch.cat((freqs, freqs), dim=-1)                                     # (T, R)
    cos, sin = att * emb.cos()[None, None], att * emb.sin()[None, None]
    x = w["model.embed_tokens.weight"][ids]
    if gemma:
        x = x * math.sqrt(C)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms(x, p + "input_layernorm")
        if phi3:  # one projection, sliced as q | k | v
            fused = lin(h, p + "self_attn.qkv_proj")
            q, k, v = fused[..., :H * D], fused[..., H * D:(H + Hkv) * D], fused[..., (H + Hkv) * D:]
        else:
            q, k, v = (qkv(h, p + "self_attn." + n) for n in ("q_proj", "k_proj", "v_proj"))
        q = q.reshape(B, T, H, D).transpose(1, 2)
        k = k.reshape(B, T, Hkv, D).transpose(1, 2)
        v = v.reshape(B, T, Hkv, D).transpose(1, 2)
        if qwen3:  # per head, over its D values
            q, k = rms(q, p + "self_attn.q_norm"), rms(k, p + "self_attn.k_norm")
        turn = lambda t: torch.cat((t[..., :R] * cos + rotate_half(t[..., :R]) * sin, t[..., R:]), dim=-1)
        q, k = turn(q), turn(k)
        k, v = (t.repeat_interleave(H // Hkv, dim=1) for t in (k, v))           # repeat_kv
        a = causal_attention(q, k, v, window).transpose(1, 2).reshape(B, T, H * D)
        x = x + lin(a, p + "self_attn.o_proj")
        h = rms(x, p + "post_attention_layernorm")
        if mixtral:
            x = x + sparse_moe(w, p + "block_sparse_moe.", h, c["num_local_experts"], c["num_experts_per_tok"],
                               True, ("w1", "w3", "w2"))
        elif (qwen3_moe or qwen2_moe) and i not in (c.get("mlp_only_layers") or []) and \
                (i + 1) % c.get("decoder_sparse_step", 1) == 0:
            x = x + sparse_moe(w, p + "mlp.", h, c["num_experts"], c["num_experts_per_tok"],
                               c.get("norm_topk_prob", False), ("gate_proj", "up_proj", "down_proj"))
            if qwen2_moe:  # the shared expert, scaled per token by its gate
                m = p + "mlp.shared_expert."
                shared = lin(F.silu(lin(h, m + "gate_proj")) * lin(h, m + "up_proj"), m + "down_proj")
                x = x + torch.sigmoid(lin(h, p + "mlp.shared_expert_gate")) * shared
        elif phi3:  # gate_up_proj chunked in two: the gate first
            gate, up = lin(h, p + "mlp.gate_up_proj").chunk(2, dim=-1)
            x = x + lin(up * F.silu(gate), p + "mlp.down_proj")
        else:
            m = p + "mlp."
            x = x + lin(act(lin(h, m + "gate_proj")) * lin(h, m + "up_proj"), m + "down_proj")
    x = rms(x, "model.norm")
    head = w["model.embed_tokens.weight"] if c.get("tie_word_embeddings", gemma) else w["lm_head.weight"]
    return x @ head.T


def sparse_moe(w, p, h, n_experts, k, renormalise, names):
    """Mixtral's or Qwen3-MoE's sparse MoE block: every token served by its
    top-k experts; names: the experts' (gate, up, down) projections."""
    gate, up, down = names
    B, T, C = h.shape
    x = h.reshape(-1, C)
    probs = (x @ w[p + "gate.weight"].T).softmax(-1)
    top, sel = probs.topk(k, dim=-1)
    if renormalise:
        top = top / top.sum(-1, keepdim=True)
    out = torch.zeros_like(x)
    for e in range(n_experts):
        rows, slot = torch.nonzero(sel == e, as_tuple=True)
        if len(rows) == 0:
            continue
        ex = p + f"experts.{e}."
        xe = x[rows]
        y = (F.silu(xe @ w[ex + gate + ".weight"].T) * (xe @ w[ex + up + ".weight"].T)) @ w[ex + down + ".weight"].T
        out.index_add_(0, rows, top[rows, slot][:, None] * y)
    return out.view(B, T, C)


def greedy(d, pairs):
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    if c["vocab_size"] != 256:
        sys.exit(f"{d}: vocabulary {c['vocab_size']}; greedy mode decodes byte prompts (256)")
    w = read_model(d)
    arch = c["architectures"][0]
    forward = gpt2_forward if arch == "GPT2LMHeadModel" else llama_forward
    ok = True
    for prompt, pentad_ids in pairs:
        got = [int(x) for x in pentad_ids.split()]
        tokens = list(prompt.encode())
        want, margins = [], []
        with torch.no_grad():
            for _ in range(len(got)):
                ids = torch.tensor([tokens])
                logits = (forward(w, c, ids) if forward is gpt2_forward else
                          forward(w, c, ids, prompt_len=len(prompt.encode())))[0, -1].numpy()
                best = int(np.argmax(logits))  # the first maximum: the lower id on ties
                top2 = np.sort(logits)[-2:]
                margins.append(float(top2[1] - top2[0]))
                want.append(best)
                tokens.append(best)
        same = got == want and len(got) > 0
        ok &= same
        print(f"{'ok  ' if same else 'FAIL'} {arch} greedy from {prompt!r}: pentad {got}, {arch} fp64 {want}"
              f" (smallest top-1/top-2 margin {min(margins, default=0):.3e})")
    return ok


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "greedy" and len(sys.argv) % 2 == 1:
        rest = sys.argv[3:]
        return greedy(sys.argv[2], list(zip(rest[0::2], rest[1::2])))
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    d, dump = sys.argv[1], sys.argv[2]
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    w = read_model(d)
    arch = c["architectures"][0]
    f = h5py.File(dump, "r")
    ids = torch.from_numpy(f["batch/inputs"][0].astype(np.int64))
    tg = torch.from_numpy(f["batch/targets"][0].astype(np.int64))
    logits = (gpt2_forward if arch == "GPT2LMHeadModel" else llama_forward)(w, c, ids)
    got = f["logits"][...].astype(np.float64)
    ref = logits.numpy()
    ok = True
    if got.shape != ref.shape:
        print(f"FAIL logits shape {got.shape} != {ref.shape}")
        return False
    diff = np.abs(got - ref)
    where = np.unravel_index(int(diff.argmax()), diff.shape)
    rel = float(diff.max() / np.abs(ref).max())
    good = rel <= LOGITS_REL
    ok &= good
    print(f"{'ok  ' if good else 'FAIL'} {arch} logits {ref.shape}: max|diff| {diff.max():.3e} at {tuple(map(int, where))} "
          f"(pentad {got[where]:.9g}, {arch} {ref[where]:.9g}) = {rel:.3e} of max|logits| {np.abs(ref).max():.3e} "
          f"(limit {LOGITS_REL:g})")
    loss = float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tg.reshape(-1)))
    got_loss = float(f["metrics/loss"][0])
    lrel = abs(got_loss - loss) / abs(loss)
    good = lrel <= LOSS_REL
    ok &= good
    print(f"{'ok  ' if good else 'FAIL'} step-1 loss: pentad {got_loss:.9g}, {arch} {loss:.9g}, relative {lrel:.3e} "
          f"(limit {LOSS_REL:g}); log(V) = {math.log(ref.shape[-1]):.4f}")
    # Non-triviality: trained weights (the loss is below chance) with spread logits.
    good = loss < 0.95 * math.log(ref.shape[-1]) and float(ref.std()) > 1e-2
    ok &= good
    print(f"{'ok  ' if good else 'FAIL'} non-trivial: loss {loss:.4f} < 0.95 log(V), logits std {ref.std():.3e}")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
