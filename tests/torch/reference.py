#!/usr/bin/python3
"""PyTorch float64 oracle for a pentad debug dump (`--set log.dump=PATH`).

Rebuilds the GPT-2 / Llama model of the dump's resolved deck from `init/*`,
checks step 1 (logits, loss, every `grad/*`), then replays all steps on the
dump's batches (warmup + cosine lr, clip_grad_norm_ semantics, torch AdamW)
and checks per-step loss, lr, grad norm and every `final/*` tensor.
Mixture-of-experts decks (model.n_experts > 0) are rebuilt with the routing
rules of src/parallel/ep/moe.cpp: per-sequence top-k (ties to the lower expert), first
choices served before second ones, per-sequence capacity, and the
load-balancing and z losses added to the objective (metrics/aux_loss); a
shared expert (model.shared_expert_ffn) every token goes through, scaled by
sigmoid(x . w) with model.shared_expert_gate.
Usage: /usr/bin/python3 reference.py DUMP.h5   (exit 1 on any failure)
"""
import math
import os
import sys
import tomllib

import h5py
import numpy as np
import torch
import torch.nn.functional as F

# --- Tolerances: pentad runs in fp32, this oracle in fp64 --------------------
# fp32 unit roundoff is u = 6e-8. A length-K dot product (K <= 4C = 128 here)
# carries ~sqrt(K)*u ~ 1e-6 relative error to the sum of |terms|, and a tiny
# model stacks ~10 such ops, so step-1 quantities should agree to ~1e-6 of
# their scale. We allow 10x that: atol = 1e-5 * max|ref| of the tensor (errors
# are relative to the magnitudes that feed an element, not to the element,
# which may be a near-cancelling sum), plus rtol = 1e-4 on the element.
# Scalars (loss, grad norm) are sums/means of many such values: rtol 1e-5.
STEP1_ATOL_REL = 1e-5      # x max|ref| of the tensor
STEP1_RTOL = 1e-4
LOSS_RTOL = 1e-5           # step-1 loss and grad norm
LR_RTOL = 1e-6             # lr is a closed formula; fp32 representation ~6e-8
# The trajectory (steps 2..N, final params). AdamW moves every element by
# lr * m_hat/(sqrt(v_hat)+eps), with |m_hat/sqrt(v_hat)| <~ 1 whatever the
# gradient's scale, so trajectory errors are measured in units of the summed
# learning rate sum_s lr(s), not of the parameter: an fp32 gradient error
# u * max|g| perturbs m_hat/sqrt(v_hat) of an element by ~u * max|g|/|g_elem|,
# ~1e-3 for the elements whose gradient is ~1e-4 of the tensor's largest (and
# O(1) for gpt2's key bias, whose true gradient is zero). fp32 torch runs of
# the tiny decks (20 seeds, an independent fp32 implementation with grad
# accumulation) reach at most 1.5e-3 of sum lr; we allow 5e-3 of sum lr
# (~2.7e-4 for the tiny decks) plus rtol 1e-4. A wrong AdamW detail (decay on
# a norm weight: wd * sum lr ~ 5e-3, missing bias correction, eps inside the
# sqrt) moves parameters by >= 1e-3. Loss stays within ~1e-7 relative over the
# steps; the grad norm, a norm of second-order-sensitive quantities, drifted
# up to 3.5e-5 relative at later steps.
FINAL_ATOL_LR = 5e-3       # x sum over steps of lr(s)
# gpt2's key bias is the exception: its true gradient is zero at every step,
# so in fp32 Adam turns rounding noise g ~ u*scale into updates of up to lr
# each step (|g| > eps once the model's gradients exceed ~0.1). Its final
# value is not determined by the math; we only bound it by Adam's reach,
# |m_hat/sqrt(v_hat)| <= (1-b1)/sqrt((1-b2)(1-b1^2/b2)) ~ 1.2 per step for
# both runs: 2.4 * sum lr.
FINAL_BK_ATOL_LR = 2.4
FINAL_RTOL = 1e-4
TRAJ_LOSS_RTOL = 1e-5      # per-step loss, every step
TRAJ_NORM_RTOL = 3e-4      # per-step grad norm, steps >= 2
# Non-triviality: the run must learn something and every gradient must live.
MIN_LOSS_DROP = 0.05       # relative drop of loss from step 1 to the last step

