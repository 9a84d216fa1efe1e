# Cross build for ARM64 Linux hosts (DGX Spark's Grace, Graviton, Ampere, Jetson Thor) on a Debian amd64 machine:
# Debian's cross compiler (crossbuild-essential-arm64) and the arm64 -dev packages installed beside the amd64 ones
# through multiarch (dpkg --add-architecture arm64; scripts/setup-deps.sh arm64 does both). Every test and every
# executable a test starts runs under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR: ctest, gtest discovery, and the
# tests' own spawns through NVFP4LM_TEST_EMULATOR), so `ctest` runs the ARM64 suite on this machine. `make
# test-arm64` in the README is the whole of it.
#
# The CPU qemu presents is its default, "max" (every feature qemu implements: NEON, dotprod, i8mm, BF16, SVE2, so
# every AArch64 kernel variant runs), or the model the environment's QEMU_CPU names when ctest runs: QEMU_CPU=
# neoverse-n1 (NEON + dotprod) or cortex-a72 (NEON only) run the suite on CPUs that lack the newer instructions, as
# NVFP4LM_CPU_ISA caps them on real hardware.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Multiarch: arm64 libraries live in /usr/lib/aarch64-linux-gnu, headers are shared in /usr/include. Programs
# (pkg-config, protoc-like tools) are the build machine's; libraries and packages are the target's only.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# pkg-config must see the arm64 .pc files, never the amd64 ones.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

find_program(NVFP4LM_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64 REQUIRED)
# -L: where qemu finds the arm64 dynamic loader and libraries (multiarch puts them under / itself).
set(CMAKE_CROSSCOMPILING_EMULATOR "${NVFP4LM_QEMU_AARCH64};-L;/")
