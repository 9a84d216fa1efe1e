// Python's number formatting and json.dumps, as Hugging Face's `tojson` filter calls it:
// json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys).
#pragma once

#include <optional>
#include <string>

#include "tokenizer/jinja/value.h"

namespace nvfp4lm::jinja {

// Python's repr(float): the shortest digits that round-trip, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string python_float_repr(double value);

struct JsonDumpOptions {
  std::optional<std::string> indent;  // nullopt: one line; otherwise the text of one indent level
  std::string item_separator = ", ";  // Python's defaults; "," when an indent is given
  std::string key_separator = ": ";
  bool sort_keys = false;  // dict items in key order (Python's sorted(), numbers and strings never mixed)
};

// json.dumps with ensure_ascii=False. Undefined values are an error (Python cannot serialize them either); so are
// keys other than str, int, float, bool and None, as in Python.
std::string json_dumps(const Value& value, const JsonDumpOptions& options);

}  // namespace nvfp4lm::jinja
