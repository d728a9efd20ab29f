// The fuzz targets that read a path: the input bytes written to a file of
// this process's own (/tmp/pentad_fuzz_<stem>_<pid><ext>), removed after.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace pentad::fuzz {

inline std::string input_path(const std::string& stem, const std::string& ext) {
  return "/tmp/pentad_fuzz_" + stem + "_" + std::to_string(getpid()) + ext;
}

// false when the file cannot be written (the input is then skipped).
inline bool write_input(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  return true;
}

}  // namespace pentad::fuzz
