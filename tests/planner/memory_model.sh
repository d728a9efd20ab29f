#!/usr/bin/env bash
# The planner's memory model (src/plan/planner.cpp) against the peaks the backend
# measures in real 2-step trainings, for the parity suite's layouts of one
# model (tests/parity/tests.cmake): per category (params, grads, optim,
# activations, comm, scratch) and in total on the root rank, and with
# pipeline parallelism every stage's activation peak (pp{s}_act_peak_bytes).
# Tolerance: 10% of the measured value (a category measured as 0 must be
# predicted as 0). Also the dp/tp/pp/cp and expert_dp bytes sent per step
# (same 10%); the ep all-to-all bytes are an upper bound (tokens dropped at
# the capacity are not sent): predicted >= measured, the gap reported.
# Dropless MoE layouts: the rows a rank receives depend on the router's skew,
# so the run's measured receive load is an input of the model, like the
# batch size: the root's (moe_recv_load, the most over both steps, as the
# peaks it is checked against are the root's over both steps) goes to
# `pentad plan --moe-load`.
#   memory_model.sh gpt2|llama [base|cp_moe|zbh1]
# base: the dp/ZeRO/tp/sp/pp layouts; cp_moe: the context-parallel layouts
# of gpt2|llama and the MoE/ep layouts of moe_gpt2|moe_llama; zbh1: the
# zero-bubble schedules' layouts (zbh1 and zbv); with llama cp_moe also
# the copied key/value heads.
# env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON
set -euo pipefail
model=$1
suite=${2:-base}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
c=""
[ "$model" = llama ] && c="--set model.n_heads=8 --set model.n_kv_heads=4"
L4="--set model.n_layers=4"
# name|ranks|sets[|deck] (the parity suite's layouts of this model; deck
# defaults to tests/parity/$model.toml)
if [ "$suite" = cp_moe ]; then
cases=(
  "cp2|2|--set parallel.cp=2"
  "cp2_contiguous|2|--set parallel.cp=2 --set parallel.cp_layout=contiguous"
  "cp4|4|--set parallel.cp=4"
  "cp2_tp2|4|$c --set parallel.cp=2 --set parallel.tp=2"
  "cp2_dp2_zero1|4|--set parallel.cp=2 --set parallel.dp=2 --set parallel.zero=1"
  "cp2_pp2|4|--set parallel.cp=2 --set parallel.pp=2 --set train.grad_accum=2"
  "moe_dp2_ep2|2|--set parallel.dp=2 --set parallel.ep=2|moe_$model"
  "moe_bf16_copies_dp2_ep2|2|--set train.dtype=bf16 --set parallel.dp=2 --set parallel.ep=2|moe_$model"
  "moe_dp4_ep2_zero1|4|--set parallel.dp=4 --set parallel.ep=2 --set parallel.zero=1|moe_$model"
  "moe_dp2_ep2_pp2|4|--set parallel.dp=2 --set parallel.ep=2 --set parallel.pp=2 --set train.grad_accum=2|moe_$model"
  "moe_dp4_ep4|4|--set parallel.dp=4 --set parallel.ep=4|moe_$model"
  "moe_dp2_ep2_zero1|2|--set parallel.dp=2 --set parallel.ep=2 --set parallel.zero=1|moe_$model"
  "moe_dp2_ep2_tp2|4|--set parallel.dp=2 --set parallel.ep=2 --set parallel.tp=2|moe_$model"
  "moe_dp2_ep2_full_dropless|2|--set model.dropless=true --set parallel.dp=2 --set parallel.ep=2 --set train.recompute=full|moe_$model"
  "moe_tp2_sp|2|--set parallel.tp=2 --set parallel.sp=true|moe_$model"
  "moe_dp2_ep2_tp2_expert_tp|4|--set parallel.dp=2 --set parallel.ep=2 --set parallel.tp=2 --set parallel.expert_tp=true|moe_$model"
  "moe_cp2|2|--set parallel.cp=2|moe_$model"
  "moe_cp2_dp2_ep2|4|--set parallel.cp=2 --set parallel.dp=2 --set parallel.ep=2|moe_$model"
  # A shared expert: gated over ep; split over tp (expert tp, with sp) and
  # run again in backward (full recompute; dropless: the routed rows known,
  # so memory is exact).
  "moe_shared_gated_dp2_ep2|2|--set model.shared_expert_ffn=48 --set model.shared_expert_gate=true --set parallel.dp=2 --set parallel.ep=2|moe_$model"
  "moe_shared_gated_tp2_sp_expert_tp_full_dropless|2|--set model.dropless=true --set model.shared_expert_ffn=64 --set model.shared_expert_gate=true --set parallel.tp=2 --set parallel.sp=true --set parallel.expert_tp=true --set train.recompute=full|moe_$model"
  "moe_shared_tp2|2|--set model.shared_expert_ffn=64 --set parallel.tp=2|moe_$model"
)
if [ "$model" = llama ]; then
  cases+=(
    "cp2_tp2_sp_selective|4|$c --set parallel.cp=2 --set parallel.tp=2 --set parallel.sp=true --set train.recompute=selective"
    "cp2_dp2_zero3_full|4|--set parallel.cp=2 --set parallel.dp=2 --set parallel.zero=3 --set train.recompute=full"
    "moe_dp4_ep2_zero2_accum2|4|--set parallel.dp=4 --set parallel.ep=2 --set parallel.zero=2 --set train.grad_accum=2 --set parallel.bucket_mb=0.01|moe_$model"
    "moe_dp2_ep2_zero3|2|--set parallel.dp=2 --set parallel.ep=2 --set parallel.zero=3|moe_$model"
    "moe_tp2_pp2_zero1|4|--set parallel.tp=2 --set parallel.pp=2 --set parallel.zero=1 --set train.grad_accum=2|moe_$model"
    "moe_cp2_tp2_sp|4|--set parallel.cp=2 --set parallel.tp=2 --set parallel.sp=true|moe_$model"
    "moe_cp2_pp2_zero1|4|--set parallel.cp=2 --set parallel.pp=2 --set parallel.zero=1 --set train.grad_accum=2|moe_$model"
    # Copied key/value heads (fewer than tp ranks): the dK/dV sum over the
    # copies, the whole tp group with one head, each head's kv_copies group
    # with two; each beside the same layout with a head per rank, whose
    # difference in tp bytes (the sum's traffic alone) is checked exactly.
    "tp2_kv1|2|--set model.n_heads=8 --set model.n_kv_heads=1 --set parallel.tp=2"
    "tp2_kv2|2|--set model.n_heads=8 --set model.n_kv_heads=2 --set parallel.tp=2"
    "tp4_sp_kv2|4|--set model.n_heads=8 --set model.n_kv_heads=2 --set parallel.tp=4 --set parallel.sp=true"
    "tp4_sp_kv4|4|--set model.n_heads=8 --set model.n_kv_heads=4 --set parallel.tp=4 --set parallel.sp=true"
  )
