// `nvfp4lm diagnose [--json]`: the build, the CPU, the GPUs (or why there are none) and which compute paths can
// run here and why not (tools/system_report.h). The first stderr line, like every command's, names a device (cuda:0
// when usable, else cpu), the compute paths available and the precision.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/flag_rows.h"
#include "tools/system_report.h"

namespace nvfp4lm::cli {
namespace {

struct DiagnoseCliOptions {
  bool json = false;
};

int run_diagnose(const DiagnoseCliOptions& cli) {
  const SystemReport report = collect_system_report();
  const bool gpu = device_unavailable_reason(Device::cuda(0)).empty() && !report.gpus.empty();
  std::string available;
  for (const ComputePathStatus& path : report.compute_paths) {
    if (!path.available) continue;
    if (!available.empty()) available += ", ";
    available += path.name;
  }
  print_header("diagnose", gpu ? Device::cuda(0) : Device::cpu(), "available: " + available,
               gpu ? "bf16 activations, fp32 accumulation on GPU; fp32 on CPU" : "fp32");
  const std::string text = cli.json ? system_report_json(report).dump(2) + "\n" : system_report_text(report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

CommandRegistration diagnose_registration(
    "diagnose", "Show the build, CPU, GPUs and which compute paths can run here (and why not)",
    [](CLI::App& app) -> CommandRun {
      auto options = std::make_shared<DiagnoseCliOptions>();
      add_flags(app, {FlagUse(rows::json(), options->json)});
      return [options] { return run_diagnose(*options); };
    },
    90);

}  // namespace
}  // namespace nvfp4lm::cli
