// core/publish.h: the publishing step's rules one by one (the CLI's use of it: tests/cli/test_output_publishing.cpp).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <memory>

#include "common/test_util.h"
#include "core/files.h"
#include "core/publish.h"

namespace nvfp4lm::test::test_publish {
namespace {

// A staged file `name` holding `contents`, as a writer leaves it before publishing.
fs::path staged_file(const TempDir& dir, const std::string& name, const std::string& contents) {
  write_file(dir / name, contents);
  return dir / name;
}

// A staged model directory: config.json and a weights file.
fs::path staged_model(const TempDir& dir, const std::string& name, const std::string& weights) {
  fs::create_directories(dir / name);
  write_file(dir / name / "config.json", "{}");
  write_file(dir / name / "model.safetensors", weights);
  return dir / name;
}

TEST(Publish, WithoutOverwriteAnythingThereIsKept) {
  TempDir dir;
  const fs::path staged = staged_file(dir, "new.tmp-1", "new");
  write_file(dir / "file", "theirs");
  fs::create_directories(dir / "empty-directory");
  fs::create_symlink(dir / "missing", dir / "dangling-link");
  for (const char* name : {"file", "empty-directory", "dangling-link"}) {
    expect_error([&] { publish(staged, dir / name, OutputKind::File, false, "--out"); },
                 {"--out", (dir / name).string(), "already exists", "--overwrite"});
    EXPECT_TRUE(fs::exists(staged)) << "the staged file is its owner's to remove";
  }
  EXPECT_EQ(read_file(dir / "file"), "theirs");
  EXPECT_TRUE(fs::is_symlink(dir / "dangling-link"));
  // rename() would put a directory in place of an empty one: the publishing step does not.
  const fs::path model = staged_model(dir, "model.tmp-1", "weights");
  expect_error([&] { publish(model, dir / "empty-directory", OutputKind::Directory, false, "the output"); },
               {"already exists"});
  EXPECT_TRUE(fs::is_empty(dir / "empty-directory"));
  EXPECT_FALSE(publish_new(model, dir / "file", OutputKind::Directory));
  ASSERT_TRUE(publish_new(model, dir / "model", OutputKind::Directory));
  EXPECT_EQ(read_file(dir / "model" / "model.safetensors"), "weights");
  EXPECT_FALSE(fs::exists(model));
}

TEST(Publish, OverwriteReplacesARegularFileOnly) {
  TempDir dir;
  const fs::path staged = staged_file(dir, "new.tmp-1", "new");
  fs::create_directories(dir / "directory" / "inner");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  write_file(dir / "target", "target");
  fs::create_symlink(dir / "target", dir / "link");
  for (const auto& [name, kind] : {std::pair<std::string, std::string>{"directory", "is a directory"},
                                   {"fifo", "is a FIFO"},
                                   {"link", "is a symbolic link"}}) {
    const fs::path path = dir / name;  // clang 14 lambdas cannot capture structured bindings
    expect_error([&] { publish(staged, path, OutputKind::File, true, "--json"); },
                 {"--json", path.string(), kind, "regular file only"});
    expect_error([&] { check_replaceable(path, "--json", OutputKind::File, true); }, {kind});
  }
  EXPECT_TRUE(fs::is_directory(dir / "directory" / "inner"));
  EXPECT_TRUE(fs::is_fifo(dir / "fifo"));
  EXPECT_EQ(read_file(dir / "link"), "target");
  EXPECT_TRUE(fs::is_symlink(dir / "link"));
  write_file(dir / "old", "old");
  publish(staged, dir / "old", OutputKind::File, true, "--json");
  EXPECT_EQ(read_file(dir / "old"), "new");
  EXPECT_FALSE(fs::exists(staged));
  // Nothing but the outputs is left in the directory (the replaced file is gone, not moved aside).
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir.path())) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"directory", "fifo", "link", "old", "target"}));
}

