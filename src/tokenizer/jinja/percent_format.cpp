// See percent_format.h. Follows CPython's PyUnicode_Format (Objects/unicodeobject.c): the argument rules (a tuple is
// the arguments, a mapping or any other non-string container is one argument that may also be read by key), the
// flags, and integer and float conversions; floats go through snprintf, which rounds as Python does (correctly).
#include "tokenizer/jinja/percent_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "tokenizer/jinja/json_dump.h"
#include "tokenizer/jinja/limits.h"
#include "tokenizer/utf8.h"

namespace nvfp4lm::jinja {
namespace {

struct Spec {
  bool left = false, plus = false, space = false, alternate = false, zero = false;
  int64_t width = -1, precision = -1;
  char conversion = 0;
};

size_t code_point_count(const std::string& text) { return code_point_offsets(text).size() - 1; }

// Pads `body` (after `sign_prefix`) to the spec's width, as Python does: left-justified with '-', zeros between the
// sign/prefix and the digits with '0' (numbers only), otherwise spaces on the left.
std::string pad(const std::string& sign_prefix, const std::string& body, const Spec& spec, bool numeric) {
  const size_t length = code_point_count(sign_prefix) + code_point_count(body);
  const size_t width = spec.width > 0 ? static_cast<size_t>(spec.width) : 0;
  if (length >= width) return sign_prefix + body;
  const std::string fill(width - length, spec.left ? ' ' : (spec.zero && numeric ? '0' : ' '));
  if (spec.left) return sign_prefix + body + fill;
  if (spec.zero && numeric) return sign_prefix + fill + body;
  return fill + sign_prefix + body;
}

std::string format_integer(const Value& value, const Spec& spec, int line) {
  const char c = spec.conversion;
  bool negative = false;
  std::string digits;
  if (value.is_big_int()) {
    NVFP4LM_CHECK(c == 'd' || c == 'i' || c == 'u',
                  "chat template line {}: %{} of an integer beyond 64 bits (nvfp4lm's integers are 64-bit)", line, c);
    digits = value.big_int_digits();
    negative = digits[0] == '-';
    if (negative) digits.erase(0, 1);
  } else {
    int64_t number = 0;
    if (value.is_int() || value.is_bool()) {
      number = value.is_bool() ? int64_t{value.as_bool()} : value.as_int();
    } else if (value.is_float() && (c == 'd' || c == 'i' || c == 'u')) {
      const double x = value.as_number();
      NVFP4LM_CHECK(std::isfinite(x) && std::fabs(x) < 9.2e18,
                    "chat template line {}: %{} of {} (cannot convert to an integer)", line, c, python_float_repr(x));
      number = static_cast<int64_t>(x);  // Python's int(): toward zero
    } else {
      NVFP4LM_FAIL("chat template line {}: %{} format: {} is required, not {}", line, c,
                   c == 'd' || c == 'i' || c == 'u' ? "a real number" : "an integer", type_name(value));
    }
    negative = number < 0;
    const uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(number) : static_cast<uint64_t>(number);
    char buffer[32];
    const char* format = c == 'o' ? "%llo" : c == 'x' ? "%llx" : c == 'X' ? "%llX" : "%llu";
    std::snprintf(buffer, sizeof buffer, format, static_cast<unsigned long long>(magnitude));
    digits = buffer;
  }
  if (spec.precision > static_cast<int64_t>(digits.size()))
    digits.insert(0, static_cast<size_t>(spec.precision) - digits.size(), '0');
  std::string prefix = negative ? "-" : spec.plus ? "+" : spec.space ? " " : "";
  if (spec.alternate && c == 'o') prefix += "0o";
  if (spec.alternate && (c == 'x' || c == 'X')) prefix += c == 'x' ? "0x" : "0X";
  return pad(prefix, digits, spec, true);
}

std::string format_float(const Value& value, const Spec& spec, int line) {
  NVFP4LM_CHECK(value.is_number() || value.is_bool(),
                "chat template line {}: %{} format: a real number is required, not {}", line, spec.conversion,
                type_name(value));
  const double x = value.is_bool() ? (value.as_bool() ? 1.0 : 0.0) : value.as_number();
  std::string format = "%";
  if (spec.left) format += '-';
  if (spec.plus) format += '+';
  if (spec.space) format += ' ';
  if (spec.alternate) format += '#';
  if (spec.zero) format += '0';
  format += "*.*";
  format += spec.conversion;
  NVFP4LM_CHECK(spec.width <= 4096 && spec.precision <= 4096, "chat template line {}: a width or precision above 4096",
                line);
  const int width = static_cast<int>(std::max<int64_t>(spec.width, 0));
  const int precision = static_cast<int>(spec.precision < 0 ? 6 : spec.precision);
  const int size = std::snprintf(nullptr, 0, format.c_str(), width, precision, x);
  std::string out(static_cast<size_t>(size) + 1, '\0');
  std::snprintf(out.data(), out.size(), format.c_str(), width, precision, x);
  out.resize(static_cast<size_t>(size));
  return out;
}

std::string format_text(std::string text, const Spec& spec) {
  if (spec.precision >= 0) {
    const std::vector<size_t> offsets = code_point_offsets(text);
    if (static_cast<size_t>(spec.precision) + 1 < offsets.size()) text.resize(offsets[spec.precision]);
  }
  return pad("", text, spec, false);
}

// Python's ascii(): repr with non-ASCII code points as \xhh, \uhhhh or \Uhhhhhhhh.
std::string ascii_repr(const Value& value) {
  const std::string text = python_repr(value);
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      out += text[i++];
      continue;
    }
    char escape[16];
    if (tokenizer::utf8_sequence_length(text, i) == 0) {  // not UTF-8 (Python's strings always are): the byte
      std::snprintf(escape, sizeof escape, "\\x%02x", static_cast<unsigned>(byte));
      out += escape;
      ++i;
      continue;
    }
    const auto code = static_cast<uint32_t>(tokenizer::decode_utf8(text, i));
    std::snprintf(escape, sizeof escape, code <= 0xFF ? "\\x%02x" : code <= 0xFFFF ? "\\u%04x" : "\\U%08x", code);
    out += escape;
  }
  return out;
}

}  // namespace

