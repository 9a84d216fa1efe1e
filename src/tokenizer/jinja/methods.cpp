// Python methods of str and dict that chat templates call, and the template's global functions (declared in
// builtins.h). Lists have no methods: transformers renders in Jinja2's ImmutableSandboxedEnvironment, where
// list.append and friends are refused too.
#include <cstdlib>
#include <ctime>

#include "core/error.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/limits.h"
#include "tokenizer/jinja/text.h"

namespace nvfp4lm::jinja {
namespace {

std::string string_argument(const CallArgs& args, size_t position, const char* name, const std::string& method,
                            int line) {
  const Value value = argument(args, position, name);
  NVFP4LM_CHECK(value.is_string(), "chat template line {}: str.{}() needs a string argument, not {}", line, method,
                type_name(value));
  return value.as_string();
}

int64_t int_argument(const CallArgs& args, size_t position, const char* name, int64_t fallback) {
  const Value value = argument(args, position, name);
  return value.is_int() ? value.as_int() : fallback;
}

// startswith / endswith take a string or a tuple of strings.
bool affix_matches(const std::string& text, const Value& affix, bool at_start, int line) {
  if (affix.is_list()) {
    for (const Value& option : affix.as_list()) {
      if (affix_matches(text, option, at_start, line)) return true;
    }
    return false;
  }
  NVFP4LM_CHECK(affix.is_string(), "chat template line {}: {} needs a string or a tuple of strings, not {}", line,
                at_start ? "startswith" : "endswith", type_name(affix));
  const std::string& s = affix.as_string();
  return at_start ? text.starts_with(s) : text.ends_with(s);
}

Value string_list(const std::vector<std::string>& items) {
  List out;
  for (const std::string& item : items) out.emplace_back(item);
  return Value(std::move(out));
}

std::optional<Value> string_method(const std::string& text, const std::string& name, CallArgs& args, int line) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value chars = argument(args, 0, "chars");
    return Value(strip(text, chars.is_string() ? &chars.as_string() : nullptr, name != "rstrip", name != "lstrip"));
  }
  if (name == "split") {
    const Value separator = argument(args, 0, "sep");
    const int64_t max_split = int_argument(args, 1, "maxsplit", -1);
    if (separator.is_undefined() || separator.is_none()) return string_list(split_whitespace(text, max_split));
    NVFP4LM_CHECK(separator.is_string() && !separator.as_string().empty(),
                  "chat template line {}: str.split() needs a non-empty string separator", line);
    return string_list(split(text, separator.as_string(), max_split));
  }
  if (name == "startswith" || name == "endswith") {
    return Value(affix_matches(text, argument(args, 0, "prefix"), name == "startswith", line));
  }
  if (name == "upper") return Value(upper(text));
  if (name == "lower") return Value(lower(text));
  if (name == "title") return Value(title(text));
  if (name == "capitalize") return Value(capitalize(text));
  if (name == "replace") {
    return Value(replace(text, string_argument(args, 0, "old", name, line), string_argument(args, 1, "new", name, line),
                         int_argument(args, 2, "count", -1)));
  }
  if (name == "find" || name == "rfind" || name == "count") {
    const std::string needle = string_argument(args, 0, "sub", name, line);
    if (name == "count") {
      int64_t count = 0;
      for (size_t at = text.find(needle); at != std::string::npos && !needle.empty();
           at = text.find(needle, at + needle.size())) {
        ++count;
      }
      return Value(count);
    }
    const size_t at = name == "find" ? text.find(needle) : text.rfind(needle);
    if (at == std::string::npos) return Value(int64_t{-1});
    return Value(static_cast<int64_t>(code_point_offsets(text.substr(0, at)).size() - 1));  // a code-point index
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const Value& item : iterate(argument(args, 0, "iterable"), line)) {
      NVFP4LM_CHECK(item.is_string(), "chat template line {}: str.join() needs strings, found a {}", line,
                    type_name(item));
      out += (first ? "" : text) + item.as_string();
      first = false;
    }
    return Value(std::move(out));
  }
  if (name == "isdigit") {
    return Value(!text.empty() && text.find_first_not_of("0123456789") == std::string::npos);
  }
  return std::nullopt;
}

