// Hostile input through the real executable (issue 17): every class gives one error line with exit code 1, or 2
// for a usage error, and leaves every input as it was. Numbers out of range; outputs that are, hold or lie in
// what a command reads (each writing command: quantize, synth, export, train --output/--metrics/--memory-report/
// --export, bench --json); a run directory in use; special files as inputs; deeply nested JSON; the export of a
// run whose newest checkpoint fails its checksums; stale temporaries of killed writers.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>

#include "common/test_util.h"
#include "core/files.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test::test_hostile_cli {
namespace {

// Every regular file under `root` (or `root` itself) with its contents, to show a failed command touched nothing.
std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> files;
  if (fs::is_regular_file(root)) {
    files[root.string()] = read_file(root);
    return files;
  }
  for (const auto& entry : fs::recursive_directory_iterator(root))
    if (entry.is_regular_file()) files[entry.path().string()] = read_file(entry.path());
  return files;
}

// Paths whose contents differ between two snapshots (added, removed or changed), for a readable failure.
std::string changed_files(const std::map<std::string, std::string>& before,
                          const std::map<std::string, std::string>& after) {
  std::string changed;
  for (const auto& [path, contents] : before) {
    auto it = after.find(path);
    if (it == after.end() || it->second != contents) changed += " " + path;
  }
  for (const auto& [path, contents] : after)
    if (!before.count(path)) changed += " " + path + " (new)";
  return changed;
}

void expect_usage_error(const std::string& args, std::initializer_list<std::string> parts) {
  const CliResult result = run_cli(args);
  expect_one_line_error(result, parts, args);
  EXPECT_EQ(result.exit_code, 2) << args << ": " << result.err;
}

TEST(HostileCli, NumbersOutOfRangeAreUsageErrors) {
  expect_usage_error("train --model m --data d --seq-len 9223372036854775808", {"--seq-len", "out of range"});
  expect_usage_error("train --model m --data d --seq-len 100000000", {"--seq-len", "[2, 1048576]"});
  expect_usage_error("train --model m --data d --seed -1", {"--seed", "negative"});
  expect_usage_error("train --model m --data d --grad-accum 2147483647", {"--grad-accum", "[1, 65536]"});
  expect_usage_error("train --model m --data d --batch 0", {"--batch"});
  expect_usage_error("train --model m --data d --lr inf", {"--lr"});
  expect_usage_error("train --model m --data d --output ''", {"--output is empty"});
  expect_usage_error("generate --model m --prompt hi --max-tokens 9223372036854775807", {"--max-tokens"});
  expect_usage_error("generate --model m --prompt hi --top-p 2", {"--top-p"});
  expect_usage_error("quantize a b --format dat --max-shard-mb 18446744073709551616", {"--max-shard-mb"});
  expect_usage_error("synth out --preset tiny --seed 0x10", {"--seed", "not a whole decimal number"});
  expect_usage_error("bench infer --preset tiny --gen -5", {"--gen"});
  expect_usage_error("nosuchcommand", {});
}

// CUDA libraries are loaded where a CUDA path runs, not by every command: cuBLASLt alone maps ~200 MB
// (src/ops/cuda/cublaslt_loader.cpp). The dynamic loader lists every library it opens under LD_DEBUG=files.
TEST(HostileCli, CommandsThatNeedNoGpuLoadNoCudaLibrary) {
  for (const std::string& args : {std::string("--version"), "info " + quoted(fixture_path("qwen3-tiny"))}) {
    const CliResult result = run_cli(args, "", "LD_DEBUG=files");
    ASSERT_EQ(result.exit_code, 0) << args << ": " << result.err;
    EXPECT_NE(result.err.find("libc.so"), std::string::npos) << "LD_DEBUG had no effect: " << result.err;
    EXPECT_EQ(result.err.find("libcublas"), std::string::npos) << args << " loaded cuBLAS";
  }
}

class HostileFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = write_pairs_jsonl(dir_ / "pairs.jsonl", 8);
    model_ = dir_ / "model";
    const CliResult synth = run_cli("synth " + quoted(model_) + " --preset tiny");
    ASSERT_EQ(synth.exit_code, 0) << synth.err;
    before_ = snapshot(dir_.path());
  }
  std::string train(const std::string& extra, const fs::path& data = {}) const {
    return "train " + tiny_train_flags(data.empty() ? data_ : data, {{"--max-steps", "2"}, {"--seq-len", "32"}}) + " " +
           extra;
  }
  // The command failed with one error line naming `parts`, and no file under the test directory changed.
  void expect_refused(const std::string& args, std::initializer_list<std::string> parts) {
    const CliResult result = run_cli(args);
    expect_one_line_error(result, parts, args);
    EXPECT_EQ(changed_files(before_, snapshot(dir_.path())), "") << args << ": a refused command changed files";
  }

  TempDir dir_;
  fs::path data_, model_;
  std::map<std::string, std::string> before_;
};

