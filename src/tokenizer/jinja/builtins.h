// The filters, tests, methods and global functions templates can call, and Jinja2's attribute / item lookup.
//
// Filters: abs capitalize count d default dictsort first float indent int items join last length list lower map
//   max min replace reject rejectattr reverse round safe select selectattr sort string sum title tojson trim
//   unique upper wordcount.
// Tests: boolean callable defined divisibleby eq equalto even false float ge gt in integer iterable le lower
//   lt mapping ne none number odd sameas sequence string true undefined upper.
// str methods: capitalize count endswith find isdigit join lower lstrip replace rfind rstrip split startswith
//   strip title upper; dict methods: get items keys values. Lists have none (see methods.cpp).
// Globals: dict namespace raise_exception range strftime_now.
#pragma once

#include <optional>
#include <string>

#include "tokenizer/jinja/value.h"

namespace nvfp4lm::jinja {

// Whether apply_filter / apply_test know `name` (for checking a template up front, e.g. when it is loaded).
bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

Value apply_filter(const std::string& name, const Value& subject, CallArgs& args, int line);
bool apply_test(const std::string& name, const Value& subject, const std::vector<Value>& args, int line);

// A method call `object.name(args)`; nullopt when `object` has no method of that name.
std::optional<Value> call_method(const Value& object, const std::string& name, CallArgs& args, int line);

// `object.name` and `object[key]` as Jinja2 resolves them: a missing key or index is Undefined; looking
// into an Undefined value is an error.
Value get_attribute(const Value& object, const std::string& name, int line);
Value get_item(const Value& object, const Value& key, int line);

// Python slicing object[start:stop:step] of a list or string (code points); absent parts are Undefined.
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step, int line);

// Iteration as Python's for: list items, dict keys, string code points; Undefined iterates as empty.
List iterate(const Value& value, int line);

// The global functions of a fresh render.
Dict global_functions();

// The argument named `name` (or at `position`) of a call, or `fallback` when absent.
Value argument(const CallArgs& args, size_t position, const char* name, Value fallback = Value());

}  // namespace nvfp4lm::jinja
