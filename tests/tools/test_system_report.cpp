// tools/system_report.h: what `diagnose` says about the CPU. The AArch64 core names come from /proc/cpuinfo's MIDR
// fields; here from texts laid out as Linux prints them on the machines nvfp4lm targets.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "tools/system_report.h"

namespace nvfp4lm::test::test_system_report {
namespace {

// Linux's /proc/cpuinfo on AArch64: one stanza per core, "CPU implementer" and "CPU part" among its fields.
std::string cpuinfo_of(const std::vector<std::pair<const char*, int>>& parts) {
  std::string text;
  int processor = 0;
  for (const auto& [part, count] : parts)
    for (int i = 0; i < count; ++i)
      text += "processor\t: " + std::to_string(processor++) +
              "\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp "
              "cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm "
              "sb paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm svebf16 i8mm "
              "bf16 dgh bti\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: " +
              part + "\nCPU revision\t: 1\n\n";
  return text;
}

TEST(SystemReport, NamesTheArmCoresOfEachDesignWithTheirCounts) {
  std::istringstream gb10(cpuinfo_of({{"0xd85", 10}, {"0xd87", 10}}));  // DGX Spark: 10 X925 + 10 A725
  EXPECT_EQ(arm_cpu_model(gb10), "Cortex-X925 x10 + Cortex-A725 x10");
  std::istringstream grace(cpuinfo_of({{"0xd4f", 72}}));  // Grace: 72 Neoverse V2
  EXPECT_EQ(arm_cpu_model(grace), "Neoverse V2 x72");
  std::istringstream unknown(cpuinfo_of({{"0xabc", 2}}));
  EXPECT_EQ(arm_cpu_model(unknown), "implementer 0x41 part 0xabc x2");
  // An x86 /proc/cpuinfo (what qemu-user shows an emulated AArch64 process): no cores named, so "unknown".
  std::istringstream x86("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9B14\n\n");
  EXPECT_EQ(arm_cpu_model(x86), "");
}

}  // namespace
}  // namespace nvfp4lm::test::test_system_report
