// `nvfp4lm serve --lora NAME=DIR ...` (model/lora_runtime.h over serve/): two PEFT adapters and the base behind one
// server. /v1/models lists the adapters with the base as their parent; three concurrent greedy requests — one per
// adapter, one for the base — are decoded in one batch, and each answer equals `nvfp4lm generate` with that adapter
// alone (the base's: generate without --lora); the answer names the model asked for; an unknown name is a 404 that
// lists the adapters. generate / chat take one adapter, and flag mistakes are one-line errors.
#include <gtest/gtest.h>

#include <thread>

#include "common/lora_test_util.h"
#include "serve_test_util.h"

namespace nvfp4lm::test::test_serve_lora {
namespace {

using nlohmann::json;

constexpr const char* kPrompt = "The three primary colours are";
constexpr int kMaxTokens = 48;

json completion_body(const std::string& model) {
  return {{"model", model}, {"prompt", kPrompt}, {"max_tokens", kMaxTokens}, {"temperature", 0}};
}

TEST(ServeLora, TwoAdaptersAndTheBaseInOneBatchEachAsGenerateAlone) {
  const TempDir dir;
  const Qwen3Config& config = tiny_serve_model().config();
  RandomAdapter support;
  RandomAdapter persona;
  persona.seed = 2;
  persona.rank = 8;
  persona.alpha = 16;
  persona.targets = {LoraTarget::Q, LoraTarget::V, LoraTarget::Up, LoraTarget::Down};
  write_random_adapter(dir / "support", config, support);
  write_random_adapter(dir / "persona", config, persona);

  ServeProcess server({"--model", tiny_serve_model_dir().string(), "--lora", "support=" + (dir / "support").string(),
                       "--lora", "persona=" + (dir / "persona").string(), "--max-batch", "4", "--context", "256"});
  const int port = server.port();
  ASSERT_GT(port, 0) << server.log();
  EXPECT_NE(server.log().find("LoRA adapters over the base, applied per request: support (rank 4"), std::string::npos)
      << server.log();

  const HttpResult models = get(serve::HttpClient("127.0.0.1", port), "/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  ASSERT_EQ(models.json()["data"].size(), 3u) << models.body;
  EXPECT_EQ(models.json()["data"][0]["id"], kServedName);
  EXPECT_EQ(models.json()["data"][1]["id"], "support");
  EXPECT_EQ(models.json()["data"][1]["parent"], kServedName);
  EXPECT_EQ(models.json()["data"][2]["id"], "persona");
  EXPECT_EQ(get(serve::HttpClient("127.0.0.1", port), "/v1/models/persona").json()["parent"], kServedName);

  // The three requests at once: the scheduler decodes them together.
  const std::vector<std::string> names = {kServedName, "support", "persona"};
  std::vector<HttpResult> answers(names.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < names.size(); ++i)
    clients.emplace_back([&, i] {
      answers[i] = post_json(serve::HttpClient("127.0.0.1", port), "/v1/completions", completion_body(names[i]).dump());
    });
  for (std::thread& client : clients) client.join();
  const std::string metrics = get(serve::HttpClient("127.0.0.1", port), "/metrics").body;
  EXPECT_LT(metric(metrics, "nvfp4lm_batch_size_bucket{le=\"2\"}"), metric(metrics, "nvfp4lm_batch_size_count"))
      << "no decode step ran the three requests together:\n"
      << metrics;

  std::vector<std::string> texts;
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_EQ(answers[i].status, 200) << names[i] << ": " << answers[i].body;
    EXPECT_EQ(answers[i].json()["model"], names[i]);
    const std::string text = answers[i].json()["choices"][0]["text"];
    texts.push_back(text);
    const std::string lora = i == 0 ? "" : " --lora " + quoted(dir / names[i]);
    const GeneratedAnswer alone =
        run_generate("--model " + quoted(tiny_serve_model_dir()) + lora + " --raw --prompt " + shell_quoted(kPrompt) +
                     " --max-tokens " + std::to_string(kMaxTokens) + " --temperature 0");
    EXPECT_EQ(text, alone.text) << names[i] << ": served in a batch vs generate alone";
  }
  EXPECT_NE(texts[0], texts[1]);
  EXPECT_NE(texts[1], texts[2]);

  const HttpResult unknown =
      post_json(serve::HttpClient("127.0.0.1", port), "/v1/completions", completion_body("other").dump());
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.find("and its LoRA adapters support, persona"), std::string::npos) << unknown.body;
}

TEST(ServeLora, FlagMistakesAreOneLineErrors) {
  const TempDir dir;
  write_random_adapter(dir / "a", tiny_serve_model().config(), RandomAdapter{});
  const std::string model = "--model " + quoted(tiny_serve_model_dir());
  expect_one_line_error(run_cli("generate " + model + " --lora " + quoted(dir / "a") + " --lora " + quoted(dir / "a") +
                                " --prompt hi --max-tokens 2"),
                        {"generate applies one --lora adapter", "serve takes several"});
  expect_one_line_error(run_cli("generate " + model + " --lora " + quoted(dir / "missing") + " --prompt hi"),
                        {"LoRA adapter", "missing", "not a directory"});
  expect_one_line_error(run_cli("serve " + model + " --port 0 --lora " + quoted(dir / "a") + " --lora " +
                                shell_quoted("a=" + (dir / "a").string())),
                        {"two adapters are named 'a'"});
  expect_one_line_error(run_cli("serve " + model + " --port 0 --lora " +
                                shell_quoted(std::string(kServedName) + "=" + (dir / "a").string())),
                        {"the adapter has the served model's name"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_serve_lora