torch.set_default_dtype(torch.float64)


# --- Model ------------------------------------------------------------------
def param_shapes(m):
    """Expected names and global shapes of every parameter, from [model]."""
    C, H, Hkv, F_, V, T = (m["d_model"], m["n_heads"], m["n_kv_heads"],
                           m["d_ff"], m["vocab_size"], m["seq_len"])
    D = m.get("head_dim") or C // H  # model.head_dim (resolved in the dump)
    gpt2 = m["family"] == "gpt2"
    s = {"model/wte": (V, C)}
    if gpt2:
        s["model/wpe"] = (T, C)
    E = m.get("n_experts", 0)
    for i in range(m["n_layers"]):
        p = f"model/layers/{i}/"
        s[p + "attn_norm/w"] = (C,)
        s[p + "attn/wq"] = (H * D, C)
        s[p + "attn/wk"] = (Hkv * D, C)
        s[p + "attn/wv"] = (Hkv * D, C)
        s[p + "attn/wo"] = (C, H * D)
        s[p + "mlp_norm/w"] = (C,)
        if m.get("qkv_bias", gpt2):  # gpt2; a llama with Qwen2's attention biases
            s[p + "attn/bq"] = (H * D,)
            s[p + "attn/bk"] = (Hkv * D,)
            s[p + "attn/bv"] = (Hkv * D,)
        if m.get("qk_norm"):  # Qwen3: one RMSNorm weight over every head of q, one of k
            s[p + "attn/q_norm"] = (D,)
            s[p + "attn/k_norm"] = (D,)
        if gpt2:
            s[p + "attn_norm/b"] = (C,)
            s[p + "mlp_norm/b"] = (C,)
            s[p + "attn/bo"] = (C,)
        if is_moe_block(m, i):
            s[p + "mlp/router/w"] = (E, C)
            x = p + "mlp/experts/"
            if not gpt2:
                s[x + "w_gate"] = (E, F_, C)
            s[x + "w_up"] = (E, F_, C)
            s[x + "w_down"] = (E, C, F_)
            if gpt2:
                s[x + "b_up"] = (E, F_)
                s[x + "b_down"] = (E, C)
            Fs = m.get("shared_expert_ffn", 0)
            if Fs:  # the shared expert, the family's MLP of width Fs, and its gate
                x = p + "mlp/shared/"
                if not gpt2:
                    s[x + "w_gate"] = (Fs, C)
                s[x + "w_up"] = (Fs, C)
                s[x + "w_down"] = (C, Fs)
                if gpt2:
                    s[x + "b_up"] = (Fs,)
                    s[x + "b_down"] = (C,)
                if m.get("shared_expert_gate"):
                    s[x + "gate"] = (1, C)
        elif gpt2:
            s[p + "mlp/w_up"] = (F_, C)
            s[p + "mlp/b_up"] = (F_,)
            s[p + "mlp/w_down"] = (C, F_)
            s[p + "mlp/b_down"] = (C,)
        else:
            s[p + "mlp/w_gate"] = (F_, C)
            s[p + "mlp/w_up"] = (F_, C)
            s[p + "mlp/w_down"] = (C, F_)
    s["model/final_norm/w"] = (C,)
    if gpt2:
        s["model/final_norm/b"] = (C,)
    if not m["tied_embeddings"]:
        s["model/lm_head"] = (V, C)
    return s


def gate_act(m):
    """The gated MLP's activation (model.mlp_act): SiLU, or Gemma's tanh GELU."""
    if m.get("mlp_act", "silu") == "gelu_tanh":
        return lambda x: F.gelu(x, approximate="tanh")
    return F.silu


def is_moe_block(m, i):
    return m.get("n_experts", 0) > 0 and (i + 1) % m["moe_every"] == 0


