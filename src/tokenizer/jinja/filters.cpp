// Jinja2's filters and tests (declared in builtins.h), with Jinja2's argument names and defaults, and
// `tojson` as transformers defines it: json.dumps(x, ensure_ascii=False, indent=indent,
// separators=separators, sort_keys=sort_keys).
#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/json_dump.h"
#include "tokenizer/jinja/text.h"

namespace nvfp4lm::jinja {
namespace {

const std::string& expect_string(const Value& value, const std::string& filter, int line) {
  NVFP4LM_CHECK(value.is_string(), "chat template line {}: filter {} needs a string, not a {}", line, filter,
                type_name(value));
  return value.as_string();
}

Value to_json(const Value& subject, const CallArgs& args, int line) {
  JsonDumpOptions options;
  const Value indent = argument(args, 0, "indent");
  if (indent.is_int()) {
    options.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent.as_int())), ' ');
  } else if (indent.is_string()) {
    options.indent = indent.as_string();
  }
  if (options.indent) options.item_separator = ",";
  const Value separators = argument(args, 99, "separators");
  if (separators.is_list()) {
    NVFP4LM_CHECK(
        separators.as_list().size() == 2 && separators.as_list()[0].is_string() && separators.as_list()[1].is_string(),
        "chat template line {}: tojson separators must be two strings", line);
    options.item_separator = separators.as_list()[0].as_string();
    options.key_separator = separators.as_list()[1].as_string();
  }
  NVFP4LM_CHECK(!truthy(argument(args, 99, "ensure_ascii")),
                "chat template line {}: tojson(ensure_ascii=true) is not supported; drop the argument", line);
  options.sort_keys = truthy(argument(args, 99, "sort_keys"));
  return Value(json_dumps(subject, options));
}

// Jinja2's sort key: strings compare case-insensitively unless case_sensitive.
bool less_than(const Value& a, const Value& b, bool case_sensitive, int line) {
  if (a.is_string() && b.is_string()) {
    return case_sensitive ? a.as_string() < b.as_string() : lower(a.as_string()) < lower(b.as_string());
  }
  return python_less(a, b, line);
}

Value attribute_path(const Value& object, const Value& attribute, int line) {
  if (attribute.is_int()) return get_item(object, attribute, line);
  NVFP4LM_CHECK(attribute.is_string(), "chat template line {}: the attribute argument must be a string, not {}", line,
                type_name(attribute));
  Value value = object;
  const std::string& path = attribute.as_string();
  for (size_t start = 0; start <= path.size();) {
    const size_t dot = std::min(path.find('.', start), path.size());
    value = get_item(value, Value(path.substr(start, dot - start)), line);
    start = dot + 1;
  }
  return value;
}

// select / reject / selectattr / rejectattr.
Value select(const Value& subject, const CallArgs& args, bool by_attribute, bool keep_matching, int line) {
  const size_t test_position = by_attribute ? 1 : 0;
  const Value attribute = by_attribute ? argument(args, 0, "attribute") : Value();
  const Value test = argument(args, test_position, "test");
  NVFP4LM_CHECK(test.is_undefined() || test.is_string(), "chat template line {}: the test argument must be a test name",
                line);
  const std::vector<Value> test_args(args.positional.begin() + std::min(args.positional.size(), test_position + 1),
                                     args.positional.end());
  List out;
  for (const Value& item : iterate(subject, line)) {
    const Value tested = by_attribute ? attribute_path(item, attribute, line) : item;
    const bool match = test.is_undefined() ? truthy(tested) : apply_test(test.as_string(), tested, test_args, line);
    if (match == keep_matching) out.push_back(item);
  }
  return Value(std::move(out));
}

}  // namespace

bool is_known_filter(const std::string& name) {
  static const std::set<std::string> names = {
      "abs",     "capitalize", "count",       "d",      "default", "dictsort",   "e",        "escape",
      "first",   "float",      "forceescape", "indent", "int",     "items",      "join",     "last",
      "length",  "list",       "lower",       "map",    "max",     "min",        "reject",   "rejectattr",
      "replace", "reverse",    "round",       "safe",   "select",  "selectattr", "sort",     "string",
      "sum",     "title",      "tojson",      "trim",   "unique",  "upper",      "wordcount"};
  return names.count(name) > 0;
}

