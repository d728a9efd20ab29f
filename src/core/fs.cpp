// Filesystem helpers (see fs.hpp).
#include "core/fs.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <sstream>

namespace pentad {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return std::nullopt;
  return ss.str();
}

bool make_dirs(const std::string& dir) {
  if (dir.empty()) return true;
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      struct stat st{};
      if (!cur.empty() && ::stat(cur.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return false;
      }
      if (!cur.empty() && ::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
    }
    if (i < dir.size()) cur += dir[i];
  }
  struct stat st{};
  if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return true;
  errno = ENOTDIR;
  return false;
}

std::string parent_dir(const std::string& path) {
  const auto p = path.rfind('/');
  return p == std::string::npos ? std::string() : path.substr(0, p);
}

}  // namespace pentad
