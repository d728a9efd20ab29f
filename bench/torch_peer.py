#!/usr/bin/python3
"""PyTorch CPU peer of pentad's throughput benchmark (bench/train_throughput.sh).

Trains a GPT-2 of the given shape in plain fp32 PyTorch (tied embeddings,
GELU tanh, F = 4C, pre-norm, AdamW, grad clip 1.0) on random tokens and prints
one JSON line. FLOPs per token: 6 * params + 12 * L * T * C (the llm.c / PaLM
count, as pentad reports it). The first step is warm-up and is not timed.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn.functional as F


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True, help="total steps; the first is warm-up")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=4)
    a = ap.parse_args()
    if a.steps < 2:
        ap.error("--steps must be >= 2 (the first step is warm-up)")
    if a.d_model % a.heads:
        ap.error("--d-model must be divisible by --heads")
    return a


def make_params(L, C, V, T, gen):
    """GPT-2 parameters, PyTorch (out, in) layout; residual projections scaled by 1/sqrt(2L)."""
    def normal(*shape, std=0.02):
        return (torch.randn(*shape, generator=gen) * std).requires_grad_()

    def const(n, v):
        return torch.full((n,), float(v)).requires_grad_()

    p = {"wte": normal(V, C), "wpe": normal(T, C), "lnf_w": const(C, 1), "lnf_b": const(C, 0)}
    p["layers"] = [{
        "ln1_w": const(C, 1), "ln1_b": const(C, 0),
        "w_qkv": normal(3 * C, C), "b_qkv": const(3 * C, 0),                     # (3C, C)
        "w_o": normal(C, C, std=0.02 / math.sqrt(2 * L)), "b_o": const(C, 0),     # (C, C)
        "ln2_w": const(C, 1), "ln2_b": const(C, 0),
        "w_up": normal(4 * C, C), "b_up": const(4 * C, 0),                        # (4C, C)
        "w_down": normal(C, 4 * C, std=0.02 / math.sqrt(2 * L)), "b_down": const(C, 0),
    } for _ in range(L)]
    return p


def flat(p):
    out = [v for k, v in p.items() if k != "layers"]
    for lp in p["layers"]:
        out += list(lp.values())
    return out


def attention(q, k, v, causal_mask):
    """Causal self-attention. q, k, v: (B, H, T, D)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))    # (B, H, T, T)
    att = att.masked_fill(causal_mask, float("-inf")).softmax(-1)
    return att @ v


def loss_fn(p, tokens, targets, H, causal_mask):
    B, T = tokens.shape
    C = p["wte"].shape[1]
    x = p["wte"][tokens] + p["wpe"][:T]                                   # (B, T, C)
    for lp in p["layers"]:
        h = F.layer_norm(x, (C,), lp["ln1_w"], lp["ln1_b"], 1e-5)
        qkv = F.linear(h, lp["w_qkv"], lp["b_qkv"])                         # (B, T, 3C)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in qkv.split(C, dim=-1))
        o = attention(q, k, v, causal_mask).transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(o, lp["w_o"], lp["b_o"])
        h = F.layer_norm(x, (C,), lp["ln2_w"], lp["ln2_b"], 1e-5)
        u = F.gelu(F.linear(h, lp["w_up"], lp["b_up"]), approximate="tanh")  # (B, T, 4C)
        x = x + F.linear(u, lp["w_down"], lp["b_down"])
    x = F.layer_norm(x, (C,), p["lnf_w"], p["lnf_b"], 1e-5)
    logits = x @ p["wte"].T                                                 # (B, T, V)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    gen = torch.Generator().manual_seed(1234)
    L, C, H, V, T, B = a.layers, a.d_model, a.heads, a.vocab, a.seq, a.batch
    p = make_params(L, C, V, T, gen)
    params = flat(p)
    n_params = sum(t.numel() for t in params)
    opt = torch.optim.AdamW([{"params": [t for t in params if t.ndim >= 2], "weight_decay": 0.1},
                             {"params": [t for t in params if t.ndim < 2], "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    causal_mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    flop_per_token = 6 * n_params + 12 * L * T * C

    step_s = []
    for step in range(a.steps):
        data = torch.randint(0, V, (B, T + 1), generator=gen)
        tokens, targets = data[:, :-1], data[:, 1:]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(p, tokens, targets, H, causal_mask)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        if step > 0:
            step_s.append(dt)
        if not math.isfinite(float(loss)):
            raise SystemExit(f"torch_peer: non-finite loss at step {step + 1}")

    # Per-step rates, then medians (the machine is shared and noisy).
    tok_s = [B * T / s for s in step_s]
    print(json.dumps({
        "peer": "pytorch", "torch": torch.__version__, "threads": a.threads, "params": n_params,
        "tokens_per_s": statistics.median(tok_s),
        "gflops": statistics.median(r * flop_per_token / 1e9 for r in tok_s),
        "step_s_median": statistics.median(step_s), "steps": a.steps,
    }))


if __name__ == "__main__":
    main()