TEST(Publish, OverwriteReplacesOnlyADirectoryThatHoldsAModel) {
  TempDir dir;
  fs::create_directories(dir / "photos" / "2024");
  write_file(dir / "photos" / "config.json", "{}");
  fs::create_directories(dir / "notes");
  write_file(dir / "notes" / "todo.txt", "mine");
  write_file(dir / "file", "mine");
  const fs::path staged = staged_model(dir, "new.tmp-1", "new");
  expect_error([&] { publish(staged, dir / "photos", OutputKind::Directory, true, "the output"); },
               {(dir / "photos").string(), "2024, a directory", "model directory only"});
  expect_error([&] { publish(staged, dir / "notes", OutputKind::Directory, true, "the output"); }, {"no config.json"});
  expect_error([&] { publish(staged, dir / "file", OutputKind::Directory, true, "the output"); },
               {"is a regular file", "model directory only"});
  EXPECT_TRUE(fs::is_directory(dir / "photos" / "2024"));
  EXPECT_EQ(read_file(dir / "notes" / "todo.txt"), "mine");
  EXPECT_EQ(read_file(dir / "file"), "mine");
  // An earlier model (config.json and files) and an empty directory are replaced, the old contents removed.
  staged_model(dir, "old", "old");
  write_file(dir / "old" / "model-00002-of-00002.safetensors", "old");
  publish(staged, dir / "old", OutputKind::Directory, true, "the output");
  EXPECT_EQ(read_file(dir / "old" / "model.safetensors"), "new");
  EXPECT_FALSE(fs::exists(dir / "old" / "model-00002-of-00002.safetensors"));
  EXPECT_FALSE(fs::exists(staged));
  fs::create_directories(dir / "empty");
  publish(staged_model(dir, "new.tmp-2", "newer"), dir / "empty", OutputKind::Directory, true, "the output");
  EXPECT_EQ(read_file(dir / "empty" / "model.safetensors"), "newer");
  for (const auto& entry : fs::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
}

TEST(Publish, LinkFallbackRefusesAnExistingFile) {
  TempDir dir;
  const fs::path staged = staged_file(dir, "new.tmp-1", "new");
  write_file(dir / "taken", "theirs");
  expect_error([&] { link_into_place(staged, dir / "taken", "--out"); }, {"already exists"});
  EXPECT_EQ(read_file(dir / "taken"), "theirs");
  EXPECT_TRUE(fs::exists(staged));
  ASSERT_TRUE(link_into_place(staged, dir / "free", "--out"));
  EXPECT_EQ(read_file(dir / "free"), "new");
  EXPECT_FALSE(fs::exists(staged));
}

TEST(Publish, AFailedWriteRemovesItsTemporary) {
  TempDir dir;
  const fs::path out = dir / "big.json";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A file-size limit makes write() fail with EFBIG, as a full disk would with ENOSPC.
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      write_file_atomic(out, std::string(1 << 20, 'x'), false);
    } catch (const Error& e) {
      ::_exit(std::string(e.what()).find(out.string()) != std::string::npos ? 0 : 2);
    }
    ::_exit(1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the write succeeded, 2: the error does not name the output";
  EXPECT_TRUE(fs::is_empty(dir.path())) << "left: " << fs::directory_iterator(dir.path())->path();
}

TEST(Publish, AStagedDirectoryIsRemovedUnlessPublished) {
  TempDir dir;
  fs::path staging;
  {
    StagedDirectory staged(dir / "out");
    staging = staged.path();
    // A fresh name no person would pick, holding the marker that names it.
    const std::string prefix = "out.nvfp4lm-partial-" + std::to_string(::getpid()) + "-";
    const std::string name = staging.filename().string();
    EXPECT_EQ(staging.parent_path(), dir.path());
    EXPECT_EQ(name.rfind(prefix, 0), 0u) << name;
    EXPECT_EQ(name.size(), prefix.size() + 16) << name;
    EXPECT_EQ(read_file(staging / kPartialMarkerFileName), name);
    write_file(staging / "config.json", "{}");
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
  {
    StagedDirectory staged(dir / "out");
    EXPECT_NE(staged.path(), staging);  // a new name each time
    write_file(staged.path() / "config.json", "{}");
    staged.publish(false, "the output");
  }
  EXPECT_EQ(read_file(dir / "out" / "config.json"), "{}");
  EXPECT_FALSE(fs::exists(dir / "out" / kPartialMarkerFileName));  // the output does not carry the marker
  EXPECT_FALSE(fs::exists(staging));
}

TEST(Publish, AStagedDirectoryNeverTakesOrRemovesANameThatExists) {
  TempDir dir;
  // Many staged directories of one output in one process: each a new directory, none removing another.
  std::vector<std::unique_ptr<StagedDirectory>> staged;
  for (int i = 0; i < 20; ++i) {
    staged.push_back(std::make_unique<StagedDirectory>(dir / "out"));
    write_file(staged.back()->path() / "mine", std::to_string(i));
  }
  for (int i = 0; i < 20; ++i) EXPECT_EQ(read_file(staged[static_cast<size_t>(i)]->path() / "mine"), std::to_string(i));
  staged.clear();
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

}  // namespace
}  // namespace nvfp4lm::test::test_publish
