// Filesystem helpers shared by every layer: reading a whole file, creating
// directories, the parent of a path, and the one atomic write (temp file +
// fsync + rename + fsync of the directory), so a crash leaves either the old
// file or the complete new one. The POSIX steps report failures as FsError
// values; each caller turns them into its own error path (InputError or fatal).
#pragma once

#include <cstddef>
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

// ---- durable writes -------------------------------------------------------

// The step of a durable write that failed.
enum class FsStep { create, write, open_for_sync, fsync, close, rename };

struct FsError {
  FsStep step = FsStep::create;
  std::string path;  // the file or directory the step acted on (rename: the source)
  std::string to;    // rename only: the destination
  int err = 0;       // errno
  // "fsync a/b.tmp: No space left on device", "rename a.tmp -> a: ...",
  // "open a/ for fsync: ..." (the wording of the checkpoint's fatal errors).
  std::string message() const;
};
using FsStatus = std::optional<FsError>;  // nullopt: the step succeeded

// fsync a file or a directory (open, fsync, close).
[[nodiscard]] FsStatus fsync_path(const std::string& path, bool directory);
// rename(from, to), then fsync of to's directory so the rename itself survives
// a crash.
[[nodiscard]] FsStatus rename_durable(const std::string& from, const std::string& to);
// Commit a finished temporary file written by someone else (a library such
// as HDF5, already closed): fsync it, then rename_durable(tmp, path).
[[nodiscard]] FsStatus commit_file(const std::string& tmp, const std::string& path);

// A file written as `path`.tmp and renamed over `path` by commit(). Destroyed
// without a successful rename (an error, an exception), it closes and removes
// the temporary file, so no half-written file is left behind.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  [[nodiscard]] FsStatus open();  // create (truncate) the temporary file
  [[nodiscard]] FsStatus write(const void* data, size_t n_bytes);
  // fsync, close, rename over `path`, fsync the directory. A failure of the
  // last step (FsStep::open_for_sync/fsync/close on the directory) comes after
  // the rename: the new file is in place, only its durability is in doubt.
  [[nodiscard]] FsStatus commit();

  const std::string& path() const { return path_; }
  const std::string& tmp_path() const { return tmp_; }
  bool renamed() const { return renamed_; }  // the new file is in place

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  bool opened_ = false;   // the temporary file exists (ours to remove)
  bool renamed_ = false;
};

// The whole of `text` to `path`, atomically (AtomicFile).
[[nodiscard]] FsStatus write_file_atomic(const std::string& path, const std::string& text);

}  // namespace pentad
