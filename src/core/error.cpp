#include "core/error.h"

namespace nvfp4lm {

void internal_error(const char* expr, const char* file, int line, const std::string& detail) {
  throw Error(
      fmt::format("internal error at {}:{}: `{}` failed{}{} (this is a bug in nvfp4lm; please "
                  "report it with the command that triggered it)",
                  file, line, expr, detail.empty() ? "" : ": ", detail));
}

}  // namespace nvfp4lm
