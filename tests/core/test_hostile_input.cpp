// Hostile-input defences of core/ (issue 17): JSON nesting limits and bounded messages, strict number parsing,
// input files that are not regular files, the output guard, the run-directory lock and stale temporaries.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "common/test_util.h"
#include "core/files.h"
#include "core/json_text.h"
#include "core/number_text.h"
#include "core/publish.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace nvfp4lm::test::test_hostile_input {
namespace {

std::string nested_arrays(int depth) {
  return std::string(static_cast<size_t>(depth), '[') + std::string(static_cast<size_t>(depth), ']');
}

TEST(JsonText, NestingIsLimitedAtParseTime) {
  // 10^5 levels used to overflow the stack in nlohmann's recursive copy / dump / destructor.
  const JsonParseResult deep = try_parse_json(nested_arrays(100000));
  EXPECT_FALSE(deep.ok());
  EXPECT_NE(deep.error.find("nested deeper than"), std::string::npos) << deep.error;
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(100000, '}');
  expect_error([&] { parse_json(objects, "config.json"); }, {"config.json", "nested deeper than 64"});
  // Real files nest a few levels; the limit itself is accepted.
  EXPECT_TRUE(try_parse_json(nested_arrays(kMaxJsonDepth)).ok());
  EXPECT_FALSE(try_parse_json(nested_arrays(kMaxJsonDepth + 1)).ok());
}

// An ordered object looks keys up linearly (issue 52: 600,000 keys took 457 s): an object of more than
// kMaxOrderedJsonObjectKeys keys, or many objects of that many, are refused at once; the limit itself is read.
TEST(JsonText, OrderedObjectsOfTooManyKeysAreRefusedQuickly) {
  auto object = [](size_t keys) {
    std::string text = "{";
    for (size_t i = 0; i < keys; ++i) text += fmt::format("{}\"k{}\":{}", i ? "," : "", i, i);
    return text + "}";
  };
  const auto start = std::chrono::steady_clock::now();
  const OrderedJsonParseResult huge = try_parse_ordered_json(object(600000));  // ~8 MB, as the issue's body
  EXPECT_FALSE(huge.ok());
  EXPECT_NE(huge.error.find("more than 5000 keys"), std::string::npos) << huge.error;
  std::string many = "[";
  for (int i = 0; i < 120; ++i) many += (i ? "," : "") + object(kMaxOrderedJsonObjectKeys);
  many += "]";
  EXPECT_FALSE(try_parse_ordered_json(many).ok());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 2.0 * emulated_time_factor()) << "refusing took too long";
  const OrderedJsonParseResult largest = try_parse_ordered_json(object(kMaxOrderedJsonObjectKeys));
  ASSERT_TRUE(largest.ok()) << largest.error;
  EXPECT_EQ(largest.value.size(), kMaxOrderedJsonObjectKeys);
  EXPECT_EQ(largest.value.begin().key(), "k0");  // in the text's order
  // The unordered parse (config.json, tokenizer.json's 151,643-entry vocabulary) has no such limit.
  EXPECT_TRUE(try_parse_json(object(20000)).ok());
}

TEST(JsonText, IntegerFieldsTakeOnlyIntegersTheyCanHold) {
  // nlohmann converts a float into an integer type by a C cast: undefined behaviour out of range (fuzz_checksums
  // found "format_version": 7.7e23). Such values, fractions and out-of-range integers are errors naming the key.
  const nlohmann::json object = nlohmann::json::parse(
      R"({"big": 777777777777777777777784, "half": 2.5, "negative": -1, "huge": 18446744073709551615, "ok": 7})");
  expect_error([&] { json_field_or<int64_t>(object, "big", 0, "checksums.json"); },
               {"checksums.json", "\"big\"", "whole number"});
  expect_error([&] { json_field_or<int64_t>(object, "half", 0, "f"); }, {"\"half\"", "2.5"});
  expect_error([&] { json_field_or<uint64_t>(object, "negative", 0, "f"); }, {"\"negative\"", "-1"});
  expect_error([&] { json_field_or<int64_t>(object, "huge", 0, "f"); }, {"\"huge\""});
  expect_error([&] { json_field_or<int>(object, "huge", 0, "f"); }, {"\"huge\""});
  EXPECT_EQ(json_field_or<uint64_t>(object, "huge", 0, "f"), UINT64_MAX);
  EXPECT_EQ(json_field_or<int>(object, "ok", 0, "f"), 7);
  EXPECT_EQ(json_field_or<int>(object, "absent", 3, "f"), 3);
  EXPECT_EQ(json_field_or<double>(object, "half", 0.0, "f"), 2.5);
}