else
  cases+=(
    "moe_dp4_ep2_zero3_accum2|4|--set parallel.dp=4 --set parallel.ep=2 --set parallel.zero=3 --set train.grad_accum=2 --set parallel.bucket_mb=0.01|moe_$model"
    "moe_tp2_full|2|--set parallel.tp=2 --set train.recompute=full|moe_$model"
    "moe_tp2_sp_full|2|--set parallel.tp=2 --set parallel.sp=true --set train.recompute=full|moe_$model"
    "moe_cp4_contiguous_dropless_full|4|--set model.dropless=true --set parallel.cp=4 --set parallel.cp_layout=contiguous --set train.recompute=full|moe_$model"
    "moe_cp2_dp2_ep2_zero3|4|--set parallel.cp=2 --set parallel.dp=2 --set parallel.ep=2 --set parallel.zero=3|moe_$model"
  )
fi
elif [ "$suite" = zbh1 ]; then
# The split backward (zbh1, zbv): slots live until their W and keep W's
# inputs; zbv's two chunks per stage each pool their own slots.
Z="--set model.n_layers=4 --set parallel.pp=2 --set parallel.virtual_stages=2 --set parallel.schedule=zbv"
cases=(
  "pp2_zbv|2|$Z --set train.grad_accum=4"
  "pp2_zbv_full|2|$Z --set train.grad_accum=2 --set train.recompute=full"
  "pp2_tp2_zbv|4|$c $Z --set parallel.tp=2 --set train.grad_accum=2"
  "moe_dp2_ep2_pp2_zbv|4|$Z --set parallel.dp=2 --set parallel.ep=2 --set train.grad_accum=2|moe_$model"
  "pp2_zbh1|2|--set parallel.pp=2 --set parallel.schedule=zbh1 --set train.grad_accum=4"
  "pp2_zbh1_full|2|--set parallel.pp=2 --set parallel.schedule=zbh1 --set train.grad_accum=4 --set train.recompute=full"
  "pp2_zbh1_selective|2|--set parallel.pp=2 --set parallel.schedule=zbh1 --set train.grad_accum=2 --set train.recompute=selective"
  "pp2_tp2_sp_zbh1|4|$c --set parallel.pp=2 --set parallel.tp=2 --set parallel.sp=true --set parallel.schedule=zbh1 --set train.grad_accum=2"
  "moe_dp2_ep2_pp2_zbh1|4|--set parallel.dp=2 --set parallel.ep=2 --set parallel.pp=2 --set parallel.schedule=zbh1 --set train.grad_accum=2|moe_$model"
  "pp2_dp2_zero2_zbh1_small_buckets|4|--set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=2 --set parallel.schedule=zbh1 --set parallel.bucket_mb=0.01 --set train.grad_accum=2"
  "pp2_dp2_zero3_zbv|4|$Z --set parallel.dp=2 --set parallel.zero=3 --set train.grad_accum=2"
  "moe_dp2_ep2_pp2_zero3_zbv|4|$Z --set parallel.dp=2 --set parallel.ep=2 --set parallel.zero=3 --set train.grad_accum=2|moe_$model"
)
else
cases=(
  "dp2|2|--set parallel.dp=2"
  "dp4|4|--set parallel.dp=4"
  "dp2_accum2|2|--set parallel.dp=2 --set train.grad_accum=2"
  "zero1_dp2|2|--set parallel.dp=2 --set parallel.zero=1"
  "zero2_dp2|2|--set parallel.dp=2 --set parallel.zero=2"
  "zero3_dp2|2|--set parallel.dp=2 --set parallel.zero=3"
  "zero1_dp4_accum2|4|--set parallel.dp=4 --set parallel.zero=1 --set train.grad_accum=2"
  "zero2_dp4_accum2|4|--set parallel.dp=4 --set parallel.zero=2 --set train.grad_accum=2"
  "zero3_dp4_accum2|4|--set parallel.dp=4 --set parallel.zero=3 --set train.grad_accum=2"
  "zero2_dp3_padding|3|--set parallel.dp=3 --set parallel.zero=2 --set parallel.bucket_mb=0.01"
  "zero3_dp2_small_buckets|2|--set parallel.dp=2 --set parallel.zero=3 --set parallel.bucket_mb=0.01 $L4"
  "bf16_copies_zero1_dp2|2|--set train.dtype=bf16 --set parallel.dp=2 --set parallel.zero=1"
  "bf16_copies_zero3_dp2|2|--set train.dtype=bf16 --set parallel.dp=2 --set parallel.zero=3"
  "tp2|2|$c --set parallel.tp=2"
  "tp4|4|$c --set parallel.tp=4"
  "tp2_sp|2|$c --set parallel.tp=2 --set parallel.sp=true"
  "tp2_sp_mb1|2|$c --set parallel.tp=2 --set parallel.sp=true --set train.micro_batch=1 --set train.grad_accum=2"
  "tp2_dp2|4|$c --set parallel.tp=2 --set parallel.dp=2"
  "tp2_full|2|$c --set parallel.tp=2 --set train.recompute=full"
  "tp2_sp_selective|2|$c --set parallel.tp=2 --set parallel.sp=true --set train.recompute=selective"
  "tp2_dp2_zero3|4|$c --set parallel.tp=2 --set parallel.dp=2 --set parallel.zero=3"
  "pp2_afab|2|--set parallel.pp=2 --set parallel.schedule=afab --set train.grad_accum=4"
  "pp2_1f1b|2|--set parallel.pp=2 --set parallel.schedule=1f1b --set train.grad_accum=4"
  "pp4_1f1b|4|$L4 --set parallel.pp=4 --set parallel.schedule=1f1b --set train.grad_accum=8"
  "pp4_afab|4|$L4 --set parallel.pp=4 --set parallel.schedule=afab --set train.grad_accum=8"
  "pp2_v2_interleaved|2|$L4 --set parallel.pp=2 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved --set train.grad_accum=4"
  "pp2_dp2_zero1|4|--set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=1 --set train.grad_accum=2"
  "pp2_tp2_sp|4|$c --set parallel.pp=2 --set parallel.tp=2 --set parallel.sp=true --set train.grad_accum=2"
  "pp2_stage_layers|2|$L4 --set parallel.pp=2 --set parallel.stage_layers=3,1 --set train.grad_accum=2"
  "pp2_recompute_full|2|--set train.recompute=full --set parallel.pp=2 --set train.grad_accum=2"
  "recompute_selective|1|--set train.recompute=selective"
  "zero1_dp3_padding|3|--set parallel.dp=3 --set parallel.zero=1 --set parallel.bucket_mb=0.01"
  "tp2_dp2_zero1|4|$c --set parallel.tp=2 --set parallel.dp=2 --set parallel.zero=1"
  "pp2_tp2|4|$c --set parallel.pp=2 --set parallel.tp=2 --set train.grad_accum=2"
  "pp2_tied|2|--set model.tied_embeddings=true --set parallel.pp=2 --set train.grad_accum=2"
  "pp2_recompute_selective|2|--set train.recompute=selective --set parallel.pp=2 --set train.grad_accum=2"
  "pp2_dp2_zero2|4|--set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=2 --set train.grad_accum=2"
  "pp2_dp2_zero3|4|--set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=3 --set train.grad_accum=2"
  "pp2_v2_dp2_zero3_small_buckets|4|$L4 --set parallel.pp=2 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved --set parallel.dp=2 --set parallel.zero=3 --set parallel.bucket_mb=0.01 --set train.grad_accum=2"
)
fi
for entry in "${cases[@]}"; do
  IFS='|' read -r name np sets deck_name <<< "$entry"
  deck=$PENTAD_SOURCE_DIR/tests/parity/${deck_name:-$model}.toml
  # shellcheck disable=SC2086
  "$MPIEXEC" -n "$np" "$PENTAD" train "$deck" --set data.train="$tmp/data/train.bin" $sets --set train.steps=2 \
    --set log.peak_tflops=0.1 --set log.metrics="$tmp/$name.jsonl" > "$tmp/$name.log" 2>&1 \
    || { cat "$tmp/$name.log"; exit 1; }
  load=""
  if [[ "$sets" == *dropless=true* ]]; then
    load="--moe-load $("$PENTAD_PYTHON" -c 'import json, sys
