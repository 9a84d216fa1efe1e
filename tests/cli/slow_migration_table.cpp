// README "Coming from the F# trainer": every nvfp4lm line of the migration table runs, as written, and does what
// the predecessor's line did. The table is read from README.md (between its migration-table markers), so the README
// cannot drift from what works. The lines run on the CPU with a tiny model: in a scratch directory that holds the
// files the lines name (Qwen3-4B-Instruct-2507/ is a tiny random Qwen3 in HF's layout, Qwen3-4B-Instruct-2507-nvfp4.dat
// it quantized to NVFP4 .dat, with config.json and the tokenizer beside it; TrainData/ small data files), with
// "--device cuda" run as "--device cpu" and "--compute-dtype bfloat16" as "float32" (the CPU's), and /tmp/qwen3-fs-ckpt
// inside the scratch directory. The "build" line is what built this test; the guard's flags, which watch a GPU, are
// left out on the CPU.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "common/test_util.h"

namespace nvfp4lm::test::slow_migration_table {
namespace {

struct MigrationRow {
  std::string what;
  std::string command;  // the nvfp4lm column, without its backticks
};

std::vector<MigrationRow> migration_table() {
  const std::string readme = read_file(source_path("README.md"));
  const size_t begin = readme.find("<!-- migration-table: begin -->"),
               end = readme.find("<!-- migration-table: end -->");
  EXPECT_NE(begin, std::string::npos);
  EXPECT_NE(end, std::string::npos);
  std::vector<MigrationRow> rows;
  std::istringstream lines(readme.substr(begin, end - begin));
  std::string line;
  const std::regex row(R"(^\| ([^|]+) \| `[^`]*` \| `([^`]*)` \|$)");
  while (std::getline(lines, line)) {
    std::smatch match;
    if (std::regex_match(line, match, row)) rows.push_back({match[1].str(), match[2].str()});
  }
  return rows;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

class MigrationTable : public ::testing::Test {
 protected:
  void SetUp() override {
    // The predecessor's files: a .dat model with config.json and the tokenizer beside it, and the data it trained on.
    const CliResult synth = run_cli("synth --preset tiny " + quoted(dir_ / kModelDir));
    ASSERT_EQ(synth.exit_code, 0) << synth.err;
    const CliResult quantize =
        run_cli("quantize " + quoted(dir_ / kModelDir) + " " + quoted(dir_ / "q") + " --format dat");
    ASSERT_EQ(quantize.exit_code, 0) << quantize.err;
    for (const auto& entry : fs::directory_iterator(dir_ / "q"))
      fs::rename(entry.path(),
                 dir_ / (entry.path().filename() == "model.dat" ? fs::path(kModelDat) : entry.path().filename()));
    fs::create_directories(dir_ / "TrainData");
    fs::create_directories(dir_ / "artifacts");
    fs::create_directories(dir_ / "doc");
    std::string tsv = "# prompt<TAB>target\n";
    for (int i = 0; i < 12; ++i)
      tsv += (i % 3 ? "談談 UFO（樣本" + std::to_string(i) + "）\tUFO 是未確認飛行物。\n" : "你是誰\t我是 F# 之神\n");
    write_file(dir_ / "TrainData" / "stageL-1percent-mix.tsv", tsv);
    write_file(dir_ / "TrainData" / "train-inputs.txt",
               "Qwen3 is a family of language models.\n\nNVFP4 stores weights in four bits with a scale per block.\n");
  }

  // The nvfp4lm line as it runs here (see the top of the file).
  std::string runnable(const std::string& command) const {
    std::string args = command.substr(std::string("nvfp4lm ").size());
    args = replace_all(args, "--device cuda", "--device cpu");
    // The guard watches a GPU's memory (tests/cli/cuda/test_cli_cuda.cpp runs its flags on the GPU).
    args = replace_all(args, " --gpu-limit-gb 108 --gpu-over-secs 0 --gpu-poll-secs 0.5", "");
    args = replace_all(args, "--compute-dtype bfloat16", "--compute-dtype float32");
    return replace_all(args, "/tmp/qwen3-fs-ckpt", (dir_ / "qwen3-fs-ckpt").string());
  }

  static constexpr const char* kModelDat = "Qwen3-4B-Instruct-2507-nvfp4.dat";
  static constexpr const char* kModelDir = "Qwen3-4B-Instruct-2507";  // the HF directory
  TempDir dir_;
};

TEST_F(MigrationTable, EveryNewLineRunsAndDoesWhatTheOldOneDid) {
  const std::vector<MigrationRow> rows = migration_table();
  std::map<std::string, std::string> by_what;
  for (const MigrationRow& row : rows) {
    EXPECT_EQ(row.command.rfind("nvfp4lm ", 0) == 0 || row.command.rfind("make ", 0) == 0, true) << row.command;
    by_what[row.what] = row.command;
  }
  const std::vector<std::string> expected = {
      "build",           "FP16 .dat export",      "NVFP4 .dat quantize", "CLI help",
      "synthetic smoke", "real-dat smoke",        "checkpoint CLI",      "one-step VRAM report",
      "WhoAmI data",     "WhoAmI train + export", "runner with guard",   "runner logit check",
      "parity script",   "KV-cache stress"};
  for (const std::string& what : expected) ASSERT_TRUE(by_what.count(what)) << "no '" << what << "' row in README";
  EXPECT_EQ(by_what["build"], "make build");

  auto run = [&](const std::string& what) {
    SCOPED_TRACE(what + ": " + by_what[what]);
    CliResult result = run_cli(runnable(by_what[what]), "", "", dir_.path());
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return result;
  };

  // Its model preparation: the HF directory as one FP16 .dat beside the NVFP4 one (sharing its config.json), then
  // that quantized to an NVFP4 .dat.
  const CliResult fp16 = run("FP16 .dat export");
  EXPECT_NE(fp16.err.find("dense F16 copy (dat)"), std::string::npos) << fp16.err;
  const CliResult fp16_info = run_cli("info Qwen3-4B-Instruct-2507-fp16.dat --json", "", "", dir_.path());
  EXPECT_NE(fp16_info.out.find("\"F16\""), std::string::npos) << fp16_info.out;
  const CliResult nvfp4 = run("NVFP4 .dat quantize");
  EXPECT_TRUE(fs::is_regular_file(dir_ / "Qwen3-4B-Instruct-2507-nvfp4" / "model.dat")) << nvfp4.err;

  // --help lists the predecessor's names with today's options.
  const CliResult help = run("CLI help");
  for (const char* name :
       {"--batch-size", "--checkpoint-dir", "--save-every-steps", "--steps", "--train-data", "--input-dat",
        "--output-dat", "--vram-report", "--synthetic", "--in-features", "--out-features", "--steps-per-epoch",
        "--max-layers", "--compute-dtype", "--step-chunk-rows", "--train-last-layers", "--resume"})
    EXPECT_NE(help.out.find(name), std::string::npos) << name;

  // One step of a random 64 x 64 model.
  const CliResult synthetic = run("synthetic smoke");
  EXPECT_NE(synthetic.err.find("hidden 64"), std::string::npos) << synthetic.err;
  EXPECT_NE(synthetic.err.find("done: 1 of 1 steps"), std::string::npos) << synthetic.err;

  // One step of the real .dat model cut to its first block.
  const CliResult real = run("real-dat smoke");
  EXPECT_NE(real.err.find("1 layers (the first ones only: --max-layers)"), std::string::npos) << real.err;
  EXPECT_NE(real.err.find("done: 1 of 1 steps"), std::string::npos) << real.err;

  // Run twice: a new run of 2 epochs x 1 step with a checkpoint each step, then a resume that finds it complete.
  const CliResult first = run("checkpoint CLI");
  EXPECT_NE(first.err.find("starting a new run"), std::string::npos) << first.err;
  EXPECT_TRUE(fs::exists(dir_ / "qwen3-fs-ckpt" / "step-1"));
  EXPECT_TRUE(fs::exists(dir_ / "qwen3-fs-ckpt" / "step-2"));
  const CliResult again = run("checkpoint CLI");
  EXPECT_NE(again.err.find("continuing from"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("already complete"), std::string::npos) << again.err;

  // One step with the memory report per phase.
  run("one-step VRAM report");
  const nlohmann::json report = nlohmann::json::parse(read_file(dir_ / "doc" / "train-step-vram-onestep.json"));
  EXPECT_TRUE(report.contains("phases")) << report.dump();

  // The identity data set: 1000 conversations answering with the name.
  const CliResult data = run("WhoAmI data");
  const std::string jsonl = read_file(dir_ / "TrainData" / "whoami-1000-natural.jsonl");
  EXPECT_EQ(std::count(jsonl.begin(), jsonl.end(), '\n'), 1000);
  EXPECT_NE(jsonl.find("我是 F# 之神"), std::string::npos);

  // 10 steps, exported as one .dat with config.json beside it, then the runner's line answers from it.
  const CliResult whoami = run("WhoAmI train + export");
  EXPECT_NE(whoami.err.find("done: 10 of 10 steps"), std::string::npos) << whoami.err;
  EXPECT_TRUE(fs::is_regular_file(dir_ / "artifacts" / "whoami-trained.dat"));
  EXPECT_TRUE(fs::is_regular_file(dir_ / "artifacts" / "config.json"));
  const CliResult runner = run("runner with guard");
  EXPECT_NE(runner.err.find("decode"), std::string::npos) << runner.err;  // the timing line
  EXPECT_FALSE(runner.out.empty());

  // The logit checks: every inference path of the trained .dat and of the base model agrees; the KV cache
  // agrees with full forwards. (Each exits 1 naming what disagrees; exit 0 is checked by run.)
  const CliResult logits = run("runner logit check");
  EXPECT_NE((logits.out + logits.err).find("cpu-cache"), std::string::npos) << logits.out << logits.err;
  run("parity script");
  run("KV-cache stress");
}

}  // namespace
}  // namespace nvfp4lm::test::slow_migration_table
