#!/usr/bin/python3
"""A Hugging Face Llama directory (pentad's export) rewritten as Phi3ForCausalLM,
for tests/torch/hf_export.sh.

Phi-3 stores a Llama's tensors fused: model.layers.{i}.self_attn.qkv_proj.weight
is q_proj's rows, then k_proj's, then v_proj's (Phi3Attention slices its output
at num_attention_heads * head_dim and num_key_value_heads * head_dim after
that); mlp.gate_up_proj.weight is gate_proj's rows, then up_proj's (Phi3MLP
chunks its output in two, the gate first). Every other tensor keeps its name.
config.json becomes a Phi3Config: architectures, model_type, the sizes, and
the keys given as KEY=JSON (e.g. sliding_window=16, rope_scaling='{...}').
Usage: to_phi3.py LLAMA_DIR OUT_DIR [KEY=JSON]...   (F32 safetensors)
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_loader import read_model  # noqa: E402


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(src, "config.json")) as f:
        c = json.load(f)
    if c["architectures"][0] != "LlamaForCausalLM":
        sys.exit(f"{src}: {c['architectures'][0]}, not a LlamaForCausalLM")
    w = {n: t.numpy() for n, t in read_model(src).items()}
    fused = {}
    for n, t in w.items():
        if n.endswith("self_attn.q_proj.weight"):
            p = n[: -len("q_proj.weight")]
            fused[p + "qkv_proj.weight"] = np.concatenate([t, w[p + "k_proj.weight"], w[p + "v_proj.weight"]])
        elif n.endswith("mlp.gate_proj.weight"):
            p = n[: -len("gate_proj.weight")]
            fused[p + "gate_up_proj.weight"] = np.concatenate([t, w[p + "up_proj.weight"]])
        elif not any(n.endswith(s) for s in ("k_proj.weight", "v_proj.weight", "up_proj.weight")):
            fused[n] = t
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"), fused)
    keep = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "rms_norm_eps", "rope_theta", "max_position_embeddings", "tie_word_embeddings",
            "bos_token_id", "eos_token_id", "torch_dtype")
    cfg = {k: c[k] for k in keep if k in c}
    cfg.update(architectures=["Phi3ForCausalLM"], model_type="phi3", hidden_act="silu", rope_scaling=None,
               original_max_position_embeddings=c["max_position_embeddings"], resid_pdrop=0.0, embd_pdrop=0.0,
               attention_dropout=0.0, sliding_window=None)
    if c.get("head_dim") not in (None, c["hidden_size"] // c["num_attention_heads"]):
        cfg["head_dim"] = c["head_dim"]
    for kv in sys.argv[3:]:
        k, v = kv.split("=", 1)
        cfg[k] = json.loads(v)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    print(f"{out}: Phi3ForCausalLM, {len(fused)} tensors ({len(w) - len(fused)} fewer than {src})")


if __name__ == "__main__":
    main()
