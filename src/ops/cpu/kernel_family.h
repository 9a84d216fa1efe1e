// A CPU kernel family: a list of {ISA, kernels} variants, fastest first, the last one portable. Dispatch runs the
// first variant whose ISA is usable here (ops/cpu/cpu_features.h: present on the CPU and within NVFP4LM_CPU_ISA),
// chosen once, when the family is first used; tests run every variant the CPU has, cap or not (runnable). Adding a
// variant (AVX2, NEON) is one more row in the family's table.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ops/cpu/cpu_features.h"

namespace nvfp4lm::cpu {

// What reports and tests read of any family, whatever its kernels' types.
class KernelFamilyInfo {
 public:
  virtual ~KernelFamilyInfo() = default;
  virtual const char* name() const = 0;                 // "nvfp4 dot", "attention", ...
  virtual const CpuIsa& chosen_isa() const = 0;         // the variant dispatch runs
  virtual std::vector<const CpuIsa*> isas() const = 0;  // every variant's, fastest first
};

template <typename Kernels>
struct KernelVariant {
  const CpuIsa* isa;
  Kernels kernels;
  const char* name() const { return isa->name; }
};

template <typename Kernels>
class KernelFamily final : public KernelFamilyInfo {
 public:
  using Variant = KernelVariant<Kernels>;

  KernelFamily(const char* name, std::vector<Variant> variants) : name_(name), variants_(std::move(variants)) {
    NVFP4LM_ASSERT(!variants_.empty() && variants_.back().isa->portable(),
                   "kernel family {}: the last variant must be portable", name_);
    chosen_ = &variants_.back();
    for (const Variant& v : variants_)
      if (cpu_may_use(*v.isa)) {
        chosen_ = &v;
        break;
      }
  }
  KernelFamily(const KernelFamily&) = delete;
  KernelFamily& operator=(const KernelFamily&) = delete;

  const char* name() const override { return name_; }
  const CpuIsa& chosen_isa() const override { return *chosen_->isa; }
  std::vector<const CpuIsa*> isas() const override {
    std::vector<const CpuIsa*> out;
    for (const Variant& v : variants_) out.push_back(v.isa);
    return out;
  }

  const Variant& chosen() const { return *chosen_; }
  // Every variant this CPU can run, fastest first (the portable one last).
  std::vector<const Variant*> runnable() const {
    std::vector<const Variant*> out;
    for (const Variant& v : variants_)
      if (cpu_can_run(*v.isa)) out.push_back(&v);
    return out;
  }
  // The variant compiled for `isa` (one of this family's).
  const Variant& variant(const CpuIsa& isa) const {
    for (const Variant& v : variants_)
      if (v.isa == &isa) return v;
    NVFP4LM_FAIL("kernel family {} has no {} variant", name_, isa.name);
  }
  // Kernels must only run where the CPU has their ISA: the entry points check the variant they are handed.
  void check_runnable(const Variant& v) const {
    NVFP4LM_ASSERT(cpu_can_run(*v.isa), "{}: this CPU cannot run the {} variant", name_, v.name());
  }

 private:
  const char* name_;
  std::vector<Variant> variants_;
  const Variant* chosen_ = nullptr;
};

// Every CPU kernel family, each listed once (ops/cpu/kernel_family.cpp): what diagnose reports and the tests check
// against NVFP4LM_CPU_ISA.
std::vector<const KernelFamilyInfo*> cpu_kernel_families();

}  // namespace nvfp4lm::cpu
