#include "io/checksum.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "core/json_text.h"

namespace nvfp4lm {
namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ull;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ull;

inline uint64_t rotl(uint64_t x, int bits) { return (x << bits) | (x >> (64 - bits)); }

// Little-endian loads (memcpy keeps them alignment-safe; the build targets little-endian hosts only).
inline uint64_t load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t load32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline uint64_t round_lane(uint64_t acc, uint64_t lane) {
  acc += lane * kPrime2;
  acc = rotl(acc, 31);
  return acc * kPrime1;
}

inline uint64_t merge_lane(uint64_t acc, uint64_t lane) {
  acc ^= round_lane(0, lane);
  return acc * kPrime1 + kPrime4;
}

// Consumes whole 32-byte stripes; returns the number of bytes consumed.
inline size_t consume_stripes(uint64_t lanes[4], const unsigned char* p, size_t bytes) {
  size_t done = 0;
  uint64_t a = lanes[0], b = lanes[1], c = lanes[2], d = lanes[3];
  for (; done + 32 <= bytes; done += 32) {
    a = round_lane(a, load64(p + done));
    b = round_lane(b, load64(p + done + 8));
    c = round_lane(c, load64(p + done + 16));
    d = round_lane(d, load64(p + done + 24));
  }
  lanes[0] = a, lanes[1] = b, lanes[2] = c, lanes[3] = d;
  return done;
}

}  // namespace

Xxh64::Xxh64(uint64_t seed) : seed_(seed) {
  lanes_[0] = seed + kPrime1 + kPrime2;
  lanes_[1] = seed + kPrime2;
  lanes_[2] = seed;
  lanes_[3] = seed - kPrime1;
}

void Xxh64::update(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_bytes_ += bytes;
  if (pending_bytes_ > 0) {
    size_t take = std::min(bytes, 32 - pending_bytes_);
    std::memcpy(pending_ + pending_bytes_, p, take);
    pending_bytes_ += take;
    p += take;
    bytes -= take;
    if (pending_bytes_ < 32) return;
    consume_stripes(lanes_, pending_, 32);
    pending_bytes_ = 0;
  }
  size_t done = consume_stripes(lanes_, p, bytes);
  std::memcpy(pending_, p + done, bytes - done);
  pending_bytes_ = bytes - done;
}

uint64_t Xxh64::digest() const {
  uint64_t acc;
  if (total_bytes_ >= 32) {
    acc = rotl(lanes_[0], 1) + rotl(lanes_[1], 7) + rotl(lanes_[2], 12) + rotl(lanes_[3], 18);
    for (uint64_t lane : lanes_) acc = merge_lane(acc, lane);
  } else {
    acc = seed_ + kPrime5;
  }
  acc += total_bytes_;
  const unsigned char* p = pending_;
  size_t left = pending_bytes_;
  for (; left >= 8; p += 8, left -= 8) {
    acc ^= round_lane(0, load64(p));
    acc = rotl(acc, 27) * kPrime1 + kPrime4;
  }
  if (left >= 4) {
    acc ^= static_cast<uint64_t>(load32(p)) * kPrime1;
    acc = rotl(acc, 23) * kPrime2 + kPrime3;
    p += 4, left -= 4;
  }
  for (; left > 0; ++p, --left) {
    acc ^= static_cast<uint64_t>(*p) * kPrime5;
    acc = rotl(acc, 11) * kPrime1;
  }
  acc ^= acc >> 33;
  acc *= kPrime2;
  acc ^= acc >> 29;
  acc *= kPrime3;
  acc ^= acc >> 32;
  return acc;
}

uint64_t xxh64(const void* data, size_t bytes, uint64_t seed) {
  Xxh64 hasher(seed);
  hasher.update(data, bytes);
  return hasher.digest();
}

std::string checksum_hex(uint64_t digest) { return fmt::format("{:016x}", digest); }

std::optional<uint64_t> parse_checksum_hex(std::string_view text) {
  if (text.size() != 16) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return std::nullopt;
    }
    value = (value << 4) | static_cast<uint64_t>(digit);
  }
  return value;
}

FileChecksum checksum_file(const fs::path& path) {
  const int fd = open_input_file(path).fd;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  constexpr size_t kBufferBytes = size_t{4} << 20;
  std::unique_ptr<unsigned char[]> buffer(new unsigned char[kBufferBytes]);
  Xxh64 hasher;
  FileChecksum result;
  for (;;) {
    ssize_t got = ::read(fd, buffer.get(), kBufferBytes);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int saved = errno;
      ::close(fd);
      NVFP4LM_FAIL("reading {} failed: {}", path.string(), std::strerror(saved));
    }
    if (got == 0) break;
    hasher.update(buffer.get(), static_cast<size_t>(got));
    result.bytes += static_cast<uint64_t>(got);
  }
  ::close(fd);
  result.xxh64 = hasher.digest();
  return result;
}

