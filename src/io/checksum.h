// Fast file checksums and the `checksums.json` manifest that makes a directory of outputs verifiable.
//
// The hash is XXH64 (Yann Collet's xxHash, 64-bit variant), implemented here from the published algorithm
// description (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md): not cryptographic, but it
// detects truncation, torn writes and bit rot, and runs at memory speed (several GB/s on one core), so
// verifying a multi-GB checkpoint costs about as much as reading it. Digests are written as 16 lowercase hex
// digits, the same text `xxhsum -H64` prints, so a file can be checked by hand.
//
// Manifest (`checksums.json`, written last into a directory, never listing itself):
//   {"format": "nvfp4lm-checksums", "format_version": 1, "algorithm": "xxh64",
//    "files": {"model.safetensors": {"bytes": 123, "xxh64": "0123456789abcdef"}, ...}}
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nvfp4lm {

namespace fs = std::filesystem;

// Streaming XXH64: feed bytes in any pieces, the digest equals xxh64() of the concatenation.
class Xxh64 {
 public:
  explicit Xxh64(uint64_t seed = 0);
  void update(const void* data, size_t bytes);
  uint64_t digest() const;

 private:
  uint64_t lanes_[4];
  uint64_t seed_;
  uint64_t total_bytes_ = 0;
  unsigned char pending_[32];  // the tail that does not fill a 32-byte stripe yet
  size_t pending_bytes_ = 0;
};

uint64_t xxh64(const void* data, size_t bytes, uint64_t seed = 0);

std::string checksum_hex(uint64_t digest);                          // 16 lowercase hex digits
std::optional<uint64_t> parse_checksum_hex(std::string_view text);  // exactly 16 hex digits

struct FileChecksum {
  uint64_t bytes = 0;
  uint64_t xxh64 = 0;
};

// Reads the whole file sequentially; Error names the path when it cannot be read.
FileChecksum checksum_file(const fs::path& path);

inline constexpr const char* kChecksumManifestName = "checksums.json";

// Hashes `files` (names relative to `dir`, in `dir`) and writes `dir/checksums.json`, fsynced.
// The caller fsyncs/renames the directory.
void write_checksum_manifest(const fs::path& dir, const std::vector<std::string>& files);

enum class VerifyLevel {
  Sizes,      // manifest parses, every listed file exists with its recorded size (cheap)
  Checksums,  // ... and every file's XXH64 matches (reads everything)
};

// Checks `dir` against its manifest, and that every name in `required` is listed. Returns an empty
// string when everything verifies, otherwise one message naming the file and the problem.
std::string verify_checksum_manifest(const fs::path& dir, const std::vector<std::string>& required,
                                     VerifyLevel level = VerifyLevel::Checksums);

}  // namespace nvfp4lm
