#!/usr/bin/env bash
# bf16 training through CUDA's fused attention kernels (cuda/attention_flash.cu):
# DECK (a tiny GPT-2 deck) with 2 heads of 16 (the tiny decks' 8 is not a head
# dimension the kernels are built for) follows the CPU's fp32 loss curve
# (loss_curves.sh, 20 steps, 1e-2), and the run's summary line counts fused
# attention calls (so the kernels did run) and batched linear groups (q, k and
# v as one product: cuda/gemm_group.cu found the model's layout grouped).
#   fused_attention_training.sh DECK
# env: as loss_curves.sh
set -uo pipefail
heads="--set model.n_heads=2"
out=$(bash "$(dirname "$0")/loss_curves.sh" "$1" 20 1e-2 "$heads" "$heads --set backend=cuda --set train.dtype=bf16" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || exit $rc
echo "$out" | grep -qE "fused attention calls [1-9]" ||
  { echo "FAIL: the bf16 run's summary counts no fused attention call"; exit 1; }
echo "$out" | grep -qE "batched linear groups [1-9]" ||
  { echo "FAIL: the bf16 run's summary counts no batched linear group (q, k, v)"; exit 1; }