TEST_F(HostileFiles, OutputsMayNotReplaceInputs) {
  const std::string m = quoted(model_);
  expect_refused("quantize " + m + " " + quoted(model_ / "model.safetensors") + " --format dat --overwrite",
                 {"lies inside the source model"});
  expect_refused("quantize " + m + " " + quoted(model_ / "tokenizer.json") + " --format modelopt --overwrite",
                 {"lies inside"});
  expect_refused("quantize " + m + " " + m + " --format dat --overwrite", {"is the source model"});
  expect_refused("quantize " + m + " " + quoted(dir_.path()) + " --format dat --overwrite",
                 {"contains the source model"});
  expect_refused("synth " + quoted(model_) + " --preset tiny --tokenizer " + m + " --overwrite", {"is --tokenizer"});
  expect_refused(train("--output " + quoted(dir_ / "run") + " --metrics " + quoted(data_)),
                 {"--metrics", "is the training data"});
  expect_refused(train("--output " + quoted(dir_ / "run") + " --memory-report " + quoted(data_) + " --overwrite"),
                 {"--memory-report", "is the training data"});
  expect_refused(train("--output " + quoted(dir_ / "run") + " --export " + quoted(tiny_model_dir()) + " --overwrite"),
                 {"is the model"});
  expect_refused(train("--output " + quoted(data_)), {"--output", "is the training data"});
  // An existing file is replaced only with --overwrite.
  write_file(dir_ / "taken.json", "{}");
  before_ = snapshot(dir_.path());
  expect_refused(train("--output " + quoted(dir_ / "run") + " --metrics " + quoted(dir_ / "taken.json")),
                 {"--metrics", "already exists", "--overwrite"});
  expect_refused("bench infer --preset tiny --gen 2 --prompt-len 2 --json " + quoted(dir_ / "taken.json"),
                 {"--json", "already exists"});
  EXPECT_FALSE(fs::exists(dir_ / "run")) << "a refused training leaves no run directory behind";
}

TEST_F(HostileFiles, ExportGuardsTheRunAndFallsBackPastABadCheckpoint) {
  const fs::path run = dir_ / "run";
  const CliResult trained = run_cli(train("--output " + quoted(run) + " --save-every 1"));
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  ASSERT_TRUE(fs::is_directory(run / "step-1") && fs::is_directory(run / "step-2"));
  before_ = snapshot(dir_.path());
  const std::string r = quoted(run);
  expect_refused("export " + r + " " + quoted(run / "step-1") + " --overwrite", {"is the run's checkpoint"});
  expect_refused("export " + r + " " + quoted(run / "source-model") + " --overwrite", {"source model's files"});
  expect_refused("export " + r + " " + quoted(run / "step-9"), {"step-9", "its own files"});
  expect_refused("export " + r + " " + r + " --overwrite", {"refusing to write the export"});
  expect_refused("export " + r + " " + quoted(data_) + " --overwrite", {"is the training data"});
  // A training running in the run directory holds its lock: a second one is refused, naming the pid.
  {
    DirectoryLock running(run);
    before_ = snapshot(dir_.path());  // the lock file now holds this process's pid
    expect_refused(train("--output " + r + " --resume"), {"in use by pid " + std::to_string(::getpid())});
  }
  // Bit rot in the newest checkpoint (same size, so only the checksum sees it): export uses the one before.
  std::string weights = read_file(run / "step-2" / "model.safetensors");
  weights[weights.size() / 2] ^= 0x10;
  write_file(run / "step-2" / "model.safetensors", weights);
  const CliResult exported = run_cli("export " + r + " " + quoted(dir_ / "out"));
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_NE(exported.err.find("skipping checkpoint"), std::string::npos) << exported.err;
  EXPECT_NE(exported.err.find("step-2"), std::string::npos) << exported.err;
  EXPECT_TRUE(fs::exists(dir_ / "out" / "model.safetensors"));
}

