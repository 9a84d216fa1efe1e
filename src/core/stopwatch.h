// Wall-clock timing for progress lines and benchmarks: a steady clock, durations as seconds in a double.
#pragma once

#include <chrono>

namespace nvfp4lm {

using Clock = std::chrono::steady_clock;

inline double seconds_between(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

inline double seconds_since(Clock::time_point start) { return seconds_between(start, Clock::now()); }

}  // namespace nvfp4lm