bool is_known_test(const std::string& name) {
  static const std::set<std::string> names = {
      "boolean", "callable", "defined", "divisibleby", "eq",     "equalto", "even",      "false",   "float", "ge",
      "gt",      "in",       "integer", "iterable",    "le",     "lower",   "lt",        "mapping", "ne",    "none",
      "number",  "odd",      "sameas",  "sequence",    "string", "true",    "undefined", "upper",   "==",    "!="};
  return names.count(name) > 0;
}

Value apply_filter(const std::string& name, const Value& subject, CallArgs& args, int line) {
  if (name == "tojson") return to_json(subject, args, line);
  if (name == "safe" || name == "e" || name == "escape" || name == "forceescape") {
    NVFP4LM_CHECK(name == "safe", "chat template line {}: filter {} is not supported (autoescape is off)", line, name);
    return subject;
  }
  if (name == "default" || name == "d") {
    const bool boolean = truthy(argument(args, 1, "boolean", Value(false)));
    const bool use_default = subject.is_undefined() || (boolean && !truthy(subject));
    return use_default ? argument(args, 0, "default_value", Value(std::string())) : subject;
  }
  if (name == "length" || name == "count") {
    if (subject.is_string()) return Value(static_cast<int64_t>(code_point_offsets(subject.as_string()).size() - 1));
    if (subject.is_dict()) return Value(static_cast<int64_t>(subject.as_dict().items.size()));
    // A list's length without copying it: templates take `messages|length` inside their loop over the messages.
    if (subject.is_list()) return Value(static_cast<int64_t>(subject.as_list().size()));
    return Value(static_cast<int64_t>(iterate(subject, line).size()));
  }
  if (name == "string") return Value(to_output(subject));
  if (name == "upper") return Value(upper(to_output(subject)));
  if (name == "lower") return Value(lower(to_output(subject)));
  if (name == "capitalize") return Value(capitalize(to_output(subject)));
  if (name == "title") return Value(title(to_output(subject)));
  if (name == "trim") {
    const Value chars = argument(args, 0, "chars");
    return Value(strip(to_output(subject), chars.is_string() ? &chars.as_string() : nullptr, true, true));
  }
  if (name == "replace") {
    const Value count = argument(args, 2, "count");
    return Value(replace(expect_string(subject, name, line), to_output(argument(args, 0, "old")),
                         to_output(argument(args, 1, "new")), count.is_int() ? count.as_int() : -1));
  }
  if (name == "join") {
    const Value attribute = argument(args, 1, "attribute");
    std::string out;
    const std::string separator = to_output(argument(args, 0, "d", Value(std::string())));
    bool first = true;
    for (const Value& item : iterate(subject, line)) {
      out +=
          (first ? "" : separator) + to_output(attribute.is_undefined() ? item : attribute_path(item, attribute, line));
      first = false;
    }
    return Value(std::move(out));
  }
  if (name == "first" || name == "last") {
    const List items = iterate(subject, line);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value(iterate(subject, line));
  if (name == "items") {
    NVFP4LM_CHECK(subject.is_dict() || subject.is_undefined(),
                  "chat template line {}: filter items needs a dict, not a {}", line, type_name(subject));
    List pairs;
    if (subject.is_dict()) {
      for (const auto& [key, value] : subject.as_dict().items) pairs.push_back(make_tuple(List{key, value}));
    }
    return Value(std::move(pairs));
  }
  if (name == "int") {
    if (subject.is_int()) return subject;
    if (subject.is_bool()) return Value(int64_t{subject.as_bool()});
    if (subject.is_float()) return Value(static_cast<int64_t>(subject.as_number()));
    if (subject.is_string()) {
      try {
        return Value(static_cast<int64_t>(std::stoll(subject.as_string())));
      } catch (const std::exception&) {
      }
    }
    return argument(args, 0, "default", Value(0));
  }
  if (name == "float") {
    if (subject.is_number() || subject.is_bool())
      return Value(subject.is_bool() ? (subject.as_bool() ? 1.0 : 0.0) : subject.as_number());
    if (subject.is_string()) {
      try {
        return Value(std::stod(subject.as_string()));
      } catch (const std::exception&) {
      }
    }
    return argument(args, 0, "default", Value(0.0));
  }
  if (name == "abs") {
    if (subject.is_int()) return Value(subject.as_int() < 0 ? -subject.as_int() : subject.as_int());
    NVFP4LM_CHECK(subject.is_float(), "chat template line {}: filter abs needs a number, not a {}", line,
                  type_name(subject));
    return Value(std::fabs(subject.as_number()));
  }
  if (name == "round") {
    NVFP4LM_CHECK(subject.is_number(), "chat template line {}: filter round needs a number", line);
    const Value precision = argument(args, 0, "precision", Value(0));
    NVFP4LM_CHECK(precision.is_int(), "chat template line {}: round precision must be an integer", line);
    const double scale = std::pow(10.0, static_cast<double>(precision.as_int()));
    const std::string method = to_output(argument(args, 1, "method", Value("common")));
    const double x = subject.as_number() * scale;
    const double rounded = method == "floor" ? std::floor(x) : method == "ceil" ? std::ceil(x) : std::round(x);
    return Value(rounded / scale);
  }
  if (name == "map") {
    const Value attribute = argument(args, 99, "attribute");
    List out;
    for (const Value& item : iterate(subject, line)) {
      if (!attribute.is_undefined()) {
        Value mapped = attribute_path(item, attribute, line);
        out.push_back(mapped.is_undefined() ? argument(args, 99, "default") : mapped);
      } else {
        NVFP4LM_CHECK(!args.positional.empty() && args.positional[0].is_string(),
                      "chat template line {}: map needs attribute=... or a filter name", line);
        CallArgs rest{{args.positional.begin() + 1, args.positional.end()}, {}};
        out.push_back(apply_filter(args.positional[0].as_string(), item, rest, line));
      }
    }
    return Value(std::move(out));
  }
  if (name == "select") return select(subject, args, false, true, line);
  if (name == "reject") return select(subject, args, false, false, line);
  if (name == "selectattr") return select(subject, args, true, true, line);
  if (name == "rejectattr") return select(subject, args, true, false, line);
  if (name == "unique") {
    List out;
    for (const Value& item : iterate(subject, line)) {
      const bool seen = std::any_of(out.begin(), out.end(), [&](const Value& kept) { return equals(kept, item); });
      if (!seen) out.push_back(item);
    }
    return Value(std::move(out));
  }
  if (name == "reverse") {
    if (subject.is_string()) return slice(subject, Value(), Value(), Value(-1), line);
    List items = iterate(subject, line);
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "sort" || name == "min" || name == "max") {
    const bool reverse = name == "sort" && truthy(argument(args, 0, "reverse", Value(false)));
    const bool case_sensitive = truthy(argument(args, name == "sort" ? 1 : 0, "case_sensitive", Value(false)));
    const Value attribute = argument(args, name == "sort" ? 2 : 1, "attribute");
    List items = iterate(subject, line);
    const auto key = [&](const Value& item) {
      return attribute.is_undefined() ? item : attribute_path(item, attribute, line);
    };
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      return reverse ? less_than(key(b), key(a), case_sensitive, line)
                     : less_than(key(a), key(b), case_sensitive, line);
    });
    if (name == "sort") return Value(std::move(items));
    if (items.empty()) return Value();
    return name == "min" ? items.front() : items.back();
  }
  if (name == "sum") {
    Value total = argument(args, 1, "start", Value(0));
    const Value attribute = argument(args, 0, "attribute");
    for (const Value& item : iterate(subject, line)) {
      const Value term = attribute.is_undefined() ? item : attribute_path(item, attribute, line);
      NVFP4LM_CHECK(term.is_number() && total.is_number(), "chat template line {}: filter sum needs numbers", line);
      total = total.is_int() && term.is_int() ? Value(total.as_int() + term.as_int())
                                              : Value(total.as_number() + term.as_number());
    }
    return total;
  }
  if (name == "dictsort") {
    NVFP4LM_CHECK(subject.is_dict(), "chat template line {}: filter dictsort needs a dict", line);
    const bool case_sensitive = truthy(argument(args, 0, "case_sensitive", Value(false)));
    const bool by_value = to_output(argument(args, 1, "by", Value("key"))) == "value";
    const bool reverse = truthy(argument(args, 2, "reverse", Value(false)));
    List pairs;
    for (const auto& [key, value] : subject.as_dict().items) pairs.push_back(make_tuple(List{key, value}));
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
      const Value& x = a.as_list()[by_value ? 1 : 0];
      const Value& y = b.as_list()[by_value ? 1 : 0];
      return reverse ? less_than(y, x, case_sensitive, line) : less_than(x, y, case_sensitive, line);
    });
    return Value(std::move(pairs));
  }
  if (name == "wordcount") return Value(static_cast<int64_t>(split_whitespace(to_output(subject), -1).size()));
  if (name == "indent") {
    const Value width = argument(args, 0, "width", Value(4));
    NVFP4LM_CHECK(width.is_string() || (width.is_int() && width.as_int() >= 0),
                  "chat template line {}: indent width must be a count or a string", line);
    const std::string pad =
        width.is_string() ? width.as_string() : std::string(static_cast<size_t>(width.as_int()), ' ');
    return Value(indent(to_output(subject), pad, truthy(argument(args, 1, "first", Value(false))),
                        truthy(argument(args, 2, "blank", Value(false)))));
  }
  NVFP4LM_FAIL("chat template line {}: unsupported filter '{}'", line, name);
}

