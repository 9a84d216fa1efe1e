// See settings.h.
#include "emu/settings.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/cuda/emulation.h"
#include "core/error.h"
#include "emu/global_race_check.h"

namespace nvfp4lm::emu {
namespace {

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

long long positive_integer(const char* name, const char* text, long long max) {
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  NVFP4LM_CHECK(end != text && *end == '\0' && value >= 1 && value <= max,
                "{}='{}' is not a whole number in [1, {}] (unset it for the default)", name, text, max);
  return value;
}

Settings parse() {
  Settings s;
  if (const char* text = env("NVFP4LM_EMU_SCHEDULE")) {
    const std::string value = text;
    if (value == "round-robin" || value == "0") {
      s.schedule = Schedule::RoundRobin;
    } else if (value == "warp-serial" || value == "1") {
      s.schedule = Schedule::WarpSerial;
    } else if (value == "reverse" || value == "2") {
      s.schedule = Schedule::Reverse;
    } else {
      NVFP4LM_FAIL("NVFP4LM_EMU_SCHEDULE='{}' is not a schedule: use round-robin, warp-serial or reverse", value);
    }
  }
  if (const char* text = env("NVFP4LM_EMU_WORKERS"))
    s.workers = static_cast<int>(positive_integer("NVFP4LM_EMU_WORKERS", text, 256));
  if (const char* text = env("NVFP4LM_EMU_STREAM")) {
    const std::string value = text;
    if (value == "deferred") {
      s.stream_mode = StreamMode::Deferred;
    } else if (value == "sync") {
      s.stream_mode = StreamMode::Sync;
    } else {
      NVFP4LM_FAIL("NVFP4LM_EMU_STREAM='{}' is not a stream mode: use deferred or sync", value);
    }
  }
  if (const char* text = env("NVFP4LM_EMU_DEVICES")) {
    const std::string value = text;
    NVFP4LM_CHECK(value == "0" || value == "1", "NVFP4LM_EMU_DEVICES='{}': use 1 (the emulated GPU) or 0 (none)",
                  value);
    s.devices = value == "1" ? 1 : 0;
  }
  if (const char* text = env("NVFP4LM_EMU_CHECK")) {
    const std::string value = text;
    if (value == "none") s.checks = Checks{false, false, false, false};
    if (value != "all" && value != "none") {
      s.checks = Checks{false, false, false, false};
      size_t start = 0;
      while (start <= value.size()) {
        const size_t end = std::min(value.find(',', start), value.size());
        const std::string item = value.substr(start, end - start);
        if (item == "bounds") {
          s.checks.bounds = true;
        } else if (item == "races") {
          s.checks.races = true;
        } else if (item == "init") {
          s.checks.init = true;
        } else if (item == "global") {
          s.checks.global = true;
        } else {
          NVFP4LM_FAIL(
              "NVFP4LM_EMU_CHECK='{}': '{}' is not a check; use all, none, or a list of bounds, races, init, global",
              value, item);
        }
        start = end + 1;
      }
    }
  }
  if (const char* text = env("NVFP4LM_EMU_GRID_CAP"))
    s.grid_cap = positive_integer("NVFP4LM_EMU_GRID_CAP", text, int64_t{1} << 30);
  if (const char* text = env("NVFP4LM_EMU_ARCH")) {
    const std::string value = text;
    s.arch = 0;
    for (int arch : {90, 100, 120, 121})
      if (value == arch_name(arch)) s.arch = arch;
    NVFP4LM_CHECK(s.arch != 0,
                  "NVFP4LM_EMU_ARCH='{}' is not a GPU the emulator presents: use sm_90, sm_100, sm_120 or sm_121",
                  value);
  }
  if (const char* text = env("NVFP4LM_EMU_STACK_KIB"))
    s.stack_bytes = static_cast<size_t>(positive_integer("NVFP4LM_EMU_STACK_KIB", text, 1 << 20)) << 10;
  if (const char* text = env("NVFP4LM_EMU_DEVICE_GIB")) {
    s.device_bytes = static_cast<size_t>(positive_integer("NVFP4LM_EMU_DEVICE_GIB", text, 1 << 16)) << 30;
  } else {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const size_t ram = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : size_t(8) << 30;
    s.device_bytes = ram / 4 * 3;
  }
  return s;
}

}  // namespace

Settings& settings_for_testing() {
  static Settings instance = parse();
  return instance;
}

const Settings& settings() { return settings_for_testing(); }

std::string_view schedule_name(Schedule schedule) {
  switch (schedule) {
    case Schedule::RoundRobin:
      return "round-robin";
    case Schedule::WarpSerial:
      return "warp-serial";
    case Schedule::Reverse:
      return "reverse";
  }
  return "?";
}

std::string arch_name(int arch) { return fmt::format("sm_{}", arch); }

std::string describe_settings() {
  const Settings& s = settings();
  std::string checks;
  for (const auto& [on, name] :
       {std::pair{s.checks.bounds, "bounds"}, {s.checks.races, "races"}, {s.checks.init, "init"}})
    if (on) checks += checks.empty() ? name : std::string(",") + name;
  return fmt::format("{}, schedule {}, {} worker{}, {} streams, shared-memory checks {}, global race check {}{}",
                     arch_name(s.arch), schedule_name(s.schedule), s.workers, s.workers == 1 ? "" : "s",
                     s.stream_mode == StreamMode::Deferred ? "deferred" : "synchronous",
                     checks.empty() ? "off" : checks, global_race_check_state(),
                     s.grid_cap > 0 ? fmt::format(", grid-stride launches capped at {} blocks", s.grid_cap) : "");
}

}  // namespace nvfp4lm::emu

namespace nvfp4lm::cuda::emulated {

int64_t grid_stride_cap() { return emu::settings().grid_cap; }
std::string settings_summary() { return emu::describe_settings(); }

}  // namespace nvfp4lm::cuda::emulated
