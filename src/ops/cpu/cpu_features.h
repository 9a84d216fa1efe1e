// The CPU features the kernels use, probed once, and the NVFP4LM_CPU_ISA cap on them, applied once: the one place
// that asks the CPU what it has (every kernel family's dispatch and `diagnose` read it from here).
//
// A kernel variant is compiled for one ISA (CpuIsa: a name and the features it needs; each named once below). A
// family (ops/cpu/kernel_family.h) runs the first of its variants whose ISA is usable: its features are present on
// this CPU and allowed by the cap. NVFP4LM_CPU_ISA names a level of this build's architecture (x86-64: "scalar",
// "avx2", "avx512f", "native"; AArch64: "scalar", "neon", "dotprod", "native"; unset or empty = native): it makes an
// AVX-512 machine compute what an AVX2-only laptop or CI runner computes, or a Neoverse V2 what a Cortex-A72 does
// (like oneDNN's ONEDNN_MAX_CPU_ISA or OpenBLAS's OPENBLAS_CORETYPE). It caps every family: the intrinsics kernels
// (ops/cpu/x86/, ops/cpu/arm/) and the portable kernels compiled per x86-64 level (attention, SwiGLU,
// cross-entropy). Any other value is an error naming this architecture's levels.
//
// Features come from CPUID on x86-64 (GCC's __builtin_cpu_supports) and from the kernel's hardware capabilities on
// AArch64 Linux (getauxval(AT_HWCAP / AT_HWCAP2): the bits /proc/cpuinfo's "Features" line shows).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

