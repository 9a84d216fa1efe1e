// A Jinja2 interpreter for Hugging Face chat templates: parse a tokenizer_config.json "chat_template" once,
// render it with a context (messages, tools, add_generation_prompt, enable_thinking, any extra kwargs) as
// transformers' apply_chat_template does (trim_blocks and lstrip_blocks on, default Undefined, loop controls,
// `tojson` as json.dumps with ensure_ascii=False, `raise_exception`, `strftime_now`, {% generation %}).
//
// Supported: {% if/elif/else %}; {% for %} with tuple targets, an `if` filter, else and loop.index, index0,
// revindex, revindex0, first, last, length, previtem, nextitem, cycle; {% set %} (plain, tuple, namespace
// attribute and block forms); {% macro %} and calls; break/continue; {% raw %}; the filters, tests,
// string/dict methods and globals listed in builtins.h; Python operators, slicing and literals.
// Anything else (e.g. {% call %}, {% include %}, an unknown filter or test) is an nvfp4lm::Error whose one-line
// message names the construct and the template line. Statements are checked when the template is parsed;
// filters, tests, methods and operations when they run, as jinja2 does (it renders a template whose untaken
// branch names an unknown filter, and so does this). There is no fallback.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/limits.h"

namespace nvfp4lm::jinja {

class Template {
 public:
  explicit Template(std::string_view source);  // throws Error on syntax the interpreter does not run

  // `context` must be a JSON object; its keys become template variables, in their order.
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace nvfp4lm::jinja
