#!/usr/bin/env bash
# Packs a relocatable GPU bundle: one folder that runs pentad's GPU check on a
# bare GPU node (driver, CUDA libraries and Python there; no MPICH, HDF5,
# OpenBLAS or toml++).
#   scripts/gpu_bundle.sh [--no-build] [--build-dir DIR] [OUT]
# OUT defaults to gpu-bundle/ (git-ignored). Without --no-build, the
# cuda-release preset is configured and built first (build-cuda/).
#
# The bundle:
#   bin/    pentad, test_cuda_ops, cuda_probe, cuda_mfu, MPICH's mpiexec.hydra
#           and hydra_pmi_proxy (mpiexec.hydra starts the proxy from its own
#           folder)
#   lib/    every shared library they load that is not CUDA's and not the C
#           and C++ runtimes' (glibc, libstdc++, libgcc_s: the node's own; the
#           MANIFEST names the newest symbol versions the bundle needs of
#           them, which the check verifies first), and UCX's transport
#           modules in lib/ucx/
#   src/    the decks, scripts and test data the check needs, in the
#           repository's layout (PENTAD_SOURCE_DIR)
#   env.sh  sourced by the check: paths, MPIEXEC, PENTAD_PYTHON, and the
#           node's CUDA libraries (the NVIDIA wheels' lib folders under the
#           Python that has h5py, then /usr/local/cuda and the driver's folder)
#   gpu_check.sh, MANIFEST (revision, toolchain, each library's origin)
# Executables find lib/ through RUNPATH $ORIGIN/../lib, libraries their
# neighbours through $ORIGIN (patchelf), so nothing needs LD_LIBRARY_PATH
# except the CUDA libraries, which come from the node.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=1
build_dir=$root/build-cuda
out=$root/gpu-bundle
while [ $# -gt 0 ]; do
  case $1 in
    --no-build) build=0 ;;
    --build-dir) build_dir=$(cd "$2" && pwd); shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    -*) echo "gpu_bundle.sh: unknown option $1" >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done
command -v patchelf > /dev/null || { echo "gpu_bundle.sh: needs patchelf (scripts/deps.sh installs it)" >&2; exit 1; }
if [ $build = 1 ]; then
  (cd "$root" && cmake --preset cuda-release > /dev/null &&
     cmake --build --preset cuda-release -j "$(nproc)" --target pentad test_cuda_ops cuda_probe cuda_mfu)
fi
bins=("$build_dir/pentad" "$build_dir/tests/test_cuda_ops" "$build_dir/tests/cuda_probe" "$build_dir/bench/cuda_mfu")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "gpu_bundle.sh: $b is missing: build the cuda-release preset (or drop --no-build)" >&2; exit 1; }
done
hydra=$(command -v mpiexec.hydra) || { echo "gpu_bundle.sh: mpiexec.hydra (MPICH) not found" >&2; exit 1; }
proxy=$(dirname "$hydra")/hydra_pmi_proxy
[ -x "$proxy" ] || { echo "gpu_bundle.sh: $proxy not found" >&2; exit 1; }
ucx_modules=$(dirname "$(readlink -f "$(ldconfig -p | awk '/libucs\.so\.0 /{print $NF; exit}')")")/ucx

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib/ucx" "$out/src"
out=$(cd "$out" && pwd)
for b in "${bins[@]}" "$hydra" "$proxy"; do
  cp "$b" "$out/bin/"
done
for m in "$ucx_modules"/lib*.so.0; do
  cp -L "$m" "$out/lib/ucx/"
done