bool apply_test(const std::string& name, const Value& subject, const std::vector<Value>& args, int line) {
  const auto arg = [&]() -> const Value& {
    NVFP4LM_CHECK(!args.empty(), "chat template line {}: test {} needs an argument", line, name);
    return args[0];
  };
  static const std::set<std::string> with_argument = {
      "divisibleby", "eq", "equalto", "==", "ne", "!=", "sameas", "in", "gt", "lt", "ge", "le"};
  NVFP4LM_CHECK(args.size() <= (with_argument.count(name) ? 1u : 0u),
                "chat template line {}: test {} takes {} argument", line, name,
                with_argument.count(name) ? "one" : "no");
  if (name == "defined") return !subject.is_undefined();
  if (name == "undefined") return subject.is_undefined();
  if (name == "none") return subject.is_none();
  if (name == "string") return subject.is_string();
  if (name == "mapping") return subject.is_dict() && !subject.is_namespace;
  // Jinja2's Undefined has __iter__, __len__ and __getitem__, so it counts as iterable and as a sequence.
  if (name == "iterable")
    return subject.is_list() || subject.is_dict() || subject.is_string() || subject.is_undefined();
  if (name == "sequence")
    return subject.is_list() || subject.is_dict() || subject.is_string() || subject.is_undefined();
  if (name == "number") return subject.is_number() || subject.is_bool() || subject.is_big_int();
  if (name == "integer") return subject.is_int() || subject.is_big_int();
  if (name == "float") return subject.is_float();
  if (name == "boolean") return subject.is_bool();
  if (name == "true") return subject.is_bool() && subject.as_bool();
  if (name == "false") return subject.is_bool() && !subject.as_bool();
  if (name == "callable") return subject.is_callable();
  if (name == "equalto" || name == "eq" || name == "==") return equals(subject, arg());
  // Python's `is`: for the values a template can name, the same type and value (so 1 is not sameas true).
  if (name == "sameas") return std::string(type_name(subject)) == type_name(arg()) && equals(subject, arg());
  if (name == "ne" || name == "!=") return !equals(subject, arg());
  if (name == "lower") return subject.is_string() && lower(subject.as_string()) == subject.as_string();
  if (name == "upper") return subject.is_string() && upper(subject.as_string()) == subject.as_string();
  if (name == "odd" || name == "even" || name == "divisibleby") {
    NVFP4LM_CHECK(subject.is_int(), "chat template line {}: test {} needs an integer, not a {}", line, name,
                  type_name(subject));
    if (name == "divisibleby") return arg().is_int() && arg().as_int() != 0 && subject.as_int() % arg().as_int() == 0;
    return (subject.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "in") {
    const Value& container = arg();
    if (container.is_string())
      return subject.is_string() && container.as_string().find(subject.as_string()) != std::string::npos;
    if (container.is_dict()) return is_hashable(subject) && container.as_dict().find_key(subject) != nullptr;
    for (const Value& item : iterate(container, line)) {
      if (equals(item, subject)) return true;
    }
    return false;
  }
  if (name == "gt" || name == "lt" || name == "ge" || name == "le") {
    const bool less = less_than(subject, arg(), true, line);
    const bool greater = less_than(arg(), subject, true, line);
    if (name == "gt") return greater;
    if (name == "lt") return less;
    if (name == "ge") return !less;
    return !greater;
  }
  NVFP4LM_FAIL("chat template line {}: unsupported test '{}'", line, name);
}

}  // namespace nvfp4lm::jinja
