// See template.h. The evaluator walks the syntax tree; variables live in a chain of scopes (the globals,
// then one scope per for-loop iteration and per macro call), so that a {% set %} inside a loop does not leak
// out of it, as in Jinja2 (which is why templates use namespace() to carry state across iterations).
#include "tokenizer/jinja/template.h"

#include <cmath>
#include <map>

#include "core/error.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/parser.h"
#include "tokenizer/jinja/percent_format.h"

namespace nvfp4lm::jinja {
namespace {

struct Scope {
  std::map<std::string, Value> variables;
  Scope* parent = nullptr;
};

enum class Flow { Normal, Break, Continue };

// An Error ends the render, so scope_ and out_ are restored on the normal path only.
class Evaluator {
 public:
  Evaluator(Scope& globals, std::string& out) : globals_(globals), scope_(&globals), out_(&out) {}

  Flow render(const Body& body) {
    for (const StmtPtr& stmt : body) {
      const Flow flow = execute(*stmt);
      if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
  }

 private:
  // One step of the render's budget (kMaxSteps): every statement run and every loop iteration.
  void step(int line) {
    NVFP4LM_CHECK(++steps_ <= kMaxSteps,
                  "chat template line {}: stopped after {} steps (a loop that does not end, or more messages than a "
                  "context holds?)",
                  line, kMaxSteps);
  }

  void append(std::string_view text, int line) {
    NVFP4LM_CHECK(out_->size() + text.size() <= kMaxTextBytes, "chat template line {}: the output passes {} MiB", line,
                  kMaxTextBytes >> 20);
    *out_ += text;
  }

  Flow execute(const Stmt& stmt) {
    step(stmt.line);
    switch (stmt.kind) {
      case Stmt::Kind::Text:
        append(stmt.text, stmt.line);
        break;
      case Stmt::Kind::Output:
        append(to_output(evaluate(*stmt.expr)), stmt.line);
        break;
      case Stmt::Kind::If:
        for (const auto& [condition, body] : stmt.branches) {
          if (!condition || truthy(evaluate(*condition))) return render(body);
        }
        break;
      case Stmt::Kind::For:
        execute_for(stmt);
        break;
      case Stmt::Kind::Set:
        execute_set(stmt);
        break;
      case Stmt::Kind::SetBlock:
        scope_->variables[stmt.targets[0]] = Value(capture(stmt.body));
        break;
      case Stmt::Kind::Macro:
        scope_->variables[stmt.name] = make_macro(stmt);
        break;
      case Stmt::Kind::Break:
        return Flow::Break;
      case Stmt::Kind::Continue:
        return Flow::Continue;
      case Stmt::Kind::Block:
        return render(stmt.body);
      case Stmt::Kind::FilterBlock: {
        Scope body_scope{{}, scope_};
        body_scope.variables[kFilterBody] = Value(capture(stmt.body));
        Scope* saved = scope_;
        scope_ = &body_scope;
        const Value filtered = evaluate(*stmt.expr);
        scope_ = saved;
        append(to_output(filtered), stmt.line);
        break;
      }
      case Stmt::Kind::CallBlock:
        execute_call_block(stmt);
        break;
    }
    return Flow::Normal;
  }

  // What `run` writes, as a string instead of the output (for {% set %} blocks, macros, callers, filter blocks and a
  // recursive loop's loop()).
  template <typename Run>
  std::string capture_output(Run run) {
    std::string captured;
    std::string* saved = out_;
    out_ = &captured;
    run();
    out_ = saved;
    return captured;
  }
  std::string capture(const Body& body) {
    return capture_output([&] { render(body); });
  }

  // A function made for one statement (a call block's caller, a recursive loop's loop()) refers to the scopes on
  // the stack while that statement runs; a template that keeps it (in a namespace) and calls it later gets an
  // Error, not a dangling scope.
  struct Liveness {
    std::shared_ptr<bool> alive = std::make_shared<bool>(true);
    ~Liveness() { *alive = false; }
  };

  // A macro or a call block's caller() run with `args`, its variables in a scope under `parent`, as Jinja2's
  // Macro.__call__: parameters from the positional arguments, then by keyword, then the default (evaluated after
  // the earlier parameters); `caller`, `varargs` and `kwargs` where the body names them (Stmt::uses_*), and what is
  // left over an Error where the body does not take it.
  Value invoke(const Stmt& definition, const std::string& what, CallArgs& args, Scope* parent) {
    const Nested nested(*this, definition.line, what);
    Scope scope{{}, parent};
    Scope* const saved = scope_;
    scope_ = &scope;
    const auto& params = definition.params;
    const size_t given = args.positional.size();
    std::vector<bool> used(args.keyword.size(), false);
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& [param, default_value] = params[i];
      Value value;
      bool found = i < given;
      if (found) value = args.positional[i];
      for (size_t k = 0; k < args.keyword.size() && !found; ++k) {
        if (args.keyword[k].first == param) {
          value = args.keyword[k].second;
          used[k] = found = true;
        }
      }
      if (!found && default_value) value = evaluate(*default_value);
      scope.variables[param] = std::move(value);
    }
    Dict left_over;
    for (size_t k = 0; k < args.keyword.size(); ++k) {
      if (used[k]) continue;
      if (args.keyword[k].first == "caller" && definition.uses_caller) {
        scope.variables["caller"] = args.keyword[k].second;
        continue;
      }
      left_over.set(args.keyword[k].first, args.keyword[k].second);
    }
    if (definition.uses_caller && !scope.variables.count("caller")) scope.variables["caller"] = Value();
    if (definition.uses_kwargs) {
      scope.variables["kwargs"] = Value(std::move(left_over));
    } else if (!left_over.items.empty()) {
      const std::string& name = left_over.items[0].first.as_string();
      NVFP4LM_FAIL("chat template line {}: {} takes no keyword argument '{}'{}", definition.line, what, name,
                   name == "caller" ? " (a {% call %} block's macro must use caller())" : "");
    }
    if (definition.uses_varargs) {
      scope.variables["varargs"] =
          make_tuple(given > params.size()
                         ? List(args.positional.begin() + static_cast<ptrdiff_t>(params.size()), args.positional.end())
                         : List{});
    } else {
      NVFP4LM_CHECK(given <= params.size(), "chat template line {}: {} takes {} arguments, {} given", definition.line,
                    what, params.size(), given);
    }
    std::string rendered = capture(definition.body);
    scope_ = saved;
    return Value(std::move(rendered));
  }

