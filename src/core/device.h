// Where a tensor lives. CPU is the fp32 reference; CUDA:n is a GPU (bf16 activations).
#pragma once

#include <string>

namespace nvfp4lm {

struct Device {
  enum class Kind : unsigned char { CPU, CUDA };
  Kind kind = Kind::CPU;
  int index = 0;

  static constexpr Device cpu() { return Device{Kind::CPU, 0}; }
  static constexpr Device cuda(int index = 0) { return Device{Kind::CUDA, index}; }
  constexpr bool is_cpu() const { return kind == Kind::CPU; }
  constexpr bool is_cuda() const { return kind == Kind::CUDA; }
  constexpr bool operator==(const Device&) const = default;

  std::string str() const;  // "cpu", "cuda:0"
  // Parses "cpu", "cuda", "cuda:N"; throws Error naming the accepted forms otherwise.
  static Device parse(const std::string& text);
};

}  // namespace nvfp4lm