print(max(json.loads(l)["moe_recv_load"] for l in open(sys.argv[1])))' "$tmp/$name.jsonl")"
  fi
  # shellcheck disable=SC2086
  "$PENTAD" plan "$deck" --ranks "$np" --set data.train="$tmp/data/train.bin" $sets $load --layout deck --json \
    > "$tmp/$name.pred" 2> "$tmp/$name.plan_err" || { cat "$tmp/$name.plan_err"; exit 1; }
  echo "$sets" > "$tmp/$name.sets"
  echo "$name" >> "$tmp/names"
done
"$PENTAD_PYTHON" - "$tmp" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["PENTAD_SOURCE_DIR"], "tests", "lib"))
from report import report
tmp = sys.argv[1]
checks = []
worst = (0.0, "")
def near(name, what, pred, meas, tol=0.10, bound=False, info=False):
    global worst
    if meas == 0:
        ok, err = pred == 0, (0.0 if pred == 0 else float("inf"))
    else:
        err = abs(pred - meas) / meas
        ok = True if info else pred >= meas if bound else err <= tol
    if err > worst[0] and not bound and not info:
        worst = (err, f"{name} {what}")
    kind = "bound" if bound else "estimate, not checked" if info else ""
    checks.append((f"{name:<24} {what:<22} predicted {pred:>12.0f} measured {meas:>12.0f} ({100*err:.2f}%) {kind}", ok))