TEST(JsonText, SyntaxErrorsAreOneBoundedLine) {
  // An unterminated 1 MB string: the parser's "last read" token must not end up whole in the message.
  const std::string text = "{\"a\": \"" + std::string(1 << 20, 'x');
  const JsonParseResult result = try_parse_json(text);
  ASSERT_FALSE(result.ok());
  EXPECT_LT(result.error.size(), 400u);
  EXPECT_EQ(result.error.find('\n'), std::string::npos);
}

TEST(JsonText, ExcerptIsBounded) {
  nlohmann::json big = nlohmann::json::array();
  for (int i = 0; i < 100000; ++i) big.push_back(i);
  EXPECT_EQ(json_excerpt(big), "(array of 100000 values)");
  const std::string excerpt = json_excerpt(nlohmann::json(std::string(10000, 'y')));
  EXPECT_LT(excerpt.size(), 120u);
  EXPECT_EQ(json_excerpt(nlohmann::json::array({1, 2})), "[1,2]");
}

TEST(NumberText, StrictDecimalInRange) {
  std::string problem;
  EXPECT_EQ(parse_number<int64_t>("42", {}, problem), 42);
  EXPECT_EQ(parse_number<int64_t>("+7", {}, problem), 7);
  EXPECT_FALSE(parse_number<int64_t>("9223372036854775808", {}, problem));  // not saturated to INT64_MAX
  EXPECT_NE(problem.find("out of range"), std::string::npos) << problem;
  EXPECT_FALSE(parse_number<uint64_t>("-1", {}, problem));  // not 2^64-1
  EXPECT_NE(problem.find("negative"), std::string::npos) << problem;
  EXPECT_FALSE(parse_number<uint64_t>("18446744073709551616", {}, problem));
  EXPECT_EQ(parse_number<int64_t>("010", {}, problem), 10);  // decimal, not octal
  EXPECT_FALSE(parse_number<int64_t>("0x10", {}, problem));
  EXPECT_FALSE(parse_number<int64_t>("12abc", {}, problem));
  EXPECT_FALSE(parse_number<int64_t>("", {}, problem));
  EXPECT_FALSE(parse_number<int>("3000000000", {}, problem));
  EXPECT_FALSE(parse_number<int64_t>("0", {1, 10}, problem));
  EXPECT_NE(problem.find("[1, 10]"), std::string::npos) << problem;
  EXPECT_FALSE(parse_number<double>("inf", {}, problem));
  EXPECT_FALSE(parse_number<double>("nan", {}, problem));
  EXPECT_FALSE(parse_number<double>("1e999", {}, problem));
  EXPECT_EQ(parse_number<double>("2.5e-3", {}, problem), 2.5e-3);
  EXPECT_FALSE(parse_number<float>("1.5", {0.0f, 1.0f}, problem));
}

