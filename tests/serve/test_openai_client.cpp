// `nvfp4lm serve` as a process, from the outside:
//  - the official `openai` npm client (a dev-only dependency, installed on demand into <build>/npm) runs chat,
//    streaming chat, completions, logprobs and invalid requests against it (tests/serve/openai_client_test.mjs), and
//    its greedy answers equal `nvfp4lm generate --temperature 0` text for text and in token count. Skipped only when
//    npm is missing or its registry cannot be reached;
//  - SIGTERM while a request streams: new requests get 503, the running answer finishes, the process exits 0.
#include <gtest/gtest.h>

#include <cstdlib>

#include "serve_test_util.h"

namespace nvfp4lm::test::test_openai_client {
namespace {

using nlohmann::json;

constexpr int kMaxTokens = 12;

// `generate ... --temperature 0` on the tiny model.
GeneratedAnswer generate_greedy(const std::string& flags) {
  return run_generate("--model " + quoted(tiny_serve_model_dir()) + " " + flags + " --temperature 0 --max-tokens " +
                      std::to_string(kMaxTokens));
}

TEST(OpenAiClient, ChatStreamingCompletionsLogprobsAndErrors) {
  std::string skip_reason;
  const fs::path npm_dir = installed_openai_client(skip_reason);
  if (npm_dir.empty() && !skip_reason.empty()) GTEST_SKIP() << skip_reason;
  ASSERT_FALSE(npm_dir.empty());
  fs::copy_file(source_path("tests/serve/openai_client_test.mjs"), npm_dir / "openai_client_test.mjs",
                fs::copy_options::overwrite_existing);

  const std::string question = "What is the capital of France?";
  const std::string raw_prompt = "The quick brown fox";
  const GeneratedAnswer chat_expected = generate_greedy("--prompt " + shell_quoted(question));
  const GeneratedAnswer raw_expected = generate_greedy("--raw --prompt " + shell_quoted(raw_prompt));

  ServeProcess server(
      {"--model", tiny_serve_model_dir().string(), "--api-key", "test-key", "--max-batch", "4", "--context", "256"});
  ASSERT_TRUE(server.spawned());
  const int port = server.port();
  ASSERT_GT(port, 0) << server.log();
  TempDir dir;
  const json spec = {{"NVFP4LM_BASE_URL", "http://127.0.0.1:" + std::to_string(port) + "/v1"},
                     {"NVFP4LM_API_KEY", "test-key"},
                     {"NVFP4LM_MODEL", kServedName},
                     {"NVFP4LM_QUESTION", question},
                     {"NVFP4LM_CHAT_EXPECTED", chat_expected.text},
                     {"NVFP4LM_RAW_PROMPT", raw_prompt},
                     {"NVFP4LM_RAW_EXPECTED", raw_expected.text},
                     {"NVFP4LM_MAX_TOKENS", kMaxTokens}};
  write_file(dir / "spec.json", spec.dump());
  const fs::path output = dir / "node.log";
  const int status = std::system(("NVFP4LM_TEST_SPEC=" + quoted(dir / "spec.json") + " timeout " +
                                  std::to_string(120 * emulated_time_factor()) + " node " +
                                  quoted(npm_dir / "openai_client_test.mjs") + " >" + quoted(output) + " 2>&1")
                                     .c_str());
  EXPECT_EQ(status, 0) << read_file(output) << "\nserver log:\n" << server.log();

  // Token for token: the server's completion token counts equal generate's.
  serve::HttpClient client("127.0.0.1", port);
  client.set_bearer_token("test-key");
  const json chat = {
      {"messages", {{{"role", "user"}, {"content", question}}}}, {"max_tokens", kMaxTokens}, {"temperature", 0}};
  const HttpResult answer = post_json(client, "/v1/chat/completions", chat.dump());
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(answer.json()["usage"]["completion_tokens"], chat_expected.tokens);
  const json completion = {{"prompt", raw_prompt}, {"max_tokens", kMaxTokens}, {"temperature", 0}};
  const HttpResult raw = post_json(client, "/v1/completions", completion.dump());
  ASSERT_EQ(raw.status, 200) << raw.body;
  EXPECT_EQ(raw.json()["usage"]["completion_tokens"], raw_expected.tokens);

  server.signal(SIGTERM);
  EXPECT_EQ(server.wait_exit(30), 0) << server.log();
}

TEST(ServeCli, SigtermFinishesTheRunningAnswerRefusesNewOnesAndExitsZero) {
  // The drain limit well above the 1,500 tokens' time in the slowest build (ASan + UBSan at -O0 took over 60 s).
  ServeProcess server({"--model", tiny_serve_model_dir().string(), "--shutdown-timeout", "600"});
  ASSERT_TRUE(server.spawned());
  const int port = server.port();
  ASSERT_GT(port, 0) << server.log();
  EXPECT_NE(server.log().find("nvfp4lm serve: device cpu, compute path"), std::string::npos) << server.log();
  RawConnection stream(port);
  const json body = {{"messages", {{{"role", "user"}, {"content", "A long answer, please."}}}},
                     {"max_tokens", 1500},  // long enough to still run when the next request comes
                     {"temperature", 0},
                     {"stream", true}};
  stream.send_post("/v1/chat/completions", body.dump());
  ASSERT_TRUE(stream.read_until("\"content\"")) << stream.received();
  server.signal(SIGTERM);
  ASSERT_TRUE(eventually([&] { return server.log().find("SIGTERM received") != std::string::npos; }));
  // Draining: a new request is refused with 503 while the running one goes on.
  serve::HttpClient client("127.0.0.1", port);
  const HttpResult refused = post_json(client, "/v1/chat/completions", body.dump());
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_NE(refused.body.find("shutting down"), std::string::npos) << refused.body;
  // The running answer ends normally: all its tokens, finish_reason, [DONE].
  EXPECT_TRUE(stream.read_until("data: [DONE]")) << stream.received();
  EXPECT_NE(stream.received().find("\"finish_reason\":\"length\""), std::string::npos) << stream.received();
  EXPECT_EQ(stream.received().find("server_shutting_down"), std::string::npos) << stream.received();
  EXPECT_EQ(server.wait_exit(30), 0) << server.log();
}

}  // namespace
}  // namespace nvfp4lm::test::test_openai_client
