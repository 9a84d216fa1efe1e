// NVFP4LM_CPU_ISA: run the CPU kernels as a smaller CPU would. Each kernel family picks, once, the widest variant
// this CPU supports (best_*_isa); the variable caps that pick, so a user or a test on an AVX-512 machine can
// reproduce what an AVX2-only laptop or CI runner computes (like oneDNN's ONEDNN_MAX_CPU_ISA or OpenBLAS's
// OPENBLAS_CORETYPE). Unset, nothing is capped. Every command's "CPU kernels" line names the variants chosen.
#pragma once

#include <vector>

namespace nvfp4lm::cpu {

// Ordered: a variant is allowed when its level is at most the limit's.
enum class IsaLevel {
  Scalar = 0,    // portable C++
  Avx2 = 1,      // AVX2 + FMA + F16C
  Avx512F = 2,   // AVX-512 F/BW/VL, without the extensions below
  Avx512All = 3  // AVX-512 with BF16, VNNI and VBMI where the CPU has them: no cap
};

// The cap from NVFP4LM_CPU_ISA ("scalar", "avx2", "avx512f", "native"; unset or empty = "native"), read once.
// Any other value throws an error naming the accepted ones.
IsaLevel cpu_isa_limit();
const char* isa_level_name(IsaLevel level);  // the variable's spelling of it

// The widest of a family's supported variants (narrowest first, scalar always present) within the limit.
template <typename Isa, typename LevelOf>
Isa widest_allowed(const std::vector<Isa>& supported, LevelOf level_of) {
  Isa best = supported.front();
  for (Isa isa : supported)
    if (static_cast<int>(level_of(isa)) <= static_cast<int>(cpu_isa_limit())) best = isa;
  return best;
}

}  // namespace nvfp4lm::cpu
