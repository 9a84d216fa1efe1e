// ops/cpu/cpu_features.h and ops/cpu/kernel_family.h: every CPU kernel family runs the first of its variants that
// this CPU has within NVFP4LM_CPU_ISA, the intrinsics kernels and the kernels compiled per x86-64 level (attention,
// SwiGLU, cross-entropy) alike. ctest runs this file, and the op tests of those families, once more under each cap
// (tests/CMakeLists.txt), so the cap is seen to reach every family and each variant meets the op tests' tolerances.
#include <gtest/gtest.h>

#include <cstdlib>
#include <span>
#include <string>

#include "ops/cpu/attention.h"
#include "ops/cpu/cpu_features.h"
#include "ops/cpu/cross_entropy.h"
#include "ops/cpu/kernel_family.h"
#include "ops/cpu/swiglu.h"
#include "ops/cpu/x86/simd.h"

namespace nvfp4lm::test::test_cpu_features {
namespace {

using cpu::CpuFeature;
using cpu::IsaLevel;

// The cap this process runs under is the one the environment asked for (so the capped ctest runs test what they say).
TEST(CpuFeatures, TheCapIsTheEnvironmentsLevel) {
  const char* text = std::getenv("NVFP4LM_CPU_ISA");
  const std::string wanted = text == nullptr || *text == '\0' ? "native" : text;
  EXPECT_EQ(cpu::isa_level_name(cpu::cpu_isa_limit()), wanted);
  EXPECT_EQ(cpu::cpu_features_usable(), cpu::cpu_features_present() & cpu::isa_level_features(cpu::cpu_isa_limit()));
}

TEST(CpuFeatures, EachLevelAllowsWhatTheLevelsBelowAllow) {
  const std::span<const IsaLevel> levels = cpu::isa_levels();
  ASSERT_GE(levels.size(), 2u);
  EXPECT_EQ(levels.front(), IsaLevel::Scalar);
  EXPECT_EQ(levels.back(), IsaLevel::Native);
  EXPECT_TRUE(cpu::isa_level_features(IsaLevel::Scalar).empty());
  for (size_t i = 1; i < levels.size(); ++i) {
    EXPECT_TRUE(cpu::isa_level_features(levels[i]).contains(cpu::isa_level_features(levels[i - 1])));
    EXPECT_FALSE(cpu::isa_level_features(levels[i - 1]).contains(cpu::isa_level_features(levels[i])));
  }
#if defined(__aarch64__)
  EXPECT_EQ(levels.size(), 4u);
  EXPECT_EQ(levels[1], IsaLevel::Neon);
  EXPECT_EQ(levels[2], IsaLevel::DotProd);
#elif defined(__x86_64__)
  EXPECT_EQ(levels.size(), 4u);
  EXPECT_EQ(levels[1], IsaLevel::Avx2);
  EXPECT_EQ(levels[2], IsaLevel::Avx512F);
#endif
  // neon allows the NEON variants only; dotprod adds SDOT but not I8MM or BF16.
  EXPECT_TRUE(cpu::isa_level_features(IsaLevel::Neon).contains(cpu::kNeonIsa.needs));
  EXPECT_FALSE(cpu::isa_level_features(IsaLevel::Neon).contains(cpu::kNeonDotIsa.needs));
  EXPECT_TRUE(cpu::isa_level_features(IsaLevel::DotProd).contains(cpu::kNeonDotIsa.needs));
  EXPECT_FALSE(cpu::isa_level_features(IsaLevel::DotProd).contains(cpu::kNeonI8mmIsa.needs));
  EXPECT_FALSE(cpu::isa_level_features(IsaLevel::DotProd).contains(cpu::kNeonBf16Isa.needs));
  EXPECT_TRUE(cpu::isa_level_features(IsaLevel::Native).contains(cpu::kNeonI8mmIsa.needs));
  EXPECT_TRUE(cpu::isa_level_features(IsaLevel::Native).contains(cpu::kNeonBf16Isa.needs));
  // avx2 allows the AVX2 kernels and the x86-64-v3 ones, no AVX-512; avx512f allows AVX-512F and x86-64-v4 but not
  // the extensions (VNNI, VBMI, BF16) the integer and BF16 kernels need.
  EXPECT_TRUE(cpu::isa_level_features(IsaLevel::Avx2).contains(cpu::kAvx2Isa.needs));
  EXPECT_TRUE(cpu::isa_level_features(IsaLevel::Avx2).contains(cpu::kX86_64V3Isa.needs));
  EXPECT_FALSE(cpu::isa_level_features(IsaLevel::Avx2).has(CpuFeature::Avx512F));
  EXPECT_FALSE(cpu::isa_level_features(IsaLevel::Avx2).contains(cpu::kX86_64V4Isa.needs));
  EXPECT_TRUE(cpu::isa_level_features(IsaLevel::Avx512F).contains(cpu::kAvx512FIsa.needs));
  EXPECT_TRUE(cpu::isa_level_features(IsaLevel::Avx512F).contains(cpu::kX86_64V4Isa.needs));
  EXPECT_FALSE(cpu::isa_level_features(IsaLevel::Avx512F).contains(cpu::kAvx512VnniIsa.needs));
  EXPECT_FALSE(cpu::isa_level_features(IsaLevel::Avx512F).contains(cpu::kAvx512Bf16Isa.needs));
  EXPECT_TRUE(cpu::isa_level_features(IsaLevel::Native).contains(cpu::kAvx512VnniIsa.needs));
  EXPECT_TRUE(cpu::isa_level_features(IsaLevel::Native).contains(cpu::kAvx512Bf16Isa.needs));
}

TEST(CpuFeatures, EveryFamilyRunsItsFirstVariantTheCpuHasWithinTheCap) {
  const std::vector<const cpu::KernelFamilyInfo*> families = cpu::cpu_kernel_families();
  ASSERT_EQ(families.size(), 10u);
  for (const cpu::KernelFamilyInfo* family : families) {
    const std::vector<const cpu::CpuIsa*> isas = family->isas();
    ASSERT_FALSE(isas.empty()) << family->name();
    EXPECT_TRUE(isas.back()->portable()) << family->name();
    const cpu::CpuIsa* expected = isas.back();
    for (const cpu::CpuIsa* isa : isas)
      if (cpu::cpu_features_present().contains(isa->needs) &&
          cpu::isa_level_features(cpu::cpu_isa_limit()).contains(isa->needs)) {
        expected = isa;
        break;
      }
    EXPECT_EQ(&family->chosen_isa(), expected) << family->name() << " runs " << family->chosen_isa().name;
    if (cpu::cpu_isa_limit() == IsaLevel::Scalar) {
      EXPECT_TRUE(family->chosen_isa().portable()) << family->name();
    }
  }
}

// The kernels that were GCC target_clones (dispatched by the loader, out of the cap's reach) are now variants like
// any other: under the cap they run the level it allows.
TEST(CpuFeatures, TheCapReachesTheKernelsCompiledPerX86Level) {
  const cpu::CpuFeatures present = cpu::cpu_features_present();
  const IsaLevel limit = cpu::cpu_isa_limit();
  std::string expected = "scalar";
#if NVFP4LM_X86_LEVELS
  if (cpu::isa_level_features(limit).has(CpuFeature::X86_64_V4) && present.has(CpuFeature::X86_64_V4))
    expected = "x86-64-v4";
  else if (cpu::isa_level_features(limit).has(CpuFeature::X86_64_V3) && present.has(CpuFeature::X86_64_V3))
    expected = "x86-64-v3";
#endif
  for (const cpu::KernelFamilyInfo* family :
       {&cpu::attention_kernel_family(), &cpu::swiglu_kernel_family(), &cpu::cross_entropy_kernel_family()})
    EXPECT_EQ(std::string(family->chosen_isa().name), expected)
        << family->name() << " under NVFP4LM_CPU_ISA=" << cpu::isa_level_name(limit) << " on a CPU with "
        << present.names();
}

// AArch64: the features come from the kernel's HWCAP bits. Under qemu-user (the ARM64 tests on amd64) the CPU is
// the model QEMU_CPU names, "max" when unset, whose features are known: the probe must read exactly those.
TEST(CpuFeatures, TheAArch64ProbeReadsTheCpusFeatures) {
#if !defined(__aarch64__)
  GTEST_SKIP() << "not an AArch64 build";
#else
  const cpu::CpuFeatures present = cpu::cpu_features_present();
  EXPECT_TRUE(present.has(CpuFeature::Asimd)) << present.names();  // every ARMv8-A CPU
  for (CpuFeature x86 : {CpuFeature::Avx2, CpuFeature::Avx512F, CpuFeature::X86_64_V3}) EXPECT_FALSE(present.has(x86));
  const char* qemu_cpu = std::getenv("QEMU_CPU");
  const bool emulated = std::string(NVFP4LM_TEST_EMULATOR).find("qemu") != std::string::npos;
  if (!emulated) return;  // real hardware (a native build): whatever it has
  const std::string model = qemu_cpu == nullptr || *qemu_cpu == '\0' ? "max" : qemu_cpu;
  using F = CpuFeature;
  if (model == "max") {
    EXPECT_EQ(present, (cpu::CpuFeatures{F::Asimd, F::AsimdDp, F::I8mm, F::Bf16, F::Sve, F::Sve2})) << present.names();
  } else if (model == "neoverse-n1") {
    EXPECT_EQ(present, (cpu::CpuFeatures{F::Asimd, F::AsimdDp})) << present.names();
  } else if (model == "cortex-a72") {
    EXPECT_EQ(present, (cpu::CpuFeatures{F::Asimd})) << present.names();
  }
  // On every model, every family runs its best variant the CPU has, and never one it lacks.
  for (const cpu::KernelFamilyInfo* family : cpu::cpu_kernel_families())
    EXPECT_TRUE(present.contains(family->chosen_isa().needs)) << family->name() << " " << family->chosen_isa().name;
#endif
}

}  // namespace
}  // namespace nvfp4lm::test::test_cpu_features
