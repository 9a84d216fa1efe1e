// --chat-template on a training run: the named template renders the data, the run says which one it uses, and the
// export carries it as chat_template.jinja, which the exported model's tokenizer then uses (so `generate` and `serve`
// ask the model as it was trained); a model trained with its tokenizer's own template exports no such file. A
// chat_template.jinja beside tokenizer.json replaces tokenizer_config.json's template, as in transformers.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "tokenizer/chat_template.h"
#include "train/trainer.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test_trainer_chat_template {
namespace {

using test::TempDir;

TEST(TrainerChatTemplate, ANamedTemplateTrainsAndTravelsWithTheExport) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 4);
  TrainOptions options = test::tiny_train_options(data, dir / "run");
  options.max_steps = 1;
  options.chat_template = "qwen3-thinking-2507";
  options.export_path = (dir / "export").string();
  {
    Trainer trainer(options, {});
    bool described = false;
    for (const std::string& line : trainer.setup_lines())
      described |= line.find("chat template: bundled qwen3-thinking-2507") != std::string::npos;
    EXPECT_TRUE(described);
    trainer.run();
  }
  ASSERT_TRUE(fs::exists(dir / "export" / "chat_template.jinja"));
  const Tokenizer exported = Tokenizer::load(dir / "export");
  EXPECT_EQ(exported.chat_template_source(), std::string(*bundled_chat_template("qwen3-thinking-2507")));
  EXPECT_TRUE(ChatTemplate::resolve(exported).prompt_opens_think());

  // The tokenizer's own template: nothing extra in the export.
  options.output = (dir / "run-auto").string();
  options.export_path = (dir / "export-auto").string();
  options.chat_template = "auto";
  {
    Trainer trainer(options, {});
    trainer.run();
  }
  EXPECT_FALSE(fs::exists(dir / "export-auto" / "chat_template.jinja"));
  EXPECT_EQ(Tokenizer::load(dir / "export-auto").chat_template_source(),
            Tokenizer::load(test::tiny_tokenizer_dir()).chat_template_source());
}

}  // namespace
}  // namespace nvfp4lm::test_trainer_chat_template