void write_checksum_manifest(const fs::path& dir, const std::vector<std::string>& files) {
  nlohmann::json listed = nlohmann::json::object();
  for (const std::string& name : files) {
    NVFP4LM_ASSERT(name != kChecksumManifestName, "the manifest cannot list itself");
    FileChecksum sum = checksum_file(dir / name);
    listed[name] = {{"bytes", sum.bytes}, {"xxh64", checksum_hex(sum.xxh64)}};
  }
  nlohmann::json manifest = {
      {"format", "nvfp4lm-checksums"}, {"format_version", 1}, {"algorithm", "xxh64"}, {"files", listed}};
  write_file_atomic(dir / kChecksumManifestName, manifest.dump(2) + "\n", /*overwrite=*/true);  // dir's own manifest
}

std::string verify_checksum_manifest(const fs::path& dir, const std::vector<std::string>& required, VerifyLevel level) {
  const fs::path manifest_path = dir / kChecksumManifestName;
  std::error_code ec;
  if (!fs::is_regular_file(manifest_path, ec)) return fmt::format("{} is missing", manifest_path.string());
  nlohmann::json manifest;
  try {
    manifest = read_json_file(manifest_path);
  } catch (const Error& e) {
    return e.what();
  }
  try {  // a key of the wrong type is a problem to report, like a wrong value
    if (!manifest.is_object() ||
        json_field_or(manifest, "format", std::string(), manifest_path.string()) != "nvfp4lm-checksums") {
      return fmt::format("{} is not an nvfp4lm checksum manifest (\"format\" is not \"nvfp4lm-checksums\")",
                         manifest_path.string());
    }
    if (json_field_or(manifest, "format_version", int64_t{-1}, manifest_path.string()) != 1) {
      return fmt::format("{}: unsupported format_version {} (this build reads 1)", manifest_path.string(),
                         manifest.contains("format_version") ? json_excerpt(manifest["format_version"]) : "(missing)");
    }
    if (json_field_or(manifest, "algorithm", std::string(), manifest_path.string()) != "xxh64") {
      return fmt::format("{}: unsupported checksum algorithm (expected \"xxh64\")", manifest_path.string());
    }
  } catch (const Error& e) {
    return e.what();
  }
  if (!manifest.contains("files") || !manifest["files"].is_object()) {
    return fmt::format("{}: \"files\" is missing or not an object", manifest_path.string());
  }
  const nlohmann::json& files = manifest["files"];
  for (const std::string& name : required) {
    if (!files.contains(name)) return fmt::format("{} does not list {}", manifest_path.string(), name);
  }
  for (const auto& [name, entry] : files.items()) {
    // Names come from a file: only plain names inside `dir` are acceptable.
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
      return fmt::format("{}: invalid file name \"{}\"", manifest_path.string(), name);
    }
    const fs::path path = dir / name;
    if (!entry.is_object() || !entry.contains("bytes") || !entry["bytes"].is_number_unsigned() ||
        !entry.contains("xxh64") || !entry["xxh64"].is_string()) {
      return fmt::format("{}: entry for {} needs \"bytes\" (unsigned) and \"xxh64\" (hex string)",
                         manifest_path.string(), name);
    }
    const uint64_t expected_bytes = entry["bytes"].get<uint64_t>();
    const std::optional<uint64_t> expected_sum = parse_checksum_hex(entry["xxh64"].get<std::string>());
    if (!expected_sum) {
      return fmt::format("{}: checksum of {} is not 16 hex digits", manifest_path.string(), name);
    }
    if (!fs::is_regular_file(path, ec)) return fmt::format("{} is missing", path.string());
    const uint64_t actual_bytes = fs::file_size(path, ec);
    if (ec) return fmt::format("cannot stat {}: {}", path.string(), ec.message());
    if (actual_bytes != expected_bytes) {
      return fmt::format("{} has {} bytes, the manifest records {} (truncated or overwritten)", path.string(),
                         actual_bytes, expected_bytes);
    }
    if (level == VerifyLevel::Checksums) {
      FileChecksum actual;
      try {
        actual = checksum_file(path);
      } catch (const Error& e) {
        return e.what();
      }
      if (actual.bytes != expected_bytes || actual.xxh64 != *expected_sum) {
        return fmt::format("{}: checksum {} does not match the manifest's {} (the file is corrupted)", path.string(),
                           checksum_hex(actual.xxh64), checksum_hex(*expected_sum));
      }
    }
  }
  return {};
}

}  // namespace nvfp4lm