for name in open(f"{tmp}/names").read().split():
    rows = [json.loads(l) for l in open(f"{tmp}/{name}.jsonl")]
    row = rows[-1]
    pred = json.load(open(f"{tmp}/{name}.pred"))
    st0 = pred["stages"][0]
    for cat in ("params", "grads", "optim", "activations", "comm", "scratch"):
        near(name, cat, st0[cat], row["peak_mem_" + cat])
    near(name, "total", st0["total"], row["peak_mem_bytes"])
    if pred["moe_load"] is not None:
        print(f"info  {name:<24} {'receive load':<22} given {pred['moe_load']:.4f} (the root's, measured; "
              f"busiest rank {max(r['moe_recv_load_max'] for r in rows):.4f})")
    for s, st in enumerate(pred["stages"]):
        if f"pp{s}_act_peak_bytes" in row and len(pred["stages"]) > 1:
            near(name, f"stage {s} activations", st["activations"], row[f"pp{s}_act_peak_bytes"])
    for g in ("dp", "tp", "pp"):
        near(name, f"{g} bytes/step", st0[g + "_bytes"], row[g + "_bytes_sent"])
    if "cp_bytes_sent" in row:
        near(name, "cp bytes/step", st0["cp_bytes"], row["cp_bytes_sent"])
    if "ep_bytes_sent" in row:
        # With a capacity an upper bound; dropless the balanced-routing estimate.
        dropless = "dropless=true" in open(f"{tmp}/{name}.sets").read()
        near(name, "ep bytes/step", st0["ep_bytes"], row["ep_bytes_sent"], bound=not dropless, info=dropless)
    if "expert_dp_bytes_sent" in row:
        near(name, "expert_dp bytes/step", st0["expert_dp_bytes"], row["expert_dp_bytes_sent"])
# Copied key/value heads: the tp bytes beyond the layout with a head per
# rank are the dK/dV sums over the copies alone, predicted exactly.
run_names = open(f"{tmp}/names").read().split()
for copied, whole in (("tp2_kv1", "tp2_kv2"), ("tp4_sp_kv2", "tp4_sp_kv4")):
    if copied in run_names and whole in run_names:
        pred = [json.load(open(f"{tmp}/{n}.pred"))["stages"][0]["tp_bytes"] for n in (copied, whole)]
        meas = [json.loads(open(f"{tmp}/{n}.jsonl").read().splitlines()[-1])["tp_bytes_sent"] for n in (copied, whole)]
        near(copied, f"tp bytes - {whole}", pred[0] - pred[1], meas[0] - meas[1], tol=1e-9)
print(f"worst relative error: {100*worst[0]:.2f}% ({worst[1]})")
sys.exit(report(checks))
PY
