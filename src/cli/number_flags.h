// Numeric flags read strictly (core/number_text.h): a value that is not a decimal number of the flag's type, or
// is outside its range, is a usage error (exit 2) naming the flag and the range, never a wrapped or saturated
// value ("--seed -1" is not 2^64-1, "--max-tokens 9223372036854775807" is not accepted to overflow later).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "core/number_text.h"

namespace nvfp4lm::cli {

// CLI11 validator for one number type and range (the FlagNumber rows of cli/flag_row.h).
template <typename T>
CLI::Validator number_validator(NumberRange<T> range = {}) {
  return CLI::Validator(
      [range](std::string& text) {
        std::string problem;
        return parse_number<T>(text, range, problem) ? std::string() : problem;
      },
      "", "number");
}

}  // namespace nvfp4lm::cli