namespace nvfp4lm::cpu {

enum class CpuFeature : uint8_t {
  Avx2,
  Fma,
  Avx512F,
  Avx512Bw,
  Avx512Vl,
  Avx512Vnni,
  Avx512Vbmi,
  Avx512Bf16,
  X86_64_V3,  // the x86-64-v3 level (AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE): what -march=x86-64-v3 code may use
  X86_64_V4,  // x86-64-v4 (v3 and AVX-512 F, BW, CD, DQ, VL)
  // AArch64, named as Linux names them (HWCAP_*, /proc/cpuinfo):
  Asimd,    // Advanced SIMD (NEON): every ARMv8-A CPU
  AsimdDp,  // SDOT/UDOT, ARMv8.2 dotprod: Neoverse N1, Cortex-A76 and later (Graviton 2+, Grace, GB10's cores)
  I8mm,     // SMMLA/USMMLA int8 matrix multiply, ARMv8.6: Neoverse V1/V2/N2, Cortex-X2/A710 and later
  Bf16,     // BFDOT/BFMMLA, ARMv8.6: the same cores
  Sve,      // Scalable Vector Extension (reported; no kernel uses it)
  Sve2,     // SVE2, ARMv9 (reported; no kernel uses it)
};
inline constexpr int kCpuFeatureCount = static_cast<int>(CpuFeature::Sve2) + 1;
const char* cpu_feature_name(CpuFeature feature);  // "avx2", "avx512vnni", "x86-64-v4", "asimddp", "i8mm", ...

class CpuFeatures {
 public:
  constexpr CpuFeatures() = default;
  constexpr CpuFeatures(std::initializer_list<CpuFeature> features) {
    for (CpuFeature f : features) bits_ |= bit(f);
  }
  constexpr bool has(CpuFeature f) const { return (bits_ & bit(f)) != 0; }
  constexpr bool contains(CpuFeatures other) const { return (bits_ & other.bits_) == other.bits_; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr CpuFeatures operator&(CpuFeatures other) const { return from_bits(bits_ & other.bits_); }
  constexpr CpuFeatures operator|(CpuFeatures other) const { return from_bits(bits_ | other.bits_); }
  constexpr bool operator==(const CpuFeatures&) const = default;
  std::string names() const;  // space-separated, in CpuFeature order ("" when empty)

 private:
  static constexpr uint32_t bit(CpuFeature f) { return uint32_t{1} << static_cast<int>(f); }
  static constexpr CpuFeatures from_bits(uint32_t bits) {
    CpuFeatures out;
    out.bits_ = bits;
    return out;
  }
  uint32_t bits_ = 0;
};

// An ISA a kernel variant is compiled for.
struct CpuIsa {
  const char* name;   // as reports and test logs print it
  CpuFeatures needs;  // what the CPU must have to run it
  bool portable() const { return needs.empty(); }
};

// Every ISA a variant is compiled for, named once. F16C goes with AVX2: every AVX2 CPU has it (Haswell, Excavator
// and later), and clang cannot probe it.
inline constexpr CpuIsa kScalarIsa{"scalar", {}};  // portable C++ (the compiler vectorizes for the baseline)
inline constexpr CpuIsa kAvx2Isa{"avx2+fma", {CpuFeature::Avx2, CpuFeature::Fma}};
inline constexpr CpuIsa kAvx512FIsa{"avx512f", {CpuFeature::Avx512F}};
inline constexpr CpuIsa kAvx512Bf16Isa{"avx512bf16", {CpuFeature::Avx512F, CpuFeature::Avx512Bf16}};
// The integer kernels' AVX-512: BW, VL, VNNI and VBMI (Ice Lake, Zen 4 and later; a Cascade Lake lacks VBMI).
inline constexpr CpuIsa kAvx512VnniIsa{
    "avx512vnni+vbmi",
    {CpuFeature::Avx512F, CpuFeature::Avx512Bw, CpuFeature::Avx512Vl, CpuFeature::Avx512Vnni, CpuFeature::Avx512Vbmi}};
// Portable kernels compiled for an x86-64 level (ops/cpu/x86/levels.h).
inline constexpr CpuIsa kX86_64V3Isa{"x86-64-v3", {CpuFeature::X86_64_V3}};
inline constexpr CpuIsa kX86_64V4Isa{"x86-64-v4", {CpuFeature::X86_64_V4}};
// AArch64 (ops/cpu/arm/). The "neon" variants run on every ARMv8-A CPU (their integer dot products as widening
// multiplies and pairwise adds); the others use the instruction their name says (the i8mm kernel also SDOT).
inline constexpr CpuIsa kNeonIsa{"neon", {CpuFeature::Asimd}};
inline constexpr CpuIsa kNeonDotIsa{"neon+dotprod", {CpuFeature::Asimd, CpuFeature::AsimdDp}};
inline constexpr CpuIsa kNeonI8mmIsa{"neon+i8mm", {CpuFeature::Asimd, CpuFeature::AsimdDp, CpuFeature::I8mm}};
inline constexpr CpuIsa kNeonBf16Isa{"neon+bf16", {CpuFeature::Asimd, CpuFeature::Bf16}};

// What this CPU has, probed once (empty on an architecture without variants).
CpuFeatures cpu_features_present();

// The NVFP4LM_CPU_ISA cap. Each architecture orders its own levels (isa_levels()): a level allows what every level
// below it allows; Scalar is the first and Native the last on every architecture.
enum class IsaLevel {
  Scalar,   // portable C++ only
  Avx2,     // x86-64: AVX2 + FMA + F16C (x86-64-v3)
  Avx512F,  // x86-64: AVX-512 F/BW/VL (x86-64-v4), without VNNI, VBMI and BF16
  Neon,     // AArch64: Advanced SIMD only (what a Cortex-A72 or a Graviton 1 has)
  DotProd,  // AArch64: NEON and SDOT, without I8MM and BF16 (a Neoverse N1, a Graviton 2)
  Native    // every feature the CPU has: no cap
};
std::span<const IsaLevel> isa_levels();      // this build's architecture's levels, lowest first
IsaLevel cpu_isa_limit();                    // read once; an unknown value throws, naming the accepted ones
const char* isa_level_name(IsaLevel level);  // the variable's spelling of it ("native", "avx2", "dotprod", ...)
CpuFeatures isa_level_features(IsaLevel level);

// cpu_features_present() within cpu_isa_limit(): what dispatch may use.
CpuFeatures cpu_features_usable();
// The CPU has every feature `isa` needs (a test may run it) / and the cap allows them (dispatch may pick it).
bool cpu_can_run(const CpuIsa& isa);
bool cpu_may_use(const CpuIsa& isa);

}  // namespace nvfp4lm::cpu