def moe(p, m, a, h, aux):
    """MoE MLP of block prefix a on h (B, T, C); appends (aux_s (B), lse (B*T)) to aux."""
    gpt2 = m["family"] == "gpt2"
    B, T, C = h.shape
    E, k = m["n_experts"], m["top_k"]
    x = h.reshape(B * T, C)
    logits = x @ p[a + "mlp/router/w"].T                              # (N, E)
    probs = logits.softmax(-1)
    lse = torch.logsumexp(logits, -1)
    pr = probs.detach().numpy()
    idx = np.argsort(-pr, axis=1, kind="stable")[:, :k]               # ties: lower expert first
    chosen = probs.gather(1, torch.from_numpy(idx))                   # (N, k)
    renormalize = m.get("renormalize_top_k", k > 1)                  # else the raw probabilities
    w = chosen / chosen.sum(-1, keepdim=True) if renormalize else chosen
    cap = T * k if m.get("dropless", False) else math.ceil(m["capacity_factor"] * T * k / E)
    keep = np.zeros((B * T, k), dtype=bool)
    f = np.zeros((B, E))
    for s in range(B):
        count = np.zeros(E, dtype=np.int64)
        for j in range(k):
            for t in range(s * T, (s + 1) * T):
                e = idx[t, j]
                f[s, e] += 1
                if count[e] < cap:
                    count[e] += 1
                    keep[t, j] = True
    f /= T * k
    out = torch.zeros_like(x)
    xp = a + "mlp/experts/"
    for e in range(E):
        rows, js = np.nonzero((idx == e) & keep)
        if len(rows) == 0:
            continue
        xe = x[rows]
        if gpt2:
            u = F.gelu(xe @ p[xp + "w_up"][e].T + p[xp + "b_up"][e], approximate="tanh")
            y = u @ p[xp + "w_down"][e].T + p[xp + "b_down"][e]
        else:
            u = gate_act(m)(xe @ p[xp + "w_gate"][e].T) * (xe @ p[xp + "w_up"][e].T)
            y = u @ p[xp + "w_down"][e].T
        out = out.index_add(0, torch.from_numpy(rows), w[rows, js][:, None] * y)
    if m.get("shared_expert_ffn", 0):  # every token through the shared expert, scaled by its gate
        sp = a + "mlp/shared/"
        if gpt2:
            u = F.gelu(x @ p[sp + "w_up"].T + p[sp + "b_up"], approximate="tanh")
            y = u @ p[sp + "w_down"].T + p[sp + "b_down"]
        else:
            u = gate_act(m)(x @ p[sp + "w_gate"].T) * (x @ p[sp + "w_up"].T)
            y = u @ p[sp + "w_down"].T
        if m.get("shared_expert_gate"):
            y = torch.sigmoid(x @ p[sp + "gate"].T) * y
        out = out + y
    P = probs.view(B, T, E).mean(1)                                    # (B, E)
    aux.append((E * (torch.from_numpy(f) * P).sum(-1), lse))
    return out.view(B, T, C)


def aux_objective(m, aux):
    """aux_loss_coef * mean over sequences of aux_s + z_loss_coef * mean lse^2, summed over MoE blocks."""
    if not aux:
        return torch.zeros(())
    return sum(m["aux_loss_coef"] * a.mean() + m["z_loss_coef"] * (z ** 2).mean() for a, z in aux)


