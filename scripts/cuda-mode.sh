#!/usr/bin/env bash
# Prints the NVFP4LM_CUDA mode `make` builds with (cmake/cuda.cmake): ON where a GPU and nvcc are present, EMULATE
# where the CUDA toolkit is present without a GPU (the CUDA backend and its tests then run on the CPU, against the
# emulated device), OFF where there is no CUDA toolkit. `make ... CUDA=ON|OFF|EMULATE` overrides it.
set -u
nvcc=$(command -v nvcc 2>/dev/null || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
  echo OFF
elif nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo ON
else
  echo EMULATE
fi
