// See json_dump.h. Float digits come from std::to_chars (shortest round-trip, the same digits Python's repr
// picks); the layout rule is Python's float_repr_style 'short': positional when -4 <= exponent < 16.
#include "tokenizer/jinja/json_dump.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/error.h"

namespace nvfp4lm::jinja {

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  const std::string sci(buffer, result.ptr);  // "-1.2345e+02"
  const size_t e_at = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e_at; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  const int exponent = std::stoi(sci.substr(e_at + 1));
  // Built with append() only: GCC 12 at -O3 reports a false -Wrestrict on chains of string operator+.
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out.append(digits, 0, 1);
    if (digits.size() > 1) out.append(".").append(digits, 1, std::string::npos);
    out.append(exponent < 0 ? "e-" : "e+");
    const std::string magnitude = std::to_string(std::abs(exponent));
    if (magnitude.size() < 2) out.append("0");
    out.append(magnitude);
  } else if (exponent < 0) {
    out.append("0.").append(static_cast<size_t>(-exponent - 1), '0').append(digits);
  } else {
    const size_t int_digits = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= int_digits) {
      out.append(digits).append(int_digits - digits.size(), '0').append(".0");
    } else {
      out.append(digits, 0, int_digits).append(".").append(digits, int_digits, std::string::npos);
    }
  }
  return out;
}

namespace {

void dump(const Value& value, const JsonDumpOptions& options, int depth, std::string& out);

void dump_string(const std::string& text, std::string& out) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(c));
          out += escape;
        } else {
          out += c;  // ensure_ascii=False: UTF-8 passes through
        }
    }
  }
  out += '"';
}

// A dict key as json.dumps writes it: strings as they are, numbers, booleans and None as their JSON text in quotes;
// any other key (a tuple) a TypeError in Python, so an Error here.
void dump_key(const Value& key, std::string& out) {
  if (key.is_string()) return dump_string(key.as_string(), out);
  NVFP4LM_CHECK(key.is_number() || key.is_big_int() || key.is_bool() || key.is_none(),
                "chat template: tojson: keys must be str, int, float, bool or None, not {}", type_name(key));
  JsonDumpOptions plain;
  std::string text;
  dump(key, plain, 0, text);
  dump_string(text, out);
}

void dump(const Value& value, const JsonDumpOptions& options, int depth, std::string& out) {
  // Python puts a newline and the indent before every item and before the closing bracket.
  const auto newline = [&](int level) {
    if (!options.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *options.indent;
  };
  if (value.is_none()) {
    out += "null";
  } else if (value.is_bool()) {
    out += value.as_bool() ? "true" : "false";
  } else if (value.is_int()) {
    out += std::to_string(value.as_int());
  } else if (value.is_big_int()) {
    out += value.big_int_digits();
  } else if (value.is_float()) {
    const double d = value.as_number();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : python_float_repr(d);
  } else if (value.is_string()) {
    dump_string(value.as_string(), out);
  } else if (value.is_list()) {
    const List& list = value.as_list();
    if (list.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < list.size(); ++i) {
      if (i > 0) out += options.item_separator;
      newline(depth + 1);
      dump(list[i], options, depth + 1, out);
    }
    newline(depth);
    out += ']';
  } else if (value.is_dict()) {
    const Dict& dict = value.as_dict();
    if (dict.items.empty()) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> items;
    for (const auto& item : dict.items) items.push_back(&item);
    if (options.sort_keys) {
      // Python sorts the (key, value) pairs before it converts the keys: numbers in numeric order, strings by code
      // point (UTF-8 byte order is the same), a mix of the two a TypeError.
      std::stable_sort(items.begin(), items.end(),
                       [](const auto* a, const auto* b) { return python_less(a->first, b->first, 0); });
    }
    out += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += options.item_separator;
      newline(depth + 1);
      dump_key(items[i]->first, out);
      out += options.key_separator;
      dump(items[i]->second, options, depth + 1, out);
    }
    newline(depth);
    out += '}';
  } else {
    NVFP4LM_FAIL("chat template: tojson cannot serialize a value of type {}; pass only JSON data to tojson",
                 type_name(value));
  }
}

}  // namespace

std::string json_dumps(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  dump(value, options, 0, out);
  return out;
}

}  // namespace nvfp4lm::jinja
