// NVFP4LM_CPU_CLONES: compile a hot CPU kernel several times — AVX-512, AVX2+FMA (x86-64-v4 / v3) and the
// baseline — and pick one at load time (GCC function multiversioning), so the portable build still uses the
// wide vector units. Put it on a coarse function (a whole task's loop nest): clones are not inlined, each
// call goes through an indirect jump. The choice changes fp32 summation order between machines, not runs.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define NVFP4LM_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define NVFP4LM_CPU_CLONES
#endif
