#!/usr/bin/env bash
# Greedy sampling against the PyTorch oracle: train DECK with pentad (one
# rank) on byte tokens of the project's docs, then `pentad sample
# --temperature 0 --tokens 32 --ids` from its final.h5 must give exactly the
# tokens of greedy decoding by generate.py (fp64, full forward per token),
# for every prompt below, and at least MIN_PROMPTS of them must decode
# something other than a loop of a few bytes (generate.py's MIN_DISTINCT).
# The model exported as a Hugging Face directory (`ckpt export --format hf`)
# and sampled from directly gives the same ids, and so does greedy decoding
# of that directory by hf_loader.py (fp64, Hugging Face's module structure).
# With --repetition-penalty 1.3, three prompts decode as generate.py's
# greedy decoding with that penalty, and at least one of them differs
# from its decoding without it.
# The trained model depends on the machine's sgemm kernels (OpenBLAS picks
# them by CPU), so which prompts fall into a loop does too.
# Usage: run_greedy.sh DECK [--set k=v]...   (the --set pairs go to the training run)
# Env: PENTAD, PENTAD_SOURCE_DIR, PENTAD_PYTHON (torch + h5py), MPIEXEC.
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 DECK [--set k=v]..." >&2
  exit 2
fi
deck=$1
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${PENTAD:?set PENTAD to the pentad binary}"
: "${PENTAD_SOURCE_DIR:?set PENTAD_SOURCE_DIR to the source tree}"
: "${PENTAD_PYTHON:?set PENTAD_PYTHON to a python with torch and h5py}"
: "${MPIEXEC:?set MPIEXEC to the MPI launcher}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pentad_greedy.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# A fixed corpus: the docs change from commit to commit, and with them the
# trained model (a greedy decode of it once fell into a 3-token loop).
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt
"$MPIEXEC" -n 1 "$PENTAD" train "$deck" \
  --set "data.train=$tmp/data/train.bin" \
  --set "checkpoint.dir=$tmp/ckpt" --set checkpoint.save_final=true --set log.every=50 "$@"
# The same model as a Hugging Face directory, sampled from directly (a
# LongRoPE model as Phi3ForCausalLM, the one class that holds it).
class=()
[[ " $* " == *" model.rope_scaling=longrope "* ]] && class=(--class Phi3ForCausalLM)
"$PENTAD" ckpt export "$tmp/ckpt/final.h5" --to "$tmp/hf" --format hf --tokenizer bytes "${class[@]}" > /dev/null
MIN_PROMPTS=2
counted=0
pairs=()
for prompt in "The pipeline " "Each rank holds " "A checkpoint " "The tokenizer " "When the "; do
  ids=$("$PENTAD" sample "$tmp/ckpt/final.h5" --prompt "$prompt" --temperature 0 --tokens 32 --ids)
  hf_ids=$("$PENTAD" sample "$tmp/hf" --prompt "$prompt" --temperature 0 --tokens 32 --ids)
  if [[ "$hf_ids" != "$ids" ]]; then
    echo "FAIL: prompt '$prompt': the Hugging Face directory gives [$hf_ids], the checkpoint [$ids]"
    exit 1
  fi
  pairs+=("$prompt" "$hf_ids")
  rc=0
  "$PENTAD_PYTHON" "$here/generate.py" "$tmp/ckpt/final.h5" "$prompt" 32 "$ids" || rc=$?
  case $rc in
    0) counted=$((counted + 1)) ;;
    3) ;;  # agreed, but a loop: not counted
    *) exit 1 ;;
  esac
done
echo "prompts that agree and do not loop: $counted (at least $MIN_PROMPTS required)"
[[ $counted -ge $MIN_PROMPTS ]]
changed=0
for prompt in "The pipeline " "Each rank holds " "A checkpoint "; do
  plain=$("$PENTAD" sample "$tmp/ckpt/final.h5" --prompt "$prompt" --temperature 0 --tokens 32 --ids)
  ids=$("$PENTAD" sample "$tmp/ckpt/final.h5" --prompt "$prompt" --temperature 0 --tokens 32 --ids \
    --repetition-penalty 1.3)
  [[ "$ids" != "$plain" ]] && changed=$((changed + 1))
  rc=0
  "$PENTAD_PYTHON" "$here/generate.py" "$tmp/ckpt/final.h5" "$prompt" 32 "$ids" 1.3 || rc=$?
  [[ $rc == 0 || $rc == 3 ]] || exit 1
done
echo "repetition penalty 1.3: the oracle's ids for 3 prompts, $changed of them other than without it"
[[ $changed -ge 1 ]]
echo "pentad sample $tmp/hf (the export, read as a Hugging Face directory) gave the same ids; against hf_loader.py:"
"$PENTAD_PYTHON" "$here/hf_loader.py" greedy "$tmp/hf" "${pairs[@]}"
