// Filesystem helpers shared by every layer: reading a whole file, creating
// directories, and the parent of a path. (The one atomic write, temp file +
// fsync + rename + fsync of the directory, lives here too.)
#pragma once

#include <optional>
#include <string>

namespace pentad {

// The whole file, or nullopt if it cannot be opened or read.
std::optional<std::string> read_text(const std::string& path);
// mkdir -p; false (errno set) when a directory cannot be created or a
// component exists and is not a directory.
bool make_dirs(const std::string& dir);
// "a/b/c.h5" -> "a/b"; "c.h5" -> "" (the current directory).
std::string parent_dir(const std::string& path);

}  // namespace pentad
