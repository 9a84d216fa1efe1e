// Issue 48: what one chat request can cost the server's template work is bounded. A body at the server's 8 MiB limit
// holding 270,000 tiny messages goes through the paths /tokenize and /apply-template take (parse, read, render with
// the bundled Qwen3-2507 templates, tokenize): it ends in a 400 within seconds (the interpreter's step bound: no
// context holds such a conversation), where the template work was once quadratic (60,000 messages took 166 s of a core)
// and jinja2 takes 8.7 s to render it; 60,000 messages render in about a second. One message of 8 MB renders and is
// tokenized at once.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>

#include "common/test_util.h"
#include "core/json_text.h"
#include "serve/api_error.h"
#include "serve/tokenize_endpoint.h"
#include "tokenizer/tokenizer_test_util.h"

namespace nvfp4lm::test_chat_body_cost {
namespace {

std::string messages_body(int count, const std::string& content) {
  std::string body = R"({"messages":[)";
  for (int i = 0; i < count; ++i)
    body += std::string(i ? "," : "") + R"({"role":")" + (i % 2 ? "assistant" : "user") + R"(","content":")" + content +
            "\"}";
  return body + "]}";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(ChatBodyCost, AnEightMiBChatBodyIsAnsweredWithinSeconds) {
  const Tokenizer& tokenizer = test::qwen3_tokenizer();
  const std::string tiny_messages = messages_body(265000, "");
  ASSERT_LE(tiny_messages.size(), size_t{8} << 20);  // within serve's --max-body-mb default
  const std::string one_big_message = messages_body(1, std::string(8'000'000, 'a'));
  const std::string long_chat = messages_body(60000, "x");
  const double bound_s = 10.0 * test::emulated_time_factor();
  // One endpoint per template (each costs seconds): the two share the template work, /tokenize adds the encoding.
  for (const auto& [name, tokenize] :
       {std::pair{"qwen3-instruct-2507", true}, std::pair{"qwen3-thinking-2507", false}}) {
    serve::PromptRules rules;
    rules.chat_template = std::make_shared<const ChatTemplate>(ChatTemplate::resolve(tokenizer, name));
    rules.context = 262144;
    rules.vocab_size = static_cast<int64_t>(tokenizer.vocab_size());
    const serve::RequestDefaults defaults;
    {
      const char* endpoint = tokenize ? "/tokenize" : "/apply-template";
      const auto answer = [&](const std::string& body) {
        OrderedJsonParseResult parsed = try_parse_ordered_json(body);
        EXPECT_TRUE(parsed.ok()) << parsed.error;
        return tokenize ? serve::tokenize_answer(parsed.value, tokenizer, rules, defaults)
                        : serve::apply_template_answer(parsed.value, rules, defaults);
      };
      auto start = std::chrono::steady_clock::now();
      try {
        answer(tiny_messages);
        ADD_FAILURE() << name << " " << endpoint << ": 265,000 messages rendered";
      } catch (const serve::ApiError& e) {
        EXPECT_EQ(e.status(), 400) << e.what();
        EXPECT_NE(std::string(e.what()).find("steps"), std::string::npos) << e.what();
      }
      const double refused_s = seconds_since(start);
      EXPECT_LT(refused_s, bound_s) << name << " " << endpoint;
      start = std::chrono::steady_clock::now();
      const nlohmann::json chat = answer(long_chat);
      const double long_s = seconds_since(start);
      EXPECT_LT(long_s, bound_s) << name << " " << endpoint;
      start = std::chrono::steady_clock::now();
      const nlohmann::json big = answer(one_big_message);
      const double big_s = seconds_since(start);
      EXPECT_LT(big_s, bound_s) << name << " " << endpoint;
      if (tokenize) {
        EXPECT_GT(chat["count"].get<int64_t>(), 60000 * 3) << name;
        EXPECT_GT(big["count"].get<int64_t>(), 1000) << name;
      } else {
        EXPECT_NE(chat["prompt"].get<std::string>().find("<|im_start|>assistant\nx<|im_end|>"), std::string::npos);
        EXPECT_GT(big["prompt"].get<std::string>().size(), size_t{8'000'000});
      }
      std::cout << name << " " << endpoint << ": 265,000 messages refused in " << refused_s << " s, 60,000 answered in "
                << long_s << " s, one 8 MB message in " << big_s << " s\n";
    }
  }
}

}  // namespace
}  // namespace nvfp4lm::test_chat_body_cost
