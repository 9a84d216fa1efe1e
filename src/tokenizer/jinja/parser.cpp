// See parser.h. Recursive descent with Jinja2's precedence, loosest first:
//   conditional (a if b else c) < or < and < not < comparisons (== != < <= > >= in, not in)
//   < + - < ~ < * / // % < ** < unary - + < postfix (.attr [index] (call) |filter is test).
// Filters and tests bind to the postfix expression as in Jinja2: `messages|length - 1` is (messages|length) - 1
// and `not x is defined` is not (x is defined).
#include "tokenizer/jinja/parser.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "core/error.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/limits.h"

namespace nvfp4lm::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

 private:
  // One level of recursion (a parenthesis, a statement inside a statement, a `not` or sign), bounded by kMaxNesting
  // so that "((((...", thousands of nested ifs or "not not not ..." are an Error, not a stack overflow.
  class Nested {
   public:
    Nested(Parser& parser, int line) : parser_(parser) {
      NVFP4LM_CHECK(++parser_.nesting_ <= kMaxNesting, "chat template line {}: nested deeper than {} levels", line,
                    kMaxNesting);
    }
    ~Nested() { --parser_.nesting_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;

   private:
    Parser& parser_;
  };
  int nesting_ = 0;
  int expression_nodes_ = 0;    // of the expression being parsed (make_expr)
  int64_t template_nodes_ = 0;  // of the whole template (make_stmt, make_expr), of kMaxTemplateNodes

  void count_node(int line) {
    NVFP4LM_CHECK(++template_nodes_ <= kMaxTemplateNodes,
                  "chat template line {}: more than {} statements and expression parts; no chat template needs so "
                  "many",
                  line, kMaxTemplateNodes);
  }

 public:
  Body parse_all() {
    std::string end_tag;
    Body body = parse_body({}, end_tag);
    return body;
  }

 private:
  // ---- statements ----

  // Statements until one of `end_tags` (its name is stored in end_tag, its StmtEnd not yet consumed) or the
  // end of the template (only allowed when end_tags is empty).
  Body parse_body(const std::set<std::string>& end_tags, std::string& end_tag) {
    Body body;
    while (true) {
      const Token& token = peek();
      if (token.kind == TokenKind::End) {
        NVFP4LM_CHECK(end_tags.empty(), "chat template: the template ends inside a block; add {{% {} %}}",
                      *end_tags.begin());
        return body;
      }
      if (token.kind == TokenKind::Text) {
        auto stmt = make_stmt(Stmt::Kind::Text);
        stmt->text = next().text;
        body.push_back(std::move(stmt));
      } else if (token.kind == TokenKind::ExprBegin) {
        next();
        auto stmt = make_stmt(Stmt::Kind::Output);
        expression_nodes_ = 0;
        stmt->expr = parse_expression();
        expect(TokenKind::ExprEnd, "}}");
        body.push_back(std::move(stmt));
      } else {
        expect(TokenKind::StmtBegin, "{%");
        const Token& keyword = peek();
        NVFP4LM_CHECK(keyword.kind == TokenKind::Name, "chat template line {}: expected a statement name after {{%",
                      keyword.line);
        if (end_tags.count(keyword.text)) {
          end_tag = next().text;
          return body;
        }
        const Nested nested(*this, keyword.line);
        expression_nodes_ = 0;
        body.push_back(parse_statement());
      }
    }
  }

  StmtPtr parse_statement() {
    const Token keyword = next();
    const std::string& name = keyword.text;
    if (name == "if") return parse_if();
    if (name == "for") return parse_for();
    if (name == "set") return parse_set();
    if (name == "macro") return parse_macro();
    if (name == "break" || name == "continue") {
      auto stmt = make_stmt(name == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue);
      expect(TokenKind::StmtEnd, "%}");
      return stmt;
    }
    if (name == "filter") return parse_filter_block();
    if (name == "call") return parse_call_block();
    if (name == "generation") {
      auto stmt = make_stmt(Stmt::Kind::Block);
      expect(TokenKind::StmtEnd, "%}");
      std::string end_tag;
      stmt->body = parse_body({"endgeneration"}, end_tag);
      expect(TokenKind::StmtEnd, "%}");
      return stmt;
    }
    NVFP4LM_FAIL(
        "chat template line {}: unsupported statement {{% {} %}}; the interpreter runs if, for, set, macro, "
        "call, filter, break, continue, raw and generation",
        keyword.line, name);
  }

  StmtPtr parse_if() {
    auto stmt = make_stmt(Stmt::Kind::If);
    ExprPtr condition = parse_expression();
    while (true) {
      expect(TokenKind::StmtEnd, "%}");
      std::string end_tag;
      Body body = parse_body({"elif", "else", "endif"}, end_tag);
      stmt->branches.emplace_back(std::move(condition), std::move(body));
      if (end_tag == "endif") break;
      if (end_tag == "else") {
        expect(TokenKind::StmtEnd, "%}");
        Body else_body = parse_body({"endif"}, end_tag);
        stmt->branches.emplace_back(nullptr, std::move(else_body));
        break;
      }
      condition = parse_expression();
    }
    expect(TokenKind::StmtEnd, "%}");
    return stmt;
  }

  StmtPtr parse_for() {
    auto stmt = make_stmt(Stmt::Kind::For);
    stmt->targets = parse_targets();
    expect_name("in");
    stmt->expr = parse_conditional(/*allow_if=*/false);
    if (peek_name("if")) {
      next();
      stmt->condition = parse_expression();
    }
    if (peek_name("recursive")) {
      next();
      stmt->recursive = true;
    }
    expect(TokenKind::StmtEnd, "%}");
    std::string end_tag;
    stmt->body = parse_body({"else", "endfor"}, end_tag);
    if (end_tag == "else") {
      expect(TokenKind::StmtEnd, "%}");
      stmt->else_body = parse_body({"endfor"}, end_tag);
    }
    expect(TokenKind::StmtEnd, "%}");
    return stmt;
  }

  // "x" or "k, v" or "(k, v)".
  std::vector<std::string> parse_targets() {
    std::vector<std::string> targets;
    const bool parenthesized = peek_operator("(");
    if (parenthesized) next();
    do {
      targets.push_back(expect_identifier());
    } while (peek_operator(",") && next().kind == TokenKind::Operator);
    if (parenthesized) expect_operator(")");
    return targets;
  }

  StmtPtr parse_set() {
    auto stmt = make_stmt(Stmt::Kind::Set);
    stmt->targets = parse_targets();
    if (stmt->targets.size() == 1 && peek_operator(".")) {
      next();
      stmt->attribute = expect_identifier();
    }
    if (peek().kind == TokenKind::StmtEnd) {
      NVFP4LM_CHECK(stmt->targets.size() == 1 && stmt->attribute.empty(),
                    "chat template line {}: a {{% set %}} block assigns one plain name", stmt->line);
      next();
      stmt->kind = Stmt::Kind::SetBlock;
      std::string end_tag;
      stmt->body = parse_body({"endset"}, end_tag);
      expect(TokenKind::StmtEnd, "%}");
      return stmt;
    }
    expect_operator("=");
    stmt->expr = parse_tuple_or_expression();
    expect(TokenKind::StmtEnd, "%}");
    return stmt;
  }

  // {% filter name(args)|name2 %} body {% endfilter %}: the chain applied to the rendered body.
  StmtPtr parse_filter_block() {
    auto stmt = make_stmt(Stmt::Kind::FilterBlock);
    ExprPtr node = make_expr(Expr::Kind::Name);
    node->name = kFilterBody;
    do {
      node = parse_filter(std::move(node));
    } while (peek_operator("|") && next().kind == TokenKind::Operator);
    stmt->expr = std::move(node);
    expect(TokenKind::StmtEnd, "%}");
    std::string end_tag;
    stmt->body = parse_body({"endfilter"}, end_tag);
    expect(TokenKind::StmtEnd, "%}");
    return stmt;
  }

  // {% call(params) macro(args) %} body {% endcall %}: the macro runs with `caller`, which renders the body.
  StmtPtr parse_call_block() {
    auto stmt = make_stmt(Stmt::Kind::CallBlock);
    if (peek_operator("(")) {
      next();
      parse_params(*stmt);
    }
    stmt->expr = parse_expression();
    NVFP4LM_CHECK(stmt->expr->kind == Expr::Kind::Call,
                  "chat template line {}: {{% call %}} needs a call, such as "
                  "{{% call my_macro() %}}",
                  stmt->line);
    expect(TokenKind::StmtEnd, "%}");
    std::string end_tag;
    stmt->body = parse_body({"endcall"}, end_tag);
    expect(TokenKind::StmtEnd, "%}");
    note_special_names(*stmt);
    return stmt;
  }

  // Jinja2's find_undeclared over a macro's (or caller's) body: whether it names caller, varargs or kwargs anywhere.
  static void note_special_names(Stmt& definition) {
    std::set<std::string> names;
    for (const StmtPtr& stmt : definition.body) collect_names(*stmt, names);
    definition.uses_caller = names.count("caller") > 0;
    definition.uses_varargs = names.count("varargs") > 0;
    definition.uses_kwargs = names.count("kwargs") > 0;
  }
  static void collect_names(const Expr& expr, std::set<std::string>& names) {
    if (expr.kind == Expr::Kind::Name) names.insert(expr.name);
    for (const ExprPtr& child : expr.children)
      if (child) collect_names(*child, names);
    for (const auto& [name, value] : expr.kwargs) collect_names(*value, names);
  }
  static void collect_names(const Stmt& stmt, std::set<std::string>& names) {
    for (const Expr* expr : {stmt.expr.get(), stmt.condition.get()})
      if (expr) collect_names(*expr, names);
    for (const auto& [condition, body] : stmt.branches) {
      if (condition) collect_names(*condition, names);
      for (const StmtPtr& child : body) collect_names(*child, names);
    }
    for (const Body* body : {&stmt.body, &stmt.else_body})
      for (const StmtPtr& child : *body) collect_names(*child, names);
    for (const auto& [param, default_value] : stmt.params)
      if (default_value) collect_names(*default_value, names);
  }

  // "name, name=default, ...)" after the opening parenthesis, into stmt.params.
  void parse_params(Stmt& stmt) {
    while (!peek_operator(")")) {
      std::string param = expect_identifier();
      ExprPtr default_value;
      if (peek_operator("=")) {
        next();
        default_value = parse_expression();
      }
      stmt.params.emplace_back(std::move(param), std::move(default_value));
      if (!peek_operator(")")) expect_operator(",");
    }
    next();
  }

  StmtPtr parse_macro() {
    auto stmt = make_stmt(Stmt::Kind::Macro);
    stmt->name = expect_identifier();
    expect_operator("(");
    parse_params(*stmt);
    expect(TokenKind::StmtEnd, "%}");
    std::string end_tag;
    stmt->body = parse_body({"endmacro"}, end_tag);
    if (peek().kind == TokenKind::Name) next();  // {% endmacro name %}
    expect(TokenKind::StmtEnd, "%}");
    note_special_names(*stmt);
    return stmt;
  }

  // ---- expressions ----

  // "a, b" (a tuple without parentheses, as `set` allows) or one expression.
  ExprPtr parse_tuple_or_expression() {
    ExprPtr first = parse_expression();
    if (!peek_operator(",")) return first;
    auto tuple = make_expr(Expr::Kind::Tuple);
    tuple->children.push_back(std::move(first));
    while (peek_operator(",")) {
      next();
      tuple->children.push_back(parse_expression());
    }
    return tuple;
  }

  ExprPtr parse_expression() {
    const Nested nested(*this, peek().line);
    return parse_conditional(true);
  }

  ExprPtr parse_conditional(bool allow_if) {
    ExprPtr value = parse_or();
    while (allow_if && peek_name("if")) {
      auto conditional = make_expr(Expr::Kind::Conditional);
      next();
      conditional->children.push_back(std::move(value));
      conditional->children.push_back(parse_or());
      if (peek_name("else")) {
        next();
        conditional->children.push_back(parse_conditional(true));
      } else {
        conditional->children.push_back(nullptr);
      }
      value = std::move(conditional);
    }
    return value;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (peek_name("or")) {
      next();
      left = binary(Expr::Kind::Or, "or", std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (peek_name("and")) {
      next();
      left = binary(Expr::Kind::And, "and", std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (!peek_name("not")) return parse_compare();
    const Nested nested(*this, peek().line);
    auto unary = make_expr(Expr::Kind::Unary);
    next();
    unary->name = "not";
    unary->children.push_back(parse_not());
    return unary;
  }

  ExprPtr parse_compare() {
    ExprPtr left = parse_math1();
    while (true) {
      std::string op;
      const Token& token = peek();
      if (token.kind == TokenKind::Operator && (token.text == "==" || token.text == "!=" || token.text == "<" ||
                                                token.text == "<=" || token.text == ">" || token.text == ">=")) {
        op = token.text;
        next();
      } else if (peek_name("in")) {
        op = "in";
        next();
      } else if (peek_name("not") && tokens_[pos_ + 1].kind == TokenKind::Name && tokens_[pos_ + 1].text == "in") {
        op = "not in";
        next();
        next();
      } else {
        return left;
      }
      left = binary(Expr::Kind::Binary, op, std::move(left), parse_math1());
    }
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (peek_operator("+") || peek_operator("-")) {
      const std::string op = next().text;
      left = binary(Expr::Kind::Binary, op, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (peek_operator("~")) {
      next();
      left = binary(Expr::Kind::Binary, "~", std::move(left), parse_math2());
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (peek_operator("*") || peek_operator("/") || peek_operator("//") || peek_operator("%")) {
      const std::string op = next().text;
      left = binary(Expr::Kind::Binary, op, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary();
    while (peek_operator("**")) {
      next();
      left = binary(Expr::Kind::Binary, "**", std::move(left), parse_unary());
    }
    return left;
  }

  // As Jinja2's parse_unary: a sign binds tighter than a filter, so `-3|abs` is (-3)|abs = 3.
  ExprPtr parse_unary(bool with_filter = true) {
    if (peek_operator("-") || peek_operator("+")) {
      const Nested nested(*this, peek().line);
      auto unary = make_expr(Expr::Kind::Unary);
      unary->name = next().text;
      unary->children.push_back(parse_unary(false));
      return parse_postfix(std::move(unary), with_filter);
    }
    return parse_postfix(parse_primary(), with_filter);
  }

  // .attr [index] (call), and with_filter also |filter and `is` tests.
  ExprPtr parse_postfix(ExprPtr node, bool with_filter) {
    while (true) {
      if (peek_operator(".")) {
        next();
        auto attribute = make_expr(Expr::Kind::Attribute);
        const Token& name = next();
        NVFP4LM_CHECK(name.kind == TokenKind::Name || name.kind == TokenKind::Integer,
                      "chat template line {}: expected an attribute name after '.'", name.line);
        attribute->name = name.text;
        attribute->children.push_back(std::move(node));
        node = std::move(attribute);
      } else if (peek_operator("[")) {
        next();
        node = parse_subscript(std::move(node));
      } else if (peek_operator("(")) {
        next();
        auto call = make_expr(Expr::Kind::Call);
        call->children.push_back(std::move(node));
        parse_call_args(*call);
        node = std::move(call);
      } else if (with_filter && peek_operator("|")) {
        next();
        node = parse_filter(std::move(node));
      } else if (with_filter && peek_name("is")) {
        next();
        auto test = make_expr(Expr::Kind::Test);
        if (peek_name("not")) {
          next();
          test->negated = true;
        }
        test->name = expect_identifier();
        test->children.push_back(std::move(node));
        if (peek_operator("(")) {
          next();
          parse_call_args(*test);
        } else if (starts_test_argument()) {
          test->children.push_back(parse_postfix(parse_primary(), false));
        }
        node = std::move(test);
      } else {
        return node;
      }
    }
  }

  // "name" or "name(args)" after a '|' (or {% filter %}): that filter applied to `subject`.
  ExprPtr parse_filter(ExprPtr subject) {
    auto filter = make_expr(Expr::Kind::Filter);
    filter->name = expect_identifier();
    filter->children.push_back(std::move(subject));
    if (peek_operator("(")) {
      next();
      parse_call_args(*filter);
    }
    return filter;
  }

  // Jinja2 lets a test take one argument without parentheses: `x is divisibleby 3`, `x is sameas none`.
  bool starts_test_argument() const {
    const Token& token = peek();
    if (token.kind == TokenKind::String || token.kind == TokenKind::Integer || token.kind == TokenKind::Float) {
      return true;
    }
    if (token.kind == TokenKind::Name) {
      static const std::set<std::string> stop = {"else", "or", "and", "if", "in", "not", "is"};
      return !stop.count(token.text);
    }
    return token.kind == TokenKind::Operator && (token.text == "[" || token.text == "{");
  }

  ExprPtr parse_subscript(ExprPtr object) {
    ExprPtr parts[3];
    int colons = 0;
    while (!peek_operator("]")) {
      if (peek_operator(":")) {
        next();
        ++colons;
        NVFP4LM_CHECK(colons <= 2, "chat template line {}: a slice has at most two ':'", peek().line);
        continue;
      }
      NVFP4LM_CHECK(!parts[colons], "chat template line {}: expected ':' or ']' in a subscript", peek().line);
      parts[colons] = parse_expression();
    }
    next();
    if (colons == 0) {
      NVFP4LM_CHECK(parts[0] != nullptr, "chat template line {}: empty subscript []", object->line);
      return binary(Expr::Kind::Index, "[]", std::move(object), std::move(parts[0]));
    }
    auto slice = make_expr(Expr::Kind::Slice);
    slice->children.push_back(std::move(object));
    for (auto& part : parts) slice->children.push_back(std::move(part));
    return slice;
  }

  void parse_call_args(Expr& call) {
    while (!peek_operator(")")) {
      if (peek().kind == TokenKind::Name && tokens_[pos_ + 1].kind == TokenKind::Operator &&
          tokens_[pos_ + 1].text == "=") {
        std::string name = next().text;
        next();
        call.kwargs.emplace_back(std::move(name), parse_expression());
      } else {
        NVFP4LM_CHECK(call.kwargs.empty(), "chat template line {}: a positional argument follows a keyword argument",
                      peek().line);
        call.children.push_back(parse_expression());
      }
      if (!peek_operator(")")) expect_operator(",");
    }
    next();
  }

  // An integer literal: 64-bit, or beyond that a BigInt (printed and compared as Python would, not computed with).
  static Value integer_literal(const std::string& text) {
    std::string digits;
    for (const char c : text)
      if (c != '_') digits += c;
    int64_t value = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (error == std::errc() && end == digits.data() + digits.size()) return Value(value);
    const size_t first = std::min(digits.find_first_not_of('0'), digits.size() - 1);
    return Value(BigInt{digits.substr(first)});
  }

  ExprPtr parse_primary() {
    const Token token = next();
    if (token.kind == TokenKind::String) {
      std::string text = token.text;
      while (peek().kind == TokenKind::String) text += next().text;  // adjacent literals concatenate
      return literal(Value(std::move(text)), token.line);
    }
    if (token.kind == TokenKind::Integer) return literal(integer_literal(token.text), token.line);
    if (token.kind == TokenKind::Float) return literal(Value(std::stod(token.text)), token.line);
    if (token.kind == TokenKind::Name) {
      if (token.text == "true" || token.text == "True") return literal(Value(true), token.line);
      if (token.text == "false" || token.text == "False") return literal(Value(false), token.line);
      if (token.text == "none" || token.text == "None") return literal(Value(None{}), token.line);
      auto name = make_expr(Expr::Kind::Name, token.line);
      name->name = token.text;
      return name;
    }
    if (token.kind == TokenKind::Operator && token.text == "(") {
      if (peek_operator(")")) {
        next();
        return make_expr(Expr::Kind::Tuple, token.line);
      }
      ExprPtr first = parse_expression();
      if (peek_operator(")")) {
        next();
        return first;
      }
      auto tuple = make_expr(Expr::Kind::Tuple, token.line);
      tuple->children.push_back(std::move(first));
      while (peek_operator(",")) {
        next();
        if (peek_operator(")")) break;
        tuple->children.push_back(parse_expression());
      }
      expect_operator(")");
      return tuple;
    }
    if (token.kind == TokenKind::Operator && token.text == "[") {
      auto list = make_expr(Expr::Kind::List, token.line);
      while (!peek_operator("]")) {
        list->children.push_back(parse_expression());
        if (!peek_operator("]")) expect_operator(",");
      }
      next();
      return list;
    }
    if (token.kind == TokenKind::Operator && token.text == "{") {
      auto dict = make_expr(Expr::Kind::Dict, token.line);
      while (!peek_operator("}")) {
        dict->children.push_back(parse_expression());
        expect_operator(":");
        dict->children.push_back(parse_expression());
        if (!peek_operator("}")) expect_operator(",");
      }
      next();
      return dict;
    }
    NVFP4LM_FAIL("chat template line {}: unexpected {} in an expression", token.line, describe(token));
  }

  // ---- helpers ----

  static std::string describe(const Token& token) {
    switch (token.kind) {
      case TokenKind::ExprEnd:
        return "'}}'";
      case TokenKind::StmtEnd:
        return "'%}'";
      case TokenKind::End:
        return "end of template";
      case TokenKind::Text:
        return "text";
      default:
        return "'" + token.text + "'";
    }
  }

  const Token& peek() const { return tokens_[pos_]; }
  const Token& next() {
    const Token& token = tokens_[pos_];
    if (token.kind != TokenKind::End) ++pos_;
    return token;
  }
  bool peek_operator(std::string_view op) const { return peek().kind == TokenKind::Operator && peek().text == op; }
  bool peek_name(std::string_view name) const { return peek().kind == TokenKind::Name && peek().text == name; }

  void expect(TokenKind kind, std::string_view what) {
    const Token& token = peek();
    NVFP4LM_CHECK(token.kind == kind, "chat template line {}: expected '{}', found {}", token.line, what,
                  describe(token));
    next();
  }
  void expect_operator(std::string_view op) {
    NVFP4LM_CHECK(peek_operator(op), "chat template line {}: expected '{}', found {}", peek().line, op,
                  describe(peek()));
    next();
  }
  void expect_name(std::string_view name) {
    NVFP4LM_CHECK(peek_name(name), "chat template line {}: expected '{}', found {}", peek().line, name,
                  describe(peek()));
    next();
  }
  std::string expect_identifier() {
    NVFP4LM_CHECK(peek().kind == TokenKind::Name, "chat template line {}: expected a name, found {}", peek().line,
                  describe(peek()));
    return next().text;
  }

  StmtPtr make_stmt(Stmt::Kind kind) {
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = kind;
    stmt->line = tokens_[pos_ > 0 ? pos_ - 1 : 0].line;
    count_node(stmt->line);
    return stmt;
  }
  ExprPtr make_expr(Expr::Kind kind, int line = 0) {
    NVFP4LM_CHECK(++expression_nodes_ <= kMaxExpressionNodes,
                  "chat template line {}: an expression of more than {} parts; no chat template needs one",
                  line ? line : peek().line, kMaxExpressionNodes);
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->line = line ? line : peek().line;
    count_node(expr->line);
    return expr;
  }
  ExprPtr literal(Value value, int line) {
    auto expr = make_expr(Expr::Kind::Literal, line);
    expr->literal = std::move(value);
    return expr;
  }
  ExprPtr binary(Expr::Kind kind, std::string op, ExprPtr left, ExprPtr right) {
    auto expr = make_expr(kind, left->line);
    expr->name = std::move(op);
    expr->children.push_back(std::move(left));
    expr->children.push_back(std::move(right));
    return expr;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) {
  // Checked before lexing: a 50 MB template once took 47 s and 3.7 GiB to reach its first error.
  NVFP4LM_CHECK(source.size() <= kMaxTemplateBytes,
                "chat template: {} bytes, more than the {} MiB a template may have (published chat templates are "
                "under 20 KB)",
                source.size(), kMaxTemplateBytes >> 20);
  return Parser(lex_template(source)).parse_all();
}

}  // namespace nvfp4lm::jinja
