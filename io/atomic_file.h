// io/atomic_file.h: whole-file reads and crash-safe writes. A write goes to a temporary file in
// the same directory, is fsynced and renamed over the target, so a crash or a failed write leaves
// the old file whole (or no file), never a half-written one.
#pragma once
#include <string>
#include <string_view>

namespace engine {

// Writes `bytes` to `path` atomically: temporary "<path>.tmp.<pid>.<n>", fsync, rename over
// `path`, fsync of the directory. On failure removes the temporary file and throws engine::Error
// naming the path and the system's reason. New files get mode 0666 less the umask.
void write_file_atomic(const std::string& path, std::string_view bytes);

// Returns the whole content of `path`; throws engine::Error naming the path and the reason.
std::string read_file(const std::string& path);

}  // namespace engine
