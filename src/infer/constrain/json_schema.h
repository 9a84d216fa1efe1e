// JSON Schema -> grammar (grammar.h): the texts a constrained answer may take are JSON values that validate against
// the schema. Supported, as OpenAI's structured outputs support them:
//   type (a name or a list: ["string", "null"]), enum, const (any JSON values), anyOf, $ref to "#", "#/$defs/..."
//   or "#/definitions/..." (any JSON pointer into the document; recursion allowed), and per type:
//   object: properties, required, additionalProperties (false, true, or a schema);
//   array: items, minItems, maxItems; string: minLength, maxLength (code points, at most 8192);
//   integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum; number, boolean, null.
// Annotations (title, description, default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly) are
// read past. Any other keyword (pattern, format, oneOf, allOf, not, multipleOf, uniqueItems, prefixItems,
// patternProperties, minimum on a number, ...) is an Error whose one-line message names the keyword and where it
// is ("unsupported keyword 'pattern' at $.properties.zip"); nothing is silently ignored.
//
// The grammar may accept fewer texts than the schema allows, never more — so every answer validates:
//  - properties come in the order the schema declares them (the schema is an ordered_json: a request's is parsed
//    keeping its key order; one converted from nlohmann::json has them sorted); an object that declares properties
//    and says nothing about
//    additionalProperties gets no others (OpenAI's strict mode and xgrammar's default); one that declares none takes
//    any members, as JSON Schema says. Extra members' names are made of [A-Za-z0-9_-] and differ from every
//    declared name (a duplicate key would override a checked value);
//  - integers have at most 15 digits and numbers are bounded likewise (json_rules.h); whitespace is bounded;
//  - a schema without a type but with keywords of one type (properties, items, minLength) is taken as that type.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "infer/constrain/grammar.h"

namespace nvfp4lm::constrain {

struct JsonGrammarOptions {
  // Whitespace bytes (space, newline, tab) allowed in each gap between JSON tokens; 0: compact JSON only.
  int max_whitespace = 1;
};

// A value that validates against `schema`. Error (one line, naming the keyword and its path) for what is not
// supported or cannot be matched by any value (false, an empty enum, minimum > maximum, ...).
std::shared_ptr<const Grammar> json_schema_grammar(const nlohmann::ordered_json& schema,
                                                   const JsonGrammarOptions& options = {});

// Any JSON object (OpenAI's response_format {"type": "json_object"}).
std::shared_ptr<const Grammar> json_object_grammar(const JsonGrammarOptions& options = {});

// Literal text, a value matching a schema, literal text: e.g. prefix "<tool_call>\n{\"name\": \"get_weather\",
// \"arguments\": ", the function's parameters schema, suffix "}\n</tool_call>". The prefix and suffix are matched
// byte for byte (an added token such as <tool_call> matches them as its text).
struct FramedSchema {
  std::string prefix;
  nlohmann::ordered_json schema;
  std::string suffix;
};
// Any one of the alternatives (several tools: one framed schema each). Error as json_schema_grammar, the path
// starting at the alternative ("$[1].properties.city").
std::shared_ptr<const Grammar> framed_json_grammar(std::span<const FramedSchema> alternatives,
                                                   const JsonGrammarOptions& options = {});

}  // namespace nvfp4lm::constrain
