// Checkpoint commit and retention (checkpoint.hpp): save_checkpoint writes
// step_NNNNNN.h5 through the atomic write of checkpoint.cpp, then points
// <dir>/latest at it (a one-line file, replaced atomically) and prunes old
// steps; resolve_checkpoint follows the pointer and never names a .tmp file.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

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

// Delete step files beyond the newest `keep` (never `committed`) and stale
// temporaries of killed writers. Rank 0 only.
void prune(const std::string& dir, const std::string& committed, int keep) {
  std::vector<std::pair<int64_t, std::string>> steps;
  std::vector<std::string> stale;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (ends_with(name, ".h5.tmp") && step_of_name(name.substr(0, name.size() - 4)) >= 0)
      stale.push_back(e.path().string());
    else if (step_of_name(name) >= 0)
      steps.emplace_back(step_of_name(name), e.path().string());
  }
  if (ec) PENTAD_FATAL("listing checkpoint directory " + dir + ": " + ec.message());
  std::sort(steps.begin(), steps.end(), std::greater<>());
  std::vector<std::string> doomed = stale;
  if (keep > 0) {
    int kept = 0;
    for (const auto& [step, path] : steps) {
      if (path == committed) continue;
      if (++kept >= keep) doomed.push_back(path);  // the committed file takes one slot
    }
  }
  for (const auto& p : doomed)
    if (::unlink(p.c_str()) != 0 && errno != ENOENT)
      PENTAD_FATAL("delete old checkpoint " + p + ": " + std::strerror(errno));
  if (!doomed.empty())
    if (FsStatus e = fsync_path(dir, true)) PENTAD_FATAL(e->message());
}

// The file a `latest` pointer in directory d names (relative to d).
std::string read_pointer(const std::string& d) {
  const std::string pointer = (fs::path(d) / "latest").string();
  std::FILE* f = std::fopen(pointer.c_str(), "r");
  if (!f)
    throw InputError("no committed checkpoint in '" + d + "': cannot read '" + pointer +
                     "': " + std::strerror(errno));
  char line[4096] = {};
  const bool got = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  std::string name = got ? line : "";
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
  if (name.empty()) throw InputError("checkpoint pointer '" + pointer + "' is empty");
  const fs::path p(name);
  return (p.is_absolute() ? p : fs::path(d) / p).string();
}

}  // namespace

std::string save_checkpoint(const std::string& dir, const CkptMeta& meta,
                            const std::vector<CkptTensor>& tensors, int keep, MPI_Comm comm) {
  if (meta.step < 0) throw InputError("checkpoint: negative step " + std::to_string(meta.step));
  char name[64];
  std::snprintf(name, sizeof name, "step_%06lld.h5", static_cast<long long>(meta.step));
  const std::string path = (fs::path(dir) / name).string();
  make_dir_collective(dir, "checkpoint.dir", comm);
  write_checkpoint_file(path, meta, tensors, comm);
  if (host::rank(comm) == 0) {
    const std::string pointer = (fs::path(dir) / "latest").string();
    if (FsStatus e = write_file_atomic(pointer, std::string(name) + "\n")) PENTAD_FATAL(e->message());
    prune(dir, path, keep);
  }
  host::idle_barrier(comm);
  return path;
}

std::string latest_checkpoint(const std::string& dir) {
  const std::string pointer = (fs::path(dir) / "latest").string();
  struct stat st {};
  if (::stat(pointer.c_str(), &st) != 0) return {};
  return resolve_checkpoint("latest", dir);
}

std::string resolve_checkpoint(const std::string& spec, const std::string& dir) {
  std::string file;
  struct stat st {};
  if (spec == "latest") {
    file = read_pointer(dir.empty() ? "." : dir);
  } else if (::stat(spec.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    file = read_pointer(spec);
  } else {
    file = spec;
  }
  if (ends_with(file, ".tmp"))
    throw InputError("checkpoint '" + file + "' is an uncommitted temporary file");
  if (::stat(file.c_str(), &st) != 0)
    throw InputError("checkpoint '" + file + "' does not exist");
  if (!S_ISREG(st.st_mode)) throw InputError("checkpoint '" + file + "' is not a file");
  return file;
}

}  // namespace pentad
