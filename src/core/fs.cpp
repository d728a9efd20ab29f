// Filesystem helpers (see fs.hpp).
#include "core/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>

namespace pentad {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  // One allocation where the size is known (a regular file; a stream's
  // buffer doubles and is copied, a quarter of the time to load a 17 MB
  // tokenizer.json).
  std::string text;
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) text.reserve(size_t(st.st_size));
  char buf[1 << 16];
  while (f.read(buf, sizeof buf) || f.gcount() > 0) text.append(buf, size_t(f.gcount()));
  if (f.bad()) return std::nullopt;
  return text;
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

// ---- durable writes -------------------------------------------------------

namespace {

FsError fs_error(FsStep step, const std::string& path, int err, const std::string& to = {}) {
  return FsError{step, path, to, err};
}

// The directory to fsync after a rename into `path`'s directory.
std::string dir_of(const std::string& path) {
  const auto p = path.rfind('/');
  if (p == std::string::npos) return ".";
  return p == 0 ? std::string("/") : path.substr(0, p);
}

}  // namespace

std::string FsError::message() const {
  const std::string why = std::strerror(err);
  switch (step) {
    case FsStep::create: return "create " + path + ": " + why;
    case FsStep::write: return "write " + path + ": " + why;
    case FsStep::open_for_sync: return "open " + path + " for fsync: " + why;
    case FsStep::fsync: return "fsync " + path + ": " + why;
    case FsStep::close: return "close " + path + ": " + why;
    case FsStep::rename: return "rename " + path + " -> " + to + ": " + why;
  }
  return path + ": " + why;
}

FsStatus fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) return fs_error(FsStep::open_for_sync, path, errno);
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return fs_error(FsStep::fsync, path, err);
  }
  if (::close(fd) != 0) return fs_error(FsStep::close, path, errno);
  return std::nullopt;
}

FsStatus rename_durable(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) return fs_error(FsStep::rename, from, errno, to);
  return fsync_path(dir_of(to), true);
}

FsStatus commit_file(const std::string& tmp, const std::string& path) {
  if (FsStatus e = fsync_path(tmp, false)) return e;
  return rename_durable(tmp, path);
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!renamed_ && opened_) std::remove(tmp_.c_str());
}

FsStatus AtomicFile::open() {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return fs_error(FsStep::create, tmp_, errno);
  opened_ = true;
  return std::nullopt;
}

FsStatus AtomicFile::write(const void* data, size_t n_bytes) {
  const char* p = static_cast<const char*>(data);
  while (n_bytes > 0) {  // write() may write less than asked (large buffers, signals)
    const ssize_t n = ::write(fd_, p, n_bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fs_error(FsStep::write, tmp_, n < 0 ? errno : EIO);
    p += n;
    n_bytes -= size_t(n);
  }
  return std::nullopt;
}

FsStatus AtomicFile::commit() {
  if (::fsync(fd_) != 0) return fs_error(FsStep::fsync, tmp_, errno);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return fs_error(FsStep::close, tmp_, errno);
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    return fs_error(FsStep::rename, tmp_, errno, path_);
  renamed_ = true;
  return fsync_path(dir_of(path_), true);
}

FsStatus write_file_atomic(const std::string& path, const std::string& text) {
  AtomicFile f(path);
  if (FsStatus e = f.open()) return e;
  if (FsStatus e = f.write(text.data(), text.size())) return e;
  return f.commit();
}

}  // namespace pentad
