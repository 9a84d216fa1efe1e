// Fuzz target: encoding arbitrary bytes with the bundled Qwen3 tokenizer (models/qwen3-tokenizer, loaded once).
// The input is the text. Invalid UTF-8 must be an Error (valid UTF-8 never); the input made valid
// (tokenizer::to_valid_utf8) must round-trip through encode/decode (tokenizer_checks.h) with and without special
// tokens, give its first ids to encode_prefix for any budget, and render and encode as a chat in both templates
// with ids equal to encoding the rendered text.
#include <map>

#include "fuzz_util.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer_checks.h"

using namespace nvfp4lm;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)fuzz::bundled_qwen3();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Tokenizer& qwen3 = fuzz::bundled_qwen3();
  const std::string_view raw = fuzz::as_text(data, size);
  const bool valid = tokenizer::is_valid_utf8(raw);
  const bool encoded = fuzz::expect_error_only([&] { (void)qwen3.encode(raw); });
  FUZZ_CHECK(encoded == valid, "encode of {} UTF-8 {}", valid ? "valid" : "invalid", encoded ? "succeeded" : "failed");

  const std::string text = tokenizer::to_valid_utf8(raw);
  FUZZ_CHECK(tokenizer::is_valid_utf8(text), "to_valid_utf8 returned invalid UTF-8");
  fuzz::check_round_trip(qwen3, text, /*allow_special=*/true);
  fuzz::check_round_trip(qwen3, text, /*allow_special=*/false);

  // encode_prefix with any budget gives the first ids of encode and says whether more exist.
  const std::vector<int32_t> all = qwen3.encode(text);
  for (const size_t budget : {size_t{0}, size_t{1}, all.size() / 2, all.size() > 0 ? all.size() - 1 : 0, all.size()}) {
    std::vector<int32_t> prefix;
    const bool more = qwen3.encode_prefix(text, budget, prefix);
    FUZZ_CHECK(prefix.size() == std::min(budget, all.size()) && std::equal(prefix.begin(), prefix.end(), all.begin()),
               "encode_prefix with budget {} is not the first ids of encode ({} of {})", budget, prefix.size(),
               all.size());
    FUZZ_CHECK(more == (all.size() > budget), "encode_prefix with budget {} of {} says more={}", budget, all.size(),
               more);
  }

  const ChatMessage conversation[] = {{"user", text}, {"assistant", text}};
  for (const char* name : {"qwen3-instruct-2507", "qwen3-hybrid", "qwen3-thinking-2507"}) {
    static std::map<std::string, ChatTemplate> templates;
    const ChatTemplate& chat_template =
        templates.try_emplace(name, ChatTemplate::resolve(qwen3, std::string(name))).first->second;
    for (const EncodedChat& chat : encode_chat(qwen3, chat_template, conversation)) {
      FUZZ_CHECK(chat.ids == qwen3.encode(chat.text), "encode_chat ids differ from encoding its text");
      FUZZ_CHECK(chat.ids.size() == chat.train_mask.size(), "{} ids, {} mask entries", chat.ids.size(),
                 chat.train_mask.size());
    }
  }
  return 0;
}