TEST(ShapeSizes, OverflowIsAnErrorNotAWrappedSize) {
  expect_error([] { Shape({int64_t{1} << 40, int64_t{1} << 40}); }, {"2^56"});
  expect_error([] { Shape({INT64_MAX, 2}); }, {"2^56"});
  // A zero dimension empties the shape but does not excuse the others: their strides would overflow (fuzz_dat
  // found this through Tensor::empty's contiguous_strides).
  expect_error([] { Shape({0, int64_t{1} << 40, int64_t{1} << 40}); }, {"2^56"});
  EXPECT_EQ(Shape({0, int64_t{1} << 20, int64_t{1} << 20}).numel(), 0);
  Shape shape({4, 4});
  shape[0] = INT64_MAX;  // changed after construction: numel() checks again
  expect_error([&] { (void)shape.numel(); }, {"2^56"});
  expect_error([] { Tensor::empty(Shape({int64_t{1} << 55, 4}), DType::F32, Device::cpu()); }, {"2^56"});
}

TEST(InputFiles, SpecialFilesAreRefusedWithoutBlocking) {
  TempDir dir;
  const fs::path fifo = dir / "model.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opening a FIFO for reading with nobody writing would block forever without O_NONBLOCK.
  expect_error([&] { open_input_file(fifo); }, {"FIFO"});
  expect_error([&] { read_text_file(fifo); }, {"FIFO"});
  expect_error([] { read_text_file("/dev/zero"); }, {"/dev/zero", "character device"});
  expect_error([&] { read_text_file(dir.path()); }, {"directory"});
  write_file(dir / "big.json", std::string(1000, ' '));
  expect_error([&] { read_text_file(dir / "big.json", 100); }, {"1000 bytes", "100"});
  EXPECT_EQ(read_text_file(dir / "big.json").size(), 1000u);
}

TEST(OutputGuard, RefusesOutputsThatAreContainOrLieInInputs) {
  TempDir dir;
  fs::create_directories(dir / "model");
  write_file(dir / "model" / "config.json", "{}");
  write_file(dir / "data.jsonl", "{}\n");
  const std::vector<GuardedInput> inputs = {{dir / "model", "the model"}, {dir / "data.jsonl", "the data"}};
  for (const bool overwrite : {false, true}) {
    expect_error([&] { guard_output(dir / "data.jsonl", "--metrics", inputs, overwrite, OutputKind::File); },
                 {"--metrics", "is the data"});
    expect_error([&] { guard_output(dir / "model", "the output", inputs, overwrite, OutputKind::File); },
                 {"is the model"});
    expect_error(
        [&] { guard_output(dir / "model" / "config.json", "the output", inputs, overwrite, OutputKind::File); },
        {"lies inside the model"});
    expect_error([&] { guard_output(dir.path(), "the output", inputs, overwrite, OutputKind::File); },
                 {"contains the model"});
    // Spelled differently: ".." and a symlink resolve to the same file.
    expect_error(
        [&] { guard_output(dir / "model" / ".." / "data.jsonl", "--json", inputs, overwrite, OutputKind::File); },
        {"is the data"});
  }
  fs::create_symlink(dir / "data.jsonl", dir / "link.jsonl");
  expect_error([&] { guard_output(dir / "link.jsonl", "--json", inputs, true, OutputKind::File); }, {"is the data"});
  // A run directory may hold outputs, but not be one.
  const std::vector<GuardedInput> run = {{dir / "model", "the run directory", true}};
  EXPECT_NO_THROW(guard_output(dir / "model" / "export", "the export", run, false, OutputKind::File));
  expect_error([&] { guard_output(dir / "model", "the export", run, true, OutputKind::File); },
               {"is the run directory"});
  // Existing outputs need --overwrite; new ones are fine; empty is refused.
  write_file(dir / "old.json", "{}");
  expect_error([&] { guard_output(dir / "old.json", "--json", inputs, false, OutputKind::File); },
               {"already exists", "--overwrite"});
  EXPECT_NO_THROW(guard_output(dir / "old.json", "--json", inputs, true, OutputKind::File));
  EXPECT_NO_THROW(guard_output(dir / "new" / "deeper" / "out", "the output", inputs, false, OutputKind::File));
  expect_error([&] { guard_output("", "--output", inputs, false, OutputKind::File); }, {"--output is empty"});
}

