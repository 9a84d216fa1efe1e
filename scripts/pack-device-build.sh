#!/usr/bin/env bash
# Packs a native CUDA build made here (no GPU needed to compile) for scripts/device-check.sh on the lent GPU
# machine, whose image may lack our -dev packages: the executables of build-gpu/ (stripped), its CTest files,
# and the shared libraries they link that are not part of glibc, libstdc++ or the CUDA driver, into
# .device/build-gpu.tar.xz (carry `.device`; the device machine's whole transfer is limited to 64 MiB).
#
#   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNVFP4LM_CUDA=ON -DNVFP4LM_CUDA_ARCHS=90a-real \
#         -DNVFP4LM_BENCH=OFF && cmake --build build-gpu --target nvfp4lm tests/emu/ptx_probe tests/test_ops_cuda ...
#   scripts/pack-device-build.sh
set -euo pipefail
build=${1:-build-gpu}
[ -x "$build/nvfp4lm" ] || { echo "pack-device-build: $build/nvfp4lm is missing; build it first" >&2; exit 2; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# Executables and the CTest scripts that name them; objects, static libraries and CMake's own files stay here.
(cd "$build" && find . \( -name CMakeFiles -prune \) -o -type f \( -perm -u+x -o -name '*.cmake' \) -print |
  grep -vE '\.(o|a|so)$|/fuzz/|cmake_install\.cmake$|/npm/') >"$stage/files"
mkdir -p "$stage/build-gpu"
(cd "$build" && tar -cf - -T "$stage/files") | tar -C "$stage/build-gpu" -xf -
find "$stage/build-gpu" -type f -perm -u+x -exec strip --strip-unneeded {} + 2>/dev/null || true

# Runtime libraries: everything ldd resolves outside glibc, the C++ runtime and the driver.
mkdir -p "$stage/.device/lib"
find "$stage/build-gpu" -type f -perm -u+x -exec ldd {} + 2>/dev/null | awk '/=> \// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcuda|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/.device/lib/"; done

{
  echo "$(git rev-parse --short HEAD)$(git diff --quiet || echo '+dirty') built $(date -u +%F) with" \
    "$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*'), archs $(grep -oP 'NVFP4LM_CUDA_ARCHS:STRING=\K.*' \
      "$build/CMakeCache.txt" 2>/dev/null)"
  ls "$stage/.device/lib"
} >"$stage/.device/build-info.txt"
mkdir -p .device
cp "$stage/.device/build-info.txt" .device/build-info.txt
echo "$PWD" >.device/source-dir
tar -C "$stage" -cf - build-gpu .device/lib | xz -T2 -6 >.device/build-gpu.tar.xz
echo "pack-device-build: $(du -h .device/build-gpu.tar.xz | cut -f1) in .device/build-gpu.tar.xz" \
  "($(wc -l <"$stage/files") files, $(ls "$stage/.device/lib" | wc -l) libraries); working tree + .device:" \
  "$(($(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1) / 1048576 + $(du -sm .device | cut -f1))) MiB of 64"
