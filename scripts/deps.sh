#!/usr/bin/env bash
# Installs pentad's build and test dependencies from Debian's repository when
# they are missing (needs root or sudo). Nothing is downloaded from elsewhere.
set -euo pipefail
pkgs=(build-essential cmake mpich libmpich-dev libopenblas-dev libopenblas-openmp-dev
      libhdf5-mpich-dev hdf5-tools libtomlplusplus-dev libcli11-dev nlohmann-json3-dev googletest libgtest-dev
      libbenchmark-dev clang python3-torch python3-h5py python3-numpy python3-matplotlib slurmctld slurmd slurm-client munge)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
