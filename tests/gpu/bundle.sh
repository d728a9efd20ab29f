#!/usr/bin/env bash
# The GPU bundle is self-contained (issue 21): packed from the CUDA build
# (scripts/gpu_bundle.sh --no-build), it is at most 60 MiB; ldd resolves
# every library of every file in it inside the bundle, except CUDA's, glibc's
# and the C++ runtime's; and, in a mount namespace where every system file
# it bundled (MPICH with hwloc and UCX, HDF5, OpenBLAS, toml++, ... and
# mpiexec.hydra, hydra_pmi_proxy, UCX's modules) is hidden, the bundle's
# pentad trains the tiny deck on 2 ranks with the CPU backend under the
# bundle's mpiexec. The hiding is checked first: the system-linked build
# must fail to start inside the namespace.
# The MANIFEST names what the bundle needs of the node's glibc and libstdc++,
# and the check stops, naming it, on a node whose libstdc++ is older, and
# on one where the loader cannot find NCCL.
# Then the check script's mechanics, from the bundle, without a GPU:
#   - as shipped, here (no GPU visible): it fails at the probe, says so,
#     and runs nothing else;
#   - with the probe replaced by one that answers yes: every step runs and
#     is reported (the CUDA ones fail here, and the op test's skips count as
#     a failure), and at most 8 files land in OUT_DIR;
#   - the budget, with a probe that answers yes slowly, so that the test and
#     not the machine's speed spends it: a 15 s budget and an 11 s probe
#     leave less than 5 s, so every later step is reported NOT RUN; a 10 s
#     budget and a 60 s probe cut the probe's own limit to what is left
#     (TIMEOUT), which ends the check.
#   bundle.sh CUDA_BUILD_DIR     (root: the mount namespace)
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$(id -u)" -ne 0 ] || ! unshare -m true 2> /dev/null; then
  echo "SKIP: needs root and unshare -m (a mount namespace hides the system libraries)"
  exit 77
fi
hydra=$(command -v mpiexec.hydra)  # the system's, before env.sh puts the bundle's first on PATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
b=$tmp/bundle
bash "$src/scripts/gpu_bundle.sh" --no-build --build-dir "$build" "$b"
size=$(du -sm "$b" | cut -f1)
echo "size: $size MiB"
[ "$size" -le 60 ] || { echo "FAIL: the bundle is $size MiB, over 60"; exit 1; }

# env.sh unpacks the compressed libraries (and finds CUDA's here in
# /usr/local/cuda, as it would find the node's).
# shellcheck source=/dev/null
source "$b/env.sh"
[ -z "$(ls "$b"/lib/*.xz 2> /dev/null | while read -r z; do [ -e "${z%.xz}" ] || echo "$z"; done)" ] \
  || { echo "FAIL: env.sh left compressed libraries unpacked"; exit 1; }
# On a node CUDA's libraries come from the NVIDIA wheels of the Python that
# has h5py: CUDA 13's put cuBLAS and the runtime in nvidia/cu13/lib, NCCL and
# cuDNN in their own nvidia/<name>/lib. env.sh puts those first.
mkdir -p "$tmp/site/nvidia/cu13/lib" "$tmp/site/nvidia/nccl/lib" "$tmp/site/nvidia/cudnn/lib"
found=$(PYTHONPATH=$tmp/site bash -c "source '$b/env.sh' && echo \"\$PENTAD_CUDA_LIBS\"")
for d in cu13 nccl cudnn; do
  [[ ":$found:" == *":$tmp/site/nvidia/$d/lib:"* ]] || { echo "FAIL: env.sh did not find the wheel folder nvidia/$d/lib ($found)"; exit 1; }
