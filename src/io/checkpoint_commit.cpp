// Checkpoint commit and retention (checkpoint.hpp): save_checkpoint writes
// step_NNNNNN.h5 through the atomic write of checkpoint.cpp, then points
// <dir>/latest at it (a one-line file, replaced atomically) and prunes old
// steps; resolve_checkpoint follows the pointer and never names a .tmp file.
// A pointer lost or damaged while step files remain is not "no checkpoint":
// the newest step file that verifies is taken, with a warning.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "comm/host.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/checkpoint_internal.hpp"

namespace pentad {

using namespace ckpt_detail;

namespace {

namespace fs = std::filesystem;

// step_<digits>.h5 -> the step, else -1.
int64_t step_of_name(const std::string& name) {
  const std::string pre = "step_", post = ".h5";
  if (name.size() <= pre.size() + post.size() || name.rfind(pre, 0) != 0 || !ends_with(name, post))
    return -1;
  const std::string digits = name.substr(pre.size(), name.size() - pre.size() - post.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char ch) {
        return std::isdigit(static_cast<unsigned char>(ch));
      }))
    return -1;
  return std::stoll(digits);
}

// The step files of directory d (step_N.h5), newest step first, and the
// stale temporaries of killed or failed writers (step_N.h5.tmp).
struct StepFiles {
  std::vector<std::pair<int64_t, std::string>> steps;
  std::vector<std::string> stale;
};

StepFiles list_step_files(const std::string& d, std::error_code* ec) {
  StepFiles out;
  for (const auto& e : fs::directory_iterator(d, *ec)) {
    const std::string name = e.path().filename().string();
    if (ends_with(name, ".h5.tmp") && step_of_name(name.substr(0, name.size() - 4)) >= 0)
      out.stale.push_back(e.path().string());
    else if (step_of_name(name) >= 0)
      out.steps.emplace_back(step_of_name(name), e.path().string());
  }
  std::sort(out.steps.begin(), out.steps.end(), std::greater<>());
  return out;
}

// Unlink `doomed` (already gone is fine), then fsync the directory. Rank 0 only.
void remove_files(const std::string& dir, const std::vector<std::string>& doomed) {
  for (const auto& p : doomed)
    if (::unlink(p.c_str()) != 0 && errno != ENOENT)
      PENTAD_FATAL("delete old checkpoint " + p + ": " + std::strerror(errno));
  if (!doomed.empty())
    if (FsStatus e = fsync_path(dir, true)) PENTAD_FATAL(e->message());
}

// Delete step files beyond the newest `keep` (never `committed`) and stale
// temporaries. Rank 0 only.
void prune(const std::string& dir, const std::string& committed, int keep) {
  std::error_code ec;
  StepFiles files = list_step_files(dir, &ec);
  if (ec) PENTAD_FATAL("listing checkpoint directory " + dir + ": " + ec.message());
  std::vector<std::string> doomed = files.stale;
  if (keep > 0) {
    int kept = 0;
    for (const auto& [step, path] : files.steps) {
      if (path == committed) continue;
      if (++kept >= keep) doomed.push_back(path);  // the committed file takes one slot
    }
  }
  remove_files(dir, doomed);
}

// What <d>/latest names, or why it cannot be followed: `error` is the
// InputError when nothing else can be taken, `why` the same problem phrased
// for the warning of the fallback (resolve_in_dir).
struct Pointer {
  std::string file;
  std::string error, why;  // both "" when `file` is a committed regular file
};

Pointer bad_pointer(std::string error, std::string why) { return {{}, std::move(error), std::move(why)}; }

// The first line of the pointer file, trailing white space removed; a line
// with control characters (a zeroed or overwritten file) is no file name.
Pointer read_pointer(const std::string& d) {
  const std::string pointer = (fs::path(d) / "latest").string();
  std::FILE* f = std::fopen(pointer.c_str(), "r");
  if (!f) {
    const int err = errno;
    return bad_pointer("no committed checkpoint in '" + d + "': cannot read '" + pointer + "': " + std::strerror(err),
                       "checkpoint pointer '" + pointer + "' " +
                           (err == ENOENT ? std::string("is missing") : "cannot be read: " + std::string(std::strerror(err))));
  }
  char buf[4096];
  const size_t n = std::fread(buf, 1, sizeof buf, f);
  const int read_err = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (read_err != 0) {
    const std::string e = "checkpoint pointer '" + pointer + "' cannot be read: " + std::strerror(read_err);
    return bad_pointer(e, e);
  }
  std::string name(buf, n);
  name = name.substr(0, name.find('\n'));
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
  if (name.empty()) {
    const std::string e = "checkpoint pointer '" + pointer + "' is empty";
    return bad_pointer(e, e);
  }
  const bool printable = std::all_of(name.begin(), name.end(), [](char ch) {
    const auto u = static_cast<unsigned char>(ch);
    return u >= 0x20 && u != 0x7f;
  });
  if (!printable || name.size() >= sizeof buf - 1) {
    const std::string e = "checkpoint pointer '" + pointer + "' is damaged (it holds no file name)";
    return bad_pointer(e, e);
  }
  const fs::path p(name);
  const std::string file = (p.is_absolute() ? p : fs::path(d) / p).string();
  const std::string names = "checkpoint pointer '" + pointer + "' names '" + file + "', ";
  struct stat st {};
  if (ends_with(file, ".tmp"))
    return bad_pointer("checkpoint '" + file + "' is an uncommitted temporary file", names + "an uncommitted temporary file");
  if (::stat(file.c_str(), &st) != 0)
    return bad_pointer("checkpoint '" + file + "' does not exist", names + "which does not exist");
  if (!S_ISREG(st.st_mode)) return bad_pointer("checkpoint '" + file + "' is not a file", names + "which is not a file");
  return {file, {}, {}};
}

