#!/usr/bin/env bash
# llama.cpp beside nvfp4lm on the same machine and model (bench/NOTES.md, README "GGUF export"). llama.cpp comes
# from npm, never built from source: node-llama-cpp's prebuilt CPU binaries (libllama + the ggml CPU backends for
# every x86-64 level; the package @node-llama-cpp/linux-x64), pinned below, installed on first use into
# $NVFP4LM_LLAMACPP_DIR (default ~/.cache/nvfp4lm/node-llama-cpp-<version>).
#
#   bench/llamacpp_reference.sh install
#   bench/llamacpp_reference.sh run MODEL.gguf [--prompt-ids 1,2,3 | --prompt-len N] [--gen N] [--threads T]
#   bench/llamacpp_reference.sh compare --nvfp4lm build/nvfp4lm --model MODEL --gguf A.gguf [--gguf B.gguf ...]
#                                       [--rounds 3] [--prompt-len 128] [--gen 32] [--threads T]
# `run` prints one JSON line (greedy tokens, prefill and decode tokens/s); `compare` alternates `nvfp4lm bench infer`
# with llama.cpp on each GGUF for --rounds rounds and prints the medians and the ratios (bench/llamacpp_reference.mjs).
# Exit status 3: npm cannot reach its registry (nothing installed; tests skip on it), 1: any other failure.
set -euo pipefail

version=3.22.1  # node-llama-cpp; its prebuilt binaries are llama.cpp release "v0.5.0" (bins/*/_nlcBuildMetadata.json)
here=$(cd "$(dirname "$0")" && pwd)
dir=${NVFP4LM_LLAMACPP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nvfp4lm/node-llama-cpp-$version}

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) platform=linux-x64 ;;
  Linux-aarch64) platform=linux-arm64 ;;
  *) echo "llamacpp_reference: no prebuilt node-llama-cpp CPU package for $(uname -s) $(uname -m)" >&2; exit 1 ;;
esac

install() {
  if [ -f "$dir/node_modules/@node-llama-cpp/$platform/package.json" ] &&
     [ -f "$dir/node_modules/node-llama-cpp/package.json" ]; then
    return 0
  fi
  if ! command -v npm > /dev/null || ! command -v node > /dev/null; then
    echo "llamacpp_reference: node and npm are needed to install llama.cpp's prebuilt binaries" >&2
    exit 3
  fi
  if ! timeout 60 npm view "node-llama-cpp@$version" version > /dev/null 2>&1; then
    echo "llamacpp_reference: npm cannot reach its registry (npm view node-llama-cpp@$version failed)" >&2
    exit 3
  fi
  echo "llamacpp_reference: installing node-llama-cpp $version ($platform CPU binaries) into $dir" >&2
  local tmp="$dir.tmp-$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  echo '{"name": "nvfp4lm-llamacpp-reference", "private": true}' > "$tmp/package.json"
  # No optional packages (the CUDA / Vulkan builds) and no install scripts: the prebuilt CPU package is all we use,
  # and node-llama-cpp's postinstall would offer to build llama.cpp from source.
  (cd "$tmp" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true timeout 600 npm install --no-audit --no-fund --omit=optional \
      --ignore-scripts "node-llama-cpp@$version" "@node-llama-cpp/$platform@$version" > npm-install.log 2>&1) || {
    echo "llamacpp_reference: npm install failed; see $tmp/npm-install.log" >&2
    exit 1
  }
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  mv "$tmp" "$dir"
}

command=${1:-}
case "$command" in
  install) install ;;
  run | compare)
    install
    NVFP4LM_LLAMACPP_DIR=$dir exec node "$here/llamacpp_reference.mjs" "$@"
    ;;
  *) sed -n '2,15p' "$0" >&2; exit 2 ;;
esac