done
[[ $found == "$tmp/site/nvidia/"* ]] || { echo "FAIL: the wheels' folders are not first ($found)"; exit 1; }
echo "env.sh: the NVIDIA wheels' lib folders first: $found"
# ldd: every resolved path inside the bundle, or one of the node's own.
node_lib='^(libcuda|libcudart|libcublas|libcublasLt|libnccl|libcudnn|libnvrtc|libnvJitLink|libcupti)\.|^(ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.so|^linux-vdso'
bad=0 n=0
while IFS= read -r -d '' f; do
  [ "$(head -c 4 "$f" | tail -c 3)" = ELF ] || continue
  n=$((n + 1))
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [[ $name =~ $node_lib ]]; then continue; fi
    case $path in
      "$b"/*) ;;
      *) echo "FAIL: $(basename "$f") needs $name from $path (outside the bundle)"; bad=1 ;;
    esac
  done < <(ldd "$f")
done < <(find "$b/bin" "$b/lib" -type f -print0)
[ $bad -eq 0 ] || exit 1
echo "ldd: $n ELF files, every non-CUDA library inside the bundle"

# The namespace: each bundled library's system file, the launcher and UCX's
# module folder hidden.
# The families the node lacks (MPICH with hwloc, UCX and its Slurm PMI, HDF5
# with szip, OpenBLAS with the Fortran runtime, toml++). The other bundled
# libraries (zlib, OpenSSL, PCRE2, ...) are ones the tools this test itself
# runs need (mount, grep); ldd above shows the bundle uses its own copies.
families='^(libmpich|libhwloc|libuc[pstm]|libslurm|libhdf5|libsz|libaec|libopenblas|libgfortran|libquadmath|libgomp|libtomlplusplus)[._]'
hide=$(awk '/^bundled libraries/{on=1; next} on {print $1, $2}' "$b/MANIFEST" | while read -r name path; do
  if [[ $name =~ $families ]]; then echo "$path"; fi
done)
for lib in libmpich libhdf5 libopenblas libtomlplusplus; do
  echo "$hide" | grep -q "/$lib" || { echo "FAIL: the MANIFEST lists no bundled $lib"; exit 1; }
done
ucx=$(dirname "$(readlink -f "$(ldconfig -p | awk '/libucs\.so\.0 /{print $NF; exit}')")")/ucx
cat > "$tmp/inside.sh" <<EOF
set -euo pipefail
mount --make-rprivate /
for f in $(echo $hide) $hydra $(dirname "$hydra")/hydra_pmi_proxy; do mount --bind /dev/null "\$f"; done
mount -t tmpfs none "$ucx"
echo "hidden: $(echo $hide), mpiexec.hydra, hydra_pmi_proxy, $ucx"
if "$build/pentad" --help > /dev/null 2>&1; then echo "FAIL: the system-linked build still starts: the hiding did not work"; exit 1; fi
if "$hydra" --version > /dev/null 2>&1; then echo "FAIL: the system mpiexec.hydra still runs"; exit 1; fi
echo "the system-linked build and mpiexec no longer start (as intended)"
source "$b/env.sh"
cd "$tmp"
"\$PENTAD" prep --out data "$b/src/tests/data/corpus.txt" > /dev/null
OMP_NUM_THREADS=1 "\$MPIEXEC" -n 2 "\$PENTAD" train "$b/src/input/tiny.toml" --set backend=cpu --set parallel.dp=2 \
  --set train.steps=20 --set train.eval_every=0 --set data.train=data/train.bin --set data.val= \
  --set checkpoint.dir=ck --set checkpoint.save_final=true --set log.every=10 --set log.metrics= > train.log 2>&1 \
  || { cat train.log; echo "FAIL: training from the bundle failed"; exit 1; }
cat train.log | tail -4
grep -q '^summary' train.log || { echo "FAIL: no summary line"; exit 1; }
ls ck/*.h5 > /dev/null 2>&1 || { echo "FAIL: no checkpoint written (HDF5 from the bundle)"; exit 1; }
EOF
unshare -m bash "$tmp/inside.sh"
echo "ok: the bundle trains on 2 ranks with the system's MPICH, HDF5, OpenBLAS and toml++ hidden"

# The node's runtimes. The MANIFEST names the newest libstdc++ symbol
# version the bundle needs, one pentad itself asks for; and on a node whose
# libstdc++ is older (a stand-in that defines only GLIBCXX_3.4, bound over
# this machine's in a mount namespace) the check stops before the probe,
# naming what is missing.
needs=$(sed -n 's/^needs of the node: glibc >= \([0-9.]*\), libstdc++ with GLIBCXX_\([0-9.]*\)$/\1 \2/p' "$b/MANIFEST")
[ -n "$needs" ] || { echo "FAIL: the MANIFEST names no needs of the node"; exit 1; }
grep -q "GLIBCXX_${needs#* }\b" <(objdump -T "$build/pentad") \
  || { echo "FAIL: the MANIFEST's GLIBCXX_${needs#* } is not one pentad asks for"; exit 1; }
echo "MANIFEST: needs glibc ${needs% *}, GLIBCXX_${needs#* }"
printf 'int pentad_old_libstdcxx(void) { return 0; }\n' > "$tmp/old.c"
printf 'GLIBCXX_3.4 { global: *; };\n' > "$tmp/old.map"
gcc -shared -fPIC -Wl,-soname,libstdc++.so.6 -Wl,--version-script,"$tmp/old.map" -o "$tmp/libstdc++.so.6" "$tmp/old.c"
# stopped_before_probe NAME MOUNTS PATTERN WHAT: the check, run in a mount
# namespace after MOUNTS, fails with a summary line matching PATTERN and
# never reaches the probe.
stopped_before_probe() {
  local name=$1 mounts=$2 pattern=$3 what=$4 rc=0
  unshare -m bash -c "mount --make-rprivate / && $mounts && bash '$b/gpu_check.sh' '$tmp/$name'" \
    > "$tmp/$name.out" 2>&1 || rc=$?
  cat "$tmp/$name.out"
  [ $rc -ne 0 ] || { echo "FAIL: the check passed on a node with $what"; exit 1; }
  grep -qE "$pattern" "$tmp/$name/summary.log" || { echo "FAIL: $what is not reported by name"; exit 1; }
  [ ! -e "$tmp/$name/probe.log" ] || { echo "FAIL: the check went on past $what"; exit 1; }
  echo "ok: a node with $what is stopped before the probe, by name"
}
stdcxx=$(readlink -f "$(ldd "$build/pentad" | awk '/libstdc\+\+/{print $3; exit}')")
stopped_before_probe check_old "mount --bind '$tmp/libstdc++.so.6' '$stdcxx'" \
  "^FAIL +node runtimes: .*GLIBCXX_${needs#* }.* lacks .*GLIBCXX_${needs#* }\b" "an older libstdc++"
# A node without NCCL (its folder hidden).
nccl_dir=$(dirname "$(ldd "$build/pentad" | awk '$1 ~ /^libnccl\.so/ {print $3; exit}')")
stopped_before_probe check_nonccl "mount -t tmpfs none '$nccl_dir'" \
  "^FAIL +node libraries: the loader finds no .*libnccl\.so\.2" "no NCCL"

# run_check NAME [VAR=VALUE...]: the check (as the bundle holds it, with
# those variables) into $tmp/NAME; it must fail here, where no GPU runs.
# Sets took (seconds).
run_check() {
  local name=$1 rc=0 t0=$SECONDS
  shift
  env "$@" bash "$b/gpu_check.sh" "$tmp/$name" > "$tmp/$name.out" 2>&1 || rc=$?
  took=$((SECONDS - t0))
  cat "$tmp/$name.out"
  [ $rc -ne 0 ] || { echo "FAIL: the check ($name) passed without a GPU"; exit 1; }
}
# The check, as shipped, on this machine without a GPU.
if nvidia-smi -L 2> /dev/null | grep -q '^GPU '; then
  echo "a GPU is visible here: the no-GPU half of the check's test does not apply"
else
  run_check check0
  grep -q "no GPU visible" "$tmp/check0/summary.log" || { echo "FAIL: the probe's failure is not reported"; exit 1; }
  [ ! -e "$tmp/check0/ops.log" ] || { echo "FAIL: the check went on past a failed probe"; exit 1; }
fi
# The whole flow with a probe that answers yes, under the default budget.
cp "$src/tests/gpu/yes_probe.sh" "$b/bin/cuda_probe"
run_check check1
files=$(find "$tmp/check1" -type f | wc -l)
[ "$files" -le 8 ] || { echo "FAIL: $files files in OUT_DIR, more than 8"; exit 1; }
[ -z "$(find "$tmp/check1" -mindepth 1 -type d)" ] || { echo "FAIL: folders in OUT_DIR"; exit 1; }
for name in test_cuda_ops fp32_parity_gpt2 bf16_follows_fp32_llama mfu_gpt2-124m one_device_pp2_comm_mpi; do
  grep -qE "^(ok|FAIL|TIMEOUT) +$name " "$tmp/check1/summary.log" || { echo "FAIL: step $name not reported"; exit 1; }
done
grep -qE '^FAIL +test_cuda_ops ' "$tmp/check1/summary.log" || { echo "FAIL: skipped op tests were not a failure"; exit 1; }
! grep -q '^NOT RUN ' "$tmp/check1/summary.log" || { echo "FAIL: a step was not run under the default budget"; exit 1; }

# The budget. Steps the budget cannot reach: a 15 s budget, an 11 s probe.
run_check check2 PENTAD_TEST_PROBE_SLEEP_S=11 PENTAD_GPU_CHECK_BUDGET_S=15
grep -qE '^ok +cuda_probe ' "$tmp/check2/summary.log" || { echo "FAIL: the slow probe did not pass within the budget"; exit 1; }
for name in test_cuda_ops fp32_parity_gpt2 mfu_gpt2-124m one_device_pp2_comm_mpi; do
  grep -qE "^NOT RUN +$name " "$tmp/check2/summary.log" || { echo "FAIL: step $name not reported as not run"; exit 1; }
done
[ $took -le 25 ] || { echo "FAIL: a 15 s budget took $took s"; exit 1; }
# A step cut to what is left: a 10 s budget, a 60 s probe (its own limit 30 s).
run_check check3 PENTAD_TEST_PROBE_SLEEP_S=60 PENTAD_GPU_CHECK_BUDGET_S=10
grep -qE '^TIMEOUT +cuda_probe \((10|[1-9]) s\)' "$tmp/check3/summary.log" || { echo "FAIL: the probe's limit was not cut to the budget"; exit 1; }
[ ! -e "$tmp/check3/ops.log" ] || { echo "FAIL: the check went on past a timed-out probe"; exit 1; }
[ $took -le 20 ] || { echo "FAIL: a 10 s budget took $took s"; exit 1; }
echo "ok: the check stops at a failed probe, reports every step, keeps to its budget and to $files files"
