// Checkpoints: XXH64 checksums, bit-identical save/load round trips (and resume = not stopping), choosing the
// newest complete checkpoint past leftovers and corruption, pruning, errors that name the file and problem,
// and a writer killed with SIGKILL in the middle of a checkpoint.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>

#include "common/test_util.h"
#include "io/checksum.h"
#include "train/checkpoint.h"
#include "train/optim/adamw.h"
#include "train/optim/adamw8bit.h"

namespace nvfp4lm::test_checkpoint {
namespace {

using json = nlohmann::json;

// ---- checksums -------------------------------------------------------------------------------------------------

// Reference digests from the xxHash library (libxxhash 0.8.1, XXH64).
TEST(Checksum, Xxh64MatchesReferenceVectors) {
  EXPECT_EQ(xxh64("", 0), 0xef46db3751d8e999ull);
  EXPECT_EQ(xxh64("a", 1), 0xd24ec4f1a98c6e5bull);
  EXPECT_EQ(xxh64("abc", 3), 0x44bc2cf5ad770999ull);
  const std::string fox = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(xxh64(fox.data(), fox.size()), 0x0b242d361fda71bcull);
  // Every tail path (1..7 bytes, 8-byte lanes, 32-byte stripes) and a non-zero seed.
  std::vector<unsigned char> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>((i * 31 + 7) & 0xff);
  const struct {
    size_t length;
    uint64_t seed0, seed_golden;
  } cases[] = {
      {1, 0xa96c7f0ce858bbb7ull, 0x585882422a6165e7ull},   {3, 0x56e6957632a487f9ull, 0x5acb303e78133c22ull},
      {4, 0xc60d15b1e3ff8f04ull, 0x7d51d5e2461732b3ull},   {7, 0xafbefc3d6c6f9a8eull, 0x2ce9adec2b2c8104ull},
      {8, 0x3da5c7aa269683e0ull, 0x758848f033fa76a2ull},   {31, 0x4a74f3a1a39ad4a1ull, 0x8137041f5af88413ull},
      {32, 0x8d57d6a4671cc43dull, 0x184ebcf3745cd46cull},  {33, 0x62c9fd21ed857664ull, 0x52fac3c981f3cc2eull},
      {63, 0x5c320a0d2707057full, 0x64ef99a2e94cc7bdull},  {64, 0x7bbabbc45729d17eull, 0xf7f22435fe1ab128ull},
      {100, 0xefa0ad2d3e70c151ull, 0xbc7ab33be7528c18ull}, {1000, 0x99594f4828043d35ull, 0xda717f741f399f3full}};
  for (const auto& c : cases) {
    EXPECT_EQ(xxh64(data.data(), c.length), c.seed0) << c.length;
    EXPECT_EQ(xxh64(data.data(), c.length, 0x9E3779B97F4A7C15ull), c.seed_golden) << c.length;
  }
}

TEST(Checksum, StreamingAndFileDigestsEqualOneShot) {
  Rng rng(1);
  std::string data(1 << 20, '\0');
  for (char& c : data) c = static_cast<char>(rng.next_u64());
  const uint64_t expected = xxh64(data.data(), data.size());
  Xxh64 streaming;
  for (size_t offset = 0; offset < data.size();) {
    const size_t piece = std::min<size_t>(rng.below(100), data.size() - offset);  // includes empty pieces
    streaming.update(data.data() + offset, piece);
    offset += piece;
  }
  EXPECT_EQ(streaming.digest(), expected);
  test::TempDir dir;
  test::write_file(dir / "blob", data);
  const FileChecksum file = checksum_file(dir / "blob");
  EXPECT_EQ(file.bytes, data.size());
  EXPECT_EQ(file.xxh64, expected);
  EXPECT_EQ(checksum_hex(0x0123456789abcdefull), "0123456789abcdef");
  EXPECT_EQ(parse_checksum_hex("0123456789ABCDEF"), 0x0123456789abcdefull);
  EXPECT_FALSE(parse_checksum_hex("0123456789abcde").has_value());
  EXPECT_FALSE(parse_checksum_hex("0123456789abcdeg").has_value());
}

// ---- a small training state ------------------------------------------------------------------------------------

struct TrainingRun {
  std::vector<Parameter> params;
  std::unique_ptr<Optimizer> optimizer;
  Rng rng{99};
};

TrainingRun make_run(const std::string& kind, DType master, uint64_t seed) {
  TrainingRun run;
  Rng init(seed);
  const std::pair<std::string, Shape> layout[] = {{"model.embed_tokens.weight", Shape{50, 16}},
                                                  {"model.layers.0.self_attn.q_proj.weight", Shape{16, 16}},
                                                  {"model.norm.weight", Shape{16}}};
  for (const auto& [name, shape] : layout) {
    Parameter p{name, Tensor::empty(shape, master), Tensor::zeros(shape, DType::F32),
                name.find("proj") != std::string::npos};
    convert_cpu(test::random_normal(shape, init), p.value);
    run.params.push_back(std::move(p));
  }
  AdamWOptions options;
  options.seed = 5;
  run.optimizer = make_optimizer(kind, run.params, options);
  return run;
}

void train(TrainingRun& run, int steps) {
  for (int s = 0; s < steps; ++s) {
    for (Parameter& p : run.params) {
      float* g = p.grad.data<float>();
      for (int64_t i = 0; i < p.grad.numel(); ++i) g[i] = run.rng.normal();
    }
    run.optimizer->step(run.params, 1e-2);
  }
}

json trainer_state_of(const TrainingRun& run, int64_t epoch) {
  return {{"epoch", epoch},
          {"data_position", {{"epoch_seed", 7}, {"next_sample", 12345}}},
          {"rng", {{"data", rng_state_to_json(run.rng.state())}}},
          {"config", {{"lr", 1e-2}, {"model", "tiny"}, {"max_steps", 18446744073709551615ull}}},
          {"metrics", json::array({{{"step", 1}, {"loss", 2.3456789012345678}}, {{"step", 2}, {"loss", 0.1}}})}};
}

fs::path save(const fs::path& run_dir, TrainingRun& run, int64_t step) {
  return save_checkpoint(run_dir, step, run.params, *run.optimizer, trainer_state_of(run, 1));
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

void expect_same_state(const TrainingRun& a, const TrainingRun& b) {
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_TRUE(same_bytes(a.params[i].value, b.params[i].value)) << a.params[i].name;
  }
  const auto sa = a.optimizer->state_tensors(), sb = b.optimizer->state_tensors();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) EXPECT_TRUE(same_bytes(sa[i].tensor, sb[i].tensor)) << sa[i].name;
  EXPECT_EQ(a.optimizer->step_count(), b.optimizer->step_count());
}

void flip_byte(const fs::path& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

void expect_error_mentions(const std::function<void()>& action, const std::vector<std::string>& needles) {
  try {
    action();
    ADD_FAILURE() << "expected an Error mentioning " << needles.front();
  } catch (const Error& e) {
    for (const std::string& needle : needles)
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// ---- round trip ------------------------------------------------------------------------------------------------

class CheckpointRoundTrip : public ::testing::TestWithParam<std::pair<std::string, DType>> {};

TEST_P(CheckpointRoundTrip, IsBitIdenticalAndResumesExactly) {
  const auto [kind, master] = GetParam();
  test::TempDir dir;
  TrainingRun original = make_run(kind, master, 1);
  train(original, 3);
  const json state = trainer_state_of(original, 1);
  const fs::path saved = save_checkpoint(dir.path(), 3, original.params, *original.optimizer, state);
  EXPECT_EQ(saved, dir / "step-3");
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "trainer_state.json", "checksums.json"}) {
    EXPECT_TRUE(fs::is_regular_file(saved / file)) << file;
  }
  EXPECT_FALSE(fs::exists(dir / "step-3.tmp"));

  TrainingRun restored = make_run(kind, master, 2);  // different weights, zero state
  const auto latest = latest_checkpoint(dir.path());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 3);
  const json loaded = load_checkpoint(latest->dir, restored.params, *restored.optimizer, VerifyLevel::Sizes);
  expect_same_state(original, restored);
  json expected = state;
  expected["format"] = "nvfp4lm-trainer-state";
  expected["format_version"] = kTrainerStateFormatVersion;
  expected["step"] = 3;
  EXPECT_EQ(loaded, expected);
  EXPECT_EQ(loaded.dump(), expected.dump());
  restored.rng.set_state(rng_state_from_json(loaded["rng"]["data"], "rng.data"));

  // Resuming gives the same result as not stopping.
  train(original, 2);
  train(restored, 2);
  expect_same_state(original, restored);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, CheckpointRoundTrip,
                         ::testing::Values(std::pair<std::string, DType>{"adamw", DType::F32},
                                           std::pair<std::string, DType>{"adamw8bit", DType::BF16}));

// ---- choosing the newest complete checkpoint -------------------------------------------------------------------

TEST(Checkpoint, LatestSkipsUnfinishedAndCorruptedCheckpoints) {
  test::TempDir dir;
  TrainingRun run = make_run("adamw", DType::F32, 1);
  EXPECT_FALSE(latest_checkpoint(dir.path()).has_value());
  EXPECT_FALSE(latest_checkpoint(dir / "absent").has_value());
  train(run, 1);
  save(dir.path(), run, 10);
  train(run, 1);
  save(dir.path(), run, 20);
  // Leftovers that are not checkpoints: an interrupted write and unrelated names.
  fs::create_directories(dir / "step-30.tmp");
  test::write_file(dir / "step-30.tmp" / "model.safetensors", "partial");
  fs::create_directories(dir / "step-abc");
  fs::create_directories(dir / "step-40.old-123");
  EXPECT_EQ(latest_checkpoint(dir.path())->step, 20);

  // A flipped byte keeps the size: only the checksum level sees it.
  flip_byte(dir / "step-20" / "model.safetensors", 200);
  EXPECT_EQ(latest_checkpoint(dir.path(), VerifyLevel::Sizes)->step, 20);
  EXPECT_EQ(latest_checkpoint(dir.path())->step, 10);
  flip_byte(dir / "step-20" / "model.safetensors", 200);  // repaired
  EXPECT_EQ(latest_checkpoint(dir.path())->step, 20);

  // A truncated file is caught by sizes alone.
  const fs::path optimizer_file = dir / "step-20" / "optimizer.safetensors";
  fs::resize_file(optimizer_file, fs::file_size(optimizer_file) - 1);
  EXPECT_EQ(latest_checkpoint(dir.path(), VerifyLevel::Sizes)->step, 10);

  // A checkpoint without its manifest is not complete.
  save(dir.path(), run, 20);  // rewritten whole
  EXPECT_EQ(latest_checkpoint(dir.path())->step, 20);
  fs::remove(dir / "step-20" / "checksums.json");
  EXPECT_EQ(latest_checkpoint(dir.path())->step, 10);
}

TEST(Checkpoint, PruneKeepsTheNewestCompleteOnes) {
  test::TempDir dir;
  TrainingRun run = make_run("adamw", DType::F32, 1);
  for (int step : {10, 20, 30, 40, 50}) save(dir.path(), run, step);
  fs::create_directories(dir / "step-5.tmp");
  fs::create_directories(dir / "step-60.tmp");
  fs::remove(dir / "step-50" / "trainer_state.json");  // the newest is incomplete
  EXPECT_THROW(prune_checkpoints(dir.path(), 0), Error);
  const std::vector<fs::path> deleted = prune_checkpoints(dir.path(), 2);
  EXPECT_EQ(deleted.size(), 3u);  // step-20, step-10, step-5.tmp
  EXPECT_FALSE(fs::exists(dir / "step-10"));
  EXPECT_FALSE(fs::exists(dir / "step-20"));
  EXPECT_FALSE(fs::exists(dir / "step-5.tmp"));
  EXPECT_TRUE(fs::exists(dir / "step-30"));
  EXPECT_TRUE(fs::exists(dir / "step-40"));
  EXPECT_TRUE(fs::exists(dir / "step-50"));      // newer but incomplete: left for inspection
  EXPECT_TRUE(fs::exists(dir / "step-60.tmp"));  // could belong to a newer write
  prune_checkpoints(dir.path(), 1);
  EXPECT_FALSE(fs::exists(dir / "step-30"));
  EXPECT_EQ(latest_checkpoint(dir.path())->step, 40);  // never deleted
}

TEST(Checkpoint, AnInterruptedDeletionIsSkippedByReadersAndFinishedByTheNextPrune) {
  test::TempDir dir;
  TrainingRun run = make_run("adamw", DType::F32, 1);
  for (int step : {5, 10, 20, 30}) save(dir.path(), run, step);
  // What a kill while deleting leaves (checkpoints are renamed step-N.deleting before anything in them goes):
  // step-5 partly emptied, and step-30 (say it was being replaced) still whole under the .deleting name.
  fs::rename(dir / "step-5", dir / "step-5.deleting");
  fs::remove(dir / "step-5.deleting" / "model.safetensors");
  fs::rename(dir / "step-30", dir / "step-30.deleting");
  EXPECT_EQ(latest_checkpoint(dir.path())->step, 20);
  const std::vector<fs::path> listed = run_checkpoint_dirs(dir.path());  // what outputs may not touch
  EXPECT_NE(std::find(listed.begin(), listed.end(), dir / "step-5.deleting"), listed.end());
  prune_checkpoints(dir.path(), 2);
  EXPECT_FALSE(fs::exists(dir / "step-5.deleting"));
  EXPECT_FALSE(fs::exists(dir / "step-30.deleting"));
  EXPECT_TRUE(fs::exists(dir / "step-10"));
  EXPECT_TRUE(fs::exists(dir / "step-20"));
  for (const auto& entry : fs::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename().string().find(".deleting"), std::string::npos) << entry.path();
}

// Issue 53 item 3: pruning deletes only what provably is a checkpoint of this program. A step-N without checksums.json
// (a partial copy, another tool's output) and a step-N.tmp / step-N.deleting holding files no checkpoint has are
// kept, with a warning; the program's own are deleted as before.
TEST(Checkpoint, PruneDeletesNothingItCannotProveIsItsOwn) {
  test::TempDir dir;
  TrainingRun run = make_run("adamw", DType::F32, 1);
  for (int step : {10, 20, 30}) save(dir.path(), run, step);
  // Another tool's output and a partial copy, named like checkpoints.
  fs::create_directories(dir / "step-5");
  test::write_file(dir / "step-5" / "model.safetensors", "someone's copy");
  fs::create_directories(dir / "step-6");
  test::write_file(dir / "step-6" / "notes.txt", "mine");
  fs::create_directories(dir / "step-7.tmp");
  test::write_file(dir / "step-7.tmp" / "photo.jpg", "mine");
  fs::create_directories(dir / "step-8.deleting" / "inner");
  // The program's own leftovers: an interrupted write and an interrupted deletion.
  fs::create_directories(dir / "step-9.tmp");
  test::write_file(dir / "step-9.tmp" / "model.safetensors", "partial");
  fs::create_directories(dir / "step-4.deleting");
  test::write_file(dir / "step-4.deleting" / "optimizer.safetensors", "partial");
  prune_checkpoints(dir.path(), 1);
  EXPECT_EQ(test::read_file(dir / "step-5" / "model.safetensors"), "someone's copy");
  EXPECT_EQ(test::read_file(dir / "step-6" / "notes.txt"), "mine");
  EXPECT_EQ(test::read_file(dir / "step-7.tmp" / "photo.jpg"), "mine");
  EXPECT_TRUE(fs::is_directory(dir / "step-8.deleting" / "inner"));
  EXPECT_FALSE(fs::exists(dir / "step-9.tmp"));
  EXPECT_FALSE(fs::exists(dir / "step-4.deleting"));
  EXPECT_FALSE(fs::exists(dir / "step-10"));
  EXPECT_FALSE(fs::exists(dir / "step-20"));
  EXPECT_EQ(latest_checkpoint(dir.path())->step, 30);
  // A checkpoint write does not remove a step-N.tmp it cannot prove is a checkpoint's: it stops, naming it.
  fs::create_directories(dir / "step-40.tmp");
  test::write_file(dir / "step-40.tmp" / "notes.txt", "mine");
  try {
    save(dir.path(), run, 40);
    ADD_FAILURE() << "step-40.tmp of someone else's was replaced";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step-40.tmp"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("notes.txt"), std::string::npos) << e.what();
  }
  EXPECT_EQ(test::read_file(dir / "step-40.tmp" / "notes.txt"), "mine");
}

// ---- load errors -----------------------------------------------------------------------------------------------

TEST(Checkpoint, LoadErrorsNameTheFileAndTheProblem) {
  test::TempDir dir;
  TrainingRun run = make_run("adamw", DType::F32, 1);
  train(run, 2);
  const fs::path ckpt = save(dir.path(), run, 2);
  TrainingRun target = make_run("adamw", DType::F32, 3);
  const std::vector<float> untouched = to_float_vector(target.params[0].value);

  // Missing tensor: this run has a parameter the checkpoint lacks.
  {
    TrainingRun bigger = make_run("adamw", DType::F32, 3);
    bigger.params.push_back(
        {"lm_head.weight", Tensor::zeros({50, 16}, DType::F32), Tensor::zeros({50, 16}, DType::F32), true});
    bigger.optimizer = make_optimizer("adamw", bigger.params, {});
    expect_error_mentions([&] { load_checkpoint(ckpt, bigger.params, *bigger.optimizer); },
                          {"model.safetensors", "lm_head.weight", "missing"});
  }
  // Extra tensor: the checkpoint has a parameter this run lacks.
  {
    TrainingRun smaller = make_run("adamw", DType::F32, 3);
    smaller.params.pop_back();
    smaller.optimizer = make_optimizer("adamw", smaller.params, {});
    expect_error_mentions([&] { load_checkpoint(ckpt, smaller.params, *smaller.optimizer); },
                          {"model.safetensors", "model.norm.weight", "no counterpart"});
  }
  // Shape mismatch (in the last parameter: nothing may have been copied into the first).
  {
    TrainingRun reshaped = make_run("adamw", DType::F32, 3);
    reshaped.params[2] = {"model.norm.weight", Tensor::zeros({8, 2}, DType::F32), Tensor::zeros({8, 2}, DType::F32),
                          false};
    reshaped.optimizer = make_optimizer("adamw", reshaped.params, {});
    const std::vector<float> before = to_float_vector(reshaped.params[0].value);
    expect_error_mentions([&] { load_checkpoint(ckpt, reshaped.params, *reshaped.optimizer); },
                          {"model.norm.weight", "shape [16]", "[8, 2]"});
    EXPECT_EQ(to_float_vector(reshaped.params[0].value), before);
  }
  // Master dtype and optimizer kind.
  {
    TrainingRun bf16 = make_run("adamw", DType::BF16, 3);
    expect_error_mentions([&] { load_checkpoint(ckpt, bf16.params, *bf16.optimizer); }, {"F32", "BF16"});
    TrainingRun eight = make_run("adamw8bit", DType::F32, 3);
    expect_error_mentions([&] { load_checkpoint(ckpt, eight.params, *eight.optimizer); },
                          {"optimizer.safetensors", "adamw", "adamw8bit"});
  }
  EXPECT_EQ(to_float_vector(target.params[0].value), untouched);

  // Corruption and missing pieces, each in a fresh copy.
  auto copy = [&](const std::string& name) {
    const fs::path to = dir / name;
    fs::copy(ckpt, to, fs::copy_options::recursive);
    return to;
  };
  const fs::path flipped = copy("flipped");
  flip_byte(flipped / "optimizer.safetensors", 300);
  expect_error_mentions([&] { load_checkpoint(flipped, target.params, *target.optimizer); },
                        {"optimizer.safetensors", "checksum"});
  const fs::path truncated = copy("truncated");
  fs::resize_file(truncated / "model.safetensors", 100);
  expect_error_mentions([&] { load_checkpoint(truncated, target.params, *target.optimizer, VerifyLevel::Sizes); },
                        {"model.safetensors", "100 bytes"});
  const fs::path missing = copy("missing");
  fs::remove(missing / "trainer_state.json");
  expect_error_mentions([&] { load_checkpoint(missing, target.params, *target.optimizer); },
                        {"trainer_state.json", "missing"});
  const fs::path bad_json = copy("bad_json");
  test::write_file(bad_json / "trainer_state.json", "{\"step\": 2, ");
  write_checksum_manifest(bad_json, {"model.safetensors", "optimizer.safetensors", "trainer_state.json"});
  expect_error_mentions([&] { load_checkpoint(bad_json, target.params, *target.optimizer); },
                        {"trainer_state.json", "not valid JSON"});
  const fs::path bad_manifest = copy("bad_manifest");
  test::write_file(bad_manifest / "checksums.json", "[1, 2");
  expect_error_mentions([&] { load_checkpoint(bad_manifest, target.params, *target.optimizer); },
                        {"checksums.json", "not valid JSON"});
  expect_error_mentions([&] { load_checkpoint(dir / "nowhere", target.params, *target.optimizer); },
                        {"nowhere", "does not exist"});
  EXPECT_EQ(to_float_vector(target.params[0].value), untouched);

  // And the intact one still loads.
  load_checkpoint(ckpt, target.params, *target.optimizer);
  expect_same_state(run, target);
}

TEST(Checkpoint, RefusesNonFiniteValues) {
  test::TempDir dir;
  TrainingRun run = make_run("adamw8bit", DType::BF16, 1);
  train(run, 1);
  save(dir.path(), run, 1);
  run.params[1].value.data<uint16_t>()[7] = 0x7fc0;  // bf16 NaN
  expect_error_mentions([&] { save(dir.path(), run, 2); },
                        {"model.layers.0.self_attn.q_proj.weight", "non-finite", "element 7"});
  EXPECT_FALSE(fs::exists(dir / "step-2"));
  EXPECT_FALSE(fs::exists(dir / "step-2.tmp"));
  EXPECT_EQ(latest_checkpoint(dir.path())->step, 1);
}

// ---- kill -9 in the middle of a write --------------------------------------------------------------------------

// Forks a child that writes step-2 of a ~64 MB checkpoint and SIGKILLs it as soon as a file named `trigger` (or
// starting with it, when it ends in '*') exists in step-2.tmp, or the directory itself when `trigger` is empty. Returns
// false when the child finished before the kill landed.
bool kill_during_write(const fs::path& run_dir, std::span<const NamedTensor> model, std::span<const NamedTensor> state,
                       const std::string& trigger) {
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      save_checkpoint(run_dir, 2, model, state, json{{"kind", "adamw"}, {"step", 2}}, json::object());
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  EXPECT_GT(child, 0);
  const fs::path tmp = run_dir / "step-2.tmp";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto triggered = [&] {
    std::error_code ec;
    if (trigger.empty()) return fs::exists(tmp, ec);
    if (!fs::is_directory(tmp, ec)) return false;
    for (const auto& entry : fs::directory_iterator(tmp, ec)) {
      const std::string name = entry.path().filename().string();
      const bool prefix = trigger.back() == '*';
      if (prefix ? name.rfind(trigger.substr(0, trigger.size() - 1), 0) == 0 : name == trigger) return true;
    }
    return false;
  };
  int status = 0;
  while (!triggered()) {
    if (::waitpid(child, &status, WNOHANG) == child) return false;  // finished first
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

TEST(Checkpoint, SigkillDuringWriteLeavesThePreviousCheckpointSelected) {
  test::TempDir dir;
  TrainingRun run = make_run("adamw", DType::F32, 1);
  train(run, 1);
  save(dir.path(), run, 1);
  const int64_t n = 8 << 20;  // 32 MB of model, 32 MB of optimizer state
  std::vector<NamedTensor> model = {{"w", Tensor::zeros({n}, DType::F32)}};
  std::vector<NamedTensor> state = {{"w.exp_avg", Tensor::zeros({n}, DType::F32)}};
  for (int64_t i = 0; i < n; i += 1024) model[0].tensor.data<float>()[i] = static_cast<float>(i);

  int kills = 0;
  // Kill points: as the directory appears, while the model file is written, once the model file is done
  // (optimizer file in progress), once trainer_state.json exists (checksums being computed).
  for (const std::string trigger : {"", "model.safetensors.tmp*", "model.safetensors", "trainer_state.json"}) {
    const bool killed = kill_during_write(dir.path(), model, state, trigger);
    if (!killed) {
      // The write won the race; then it must be complete. Remove it to keep testing the next point.
      EXPECT_EQ(latest_checkpoint(dir.path())->step, 2) << trigger;
      fs::remove_all(dir / "step-2");
      continue;
    }
    ++kills;
    EXPECT_FALSE(fs::exists(dir / "step-2")) << trigger;
    const auto latest = latest_checkpoint(dir.path());
    ASSERT_TRUE(latest.has_value()) << trigger;
    EXPECT_EQ(latest->step, 1) << trigger;
    TrainingRun restored = make_run("adamw", DType::F32, 2);
    load_checkpoint(latest->dir, restored.params, *restored.optimizer);
    expect_same_state(run, restored);
  }
  EXPECT_GE(kills, 2);  // at least the early kill points must land mid-write

  // The next save replaces the leftover and becomes the newest.
  save_checkpoint(dir.path(), 2, model, state, json{{"kind", "adamw"}, {"step", 2}}, json::object());
  EXPECT_FALSE(fs::exists(dir / "step-2.tmp"));
  EXPECT_EQ(latest_checkpoint(dir.path())->step, 2);
}

}  // namespace
}  // namespace nvfp4lm::test_checkpoint
