// Fuzz target: the body of an OpenAI request as `serve` reads it (serve/openai_request.h, sequence_request.h,
// tokenize_endpoint.h), with the tiny tokenizer fixture and a 256-token context: parsed as JSON, then read as a chat
// completion and a completion, turned into what the engine runs, and answered as /tokenize and /detokenize would.
// The contract differs from the other targets': bad input ends in an ApiError (the 4xx the client gets), whose
// message is one line and whose JSON body serializes (a rejected value with invalid UTF-8 once made it a 500);
// an nvfp4lm::Error or any other exception escaping is a finding.
#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "fuzz_util.h"
#include "serve/api_error.h"
#include "serve/openai_request.h"
#include "serve/sequence_request.h"
#include "serve/tokenize_endpoint.h"
#include "tokenizer/tokenizer.h"

using namespace nvfp4lm;
using namespace nvfp4lm::serve;

namespace {

void check_error(const ApiError& error) {
  const std::string_view message = error.what();
  FUZZ_CHECK(message.find('\n') == std::string_view::npos, "an error message spans lines: {}", message);
  FUZZ_CHECK(error.status() >= 400 && error.status() < 500, "bad input answered {}", error.status());
  (void)to_json_text(error.body());  // throws (a finding) if the body cannot be written
}

template <typename Body>
void expect_api_error_only(Body&& body) {
  try {
    body();
  } catch (const ApiError& error) {
    check_error(error);
  } catch (const std::exception& e) {
    fuzz::fail(std::string("a request body escaped as a non-API error (a 500): ") + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizer tokenizer = Tokenizer::load(fuzz::source_path("tests/fixtures/tiny-tokenizer"));
  static const PromptRules rules = [] {
    PromptRules r;
    r.context = 256;
    r.vocab_size = static_cast<int64_t>(tokenizer.vocab_size());
    r.eos_ids = {0};
    return r;
  }();
  const RequestDefaults defaults;
  const JsonParseResult parsed = try_parse_json(fuzz::as_text(data, size));
  if (!parsed.ok()) return 0;
  for (const Endpoint endpoint : {Endpoint::ChatCompletions, Endpoint::Completions})
    expect_api_error_only([&] {
      const CompletionRequest request = parse_completion_request(parsed.value, endpoint, defaults);
      const SequenceSpec spec = to_sequence_spec(request, tokenizer, rules, 7);
      FUZZ_CHECK(!spec.prompt.empty() && static_cast<int64_t>(spec.prompt.size()) < rules.context,
                 "a prompt of {} tokens passed the context check", spec.prompt.size());
      FUZZ_CHECK(spec.options.max_new_tokens >= 1 &&
                     static_cast<int64_t>(spec.prompt.size()) + spec.options.max_new_tokens <= rules.context,
                 "{} + {} tokens passed the context check", spec.prompt.size(), spec.options.max_new_tokens);
      for (const auto& [id, bias] : spec.options.sampling.logit_bias)
        FUZZ_CHECK(id >= 0 && id < rules.vocab_size, "logit_bias id {} passed", id);
    });
  expect_api_error_only([&] { (void)to_json_text(tokenize_answer(parsed.value, tokenizer, rules, defaults)); });
  expect_api_error_only([&] { (void)to_json_text(detokenize_answer(parsed.value, tokenizer, rules)); });
  return 0;
}