def rope_inv_freq(m, D, context):
    """theta^(-2i/D) per pair i; with rope_scaling = "llama3", Llama 3.1's rule
    as a clamped mix: s = (L / wavelength - low) / (high - low) clamped to
    [0, 1] (L the original context, wavelength 2 pi / f), then
    (1 - s) f / factor + s f, so short wavelengths keep f, long ones f / factor.
    With "longrope", f / rope_short_factor[i] when the forward call's context
    is at most L, else f / rope_long_factor[i]."""
    f = m["rope_theta"] ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    if m.get("rope_scaling", "none") == "longrope":
        ext = m["rope_long_factor"] if context > m["rope_original_context"] else m["rope_short_factor"]
        return f / torch.tensor(ext, dtype=torch.float64)
    if m.get("rope_scaling", "none") == "yarn":
        return yarn_inv_freq(m, f, D)
    if m.get("rope_scaling", "none") == "linear":  # position interpolation: every pair factor times slower
        return f / m["rope_scaling_factor"]
    if m.get("rope_scaling", "none") != "llama3":
        return f
    L, lo, hi = m["rope_original_context"], m["rope_low_freq_factor"], m["rope_high_freq_factor"]
    s = ((L * f / (2 * math.pi) - lo) / (hi - lo)).clamp(0.0, 1.0)
    return (1 - s) * f / m["rope_scaling_factor"] + s * f