TEST(OutputGuard, UnwritableLocationIsFoundBeforeAnyWork) {
  if (::geteuid() == 0) {
    // root writes anywhere but on a read-only file system; /proc is one on every Linux.
    expect_error([] { guard_output("/proc/nvfp4lm-out/model", "the output", {}, false, OutputKind::File); },
                 {"not writable"});
    return;
  }
  TempDir dir;
  fs::create_directories(dir / "ro");
  fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  expect_error([&] { guard_output(dir / "ro" / "out", "the output", {}, false, OutputKind::File); }, {"not writable"});
  fs::permissions(dir / "ro", fs::perms::owner_all);
}

TEST(DirectoryLock, SecondProcessIsRefusedWithThePid) {
  TempDir dir;
  const fs::path run = dir / "run";
  {
    DirectoryLock lock(run);
    EXPECT_TRUE(lock.created_directory());
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      // flock locks belong to the open file description: a fresh open in another process conflicts.
      try {
        DirectoryLock second(run);
        ::_exit(1);
      } catch (const Error& e) {
        const std::string message = e.what();
        ::_exit(message.find("in use by pid " + std::to_string(::getppid())) != std::string::npos ? 0 : 2);
      }
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the second lock succeeded, 2: the message lacks the pid";
  }
  // Released with the object (and by the kernel when a process dies).
  DirectoryLock again(run);
  EXPECT_FALSE(again.created_directory());
  again.release_and_remove_if_unused();
  EXPECT_TRUE(fs::exists(run));  // not created by `again`
  DirectoryLock fresh(dir / "fresh");
  fresh.release_and_remove_if_unused();
  EXPECT_FALSE(fs::exists(dir / "fresh"));  // created and unused: removed again
}

// Issue 53: only what provably is a temporary of this program is removed (its name's form, a process that is gone,
// and for a directory the marker naming it); names a person picks, even ones like the old temporaries', are kept.
TEST(StaleTemporaries, OnlyProvableLeftoversOfDeadWritersAreRemoved) {
  TempDir dir;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // a pid that is certainly gone (not reused this soon)
  const fs::path out = dir / "model.dat";
  auto partial = [&](const std::string& name, pid_t pid, const char* tag) {
    return dir / fmt::format("{}.nvfp4lm-partial-{}-{}", name, pid, tag);
  };
  const fs::path dead = partial("model.dat", child, "00000000deadbeef");
  const fs::path dead_dir = partial("model.dat", child, "0123456789abcdef");
  const fs::path unmarked_dir = partial("model.dat", child, "fedcba9876543210");
  const fs::path live = partial("model.dat", ::getppid(), "00000000deadbeef");
  const fs::path other = partial("other.dat", child, "00000000deadbeef");
  const fs::path short_tag = partial("model.dat", child, "beef");
  const std::vector<fs::path> persons = {dir / ("model.dat.tmp-" + std::to_string(child)),
                                         dir / ("model.dat.old-" + std::to_string(child)),
                                         dir / "model.dat.old-20251206", dir / "model.dat.tmp-1"};
  write_file(dead, "x");
  fs::create_directories(dead_dir / "inner");
  write_file(dead_dir / kPartialMarkerFileName, dead_dir.filename().string());
  fs::create_directories(unmarked_dir / "inner");  // named like one, but no marker: a person's
  write_file(live, "x");
  write_file(other, "x");
  write_file(short_tag, "x");
  for (const fs::path& path : persons) {
    fs::create_directories(path);
    write_file(path / "notes.txt", "mine");
  }
  remove_stale_temporaries(out);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(dead_dir));
  EXPECT_TRUE(fs::exists(unmarked_dir / "inner"));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));  // another output's temporaries are that writer's business
  EXPECT_TRUE(fs::exists(short_tag));
  for (const fs::path& path : persons) EXPECT_EQ(read_file(path / "notes.txt"), "mine") << path;
}

}  // namespace
}  // namespace nvfp4lm::test::test_hostile_input