TEST_F(HostileFiles, SpecialFilesAndNestedJsonGiveOneLineErrors) {
  fs::create_directories(dir_ / "fifo-model");
  fs::copy_file(model_ / "config.json", dir_ / "fifo-model" / "config.json");
  ASSERT_EQ(::mkfifo((dir_ / "fifo-model" / "model.safetensors").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((dir_ / "fifo.jsonl").c_str(), 0600), 0);
  before_ = snapshot(dir_.path() / "model");
  expect_one_line_error(run_cli("info " + quoted(dir_ / "fifo-model")), {"FIFO"});
  expect_one_line_error(run_cli(train("--output " + quoted(dir_ / "r1"), dir_ / "fifo.jsonl")), {"FIFO"});
  expect_one_line_error(run_cli(train("--output " + quoted(dir_ / "r2") + " --data-format text", "/dev/zero")),
                        {"/dev/zero", "character device"});
  // 10^5 nested levels in a config.json (a stack overflow before the depth limit), and in a tokenizer.json
  // normalizer.
  fs::create_directories(dir_ / "deep");
  fs::copy_file(model_ / "model.safetensors", dir_ / "deep" / "model.safetensors");
  write_file(dir_ / "deep" / "config.json", std::string(100000, '[') + std::string(100000, ']'));
  expect_one_line_error(run_cli("info " + quoted(dir_ / "deep")), {"config.json", "nested deeper than"});
  fs::create_directories(dir_ / "deep-tok");
  std::string normalizer;
  for (int i = 0; i < 100000; ++i) normalizer += R"({"type":"Sequence","normalizers":[)";
  for (int i = 0; i < 100000; ++i) normalizer += "]}";
  write_file(dir_ / "deep-tok" / "tokenizer.json", R"({"normalizer":)" + normalizer + "}");
  expect_one_line_error(run_cli("tokenize --tokenizer " + quoted(dir_ / "deep-tok"), "hello"), {"nested deeper than"});
  EXPECT_EQ(changed_files(before_, snapshot(dir_.path() / "model")), "");
  EXPECT_FALSE(fs::exists(dir_ / "r1"));
  EXPECT_FALSE(fs::exists(dir_ / "r2"));
}

TEST_F(HostileFiles, UnwritableOutputsFailBeforeTraining) {
  // Every output of a run, not only the export: the memory report (also spelled --vram-report) and --output-dat.
  const std::string unwritable = ::geteuid() == 0 ? "/proc/nvfp4lm-out" : "/nvfp4lm-out-test";
  for (const std::string& flag : {"--export " + unwritable, "--vram-report " + unwritable + ".json",
                                  "--memory-report " + unwritable + ".json", "--output-dat " + unwritable + ".dat"}) {
    SCOPED_TRACE(flag);
    const CliResult result = run_cli(train("--output " + quoted(dir_ / "run") + " " + flag));
    expect_one_line_error(result, {"not writable"});
    EXPECT_EQ(result.err.find("step 1"), std::string::npos) << "refused only after training: " << result.err;
    EXPECT_FALSE(fs::exists(dir_ / "run"));
  }
}

// Issue 53 item 2: a writer removes the temporary a killed writer of its output left (named as this program names
// them, with the marker inside), and nothing a person made beside the output: `model.old-20251206`, a backup made by
// hand, was removed as "left by an interrupted write of process 20251206".
TEST_F(HostileFiles, StaleTemporariesOfKilledWritersAreRemovedAndNothingElse) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const fs::path out = dir_ / "q";
  const fs::path stale = dir_ / fmt::format("q.nvfp4lm-partial-{}-{:016x}", child, 0x5eedULL);
  fs::create_directories(stale);
  write_file(stale / ".nvfp4lm-partial", stale.filename().string());
  write_file(stale / "model.safetensors", std::string(4096, 'x'));
  const std::vector<fs::path> backups = {dir_ / "q.old-20251206", dir_ / ("q.tmp-" + std::to_string(child)),
                                         dir_ / ("q.old-" + std::to_string(child))};
  for (const fs::path& backup : backups) {
    fs::create_directories(backup);
    write_file(backup / "config.json", "{\"mine\": true}");
  }
  const CliResult result = run_cli("quantize " + quoted(model_) + " " + quoted(out) + " --format modelopt");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(out / "model.safetensors"));
  for (const fs::path& backup : backups) {
    EXPECT_EQ(read_file(backup / "config.json"), "{\"mine\": true}") << backup;
    EXPECT_EQ(result.err.find(backup.filename().string()), std::string::npos) << result.err;
  }
}

}  // namespace
}  // namespace nvfp4lm::test::test_hostile_cli