def yarn_inv_freq(m, f, D):
    """YaRN as Hugging Face computes it: over the original context L pair i
    makes L f_i / (2 pi) turns, which is beta at the (real) pair index
    i(beta) = D ln(L / (2 pi beta)) / (2 ln theta). The mix weight of the
    slowed frequency f / factor rises linearly in i from i(beta_fast) to
    i(beta_slow) (those ends rounded down and up with rope_truncate,
    clamped to [0, D - 1], 0.001 apart at least)."""
    L, theta = m["rope_original_context"], m["rope_theta"]
    ends = [D * math.log(L / (2 * math.pi * m[k])) / (2 * math.log(theta))
            for k in ("rope_beta_fast", "rope_beta_slow")]
    if m["rope_truncate"]:
        ends = [math.floor(ends[0]), math.ceil(ends[1])]
    a, b = max(ends[0], 0), min(ends[1], D - 1)
    if a == b:
        b += 0.001
    w = ((torch.arange(D // 2, dtype=torch.float64) - a) / (b - a)).clamp(0.0, 1.0)
    return w * f / m["rope_scaling_factor"] + (1 - w) * f


def rope_scale(m):
    """The factor on every rotated pair: YaRN's attention factor (given, or
    0.1 ln(factor) + 1), LongRoPE's (given, or sqrt(1 + ln(factor) / ln L),
    L the original context), else 1."""
    kind, factor = m.get("rope_scaling", "none"), m.get("rope_scaling_factor", 1.0)
    if kind not in ("yarn", "longrope"):
        return 1.0
    if m["rope_attention_factor"] > 0:
        return m["rope_attention_factor"]
    if factor <= 1:
        return 1.0
    if kind == "longrope":
        return math.sqrt(1.0 + math.log(factor) / math.log(m["rope_original_context"]))
    return 1.0 + 0.1 * math.log(factor)


def rope(x, m, prompt_len=None):
    """Rotate pairs (2i, 2i+1) of each head by pos * rope_inv_freq(m, R)[i] and
    scale them by rope_scale(m), for the first R = model.rotary_dim channels
    (0: all D), as a head of R would; the others pass unchanged. x: (B, T, h,
    D). The forward call's context (LongRoPE's choice) is T; with prompt_len,
    that of a cached generation: prompt_len for the prompt's positions,
    pos + 1 for each later one."""
    T, D = x.shape[1], x.shape[3]
    R = m.get("rotary_dim") or D
    calls = [T if prompt_len is None else max(prompt_len, t + 1) for t in range(T)]
    ang = torch.stack([t * rope_inv_freq(m, R, c) for t, c in enumerate(calls)])  # (T, R/2)
    a = rope_scale(m)
    cos, sin = a * ang.cos()[None, :, None, :], a * ang.sin()[None, :, None, :]
    x0, x1 = x[..., 0:R:2], x[..., 1:R:2]
    turned = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)
    return torch.cat((turned, x[..., R:]), dim=-1)


def attention(q, k, v):
    """Causal GQA: query head h reads kv head h // (H/Hkv). q: (B,T,H,D), k,v: (B,T,Hkv,D)."""
    B, T, H, D = q.shape
    group = H // k.shape[2]
    k = k.repeat_interleave(group, dim=2)
    v = v.repeat_interleave(group, dim=2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))                  # (B, H, T, D)
    scores = q @ k.transpose(-1, -2) / math.sqrt(D)                    # (B, H, T, T)
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(causal, float("-inf"))
    o = scores.softmax(-1) @ v                                         # (B, H, T, D)
    return o.transpose(1, 2).reshape(B, T, H * D)


def forward(p, m, tokens, aux=None, prompt_len=None):
    """Logits (B, T, V) for int64 tokens (B, T); MoE blocks append their aux terms to aux.
    prompt_len: RoPE as in a cached generation from a prompt that long (rope)."""
    gpt2 = m["family"] == "gpt2"
    C, H, Hkv = m["d_model"], m["n_heads"], m["n_kv_heads"]
    D = m.get("head_dim") or C // H  # model.head_dim (resolved in the dump)
    B, T = tokens.shape
    eps = m["norm_eps"]

    def rms(x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

    # Gemma (model.norm_plus_one): an RMSNorm scales by 1 + its weight.
    unit = 1.0 if m.get("norm_plus_one") else 0.0

    def norm(x, pre):
        if gpt2:
            return F.layer_norm(x, (C,), p[pre + "/w"], p[pre + "/b"], eps)
        return rms(x) * (unit + p[pre + "/w"])

    def lin(x, w, b=None):
        y = x @ p[w].T
        return y + p[b] if b is not None else y

    x = p["model/wte"][tokens]
    if m.get("embed_scale"):  # Gemma: the embeddings times sqrt(d_model), in the head unscaled
        x = x * math.sqrt(C)
    if gpt2:
        x = x + p["model/wpe"][:T][None]
    for i in range(m["n_layers"]):
        a = f"model/layers/{i}/"
        h = norm(x, a + "attn_norm")
        # The q/k/v biases are added before RoPE turns q and k (Qwen2's order).
        bias = (lambda n: a + "attn/" + n) if m.get("qkv_bias", gpt2) else (lambda n: None)
        q = lin(h, a + "attn/wq", bias("bq")).view(B, T, H, D)
        k = lin(h, a + "attn/wk", bias("bk")).view(B, T, Hkv, D)
        v = lin(h, a + "attn/wv", bias("bv")).view(B, T, Hkv, D)
        if m.get("qk_norm"):  # Qwen3: each head of q and k RMS-normalized before RoPE
            q = rms(q) * (unit + p[a + "attn/q_norm"])
            k = rms(k) * (unit + p[a + "attn/k_norm"])
        if not gpt2:
            q, k = rope(q, m, prompt_len), rope(k, m, prompt_len)
        x = x + lin(attention(q, k, v), a + "attn/wo", a + "attn/bo" if gpt2 else None)
        h = norm(x, a + "mlp_norm")
        if is_moe_block(m, i):
            x = x + moe(p, m, a, h, aux if aux is not None else [])
        elif gpt2:
            u = F.gelu(lin(h, a + "mlp/w_up", a + "mlp/b_up"), approximate="tanh")
            x = x + lin(u, a + "mlp/w_down", a + "mlp/b_down")
        else:
            u = gate_act(m)(lin(h, a + "mlp/w_gate")) * lin(h, a + "mlp/w_up")
            x = x + lin(u, a + "mlp/w_down")
    x = norm(x, "model/final_norm")
    head = p["model/wte"] if m["tied_embeddings"] else p["model/lm_head"]
    return x @ head.T


def lr_at(s, t):
    """Learning rate of step s (1-based): linear warmup, then train.lr_schedule
    as docs/running.md states it (cosine or linear to min_lr, constant, or
    wsd: constant, then linear to min_lr over the last decay_steps)."""
    lr, lo, w, n = t["lr"], t["min_lr"], t["warmup_steps"], t["steps"]
    if s <= w:
        return lr * s / w
    p = min(1.0, max(0.0, (s - w) / max(1, n - w)))
    kind = t.get("lr_schedule", "cosine")
    if kind == "cosine":
        return lo + 0.5 * (lr - lo) * (1 + math.cos(math.pi * p))
    if kind == "linear":
        return lr - (lr - lo) * p
    if kind == "constant":
        return lr
    if kind == "wsd":
        d = t["decay_steps"]
        return lr if s <= n - d else lr - (lr - lo) * min(1.0, (s - (n - d)) / d)
    raise ValueError(f"unknown train.lr_schedule {kind!r}")


# --- Checking ---------------------------------------------------------------
class Report:
    def __init__(self):
        self.passed = self.failed = 0
        self.worst = {}     # class -> (ratio, line)
        self.order = []

    def record(self, cls, ok, ratio, line):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"  FAIL {cls}: {line}")
        if cls not in self.worst:
            self.order.append(cls)
        if cls not in self.worst or ratio > self.worst[cls][0] or not np.isfinite(ratio):
            self.worst[cls] = (ratio, line)

    def tensor(self, cls, name, got, ref, atol_rel, rtol, scale=None):
        """|got - ref| <= atol_rel * scale + rtol * |ref| elementwise; scale defaults to max|ref|."""
        got = np.asarray(got, dtype=np.float64)
        ref = np.asarray(ref, dtype=np.float64)
        if got.shape != ref.shape:
            self.record(cls, False, math.inf, f"{name}: shape {got.shape} != reference {ref.shape}")
            return
        if scale is None:
            scale = float(np.abs(ref).max()) if ref.size else 0.0
        atol = atol_rel * scale
        diff = np.abs(got - ref)
        allowed = atol + rtol * np.abs(ref)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio_arr = np.where(allowed > 0, diff / allowed, np.where(diff > 0, np.inf, 0.0))
        ratio_arr = np.where(np.isfinite(got), ratio_arr, np.inf)
        where = np.unravel_index(int(np.argmax(ratio_arr)), ref.shape) if ref.size else ()
        ratio = float(ratio_arr[where]) if ref.size else 0.0
        ok = bool(np.all(diff <= allowed) and np.all(np.isfinite(got)))
        self.record(cls, ok, ratio,
                    f"{name}: max|diff| {float(diff.max()):.3e} (worst at {tuple(int(i) for i in where)}: "
                    f"pentad {float(got[where]):.9g} ref {float(ref[where]):.9g}, "
                    f"allowed {float(allowed[where]):.3e}, {ratio:.3f} of tolerance; atol scale {scale:.3e})")

    def scalar(self, cls, name, got, ref, rtol):
        diff = abs(got - ref)
        allowed = rtol * abs(ref)
        ratio = diff / allowed if allowed > 0 else (math.inf if diff > 0 else 0.0)
        ok = bool(diff <= allowed)
        self.record(cls, ok, ratio, f"{name}: pentad {got:.9g} ref {ref:.9g}, |diff| {diff:.3e} "
                                    f"(rel {diff / abs(ref) if ref else math.inf:.3e}), {ratio:.3f} of tolerance")

    def check(self, cls, ok, line):
        self.record(cls, bool(ok), 0.0 if ok else math.inf, line)

    def summary(self):
        for cls in self.order:
            ratio, line = self.worst[cls]
            print(f"{cls:>14} worst: {line}")
        print(f"{self.passed} passed, {self.failed} failed")
        return self.failed == 0


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rep = Report()
    f = h5py.File(sys.argv[1], "r")
    cfg = tomllib.loads(f.attrs["config"] if isinstance(f.attrs["config"], str)
                        else f.attrs["config"].decode())
    m, t = cfg["model"], cfg["train"]
    gpt2 = m["family"] == "gpt2"
    print(f"dump {sys.argv[1]}: {m['family']} L={m['n_layers']} C={m['d_model']} H={m['n_heads']} "
          f"Hkv={m['n_kv_heads']} D={m.get('head_dim')} F={m['d_ff']} V={m['vocab_size']} T={m['seq_len']} "
          f"tied={m['tied_embeddings']} steps={t['steps']} recompute={t.get('recompute')} "
          f"dp={cfg.get('parallel', {}).get('dp')}")

    # Dump layout: exactly the expected tensors, with the expected shapes.
    shapes = param_shapes(m)
    for grp in ("init", "grad", "final"):
        have = set()
        f[grp].visit(lambda n, g=f[grp]: have.add(n) if isinstance(g[n], h5py.Dataset) else None)
        have = {n for n in have}
        missing, extra = sorted(set(shapes) - have), sorted(have - set(shapes))
        rep.check("layout", not missing and not extra,
                  f"{grp}/: {len(have)} tensors; missing {missing[:4]} extra {extra[:4]}")
        for n in sorted(set(shapes) & have):
            if f[grp][n].shape != shapes[n]:
                rep.check("layout", False, f"{grp}/{n}: shape {f[grp][n].shape} != {shapes[n]}")
    names = sorted(n for n in shapes if n in f["init"])
    inputs = torch.from_numpy(f["batch/inputs"][...].astype(np.int64))
    targets = torch.from_numpy(f["batch/targets"][...].astype(np.int64))
    n_steps = t["steps"]
    b_global = t["micro_batch"] * t["grad_accum"] * cfg["parallel"]["dp"]
    rep.check("layout", tuple(inputs.shape) == (n_steps, b_global, m["seq_len"]) == tuple(targets.shape),
              f"batch shape {tuple(inputs.shape)} / {tuple(targets.shape)}, expected "
              f"{(n_steps, b_global, m['seq_len'])}")
    # A loss mask (token files of versions 3 and 4) leaves targets -1: they
    # add nothing to the loss, whose mean is over the others (ignore_index).
    trained = targets >= 0
    masked = os.environ.get("PENTAD_LOSS_MASK") == "1"
    rep.check("layout", bool((inputs >= 0).all() and (inputs < m["vocab_size"]).all()
                             and (targets < m["vocab_size"]).all() and (trained | (targets == -1)).all()),
              "batch tokens in [0, vocab_size), targets there or -1 (not trained)")
    rep.check("batch", bool(((targets[:, :, :-1] == inputs[:, :, 1:]) | ~trained[:, :, :-1]).all()),
              "targets are the inputs shifted by one token (where trained)")
    n_ignored = int((~trained).sum())
    rep.check("batch", (n_ignored > 0) == masked and (not masked or bool(trained.any(-1).any(-1).all())),
              f"{n_ignored} of {targets.numel()} targets not trained; "
              + ("a loss mask, and every step trains some" if masked else "no loss mask"))
    if rep.failed:
        return rep.summary()

    # Step 1 and the whole trajectory in fp64.
    p = {n: torch.from_numpy(f["init"][n][...].astype(np.float64)).requires_grad_() for n in names}
    # Matrices and embeddings decay; norms and biases (also the experts' (E, F) biases) do not.
    decays = lambda n: p[n].ndim >= 2 and not n.split("/")[-1].startswith("b_")
    decay = [p[n] for n in names if decays(n)]
    no_decay = [p[n] for n in names if not decays(n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": t["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"])
    losses, lrs, norms, auxes, n_clipped = [], [], [], [], 0
    for s in range(1, n_steps + 1):
        lr = lr_at(s, t)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=False)
        aux = []
        logits = forward(p, m, inputs[s - 1], aux)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets[s - 1].reshape(-1), ignore_index=-1)
        aux_loss = aux_objective(m, aux)
        (loss + aux_loss).backward()
        auxes.append(float(aux_loss))
        norm = math.sqrt(sum(float((p[n].grad ** 2).sum()) for n in names))
        if s == 1:
            step1_checks(rep, f, m, names, p, logits, loss, norm)
        if t["grad_clip"] > 0 and norm > t["grad_clip"]:
            n_clipped += 1
            with torch.no_grad():
                for n in names:
                    p[n].grad.mul_(t["grad_clip"] / (norm + 1e-6))
        opt.step()
        losses.append(float(loss))
        lrs.append(lr)
        norms.append(norm)

    got_loss, got_lr, got_norm = (f["metrics/" + k][...].astype(np.float64) for k in ("loss", "lr", "grad_norm"))
    for k, arr in (("loss", got_loss), ("lr", got_lr), ("grad_norm", got_norm)):
        rep.check("layout", arr.shape == (n_steps,), f"metrics/{k} shape {arr.shape}, expected ({n_steps},)")
    if rep.failed:
        return rep.summary()
    for s in range(n_steps):
        rep.scalar("loss/step", f"step {s + 1} loss", got_loss[s], losses[s], TRAJ_LOSS_RTOL)
        rep.scalar("lr/step", f"step {s + 1} lr", got_lr[s], lrs[s], LR_RTOL)
        rep.scalar("grad_norm/step", f"step {s + 1} grad_norm", got_norm[s], norms[s],
                   LOSS_RTOL if s == 0 else TRAJ_NORM_RTOL)
    if m.get("n_experts", 0) > 0:
        got_aux = f["metrics/aux_loss"][...].astype(np.float64)
        rep.check("layout", got_aux.shape == (n_steps,), f"metrics/aux_loss shape {got_aux.shape}")
        for s in range(n_steps):
            rep.scalar("aux_loss/step", f"step {s + 1} aux_loss", got_aux[s], auxes[s], TRAJ_LOSS_RTOL)
    lr_sum = sum(lrs)
    for n in names:
        bk = gpt2 and n.endswith("attn/bk")
        rep.tensor("final(bk bound)" if bk else "final", "final/" + n, f["final"][n][...],
                   p[n].detach().numpy(), FINAL_BK_ATOL_LR if bk else FINAL_ATOL_LR, FINAL_RTOL, scale=lr_sum)

    # Non-triviality: learning happened, and it moved every parameter.
    drop = (losses[0] - losses[-1]) / losses[0]
    rep.check("nontrivial", drop >= MIN_LOSS_DROP,
              f"loss {losses[0]:.4f} -> {losses[-1]:.4f} (relative drop {drop:.3f}, need >= {MIN_LOSS_DROP})")
    moved = [n for n in names if not np.array_equal(f["final"][n][...], f["init"][n][...])]
    rep.check("nontrivial", len(moved) == len(names),
              f"{len(moved)}/{len(names)} parameters changed from init to final")
    print(f"clipping: grad norm > grad_clip={t['grad_clip']:g} at {n_clipped} of {n_steps} steps "
          f"(reference norms {min(norms):.4g}..{max(norms):.4g})")
    return rep.summary()


def bk_grad_scale(n, p, gpt2):
    """GPT-2's key bias gets no gradient (softmax is shift-invariant per query row, so
    q.bk cancels): its fp64 gradient is ~1e-19 and its fp32 one is rounding noise
    of the terms that also form bq's gradient. Scale its atol by the sibling bq.
    Under RoPE (a llama with qkv_bias) q.(R bk) depends on the key's position:
    that key bias has a gradient and is checked as any other tensor."""
    if not (gpt2 and n.endswith("attn/bk")):
        return None
    return float(p[n[:-2] + "bq"].grad.abs().max())


def step1_checks(rep, f, m, names, p, logits, loss, norm):
    gpt2 = m["family"] == "gpt2"
    rep.tensor("logits", "logits", f["logits"][...], logits.detach().numpy(), STEP1_ATOL_REL, STEP1_RTOL)
    rep.scalar("loss", "step 1 loss", float(f["metrics/loss"][0]), float(loss), LOSS_RTOL)
    for n in names:
        ref = p[n].grad.numpy()
        rep.tensor("grad", "grad/" + n, f["grad"][n][...], ref, STEP1_ATOL_REL, STEP1_RTOL,
                   scale=bk_grad_scale(n, p, gpt2))
        analytically_zero = gpt2 and n.endswith("attn/bk")
        rep.check("nontrivial", analytically_zero or float(np.abs(ref).max()) > 0,
                  f"grad/{n} max|ref| {float(np.abs(ref).max()):.3e} is nonzero")
    rep.check("nontrivial", float(logits.std()) > 1e-3, f"logits std {float(logits.std()):.3e} > 1e-3")


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