// "" when `path` opens as a pentad checkpoint with its meta attributes, else
// the problem. Its checksums are verified when it is loaded (or by ckpt info).
std::string quick_verify(const std::string& path) {
  h5::quiet();
  if (std::string err = precheck_file(path); !err.empty()) return err;
  h5::Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!f.ok()) return "checkpoint '" + path + "' cannot be opened: " + h5::error_detail();
  CkptMeta meta;
  return read_meta(f.get(), path, &meta);
}

// The checkpoint directory d's latest: the file its pointer names, or, when
// the pointer is missing or unreadable (a crash, a deleted or overwritten
// file) but step files remain, the newest step file that verifies, with a
// warning saying so (`warn`). Never "starting fresh" past committed files.
std::string resolve_in_dir(const std::string& d, bool warn) {
  const Pointer ptr = read_pointer(d);
  if (ptr.error.empty()) return ptr.file;
  std::error_code ec;
  const StepFiles files = list_step_files(d, &ec);
  if (files.steps.empty()) throw InputError(ptr.error);
  std::string skipped;  // the newest file that does not verify, and why
  int n_skipped = 0;
  for (const auto& [step, path] : files.steps) {
    const std::string problem = quick_verify(path);
    if (problem.empty()) {
      if (warn)
        warn_once_per_job(ptr.why + "; using the newest checkpoint in '" + d + "' that verifies: " + path +
                          (n_skipped ? " (skipped " + std::to_string(n_skipped) + " newer: " + skipped + ")" : ""));
      return path;
    }
    if (n_skipped++ == 0) skipped = problem;
  }
  throw InputError(ptr.error + "; and none of the " + std::to_string(files.steps.size()) + " step files in '" +
                   d + "' verifies (the newest: " + skipped + ")");
}

}  // namespace

std::string save_checkpoint(const std::string& dir, const CkptMeta& meta,
                            const std::vector<CkptTensor>& tensors, int keep, MPI_Comm comm,
                            const CkptWriter& writer) {
  if (meta.step < 0) throw InputError("checkpoint: negative step " + std::to_string(meta.step));
  char name[64];
  std::snprintf(name, sizeof name, "step_%06lld.h5", static_cast<long long>(meta.step));
  const std::string path = (fs::path(dir) / name).string();
  make_dir_collective(dir, "checkpoint.dir", comm);
  // A writer that died on a full disk left its temporary: remove it first,
  // or it holds the space this checkpoint needs. (The other ranks touch the
  // directory only in write_checkpoint_file's collectives, after this.)
  if (host::rank(comm) == 0) {
    std::error_code ec;
    remove_files(dir, list_step_files(dir, &ec).stale);
  }
  write_checkpoint_file(path, meta, tensors, comm, writer);
  if (host::rank(comm) == 0) {
    const std::string pointer = (fs::path(dir) / "latest").string();
    if (FsStatus e = write_file_atomic(pointer, std::string(name) + "\n")) PENTAD_FATAL(e->message());
    prune(dir, path, keep);
  }
  host::idle_barrier(comm);
  return path;
}

std::string latest_checkpoint(const std::string& dir) {
  const std::string d = dir.empty() ? "." : dir;
  struct stat st {};
  if (::stat((fs::path(d) / "latest").c_str(), &st) != 0) {
    std::error_code ec;
    if (list_step_files(d, &ec).steps.empty()) return {};  // nothing committed yet
  }
  return resolve_in_dir(d, false);  // resolve_checkpoint("latest", dir), which warns, follows
}

std::string resolve_checkpoint(const std::string& spec, const std::string& dir) {
  struct stat st {};
  if (spec == "latest") return resolve_in_dir(dir.empty() ? "." : dir, true);
  if (::stat(spec.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return resolve_in_dir(spec, true);
  // DIR/latest names the pointer file itself: DIR's latest (`ckpt export ckpt/latest`).
  if (fs::path(spec).filename() == "latest" && ::stat(spec.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    const std::string d = fs::path(spec).parent_path().string();
    return resolve_in_dir(d.empty() ? "." : d, true);
  }
  const std::string& file = spec;
  if (ends_with(file, ".tmp"))
    throw InputError("checkpoint '" + file + "' is an uncommitted temporary file");
  if (::stat(file.c_str(), &st) != 0)
    throw InputError("checkpoint '" + file + "' does not exist");
  if (!S_ISREG(st.st_mode)) throw InputError("checkpoint '" + file + "' is not a file");
  return file;
}

}  // namespace pentad
