// Checkpoint helpers used by the save/load, commit and tool files (see
// checkpoint_internal.hpp): shapes, the meta attributes, the first look at a
// file that may be damaged, and the collectives in which rank 0 works alone
// (mkdir, resolving a path, the tools) while the others wait idly.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "comm/host.hpp"
#include "core/error.hpp"
#include "io/checkpoint_internal.hpp"

namespace pentad::ckpt_detail {

namespace fs = std::filesystem;

int64_t n_elements(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string read_meta(hid_t file, const std::string& path, CkptMeta* meta) {
  const std::string what = "checkpoint '" + path + "'";
  const auto format = h5::read_str_attr(file, "format");
  if (!format || *format != kFormat)
    return what + " is not a pentad checkpoint (attribute 'format' is " +
           (format ? "'" + *format + "'" : std::string("missing")) + ", expected '" + kFormat + "')";
  const auto version = h5::read_int_attr(file, "format_version");
  if (!version) return what + ": attribute 'format_version' is missing";
  if (*version != kFormatVersion)
    return what + " has format_version " + std::to_string(*version) + "; this build reads " +
           std::to_string(kFormatVersion);
  const auto step = h5::read_int_attr(file, "step");
  const auto seed = h5::read_uint_attr(file, "seed");
  const auto config = h5::read_str_attr(file, "config");
  const auto layout = h5::read_str_attr(file, "layout");
  const auto sig = h5::read_str_attr(file, "model_signature");
  if (!step || !seed || !config || !layout || !sig)
    return what + ": a meta attribute (step, seed, config, layout, model_signature) is missing";
  meta->step = *step;
  meta->seed = *seed;
  meta->config_toml = *config;
  meta->layout = *layout;
  meta->model_signature = *sig;
  meta->data_sequences.clear();
  if (const auto seqs = h5::read_str_attr(file, "data_sequences")) {
    const std::string bad = what + ": attribute 'data_sequences' ('" + *seqs +
                            "') is not a list of sequence counts separated by commas";
    size_t pos = 0;
    while (pos <= seqs->size()) {
      const size_t comma = std::min(seqs->find(',', pos), seqs->size());
      const std::string item = seqs->substr(pos, comma - pos);
      if (item.empty() || item.size() > 18 || item.find_first_not_of("0123456789") != std::string::npos) return bad;
      meta->data_sequences.push_back(std::stoll(item));
      pos = comma + 1;
    }
  }
  return {};
}

std::string precheck_file(const std::string& path) {
  const std::string what = "checkpoint '" + path + "'";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return what + " cannot be read: " + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return what + " is not a regular file";
  if (st.st_size == 0) return what + " is empty";
  if (H5Fis_hdf5(path.c_str()) <= 0)
    return what + " is not an HDF5 file (no HDF5 signature: zeroed or damaged header?)";
  h5::Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!f.ok()) return what + " cannot be opened (truncated or damaged file): " + h5::error_detail();
  return {};
}

void make_dir_collective(const std::string& dir, const std::string& what, MPI_Comm comm) {
  std::string err;
  if (host::rank(comm) == 0) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir)) {
      err = what + ": cannot create directory '" + dir + "': " +
            (ec ? ec.message() : std::string("not a directory"));
    } else if (::access(dir.c_str(), W_OK) != 0) {
      err = what + ": directory '" + dir + "' is not writable: " + std::strerror(errno);
    }
  }
  host::idle_barrier(comm);
  agree_or_throw(err.empty(), err, comm);
}

void on_root(MPI_Comm comm, const std::function<void()>& fn) {
  std::string err;
  if (host::rank(comm) == 0) {
    try {
      fn();
    } catch (const InputError& e) {
      err = e.what();
    }
  }
  host::idle_barrier(comm);
  agree_or_throw(err.empty(), err, comm);
}

std::string resolve_collective(const std::string& spec, const std::string& dir, MPI_Comm comm) {
  std::string path;
  on_root(comm, [&] { path = resolve_checkpoint(spec, dir); });
  return host::bcast_string(comm, path, 0);
}

}  // namespace pentad::ckpt_detail
