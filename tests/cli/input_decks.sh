#!/usr/bin/env bash
# Every deck shipped in input/ is accepted and planned: `pentad plan DECK
# --ranks 8 --gpu-mem 80GiB` exits 0 and names a winning layout. The Llama
# 3.2 1B deck's model has the published parameter count, worked out here
# from its config.json's sizes: embedding 128256 x 2048 (tied), 16 blocks of
# q/o 2048 x 2048, k/v 512 x 2048, SwiGLU 3 x 2048 x 8192 and two norms,
# and the final norm. The Qwen2.5 0.5B deck's likewise (494 032 768, its
# published count): embedding 151936 x 896 (tied), 24 blocks of q/o 896 x
# 896, k/v 128 x 896, the q/k/v biases (896 + 2 x 128), SwiGLU 3 x 896 x
# 4864 and two norms, and the final norm. The Qwen3 0.6B deck's likewise
# (596 049 920; 0.44B without the embedding, as published): embedding
# 151936 x 1024 (tied), 28 blocks of q 2048 x 1024 and o 1024 x 2048 (16
# heads of 128), k/v 1024 x 1024 (8 heads of 128), the q/k norms (2 x 128),
# SwiGLU 3 x 1024 x 3072 and two norms, and the final norm. The Qwen3
# 30B-A3B deck's (30 532 122 624, its published 30.5B), from the plan of
# one rank: the dense store N (embedding and head 151936 x 2048, 48 blocks of
# q 4096 x 2048 and o 2048 x 4096 (32 heads of 128), k/v 512 x 2048, the q/k
# norms, the router 128 x 2048 and two norms, the final norm) plus the
# expert store NE (48 x 128 experts of 3 x 2048 x 768). The Gemma 2B deck's
# (2 506 172 416, its published 2.51B): embedding 256000 x 2048 (tied), 18
# blocks of q/o 2048 x 2048 (8 heads of 256), k/v 256 x 2048 (one head),
# GeGLU 3 x 2048 x 16384 and two norms, and the final norm. The
# Qwen1.5-MoE-A2.7B deck's (14 315 784 192, its published 14.3B), from the
# plan of one rank: the dense store N (embedding and head 151936 x 2048, 24
# blocks of q/k/v/o 2048 x 2048 (16 heads of 128, as many kv heads), the
# q/k/v biases, the router 60 x 2048, the shared expert 3 x 2048 x 5632 and
# its gate 2048, two norms, the final norm) plus the expert store NE (24 x 60
# experts of 3 x 2048 x 1408).
# Env: PENTAD, PENTAD_SOURCE_DIR.
set -u
fail=0
# check_moe_deck DECK N NE WHAT: one rank's plan counts N dense and NE expert parameters.
check_moe_deck() {
  local one
  one=$("$PENTAD" plan "$1" --ranks 1 --layout dp=1 --explain 2>&1)
  if grep -q "N = $2 parameter elements (padded), shard S = $2, experts NE = $3 elements" <<<"$one"; then
    echo "ok    $(basename "$1"): $(($2 + $3)) parameters ($2 dense, $3 in experts; $4)"
  else
    echo "FAIL: $(basename "$1"): not $2 + $3 parameters:"; grep "parameter elements" <<<"$one"; fail=1
  fi
}
for deck in "$PENTAD_SOURCE_DIR"/input/*.toml; do
  out=$("$PENTAD" plan "$deck" --ranks 8 --gpu-mem 80GiB 2>&1); rc=$?
  if [ $rc -ne 0 ] || ! grep -q "^winner: " <<<"$out"; then
    echo "FAIL: $deck: plan exit $rc"; tail -5 <<<"$out"; fail=1
  else
    echo "ok    $(basename "$deck"): $(grep "^winner: " <<<"$out")"
  fi
  if [ "$(basename "$deck")" = llama3.2-1b.toml ]; then
    C=2048 F=8192 V=128256 L=16 kv=512
    want=$((V * C + L * (2 * C * C + 2 * kv * C + 3 * C * F + 2 * C) + C))
    if grep -q "N = $want parameter elements" <<<"$out"; then
      echo "ok    llama3.2-1b.toml: $want parameters (Llama 3.2 1B's 1.24B)"
    else
      echo "FAIL: llama3.2-1b.toml: not $want parameters:"; grep "parameter elements" <<<"$out"; fail=1
    fi
  fi
  if [ "$(basename "$deck")" = qwen2.5-0.5b.toml ]; then
    C=896 F=4864 V=151936 L=24 kv=128
    want=$((V * C + L * (2 * C * C + 2 * kv * C + C + 2 * kv + 3 * C * F + 2 * C) + C))
    if grep -q "N = $want parameter elements" <<<"$out"; then
      echo "ok    qwen2.5-0.5b.toml: $want parameters (Qwen2.5 0.5B's 494M, its q/k/v biases included)"
    else
      echo "FAIL: qwen2.5-0.5b.toml: not $want parameters:"; grep "parameter elements" <<<"$out"; fail=1
    fi
  fi
  if [ "$(basename "$deck")" = qwen3-0.6b.toml ]; then
    C=1024 F=3072 V=151936 L=28 q=2048 kv=1024 D=128
    want=$((V * C + L * (2 * q * C + 2 * kv * C + 2 * D + 3 * C * F + 2 * C) + C))
    if grep -q "N = $want parameter elements" <<<"$out"; then
      echo "ok    qwen3-0.6b.toml: $want parameters (Qwen3 0.6B's 0.6B, 0.44B without the embedding)"
    else
      echo "FAIL: qwen3-0.6b.toml: not $want parameters:"; grep "parameter elements" <<<"$out"; fail=1
    fi
  fi
  if [ "$(basename "$deck")" = gemma-2b.toml ]; then
    C=2048 F=16384 V=256000 L=18 q=2048 kv=256
    want=$((V * C + L * (2 * q * C + 2 * kv * C + 3 * C * F + 2 * C) + C))
    if grep -q "N = $want parameter elements" <<<"$out"; then
      echo "ok    gemma-2b.toml: $want parameters (Gemma 2B's 2.51B, half of them the embedding)"
    else
      echo "FAIL: gemma-2b.toml: not $want parameters:"; grep "parameter elements" <<<"$out"; fail=1
    fi
  fi
  if [ "$(basename "$deck")" = qwen3-30b-a3b.toml ]; then
    C=2048 F=768 V=151936 L=48 q=4096 kv=512 D=128 E=128
    check_moe_deck "$deck" $((2 * V * C + L * (2 * q * C + 2 * kv * C + 2 * D + E * C + 2 * C) + C)) \
      $((L * E * 3 * C * F)) "Qwen3 30B-A3B's 30.5B"
  fi
  if [ "$(basename "$deck")" = qwen1.5-moe-a2.7b.toml ]; then
    C=2048 F=1408 Fs=5632 V=151936 L=24 E=60
    check_moe_deck "$deck" $((2 * V * C + L * (4 * C * C + 3 * C + E * C + 3 * C * Fs + C + 2 * C) + C)) \
      $((L * E * 3 * C * F)) "the shared experts among the dense; Qwen1.5-MoE-A2.7B's 14.3B"
  fi
done
exit $fail