  void execute_call_block(const Stmt& stmt) {
    const Liveness liveness;
    Scope* call_site = scope_;
    const Stmt* block = &stmt;
    const Value caller(Function([this, alive = liveness.alive, call_site, block](CallArgs& args) {
      NVFP4LM_CHECK(*alive, "chat template line {}: caller() called after its {{% call %}} block ended", block->line);
      return invoke(*block, "caller()", args, call_site);
    }));
    append(to_output(evaluate_call(*stmt.expr, &caller)), stmt.line);
  }

  void assign(const std::vector<std::string>& targets, const Value& value, int line) {
    if (targets.size() == 1) {
      scope_->variables[targets[0]] = value;
      return;
    }
    NVFP4LM_CHECK(value.is_list() && value.as_list().size() == targets.size(),
                  "chat template line {}: cannot unpack a {} into {} names", line, type_name(value), targets.size());
    for (size_t i = 0; i < targets.size(); ++i) scope_->variables[targets[i]] = value.as_list()[i];
  }

  void execute_set(const Stmt& stmt) {
    Value value = evaluate(*stmt.expr);
    if (stmt.attribute.empty()) {
      assign(stmt.targets, value, stmt.line);
      return;
    }
    const Value target = lookup(stmt.targets[0]);
    NVFP4LM_CHECK(target.is_dict() && target.is_namespace,
                  "chat template line {}: {{% set {}.{} %}} needs {} to be a namespace(), not a {}", stmt.line,
                  stmt.targets[0], stmt.attribute, stmt.targets[0], type_name(target));
    target.as_dict().set(stmt.attribute, std::move(value));
  }

  void execute_for(const Stmt& stmt) { run_loop(stmt, evaluate(*stmt.expr), scope_, 1); }

