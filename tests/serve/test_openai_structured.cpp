// Structured answers (response_format json_schema / json_object) through `nvfp4lm serve` as a process, asked by the
// official `openai` npm client (tests/serve/openai_structured_test.mjs): 50 answers of the tiny random model at
// temperature 1 all parse and validate against the schema. The client is installed on demand into <build>/npm as
// test_openai_client.cpp does; skipped only when npm is missing or its registry cannot be reached.
#include <gtest/gtest.h>

#include <cstdlib>

#include "serve_test_util.h"

namespace nvfp4lm::test::test_openai_structured {
namespace {

TEST(OpenAiClient, StructuredAnswersAtTemperatureOneAlwaysValidate) {
  std::string skip_reason;
  const fs::path npm_dir = installed_openai_client(skip_reason);
  if (npm_dir.empty() && !skip_reason.empty()) GTEST_SKIP() << skip_reason;
  ASSERT_FALSE(npm_dir.empty());
  fs::copy_file(source_path("tests/serve/openai_structured_test.mjs"), npm_dir / "openai_structured_test.mjs",
                fs::copy_options::overwrite_existing);
  ServeProcess server({"--model", tiny_serve_model_dir().string(), "--max-batch", "8", "--context", "256"});
  ASSERT_TRUE(server.spawned());
  const int port = server.port();
  ASSERT_GT(port, 0) << server.log();
  TempDir dir;
  const nlohmann::json spec = {{"NVFP4LM_BASE_URL", "http://127.0.0.1:" + std::to_string(port) + "/v1"},
                               {"NVFP4LM_MODEL", kServedName},
                               // Under an emulator 10: Node's fetch waits at most 300 s for an answer's headers
                               // (undici's headersTimeout, whatever the client's timeout), and 50 answers queued
                               // behind 8 rows took longer than that under qemu-user.
                               {"NVFP4LM_REQUESTS", emulated_time_factor() > 1 ? 10 : 50},
                               {"NVFP4LM_MAX_TOKENS", 64}};
  write_file(dir / "spec.json", spec.dump());
  const fs::path output = dir / "node.log";
  const int status = std::system(("NVFP4LM_TEST_SPEC=" + quoted(dir / "spec.json") + " timeout " +
                                  std::to_string(300 * emulated_time_factor()) + " node " +
                                  quoted(npm_dir / "openai_structured_test.mjs") + " >" + quoted(output) + " 2>&1")
                                     .c_str());
  EXPECT_EQ(status, 0) << read_file(output) << "\nserver log:\n" << server.log();
  EXPECT_NE(read_file(output).find("ok unsupported keyword refused"), std::string::npos) << read_file(output);
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait_exit(30), 0) << server.log();
}

}  // namespace
}  // namespace nvfp4lm::test::test_openai_structured