# Libraries that stay the node's: CUDA's (the driver, the toolkit's and the
# NVIDIA wheels'), glibc's, and the C++ runtime's.
node_lib='^(libcuda|libcudart|libcublas|libcublasLt|libnccl|libcudnn|libnvrtc|libnvJitLink|libcupti)\.|^(ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.so'
: > "$out/MANIFEST.libs"
for f in "$out"/bin/* "$out"/lib/ucx/*; do
  # ldd lists the whole closure; a "not found" CUDA library is the node's.
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ $name =~ $node_lib ]]; then continue; fi
  [ -e "$out/lib/$name" ] || { cp -L "$path" "$out/lib/$name"; echo "$name $(readlink -f "$path")" >> "$out/MANIFEST.libs"; }
done
# What the bundle needs of the node's C and C++ runtimes: the newest symbol
# version any of its files asks of glibc and of libstdc++ (MANIFEST; the
# check compares the node's before it runs anything).
newest() {  # newest PREFIX: the highest PREFIX<version> any bundled file requires
  for f in "$out"/bin/* "$out"/lib/*.so* "$out"/lib/ucx/*; do
    objdump -T "$f" 2> /dev/null | grep -oE "\\b$1[0-9][0-9.]*" || true  # a file may ask for none
  done | sed "s/^$1//" | sort -uV | tail -1
}
needs_glibc=$(newest GLIBC_)
needs_glibcxx=$(newest GLIBCXX_)
[ -n "$needs_glibc" ] && [ -n "$needs_glibcxx" ] \
  || { echo "gpu_bundle.sh: cannot read the symbol versions the binaries need (objdump)" >&2; exit 1; }
strip --strip-unneeded "$out"/bin/pentad "$out"/bin/test_cuda_ops "$out"/bin/cuda_probe "$out"/bin/cuda_mfu
for f in "$out"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
for f in "$out"/lib/*.so*; do chmod u+w "$f"; patchelf --set-rpath '$ORIGIN' "$f"; done
for f in "$out"/lib/ucx/*; do chmod u+w "$f"; patchelf --set-rpath '$ORIGIN/..' "$f"; done
# The large ones (MPICH's 41 MB, OpenBLAS's 37 MB with every CPU's
# kernels, HDF5, OpenSSL, ...: over 2 MiB) travel xz-compressed; env.sh
# unpacks them beside the others on first use. That keeps the folder small
# enough to travel (under 60 MiB with the repository beside it).
for f in "$out"/lib/*.so*; do
  [ "$(stat -c %s "$f")" -gt $((2 << 20)) ] && xz -T0 -6 "$f"
done

# What the check reads, in the repository's layout.
(cd "$root" && cp --parents -r input tests/data tests/parity tests/precision "$out/src/")
cp "$root/scripts/gpu_check.sh" "$out/gpu_check.sh"
cat > "$out/env.sh" <<'ENV'
# Sourced by gpu_check.sh (or by hand: `source gpu-bundle/env.sh`).
bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PATH=$bundle/bin:$PATH
export PENTAD=$bundle/bin/pentad MPIEXEC=$bundle/bin/mpiexec.hydra PENTAD_SOURCE_DIR=$bundle/src
export UCX_MODULE_DIR=$bundle/lib/ucx
# Libraries packed xz-compressed are unpacked once, in place.
for z in "$bundle"/lib/*.xz; do
  [ -e "$z" ] && [ ! -e "${z%.xz}" ] || continue
  { xz -dc "$z" 2> /dev/null || python3 -c 'import lzma, sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' "$z"; } \
    > "${z%.xz}.part.$$" && mv "${z%.xz}.part.$$" "${z%.xz}" || { rm -f "${z%.xz}.part.$$"; echo "env.sh: cannot unpack $z" >&2; }
done
# The Python that has h5py (the comparisons read HDF5 dumps).
if [ -z "${PENTAD_PYTHON:-}" ]; then
  for py in python3 /usr/bin/python3; do
    if command -v "$py" > /dev/null && "$py" -c 'import h5py' 2> /dev/null; then PENTAD_PYTHON=$(command -v "$py"); break; fi
  done
fi
export PENTAD_PYTHON=${PENTAD_PYTHON:-python3}
# CUDA's libraries are the node's: the NVIDIA wheels' lib folders of that
# Python first, then the toolkit's and the driver's folders where present.
cuda_dirs=$("$PENTAD_PYTHON" - 2> /dev/null <<'PY' || true
import glob, importlib.util, os
spec = importlib.util.find_spec("nvidia")
for base in (spec.submodule_search_locations if spec else []):
    for d in sorted(glob.glob(os.path.join(base, "*", "lib"))):
        print(d)
PY
)
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/nvidia/lib64; do
  [ -d "$d" ] && cuda_dirs="$cuda_dirs"$'\n'"$d"
done
PENTAD_CUDA_LIBS=$(printf '%s\n' "$cuda_dirs" | sed '/^$/d' | paste -sd:)
export PENTAD_CUDA_LIBS
export LD_LIBRARY_PATH=$PENTAD_CUDA_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ENV
{
  echo "pentad $(git -C "$root" describe --always --dirty 2> /dev/null || echo unknown), packed $(date -u +%FT%TZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "$(/usr/local/cuda/bin/nvcc --version 2> /dev/null | tail -1 || echo 'nvcc: unknown')"
  echo "needs of the node: glibc >= $needs_glibc, libstdc++ with GLIBCXX_$needs_glibcxx"
  echo "CUDA machine code: $(grep -rhoE 'code=\[?[a-z_0-9,]*sm_[0-9a]+' "$build_dir"/cuda/CMakeFiles/pentad_cuda.dir/flags.make | grep -oE 'sm_[0-9a]+' | sort -u | paste -sd' ')"
  echo "bundled libraries (name, origin):"
  sort "$out/MANIFEST.libs"
} > "$out/MANIFEST"
rm "$out/MANIFEST.libs"
echo "gpu bundle: $out ($(du -sm "$out" | cut -f1) MiB, $(find "$out/lib" -type f | wc -l) libraries)"