  // One run of a for loop over `iterable` (a recursive loop's loop(items) runs it again one level deeper); the
  // iterations' scopes hang off `outer`, the scope the for statement is in.
  void run_loop(const Stmt& stmt, const Value& iterable, Scope* outer, int64_t depth) {
    Scope* const saved = scope_;
    List items;
    for (Value& item : iterate(iterable, stmt.line)) {
      if (stmt.condition) {
        Scope filter_scope{{}, outer};
        scope_ = &filter_scope;
        assign(stmt.targets, item, stmt.line);
        const bool keep = truthy(evaluate(*stmt.condition));
        scope_ = saved;
        if (!keep) continue;
      }
      items.push_back(std::move(item));
    }
    if (items.empty()) {
      Scope else_scope{{}, outer};
      scope_ = &else_scope;
      render(stmt.else_body);
      scope_ = saved;
      return;
    }
    const Liveness liveness;
    std::shared_ptr<Function> recurse;
    if (stmt.recursive) {
      recurse = std::make_shared<Function>([this, alive = liveness.alive, &stmt, outer, depth](CallArgs& args) {
        NVFP4LM_CHECK(*alive, "chat template line {}: loop() called after its loop ended", stmt.line);
        NVFP4LM_CHECK(args.positional.size() == 1,
                      "chat template line {}: loop() of a recursive loop takes the items to loop over", stmt.line);
        const Nested nested(*this, stmt.line, "loop()");
        return Value(capture_output([&] { run_loop(stmt, args.positional[0], outer, depth + 1); }));
      });
    }
    const auto length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      step(stmt.line);
      Scope iteration{{}, outer};
      scope_ = &iteration;
      Dict loop;
      loop.set("index", Value(i + 1));
      loop.set("index0", Value(i));
      loop.set("revindex", Value(length - i));
      loop.set("revindex0", Value(length - i - 1));
      loop.set("first", Value(i == 0));
      loop.set("last", Value(i == length - 1));
      loop.set("length", Value(length));
      loop.set("depth", Value(depth));
      loop.set("depth0", Value(depth - 1));
      loop.set("previtem", i > 0 ? items[i - 1] : Value());
      loop.set("nextitem", i + 1 < length ? items[i + 1] : Value());
      loop.set("cycle", Value(Function([i](CallArgs& args) {
                 NVFP4LM_CHECK(!args.positional.empty(), "loop.cycle() needs at least one value");
                 return args.positional[static_cast<size_t>(i) % args.positional.size()];
               })));
      loop.call = recurse;
      iteration.variables["loop"] = Value(std::move(loop));
      assign(stmt.targets, items[i], stmt.line);
      const Flow flow = render(stmt.body);
      scope_ = saved;
      if (flow == Flow::Break) break;
    }
  }

  Value make_macro(const Stmt& stmt) {
    const Stmt* macro = &stmt;
    return Value(
        Function([this, macro](CallArgs& args) { return invoke(*macro, "macro " + macro->name, args, &globals_); }));
  }

  // One level of macro, caller() or loop() calls, bounded by kMaxNesting (a recursion that does not end is an Error,
  // not a stack overflow).
  class Nested {
   public:
    Nested(Evaluator& evaluator, int line, const std::string& what) : evaluator_(evaluator) {
      NVFP4LM_CHECK(evaluator_.call_depth_ < kMaxNesting, "chat template line {}: {} calls nested deeper than {}", line,
                    what, kMaxNesting);
      ++evaluator_.call_depth_;
    }
    ~Nested() { --evaluator_.call_depth_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;

   private:
    Evaluator& evaluator_;
  };

  Value lookup(const std::string& name) const {
    for (const Scope* scope = scope_; scope != nullptr; scope = scope->parent) {
      const auto found = scope->variables.find(name);
      if (found != scope->variables.end()) return found->second;
    }
    return Value();
  }

  // ---- expressions ----

