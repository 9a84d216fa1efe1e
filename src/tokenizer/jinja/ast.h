// The syntax tree of a template: expressions (Expr) and statements (Stmt). One node struct per category with
// a kind, rather than a class per construct: the evaluator switches on the kind, and every node keeps the
// template line it came from for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace nvfp4lm::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,      // literal
    Name,         // name
    List,         // children: items
    Tuple,        // children: items
    Dict,         // children: key, value, key, value...
    Attribute,    // children[0].name
    Index,        // children[0][children[1]]
    Slice,        // children[0][children[1]:children[2]:children[3]] (absent parts are null)
    Call,         // children[0](children[1..], kwargs)
    Filter,       // children[0] | name(children[1..], kwargs)
    Test,         // children[0] is [not] name(children[1..])
    Unary,        // name ("-", "+", "not") children[0]
    Binary,       // children[0] name children[1]; name is the operator, "in" / "not in" included
    And,          // children[0] and children[1] (short-circuit, returns an operand as Python does)
    Or,           // children[0] or children[1]
    Conditional,  // children[0] if children[1] else children[2] (children[2] may be null)
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // Test: "is not"
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    Text,      // text
    Output,    // {{ expr }}
    If,        // branches: (condition, body)...; the else branch has a null condition
    For,       // for targets in expr [if condition] body [else else_body]
    Set,       // set targets = expr, or set targets[0].attribute = expr (namespace)
    SetBlock,  // set targets[0] %} body {% endset
    Macro,     // macro name(params) body
    Break,
    Continue,
    Block,        // a transparent block: {% generation %} ... {% endgeneration %} (transformers' extension)
    FilterBlock,  // filter chain %} body {% endfilter: expr applies the chain to a Name kFilterBody
    CallBlock,    // call(params) expr %} body {% endcall: expr is the call; body is what caller(params) renders
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::string> targets;
  std::string attribute;
  Body body, else_body;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro / caller parameters with optional defaults
  bool recursive = false;                               // For: `recursive` (loop(items) renders the body again)
  // Macro, CallBlock: whether the body names caller, varargs, kwargs (Jinja2 then passes them; otherwise a call
  // block, extra positional or unknown keyword arguments are an error).
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;
};

// The name a {% filter %} block's chain reads its rendered body from: not an identifier, so no template can name it.
inline constexpr const char* kFilterBody = "(filter body)";

}  // namespace nvfp4lm::jinja
