#!/usr/bin/env bash
# Installs nvfp4lm's build and test dependencies from Debian 12 packages. Idempotent: does nothing (and
# needs no network) when everything is already installed. The CUDA toolkit is optional and not installed
# here: when /usr/local/cuda/bin/nvcc exists the CUDA backend is built too, for a GPU or, without one, for the
# emulated CUDA device (Boost.Context gives it its fibers). Boost.Asio + Beast (libboost1.74-dev, header-only) are
# `serve`'s HTTP layer. The test of `serve` with the official `openai` npm client needs Node.js and npm (not
# installed here; it installs the client into the build directory itself and skips when npm or its registry cannot
# be reached). Open MPI (libopenmpi-dev, openmpi-bin) is the transport of data-parallel training (`mpirun -np N
# nvfp4lm train`, train/dist/mpi_communicator.h; tested under mpirun, label mpi); CMake builds without it when it is
# missing, and training then runs in one process.
#   scripts/setup-deps.sh        the build and test dependencies
#   scripts/setup-deps.sh fuzz   those plus clang, its sanitizer/libFuzzer runtimes, LLVM's OpenMP and lld, for the
#                                sanitizer and fuzzing builds (make test-asan, make fuzz)
#   scripts/setup-deps.sh arm64  those plus the ARM64 cross build and its emulator (make test-arm64): Debian's
#                                cross compiler, qemu-user, and the arm64 builds of the libraries, installed beside
#                                the amd64 ones through multiarch (dpkg --add-architecture arm64). Header-only
#                                packages (nlohmann-json, CLI11) serve both architectures.
set -euo pipefail

# OpenBLAS: the OpenMP-threaded build, which shares nvfp4lm's OpenMP thread pool (the default pthreads build's
# spinning threads slow the CPU kernels ~2.7x; CMakeLists.txt prefers this variant when both are installed).
packages=(
  build-essential cmake pkg-config
  libopenblas-openmp-dev libpcre2-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libboost-context-dev libboost1.74-dev
  libopenmpi-dev openmpi-bin
)
case "${1:-}" in
  "") ;;
  fuzz) packages+=(clang libclang-rt-14-dev libomp-14-dev lld) ;;
  arm64)
    packages+=(crossbuild-essential-arm64 qemu-user-static
               libopenblas-openmp-dev:arm64 libpcre2-dev:arm64 libfmt-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64
               libboost1.74-dev:arm64) ;;
  *) echo "setup-deps: unknown group '$1' (known: fuzz, arm64)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup-deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
if [ "${1:-}" = arm64 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "setup-deps: adding the arm64 architecture (multiarch) for the cross build's libraries"
  $sudo dpkg --add-architecture arm64
fi
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
