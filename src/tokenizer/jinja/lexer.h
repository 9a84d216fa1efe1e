// Splits a template into tokens: literal text, the delimiters of {{ expressions }} and {% statements %},
// and the names, literals and operators inside them. Comments ({# #}) are dropped here.
//
// Whitespace control is applied while lexing, as Hugging Face's apply_chat_template configures Jinja2:
// trim_blocks (the first newline after a %} or #} is removed), lstrip_blocks (spaces and tabs between the
// start of a line and a {% or {# are removed; "{%+" keeps them), and "-" on either side of a tag strips all
// whitespace, newlines included, on that side.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nvfp4lm::jinja {

enum class TokenKind {
  Text,       // literal template text (already whitespace-controlled)
  ExprBegin,  // {{
  ExprEnd,    // }}
  StmtBegin,  // {%
  StmtEnd,    // %}
  Name,       // identifier or keyword
  String,     // string literal; text holds the unescaped value
  Integer,    // text holds the digits
  Float,      // text holds the literal
  Operator,   // punctuation and operators: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  End,
};

struct Token {
  TokenKind kind;
  std::string text;
  int line;  // 1-based line of the template where the token starts
};

// Throws nvfp4lm::Error naming the line for an unterminated tag, string or comment.
std::vector<Token> lex_template(std::string_view source);

}  // namespace nvfp4lm::jinja