  Value evaluate(const Expr& expr) {
    switch (expr.kind) {
      case Expr::Kind::Literal:
        return expr.literal;
      case Expr::Kind::Name:
        return lookup(expr.name);
      case Expr::Kind::List:
      case Expr::Kind::Tuple: {
        List list;
        for (const ExprPtr& child : expr.children) list.push_back(evaluate(*child));
        return expr.kind == Expr::Kind::Tuple ? make_tuple(std::move(list)) : Value(std::move(list));
      }
      case Expr::Kind::Dict: {
        Dict dict;
        for (size_t i = 0; i < expr.children.size(); i += 2) {
          Value key = evaluate(*expr.children[i]);
          NVFP4LM_CHECK(is_hashable(key), "chat template line {}: unhashable type '{}' (as a dict key)", expr.line,
                        type_name(key));
          dict.set_key(std::move(key), evaluate(*expr.children[i + 1]));
        }
        return Value(std::move(dict));
      }
      case Expr::Kind::Attribute:
        return get_attribute(evaluate(*expr.children[0]), expr.name, expr.line);
      case Expr::Kind::Index:
        return get_item(evaluate(*expr.children[0]), evaluate(*expr.children[1]), expr.line);
      case Expr::Kind::Slice: {
        const auto part = [&](size_t i) { return expr.children[i] ? evaluate(*expr.children[i]) : Value(); };
        return slice(part(0), part(1), part(2), part(3), expr.line);
      }
      case Expr::Kind::Call:
        return evaluate_call(expr);
      case Expr::Kind::Filter: {
        const Value subject = evaluate(*expr.children[0]);
        CallArgs args = evaluate_args(expr);
        return apply_filter(expr.name, subject, args, expr.line);
      }
      case Expr::Kind::Test: {
        const Value subject = evaluate(*expr.children[0]);
        CallArgs args = evaluate_args(expr);
        return Value(apply_test(expr.name, subject, args.positional, expr.line) != expr.negated);
      }
      case Expr::Kind::Unary: {
        const Value operand = evaluate(*expr.children[0]);
        if (expr.name == "not") return Value(!truthy(operand));
        NVFP4LM_CHECK(operand.is_number() || operand.is_bool(), "chat template line {}: unary {} on a {}", expr.line,
                      expr.name, type_name(operand));
        if (expr.name == "+") return operand;
        if (operand.is_float()) return Value(-operand.as_number());
        return Value(-(operand.is_bool() ? int64_t{operand.as_bool()} : operand.as_int()));
      }
      case Expr::Kind::And: {
        Value left = evaluate(*expr.children[0]);
        return truthy(left) ? evaluate(*expr.children[1]) : left;
      }
      case Expr::Kind::Or: {
        Value left = evaluate(*expr.children[0]);
        return truthy(left) ? left : evaluate(*expr.children[1]);
      }
      case Expr::Kind::Conditional:
        if (truthy(evaluate(*expr.children[1]))) return evaluate(*expr.children[0]);
        return expr.children[2] ? evaluate(*expr.children[2]) : Value();
      case Expr::Kind::Binary:
        return binary(expr.name, evaluate(*expr.children[0]), evaluate(*expr.children[1]), expr.line);
    }
    return Value();
  }

  // Arguments after children[0] (the subject or callee).
  CallArgs evaluate_args(const Expr& expr) {
    CallArgs args;
    for (size_t i = 1; i < expr.children.size(); ++i) args.positional.push_back(evaluate(*expr.children[i]));
    for (const auto& [name, value] : expr.kwargs) args.keyword.emplace_back(name, evaluate(*value));
    return args;
  }

  // A call; `caller` (a {% call %} block's body) is passed as the keyword argument Jinja2 passes it as.
  Value evaluate_call(const Expr& expr, const Value* caller = nullptr) {
    const Expr& callee = *expr.children[0];
    CallArgs args = evaluate_args(expr);
    if (caller) args.keyword.emplace_back("caller", *caller);
    if (callee.kind == Expr::Kind::Attribute) {
      const Value object = evaluate(*callee.children[0]);
      if (std::optional<Value> result = call_method(object, callee.name, args, expr.line)) return *result;
      const Value function = get_attribute(object, callee.name, expr.line);
      NVFP4LM_CHECK(function.is_callable(), "chat template line {}: {} has no method {}()", expr.line,
                    type_name(object), callee.name);
      return function.as_callable()(args);
    }
    const Value function = evaluate(callee);
    if (function.is_dict() && function.as_dict().call) return (*function.as_dict().call)(args);  // loop(items)
    NVFP4LM_CHECK(function.is_callable(), "chat template line {}: {} is not a function (it is {})", expr.line,
                  callee.kind == Expr::Kind::Name ? callee.name : std::string("the called value"),
                  function.is_undefined() ? "undefined" : type_name(function));
    try {
      return function.as_callable()(args);
    } catch (const Error& error) {
      const std::string message = error.what();
      if (message.starts_with("chat template line")) throw;
      NVFP4LM_FAIL("chat template line {}: {}", expr.line, message);
    }
  }