std::string percent_format(const std::string& format, const Value& args, int line) {
  const bool tuple = args.is_list() && args.is_tuple;
  // CPython: a non-tuple argument with __getitem__ that is not a string (a dict, a list) may be read by key and is
  // never "not all arguments converted".
  const bool mapping_like = args.is_dict() || (args.is_list() && !tuple);
  const List single{args};
  const List& positional = tuple ? args.as_list() : single;
  size_t next_arg = 0;
  const auto take = [&]() -> const Value& {
    NVFP4LM_CHECK(next_arg < positional.size(), "chat template line {}: not enough arguments for format string", line);
    return positional[next_arg++];
  };
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    NVFP4LM_CHECK(++i < format.size(), "chat template line {}: incomplete format (a '%' at the end)", line);
    const Value* keyed = nullptr;
    if (format[i] == '(') {
      int depth = 1;
      const size_t start = ++i;
      while (i < format.size() && depth > 0) {
        depth += format[i] == '(' ? 1 : format[i] == ')' ? -1 : 0;
        ++i;
      }
      NVFP4LM_CHECK(depth == 0, "chat template line {}: incomplete format key", line);
      NVFP4LM_CHECK(args.is_dict(), "chat template line {}: format requires a mapping, not a {}", line,
                    type_name(args));
      const std::string key = format.substr(start, i - 1 - start);
      keyed = args.as_dict().find(key);
      NVFP4LM_CHECK(keyed != nullptr, "chat template line {}: KeyError {} in a format string", line,
                    python_repr(Value(key)));
    }
    Spec spec;
    for (; i < format.size(); ++i) {
      const char c = format[i];
      if (c == '-')
        spec.left = true;
      else if (c == '+')
        spec.plus = true;
      else if (c == ' ')
        spec.space = true;
      else if (c == '#')
        spec.alternate = true;
      else if (c == '0')
        spec.zero = true;
      else
        break;
    }
    const auto number = [&](int64_t& target) {
      if (i < format.size() && format[i] == '*') {
        ++i;
        const Value& value = take();
        NVFP4LM_CHECK(value.is_int(), "chat template line {}: * wants an integer, not {}", line, type_name(value));
        target = value.as_int();
        return;
      }
      if (i >= format.size() || format[i] < '0' || format[i] > '9') return;
      target = 0;
      for (; i < format.size() && format[i] >= '0' && format[i] <= '9'; ++i) {
        NVFP4LM_CHECK(target < 100'000'000, "chat template line {}: a width or precision too big", line);
        target = target * 10 + (format[i] - '0');
      }
    };
    number(spec.width);
    if (spec.width < 0 && spec.width != -1) {  // Python: a negative * width left-justifies
      spec.left = true;
      spec.width = -spec.width;
    }
    if (i < format.size() && format[i] == '.') {
      ++i;
      spec.precision = 0;
      number(spec.precision);
      if (spec.precision < 0) spec.precision = 0;
    }
    NVFP4LM_CHECK(spec.width <= 1'000'000, "chat template line {}: a width above 1000000", line);
    while (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L')) ++i;  // ignored, as Python
    NVFP4LM_CHECK(i < format.size(), "chat template line {}: incomplete format", line);
    spec.conversion = format[i];
    if (spec.conversion == '%') {
      out += '%';
      continue;
    }
    const Value& value = keyed ? *keyed : take();
    switch (spec.conversion) {
      case 'd':
      case 'i':
      case 'u':
      case 'o':
      case 'x':
      case 'X':
        out += format_integer(value, spec, line);
        break;
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G':
        out += format_float(value, spec, line);
        break;
      case 's':
        out += format_text(to_output(value), spec);
        break;
      case 'r':
        out += format_text(python_repr(value), spec);
        break;
      case 'a':
        out += format_text(ascii_repr(value), spec);
        break;
      case 'c': {
        std::string character;
        if (value.is_string()) {
          NVFP4LM_CHECK(code_point_count(value.as_string()) == 1,
                        "chat template line {}: %c requires an int or a unicode character, not a string of length {}",
                        line, code_point_count(value.as_string()));
          character = value.as_string();
        } else {
          NVFP4LM_CHECK(value.is_int() && value.as_int() >= 0 && value.as_int() <= 0x10FFFF,
                        "chat template line {}: %c requires an int in range(0x110000) or a character", line);
          const auto code = static_cast<char32_t>(value.as_int());
          NVFP4LM_CHECK(code < 0xD800 || code > 0xDFFF,
                        "chat template line {}: %c of a surrogate (U+{:04X}) cannot be written as UTF-8", line,
                        static_cast<uint32_t>(code));
          tokenizer::append_utf8(character, code);
        }
        out += pad("", character, spec, false);
        break;
      }
      default:
        NVFP4LM_FAIL("chat template line {}: unsupported format character '{}' in a % format", line,
                     std::string(1, spec.conversion));
    }
    NVFP4LM_CHECK(out.size() <= kMaxTextBytes, "chat template line {}: a formatted string of more than {} MiB", line,
                  kMaxTextBytes >> 20);
  }
  NVFP4LM_CHECK(next_arg >= positional.size() || mapping_like,
                "chat template line {}: not all arguments converted during string formatting", line);
  return out;
}

}  // namespace nvfp4lm::jinja
