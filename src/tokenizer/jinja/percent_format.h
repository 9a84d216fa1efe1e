// Python's printf-style string formatting, `format % args`, which Jinja2 leaves to Python (templates write
// `"%s: %d" % (name, count)` and `"%(name)s" % {"name": n}`).
#pragma once

#include <string>

#include "tokenizer/jinja/value.h"

namespace nvfp4lm::jinja {

// str.__mod__: `args` is a tuple (one value per conversion), a dict (read by `%(key)s`) or one value. Conversions
// d i u o x X e E f F g G c r s a % with the flags - + space # 0, a width and a precision (`*` takes them from
// the arguments); what Python refuses (too few or too many arguments, %d of a string, an unknown conversion) is an
// Error naming `line`.
std::string percent_format(const std::string& format, const Value& args, int line);

}  // namespace nvfp4lm::jinja