std::optional<Value> dict_method(const Dict& dict, const std::string& name, CallArgs& args) {
  if (name == "items") {
    List pairs;
    for (const auto& [key, value] : dict.items) pairs.push_back(make_tuple(List{key, value}));
    return Value(std::move(pairs));
  }
  if (name == "keys" || name == "values") {
    List out;
    for (const auto& [key, value] : dict.items) out.push_back(name == "keys" ? key : value);
    return Value(std::move(out));
  }
  if (name == "get") {
    const Value key = argument(args, 0, "key");
    const Value* found = is_hashable(key) ? dict.find_key(key) : nullptr;
    return found ? *found : argument(args, 1, "default", Value(None{}));
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> call_method(const Value& object, const std::string& name, CallArgs& args, int line) {
  if (object.is_string()) {
    std::optional<Value> result = string_method(object.as_string(), name, args, line);
    NVFP4LM_CHECK(result.has_value(), "chat template line {}: unsupported string method {}()", line, name);
    return result;
  }
  if (object.is_dict() && !object.is_namespace) {
    const Value* member = object.as_dict().find(name);
    if (member && member->is_callable()) return std::nullopt;  // a function stored in the dict
    std::optional<Value> result = dict_method(object.as_dict(), name, args);
    NVFP4LM_CHECK(result.has_value(), "chat template line {}: unsupported dict method {}()", line, name);
    return result;
  }
  NVFP4LM_CHECK(!object.is_list(),
                "chat template line {}: list methods such as {}() are not available (the template "
                "sandbox is immutable)",
                line, name);
  return std::nullopt;
}

Dict global_functions() {
  Dict globals;
  globals.set("raise_exception", Value(Function([](CallArgs& args) -> Value {
                NVFP4LM_FAIL("raise_exception: {}", to_output(argument(args, 0, "message")));
              })));
  globals.set("range", Value(Function([](CallArgs& args) {
                const auto number = [&](size_t i) {
                  const Value& v = args.positional[i];
                  NVFP4LM_CHECK(v.is_int(), "range() needs integers, not {}", type_name(v));
                  return v.as_int();
                };
                NVFP4LM_CHECK(!args.positional.empty() && args.positional.size() <= 3, "range() takes 1 to 3 integers");
                const int64_t start = args.positional.size() > 1 ? number(0) : 0;
                const int64_t stop = args.positional.size() > 1 ? number(1) : number(0);
                const int64_t step = args.positional.size() > 2 ? number(2) : 1;
                NVFP4LM_CHECK(step != 0, "range() step cannot be zero");
                const double count =
                    (static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step);
                NVFP4LM_CHECK(count <= static_cast<double>(kMaxSteps), "range() of more than {} numbers", kMaxSteps);
                List out;
                for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
                return Value(std::move(out));
              })));
  const auto make_dict = [](CallArgs& args, bool is_namespace) {
    Dict dict;
    for (const Value& positional : args.positional) {
      NVFP4LM_CHECK(positional.is_dict(), "namespace()/dict() take a dict or keyword arguments, not a {}",
                    type_name(positional));
      for (const auto& [key, value] : positional.as_dict().items) dict.set_key(key, value);
    }
    for (const auto& [key, value] : args.keyword) dict.set(key, value);
    Value out(std::move(dict));
    out.is_namespace = is_namespace;
    return out;
  };
  globals.set("namespace", Value(Function([make_dict](CallArgs& args) { return make_dict(args, true); })));
  globals.set("dict", Value(Function([make_dict](CallArgs& args) { return make_dict(args, false); })));
  // transformers' strftime_now: the local time formatted by strftime (Llama 3 templates print today's date). With
  // SOURCE_DATE_EPOCH set (the reproducible-builds convention: seconds since 1970, read as UTC), that time instead,
  // so a rendering can be reproduced on another day (tests/reference/make_chat_template_fixtures.py does the same).
  globals.set("strftime_now", Value(Function([](CallArgs& args) {
                const Value format = argument(args, 0, "format");
                NVFP4LM_CHECK(format.is_string(), "strftime_now() needs a format string");
                std::tm local{};
                const char* epoch = std::getenv("SOURCE_DATE_EPOCH");
                char* end = nullptr;
                const long long pinned = epoch != nullptr ? std::strtoll(epoch, &end, 10) : -1;
                if (epoch != nullptr && *epoch != '\0' && *end == '\0' && pinned >= 0) {
                  const auto when = static_cast<std::time_t>(pinned);
                  gmtime_r(&when, &local);
                } else {
                  const std::time_t now = std::time(nullptr);
                  localtime_r(&now, &local);
                }
                char buffer[256];
                const size_t size = std::strftime(buffer, sizeof buffer, format.as_string().c_str(), &local);
                return Value(std::string(buffer, size));
              })));
  return globals;
}

}  // namespace nvfp4lm::jinja