  static Value binary(const std::string& op, const Value& left, const Value& right, int line);

  Scope& globals_;
  Scope* scope_;
  std::string* out_;
  int64_t steps_ = 0;   // of kMaxSteps
  int call_depth_ = 0;  // of kMaxNesting
};

int64_t as_integer(const Value& value) { return value.is_bool() ? int64_t{value.as_bool()} : value.as_int(); }
bool is_integral(const Value& value) { return value.is_int() || value.is_bool(); }
bool is_numeric(const Value& value) { return value.is_number() || value.is_bool(); }
double as_double(const Value& value) { return value.is_bool() ? (value.as_bool() ? 1.0 : 0.0) : value.as_number(); }

// A string built by the template, refused past kMaxTextBytes (a doubling in a loop reaches any size in 40 steps).
std::string checked_size(std::string text, int line) {
  NVFP4LM_CHECK(text.size() <= kMaxTextBytes, "chat template line {}: a string of more than {} MiB", line,
                kMaxTextBytes >> 20);
  return text;
}

Value repeat(const Value& sequence, int64_t count, int line) {
  const size_t unit = sequence.is_string() ? sequence.as_string().size() : sequence.as_list().size() * 16;
  NVFP4LM_CHECK(count <= 0 || unit == 0 || static_cast<uint64_t>(count) <= kMaxTextBytes / unit,
                "chat template line {}: repeating {} times passes {} MiB", line, count, kMaxTextBytes >> 20);
  if (sequence.is_string()) {
    std::string out;
    for (int64_t i = 0; i < count; ++i) out += sequence.as_string();
    return Value(std::move(out));
  }
  List out;
  for (int64_t i = 0; i < count; ++i) out.insert(out.end(), sequence.as_list().begin(), sequence.as_list().end());
  return Value(std::move(out));
}

bool contains(const Value& container, const Value& item, int line) {
  if (container.is_string()) {
    NVFP4LM_CHECK(item.is_string(), "chat template line {}: 'in <string>' needs a string on the left, not a {}", line,
                  type_name(item));
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict()) {
    NVFP4LM_CHECK(is_hashable(item), "chat template line {}: unhashable type '{}' (as a dict key)", line,
                  type_name(item));
    return container.as_dict().find_key(item) != nullptr;
  }
  if (container.is_list()) {
    for (const Value& element : container.as_list()) {
      if (equals(element, item)) return true;
    }
    return false;
  }
  if (container.is_undefined()) return false;
  NVFP4LM_FAIL("chat template line {}: 'in' needs a string, list or dict on the right, not a {}", line,
               type_name(container));
}

Value Evaluator::binary(const std::string& op, const Value& left, const Value& right, int line) {
  if (op == "==") return Value(equals(left, right));
  if (op == "!=") return Value(!equals(left, right));
  if (op == "in") return Value(contains(right, left, line));
  if (op == "not in") return Value(!contains(right, left, line));
  if (op == "~") return Value(checked_size(to_output(left) + to_output(right), line));
  const auto fail = [&]() -> Value {
    NVFP4LM_FAIL("chat template line {}: unsupported operand types for {}: {} and {}", line, op, type_name(left),
                 type_name(right));
  };
  if (op == "%" && left.is_string()) return Value(percent_format(left.as_string(), right, line));
  for (const Value* side : {&left, &right}) {
    if (side->is_big_int())
      NVFP4LM_FAIL(
          "chat template line {}: '{}' with {}: an integer beyond 64 bits is printed and compared, not "
          "computed with (Python's integers are unbounded, nvfp4lm's are 64-bit)",
          line, op, side->big_int_digits());
  }
  if (op == "<" || op == "<=" || op == ">" || op == ">=") {
    int order = 0;
    if (is_numeric(left) && is_numeric(right)) {
      order = as_double(left) < as_double(right) ? -1 : as_double(left) > as_double(right) ? 1 : 0;
    } else if (left.is_string() && right.is_string()) {
      order = left.as_string().compare(right.as_string());
    } else {
      return fail();
    }
    if (op == "<") return Value(order < 0);
    if (op == "<=") return Value(order <= 0);
    if (op == ">") return Value(order > 0);
    return Value(order >= 0);
  }
  if (op == "+") {
    if (left.is_string() && right.is_string()) return Value(checked_size(left.as_string() + right.as_string(), line));
    if (left.is_list() && right.is_list()) {
      NVFP4LM_CHECK(left.as_list().size() + right.as_list().size() <= kMaxTextBytes / 16,
                    "chat template line {}: a list of more than {} items", line, kMaxTextBytes / 16);
      List sum = left.as_list();
      sum.insert(sum.end(), right.as_list().begin(), right.as_list().end());
      return Value(std::move(sum));
    }
  }
  if (op == "*") {
    if ((left.is_string() || left.is_list()) && is_integral(right)) return repeat(left, as_integer(right), line);
    if ((right.is_string() || right.is_list()) && is_integral(left)) return repeat(right, as_integer(left), line);
  }
  if (!is_numeric(left) || !is_numeric(right)) return fail();
  const bool integers = is_integral(left) && is_integral(right);
  const double x = as_double(left), y = as_double(right);
  if (op == "/") {
    NVFP4LM_CHECK(y != 0.0, "chat template line {}: division by zero", line);
    return Value(x / y);
  }
  if (integers) {
    // 64-bit integers: a result Python would hold in more bits is an Error, never a wrapped number.
    const int64_t a = as_integer(left), b = as_integer(right);
    const auto overflow = [&]() -> Value {
      NVFP4LM_FAIL(
          "chat template line {}: {} {} {} is beyond 64-bit integers (Python's are unbounded; nvfp4lm "
          "computes with 64 bits)",
          line, a, op, b);
    };
    int64_t result = 0;
    if (op == "+") return __builtin_add_overflow(a, b, &result) ? overflow() : Value(result);
    if (op == "-") return __builtin_sub_overflow(a, b, &result) ? overflow() : Value(result);
    if (op == "*") return __builtin_mul_overflow(a, b, &result) ? overflow() : Value(result);
    if (op == "//" || op == "%") {
      NVFP4LM_CHECK(b != 0, "chat template line {}: integer division or modulo by zero", line);
      if (a == INT64_MIN && b == -1) return op == "%" ? Value(int64_t{0}) : overflow();
      int64_t quotient = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0))) --quotient;  // Python floors
      return Value(op == "//" ? quotient : a - quotient * b);
    }
    if (op == "**" && b >= 0) {  // by squaring: at most 64 steps whatever b is
      int64_t power = 1, base = a;
      for (int64_t e = b; e > 0; e >>= 1) {
        if ((e & 1) != 0 && __builtin_mul_overflow(power, base, &power)) return overflow();
        if (e > 1 && __builtin_mul_overflow(base, base, &base)) return overflow();
      }
      return Value(power);
    }
  }
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "**") return Value(std::pow(x, y));
  NVFP4LM_CHECK(y != 0.0, "chat template line {}: float division or modulo by zero", line);
  if (op == "//") return Value(std::floor(x / y));
  if (op == "%") return Value(x - std::floor(x / y) * y);
  return fail();
}

}  // namespace

Template::Template(std::string_view source) : body_(std::make_shared<const Body>(parse_template(source))) {}

std::string Template::render(const nlohmann::ordered_json& context) const {
  NVFP4LM_CHECK(context.is_object(), "chat template: the render context must be a JSON object, not {}",
                context.type_name());
  Scope globals;
  for (auto& [name, function] : global_functions().items) globals.variables[name.as_string()] = function;
  for (const auto& [key, value] : context.items()) globals.variables[key] = from_json(value);
  std::string out;
  try {
    Evaluator(globals, out).render(*body_);
  } catch (const std::bad_variant_access&) {
    // A value of an unexpected type reached code that did not check it: a gap in the interpreter's checks.
    NVFP4LM_FAIL(
        "chat template: a value of an unexpected type reached a filter or method without a check (an "
        "interpreter bug; please report it with the template)");
  }
  return out;
}

}  // namespace nvfp4lm::jinja
