// Checkpoints (checkpoint.hpp, ARCHITECTURE.md section 8): one parallel-HDF5
// file of global tensors, each a chunked float32 dataset with the Fletcher32
// filter, written collectively (HDF5 requires collective I/O to write
// filtered datasets in parallel) and read back block by block under any
// layout. Commit follows the classic write-temp / fsync / rename / fsync-dir
// protocol, so a crash leaves either the previous checkpoint or the new one.
// Also here: the `pentad ckpt info|export` tools and the preemption signals.
#include "io/checkpoint.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <optional>
#include <type_traits>
#include <toml++/toml.h>

#include "config/config.hpp"
#include "comm/host.hpp"
#include "core/error.hpp"
#include "io/h5io.hpp"

namespace pentad {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "pentad-checkpoint";
constexpr int64_t kFormatVersion = 1;
constexpr int64_t kChunkBytes = int64_t{1} << 20;  // target chunk size (whole rows when they fit)

// ---------------------------------------------------------------------------
// HDF5 handles: closed on scope exit, so an InputError thrown on every rank
// at the same point closes the same objects in the same (collective) order.

class H5Id {
 public:
  H5Id() = default;
  H5Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  H5Id(H5Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  H5Id& operator=(H5Id&& o) noexcept {
    reset();
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = -1;
    return *this;
  }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  ~H5Id() { reset(); }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = -1;
  }
  // Close now and check it (a file close writes metadata: it can fail).
  void close_checked(const std::string& what) {
    const hid_t id = id_;
    id_ = -1;
    if (id >= 0 && close_(id) < 0) PENTAD_FATAL("HDF5: closing " + what + " failed");
  }

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

H5Id plist(hid_t cls) { return {HDF5_CHECK(H5Pcreate(cls)), H5Pclose}; }
H5Id space(const std::vector<hsize_t>& dims) {
  return {HDF5_CHECK(H5Screate_simple(int(dims.size()), dims.data(), nullptr)), H5Sclose};
}

// The innermost message of HDF5's error stack (e.g. "truncated file: eof =
// ..."), for error messages. Call right after the failing call.
std::string h5_error_detail(bool* pipeline = nullptr) {
  struct Walk {
    std::string last;
    bool pline = false;
  } w;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        auto* walk = static_cast<Walk*>(data);
        if (e->desc && *e->desc) walk->last = e->desc;
        if (e->maj_num == H5E_PLINE) walk->pline = true;
        return 0;
      },
      &w);
  if (pipeline) *pipeline = w.pline;
  return w.last;
}

void quiet_hdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }  // we report errors ourselves

// ---------------------------------------------------------------------------
// Attributes

void write_attr(hid_t obj, const char* name, const std::string& value) {
  // Variable-length UTF-8, which h5py returns as a Python str.
  H5Id type(HDF5_CHECK(H5Tcopy(H5T_C_S1)), H5Tclose);
  HDF5_CHECK(H5Tset_size(type.get(), H5T_VARIABLE));
  HDF5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8));
  H5Id sp(HDF5_CHECK(H5Screate(H5S_SCALAR)), H5Sclose);
  H5Id a(HDF5_CHECK(H5Acreate2(obj, name, type.get(), sp.get(), H5P_DEFAULT, H5P_DEFAULT)),
         H5Aclose);
  const char* ptr = value.c_str();
  HDF5_CHECK(H5Awrite(a.get(), type.get(), &ptr));
}

template <class T>
void write_int_attr(hid_t obj, const char* name, T value) {
  static_assert(sizeof(T) == 8);
  const bool is_signed = std::is_signed_v<T>;
  H5Id sp(HDF5_CHECK(H5Screate(H5S_SCALAR)), H5Sclose);
  H5Id a(HDF5_CHECK(H5Acreate2(obj, name, is_signed ? H5T_STD_I64LE : H5T_STD_U64LE, sp.get(),
                               H5P_DEFAULT, H5P_DEFAULT)),
         H5Aclose);
  HDF5_CHECK(H5Awrite(a.get(), is_signed ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64, &value));
}

// Reads of a possibly damaged file: nullopt instead of a fatal error.
std::optional<std::string> read_str_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  H5Id a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  if (!a.ok()) return std::nullopt;
  H5Id ftype(H5Aget_type(a.get()), H5Tclose);
  if (!ftype.ok() || H5Tget_class(ftype.get()) != H5T_STRING) return std::nullopt;
  H5Id mtype(HDF5_CHECK(H5Tcopy(H5T_C_S1)), H5Tclose);
  if (H5Tis_variable_str(ftype.get()) > 0) {
    HDF5_CHECK(H5Tset_size(mtype.get(), H5T_VARIABLE));
    HDF5_CHECK(H5Tset_cset(mtype.get(), H5Tget_cset(ftype.get())));
    char* p = nullptr;
    if (H5Aread(a.get(), mtype.get(), &p) < 0 || !p) return std::nullopt;
    std::string s(p);
    H5free_memory(p);
    return s;
  }
  const size_t n = H5Tget_size(ftype.get());
  std::string s(n, '\0');
  HDF5_CHECK(H5Tset_size(mtype.get(), n));
  if (n == 0 || H5Aread(a.get(), mtype.get(), s.data()) < 0) return std::nullopt;
  s.resize(std::strlen(s.c_str()));
  return s;
}

template <class T = int64_t>
std::optional<T> read_int_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  H5Id a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  if (!a.ok()) return std::nullopt;
  H5Id ftype(H5Aget_type(a.get()), H5Tclose);
  if (!ftype.ok() || H5Tget_class(ftype.get()) != H5T_INTEGER) return std::nullopt;
  T v = 0;
  if (H5Aread(a.get(), std::is_signed_v<T> ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64, &v) < 0)
    return std::nullopt;
  return v;
}

// Meta attributes of an open checkpoint, or the problem ("" when fine).
std::string read_meta(hid_t file, const std::string& path, CkptMeta* meta) {
  const std::string what = "checkpoint '" + path + "'";
  const auto format = read_str_attr(file, "format");
  if (!format || *format != kFormat)
    return what + " is not a pentad checkpoint (attribute 'format' is " +
           (format ? "'" + *format + "'" : std::string("missing")) + ", expected '" + kFormat + "')";
  const auto version = read_int_attr(file, "format_version");
  if (!version) return what + ": attribute 'format_version' is missing";
  if (*version != kFormatVersion)
    return what + " has format_version " + std::to_string(*version) + "; this build reads " +
           std::to_string(kFormatVersion);
  const auto step = read_int_attr(file, "step");
  const auto seed = read_int_attr<uint64_t>(file, "seed");
  const auto config = read_str_attr(file, "config");
  const auto layout = read_str_attr(file, "layout");
  const auto sig = read_str_attr(file, "model_signature");
  if (!step || !seed || !config || !layout || !sig)
    return what + ": a meta attribute (step, seed, config, layout, model_signature) is missing";
  meta->step = *step;
  meta->seed = *seed;
  meta->config_toml = *config;
  meta->layout = *layout;
  meta->model_signature = *sig;
  return {};
}

// ---------------------------------------------------------------------------
// Shapes and names

int64_t n_elements(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// Whole trailing dimensions while they fit in kChunkBytes, so a chunk is a
// block of complete rows for every tensor whose row is under 1 MiB.
std::vector<hsize_t> chunk_dims(const std::vector<int64_t>& shape) {
  const int64_t budget = kChunkBytes / int64_t(sizeof(float));
  std::vector<hsize_t> c(shape.size(), 1);
  int64_t prod = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] <= budget / prod) {
      c[d] = hsize_t(shape[d]);
      prod *= shape[d];
    } else {
      c[d] = hsize_t(std::max<int64_t>(1, budget / prod));
      break;
    }
  }
  return c;
}

// "model/layers/10" sorts after "model/layers/9".
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i2 = i, j2 = j;
      while (i2 < a.size() && std::isdigit(static_cast<unsigned char>(a[i2]))) ++i2;
      while (j2 < b.size() && std::isdigit(static_cast<unsigned char>(b[j2]))) ++j2;
      const std::string na = a.substr(i, i2 - i), nb = b.substr(j, j2 - j);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = i2;
      j = j2;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

// Does the slash-separated path exist (every link on the way)?
bool path_exists(hid_t file, const std::string& name) {
  size_t pos = 0;
  while (true) {
    pos = name.find('/', pos + 1);
    const std::string prefix = name.substr(0, pos);
    if (H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (pos == std::string::npos) return true;
  }
}

uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Local checks of the tensor list: shapes, blocks inside the global shape,
// unique names. "" or the problem.
std::string check_tensors_local(const std::vector<CkptTensor>& tensors) {
  std::vector<std::string> names;
  for (const auto& t : tensors) {
    const std::string what = "checkpoint tensor '" + t.name + "'";
    if (t.name.empty() || t.name[0] == '/' || t.name.back() == '/' ||
        t.name.find("//") != std::string::npos)
      return what + ": a name must be a relative path like 'model/wte'";
    if (t.shape.empty()) return what + ": scalars are not supported (use shape (1,))";
    if (t.local_start.size() != t.shape.size() || t.local_shape.size() != t.shape.size())
      return what + ": local_start/local_shape must have " + std::to_string(t.shape.size()) +
             " dimensions like its shape " + shape_str(t.shape);
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d] < 0 || t.local_start[d] < 0 || t.local_shape[d] < 0 ||
          t.local_start[d] + t.local_shape[d] > t.shape[d])
        return what + ": block start " + shape_str(t.local_start) + " extent " +
               shape_str(t.local_shape) + " is outside its shape " + shape_str(t.shape);
    }
    names.push_back(t.name);
  }
  std::sort(names.begin(), names.end());
  const auto dup = std::adjacent_find(names.begin(), names.end());
  if (dup != names.end()) return "checkpoint tensor '" + *dup + "' is listed twice";
  return {};
}

// Every rank passes the same names and global shapes, in the same order.
// Collective over comm.
void agree_tensor_list(const std::vector<CkptTensor>& tensors, MPI_Comm comm) {
  const std::string local = check_tensors_local(tensors);
  agree_or_throw(local.empty(), local, comm);
  uint64_t h = 14695981039346656037ull;
  for (const auto& t : tensors) {
    h = fnv1a(h, t.name.data(), t.name.size() + 1);
    h = fnv1a(h, t.shape.data(), t.shape.size() * sizeof(int64_t));
  }
  uint64_t mine[2] = {h, ~h}, lo[2] = {0, 0};
  MPI_CHECK(MPI_Allreduce(mine, lo, 2, MPI_UINT64_T, MPI_MIN, comm));
  agree_or_throw(lo[0] == ~lo[1],
                 "checkpoint: the ranks passed different tensor lists (names, shapes or order)", comm);
}

// ---------------------------------------------------------------------------
// POSIX helpers (local failures are fatal)

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), O_RDONLY | (directory ? O_DIRECTORY : 0));
  if (fd < 0) PENTAD_FATAL("open " + path + " for fsync: " + std::strerror(errno));
  if (::fsync(fd) != 0) PENTAD_FATAL("fsync " + path + ": " + std::strerror(errno));
  if (::close(fd) != 0) PENTAD_FATAL("close " + path + ": " + std::strerror(errno));
}

void rename_checked(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    PENTAD_FATAL("rename " + from + " -> " + to + ": " + std::strerror(errno));
}

std::string parent_of(const std::string& path) {
  const std::string p = fs::path(path).parent_path().string();
  return p.empty() ? "." : p;
}

// Small text file, atomically: tmp, fsync, rename, fsync dir.
void write_small_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) PENTAD_FATAL("create " + tmp + ": " + std::strerror(errno));
  if (::write(fd, text.data(), text.size()) != ssize_t(text.size()))
    PENTAD_FATAL("write " + tmp + ": " + std::strerror(errno));
  if (::fsync(fd) != 0) PENTAD_FATAL("fsync " + tmp + ": " + std::strerror(errno));
  if (::close(fd) != 0) PENTAD_FATAL("close " + tmp + ": " + std::strerror(errno));
  rename_checked(tmp, path);
  fsync_path(parent_of(path), true);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

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
  if (!doomed.empty()) fsync_path(dir, true);
}

// A barrier that sleeps instead of spinning, for ranks waiting while one rank
// does serial work (fsync, rename, the tools): on a node with more ranks
// than cores a spinning waiter takes the CPU from the rank doing the work.
// Collective over comm.
void idle_barrier(MPI_Comm comm) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ibarrier(comm, &req));
  for (int done = 0;;) {
    MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    ::usleep(200);
  }
}

// mkdir -p on rank 0; an InputError on every rank if it fails. Collective over comm.
void make_dir_collective(const std::string& dir, const std::string& what, MPI_Comm comm) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  std::string err;
  if (rank == 0) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir)) {
      err = what + ": cannot create directory '" + dir + "': " +
            (ec ? ec.message() : std::string("not a directory"));
    } else if (::access(dir.c_str(), W_OK) != 0) {
      err = what + ": directory '" + dir + "' is not writable: " + std::strerror(errno);
    }
  }
  idle_barrier(comm);
  agree_or_throw(err.empty(), err, comm);
}

// ---------------------------------------------------------------------------
// Parallel file access

H5Id mpio_fapl(MPI_Comm comm, bool collective_metadata) {
  H5Id fapl = plist(H5P_FILE_ACCESS);
  HDF5_CHECK(H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL));
  // v2 object headers and superblock: the file's metadata carries checksums too.
  HDF5_CHECK(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18));
  if (collective_metadata) {
    HDF5_CHECK(H5Pset_all_coll_metadata_ops(fapl.get(), true));
    HDF5_CHECK(H5Pset_coll_metadata_write(fapl.get(), true));
  }
  return fapl;
}

// A file opened or created by every rank of comm, or none: all failed is an
// InputError (same cause everywhere), some failed is a local fault.
void agree_opened(const H5Id& file, const std::string& msg, MPI_Comm comm) {
  const int mine = file.ok() ? 1 : 0;
  int n_ok = 0, n = 0;
  MPI_CHECK(MPI_Allreduce(&mine, &n_ok, 1, MPI_INT, MPI_SUM, comm));
  MPI_CHECK(MPI_Comm_size(comm, &n));
  if (n_ok != 0 && n_ok != n) {
    if (!file.ok()) PENTAD_FATAL(msg + " (on this rank only)");
  }
  agree_or_throw(n_ok == n, msg, comm);
}

// Writes one checkpoint to path + ".tmp", closes it, fsyncs it on every node.
// Collective over comm.
void write_tmp(const std::string& tmp, const CkptMeta& meta, const std::vector<CkptTensor>& tensors,
               MPI_Comm comm) {
  H5Id fapl = mpio_fapl(comm, true);
  H5Id file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
  agree_opened(file, "cannot create checkpoint file '" + tmp + "': " + h5_error_detail(), comm);

  write_attr(file.get(), "format", kFormat);
  write_int_attr(file.get(), "format_version", kFormatVersion);
  write_int_attr(file.get(), "step", meta.step);
  write_int_attr(file.get(), "seed", meta.seed);
  write_attr(file.get(), "config", meta.config_toml);
  write_attr(file.get(), "layout", meta.layout);
  write_attr(file.get(), "model_signature", meta.model_signature);

  H5Id lcpl = plist(H5P_LINK_CREATE);
  HDF5_CHECK(H5Pset_create_intermediate_group(lcpl.get(), 1));
  H5Id dxpl = plist(H5P_DATASET_XFER);
  HDF5_CHECK(H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE));

  std::vector<float> buf;
  for (const auto& t : tensors) {
    const std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
    const int64_t n_global = n_elements(t.shape);
    H5Id dcpl = plist(H5P_DATASET_CREATE);
    if (n_global > 0) {
      const auto chunk = chunk_dims(t.shape);
      HDF5_CHECK(H5Pset_chunk(dcpl.get(), int(chunk.size()), chunk.data()));
      HDF5_CHECK(H5Pset_fletcher32(dcpl.get()));
      HDF5_CHECK(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER));
    }
    H5Id fspace = space(dims);
    H5Id ds(H5Dcreate2(file.get(), t.name.c_str(), H5T_IEEE_F32LE, fspace.get(), lcpl.get(),
                       dcpl.get(), H5P_DEFAULT),
            H5Dclose);
    if (!ds.ok()) PENTAD_FATAL("HDF5: cannot create dataset '" + t.name + "' in " + tmp + ": " + h5_error_detail());

    const int64_t n_local = n_elements(t.local_shape);
    buf.resize(size_t(n_local));
    if (t.get) {
      t.get(buf.data());
    } else if (t.writer && n_local > 0) {
      PENTAD_FATAL("checkpoint tensor '" + t.name + "': a writer without get()");
    }
    if (n_global == 0) continue;  // nothing to write, on every rank

    const bool writes = t.writer && n_local > 0;
    H5Id mspace = space(writes ? std::vector<hsize_t>(t.local_shape.begin(), t.local_shape.end())
                               : std::vector<hsize_t>{1});
    if (writes) {
      const std::vector<hsize_t> start(t.local_start.begin(), t.local_start.end());
      const std::vector<hsize_t> count(t.local_shape.begin(), t.local_shape.end());
      HDF5_CHECK(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr,
                                     count.data(), nullptr));
    } else {
      HDF5_CHECK(H5Sselect_none(fspace.get()));
      HDF5_CHECK(H5Sselect_none(mspace.get()));
    }
    static float dummy = 0;
    if (H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), dxpl.get(),
                 writes ? buf.data() : &dummy) < 0)
      PENTAD_FATAL("HDF5: writing tensor '" + t.name + "' to " + tmp + " failed: " + h5_error_detail());
  }
  file.close_checked(tmp);

  // One rank per node flushes the file: the page cache is per node.
  MPI_Comm node = MPI_COMM_NULL;
  int rank = 0, node_rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  MPI_CHECK(MPI_Comm_rank(node, &node_rank));
  MPI_CHECK(MPI_Comm_free(&node));
  if (node_rank == 0) fsync_path(tmp, false);
  idle_barrier(comm);
}

// Writes every tensor's global shape check and block read; "" or the problem.
std::string read_block(hid_t file, const std::string& path, const CkptTensor& t, std::vector<float>* buf) {
  const std::string what = "checkpoint '" + path + "': tensor '" + t.name + "'";
  if (!path_exists(file, t.name)) return "checkpoint '" + path + "' has no tensor '" + t.name + "'";
  H5Id ds(H5Dopen2(file, t.name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) return what + " is not a dataset or cannot be opened: " + h5_error_detail();
  H5Id type(H5Dget_type(ds.get()), H5Tclose);
  if (!type.ok() || H5Tget_class(type.get()) != H5T_FLOAT || H5Tget_size(type.get()) != 4)
    return what + " is not float32";
  H5Id fspace(H5Dget_space(ds.get()), H5Sclose);
  const int nd = fspace.ok() ? H5Sget_simple_extent_ndims(fspace.get()) : -1;
  if (nd < 0) return what + ": cannot read its shape";
  std::vector<hsize_t> dims(size_t(nd), 0);
  H5Sget_simple_extent_dims(fspace.get(), dims.data(), nullptr);
  const std::vector<int64_t> shape(dims.begin(), dims.end());
  if (shape != t.shape)
    return what + " has shape " + shape_str(shape) + " in the file but this run expects " +
           shape_str(t.shape);

  const int64_t n_local = n_elements(t.local_shape);
  buf->resize(size_t(n_local));
  if (n_local == 0) return {};
  const std::vector<hsize_t> start(t.local_start.begin(), t.local_start.end());
  const std::vector<hsize_t> count(t.local_shape.begin(), t.local_shape.end());
  HDF5_CHECK(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr));
  H5Id mspace = space(count);
  // Independent transfer: a rank that hits a bad chunk returns at once and
  // the error is agreed on outside HDF5, so no rank waits inside it.
  if (H5Dread(ds.get(), H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), H5P_DEFAULT, buf->data()) < 0) {
    bool pipeline = false;
    const std::string detail = h5_error_detail(&pipeline);
    if (pipeline) return what + " failed its checksum (file corrupted)";
    return what + ": read error: " + detail;
  }
  return {};
}

// Rank 0 classifies a file that cannot be opened: a clear message, or "".
std::string precheck_file(const std::string& path) {
  const std::string what = "checkpoint '" + path + "'";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return what + " cannot be read: " + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return what + " is not a regular file";
  if (st.st_size == 0) return what + " is empty";
  if (H5Fis_hdf5(path.c_str()) <= 0)
    return what + " is not an HDF5 file (no HDF5 signature: zeroed or damaged header?)";
  H5Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!f.ok()) return what + " cannot be opened (truncated or damaged file): " + h5_error_detail();
  return {};
}

// Resolve on rank 0, broadcast; InputError on every rank. Collective over comm.
std::string resolve_collective(const std::string& spec, const std::string& dir, MPI_Comm comm) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  std::string path, err;
  if (rank == 0) {
    try {
      path = resolve_checkpoint(spec, dir);
    } catch (const InputError& e) {
      err = e.what();
    }
  }
  idle_barrier(comm);
  agree_or_throw(err.empty(), err, comm);
  int n = int(path.size());
  MPI_CHECK(MPI_Bcast(&n, 1, MPI_INT, 0, comm));
  path.resize(size_t(n));
  MPI_CHECK(MPI_Bcast(path.data(), n, MPI_CHAR, 0, comm));
  return path;
}

// Runs fn on rank 0 (serial HDF5, default driver); an InputError there is
// raised on every rank. Collective over comm.
void on_root(MPI_Comm comm, const std::function<void()>& fn) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  std::string err;
  if (rank == 0) {
    try {
      fn();
    } catch (const InputError& e) {
      err = e.what();
    }
  }
  idle_barrier(comm);
  agree_or_throw(err.empty(), err, comm);
}

// A checkpoint opened serially by one process (tools), meta verified.
struct SerialCkpt {
  H5Id file;
  CkptMeta meta;
  std::vector<std::string> datasets;  // every dataset path, natural order
};

SerialCkpt open_serial(const std::string& path) {
  quiet_hdf5();
  if (std::string err = precheck_file(path); !err.empty()) throw InputError(err);
  SerialCkpt c;
  c.file = H5Id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!c.file.ok()) throw InputError("checkpoint '" + path + "' cannot be opened: " + h5_error_detail());
  if (std::string err = read_meta(c.file.get(), path, &c.meta); !err.empty()) throw InputError(err);
  std::vector<std::string> links;
  if (H5Lvisit(c.file.get(), H5_INDEX_NAME, H5_ITER_INC,
               [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
                 static_cast<std::vector<std::string>*>(data)->push_back(name);
                 return 0;
               },
               &links) < 0)
    throw InputError("checkpoint '" + path + "': cannot list its contents: " + h5_error_detail());
  for (const auto& name : links) {
    H5Id obj(H5Oopen(c.file.get(), name.c_str(), H5P_DEFAULT), H5Oclose);
    if (obj.ok() && H5Iget_type(obj.get()) == H5I_DATASET) c.datasets.push_back(name);
  }
  std::sort(c.datasets.begin(), c.datasets.end(), natural_less);
  return c;
}

// Reads a whole float dataset (verifying its checksums) in row slabs of at
// most ~64 MiB, handing each slab to `sink`.
std::vector<int64_t> read_whole(hid_t file, const std::string& path, const std::string& name,
                                const std::function<void(const float*, int64_t)>& sink) {
  const std::string what = "checkpoint '" + path + "': tensor '" + name + "'";
  H5Id ds(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) throw InputError("checkpoint '" + path + "' has no tensor '" + name + "'");
  H5Id type(H5Dget_type(ds.get()), H5Tclose);
  if (!type.ok() || H5Tget_class(type.get()) != H5T_FLOAT || H5Tget_size(type.get()) != 4)
    throw InputError(what + " is not float32");
  H5Id fspace(H5Dget_space(ds.get()), H5Sclose);
  const int nd = fspace.ok() ? H5Sget_simple_extent_ndims(fspace.get()) : -1;
  if (nd < 1) throw InputError(what + ": cannot read its shape");
  std::vector<hsize_t> dims(size_t(nd), 0);
  H5Sget_simple_extent_dims(fspace.get(), dims.data(), nullptr);
  const std::vector<int64_t> shape(dims.begin(), dims.end());
  const int64_t row = n_elements(shape) / std::max<int64_t>(1, shape[0]);
  const int64_t rows_per_slab = std::max<int64_t>(1, (int64_t{16} << 20) / std::max<int64_t>(1, row));
  std::vector<float> buf;
  for (int64_t r0 = 0; r0 < shape[0] && row > 0; r0 += rows_per_slab) {
    std::vector<hsize_t> start(dims.size(), 0), count = dims;
    start[0] = hsize_t(r0);
    count[0] = hsize_t(std::min(rows_per_slab, shape[0] - r0));
    buf.resize(size_t(int64_t(count[0]) * row));
    HDF5_CHECK(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr));
    H5Id mspace = space(count);
    if (H5Dread(ds.get(), H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), H5P_DEFAULT, buf.data()) < 0) {
      bool pipeline = false;
      const std::string detail = h5_error_detail(&pipeline);
      throw InputError(pipeline ? what + " failed its checksum (file corrupted)"
                                : what + ": read error: " + detail);
    }
    sink(buf.data(), int64_t(buf.size()));
  }
  return shape;
}

// ---------------------------------------------------------------------------
// llm.c export
//
// gpt2_model.bin, as read by llm.c's train_gpt2.c (gpt2_build_from_checkpoint):
//   int32 header[256]: [0] = 20240326 (magic), [1] = 3 (version: float32
//     params), [2] = maxT, [3] = V, [4] = L, [5] = NH, [6] = C,
//     [7] = Vp (V rounded up to a multiple of 128); the rest 0.
//   float32 parameters, each row-major, in this order:
//     wte (Vp, C) rows >= V zero     <- model/wte (V, C)
//     wpe (maxT, C)                  <- model/wpe
//     ln1w, ln1b (L, C)              <- layers/i/attn_norm/w|b
//     qkvw (L, 3C, C)                <- layers/i/attn/wq, wk, wv stacked by rows
//     qkvb (L, 3C)                   <- layers/i/attn/bq, bk, bv
//     attprojw (L, C, C), attprojb   <- layers/i/attn/wo, bo
//     ln2w, ln2b (L, C)              <- layers/i/mlp_norm/w|b
//     fcw (L, 4C, C), fcb (L, 4C)    <- layers/i/mlp/w_up, b_up
//     fcprojw (L, C, 4C), fcprojb    <- layers/i/mlp/w_down, b_down
//     lnfw, lnfb (C)                 <- final_norm/w|b
// Weights are (out, in) as in torch.nn.Linear, like ours; lm_head is wte.

void write_llmc_gpt2(const SerialCkpt& c, const std::string& path, const std::string& out_path,
                     int64_t n_layers, int64_t n_heads) {
  hid_t f = c.file.get();
  const auto has = [&](const std::string& n) {
    return std::find(c.datasets.begin(), c.datasets.end(), n) != c.datasets.end();
  };
  const auto shape_of = [&](const std::string& n) {
    if (!has(n)) throw InputError("checkpoint '" + path + "' has no tensor '" + n + "' (needed by the llm.c export)");
    H5Id ds(HDF5_CHECK(H5Dopen2(f, n.c_str(), H5P_DEFAULT)), H5Dclose);
    H5Id sp(HDF5_CHECK(H5Dget_space(ds.get())), H5Sclose);
    std::vector<hsize_t> d(size_t(std::max(0, H5Sget_simple_extent_ndims(sp.get()))));
    H5Sget_simple_extent_dims(sp.get(), d.data(), nullptr);
    return std::vector<int64_t>(d.begin(), d.end());
  };
  const auto wte = shape_of("model/wte"), wpe = shape_of("model/wpe");
  if (wte.size() != 2 || wpe.size() != 2 || wte[1] != wpe[1])
    throw InputError("checkpoint '" + path + "': model/wte " + shape_str(wte) + " and model/wpe " +
                     shape_str(wpe) + " do not fit GPT-2");
  const int64_t V = wte[0], C = wte[1], maxT = wpe[0], Vp = (V + 127) / 128 * 128;
  if (has("model/lm_head"))
    throw InputError("checkpoint '" + path + "': llm.c's GPT-2 ties lm_head to wte; this model is untied");
  if (n_heads <= 0 || C % n_heads != 0)
    throw InputError("checkpoint '" + path + "': n_heads=" + std::to_string(n_heads) +
                     " does not divide d_model=" + std::to_string(C));
  const std::string l0 = "model/layers/0/mlp/w_up";
  if (n_layers > 0 && shape_of(l0) != std::vector<int64_t>{4 * C, C})
    throw InputError("checkpoint '" + path + "': llm.c's GPT-2 needs d_ff = 4*d_model, but " + l0 +
                     " has shape " + shape_str(shape_of(l0)));
  for (int64_t x : {V, C, maxT, n_layers, n_heads, Vp})
    if (x > INT32_MAX) throw InputError("checkpoint '" + path + "': a dimension exceeds int32 for llm.c");

  const std::string tmp = out_path + ".tmp";
  std::FILE* out = std::fopen(tmp.c_str(), "wb");
  if (!out) throw InputError("cannot create '" + tmp + "': " + std::strerror(errno));
  const auto put = [&](const float* p, int64_t n) {
    if (std::fwrite(p, sizeof(float), size_t(n), out) != size_t(n))
      PENTAD_FATAL("write " + tmp + ": " + std::strerror(errno));
  };
  int32_t header[256] = {};
  header[0] = 20240326;
  header[1] = 3;
  header[2] = int32_t(maxT);
  header[3] = int32_t(V);
  header[4] = int32_t(n_layers);
  header[5] = int32_t(n_heads);
  header[6] = int32_t(C);
  header[7] = int32_t(Vp);
  if (std::fwrite(header, sizeof header, 1, out) != 1) PENTAD_FATAL("write " + tmp + ": " + std::strerror(errno));

  // Each tensor is checked against its llm.c shape before it is copied.
  const auto copy = [&](const std::string& name, const std::vector<int64_t>& want) {
    const auto got = shape_of(name);
    if (got != want)
      throw InputError("checkpoint '" + path + "': tensor '" + name + "' has shape " + shape_str(got) +
                       ", the llm.c export expects " + shape_str(want));
    read_whole(f, path, name, put);
  };
  copy("model/wte", {V, C});
  const std::vector<float> zeros(size_t((Vp - V) * C), 0.0f);
  put(zeros.data(), int64_t(zeros.size()));
  copy("model/wpe", {maxT, C});
  const auto per_layer = [&](std::initializer_list<const char*> leaves, const std::vector<int64_t>& want) {
    for (int64_t l = 0; l < n_layers; ++l)
      for (const char* leaf : leaves) copy("model/layers/" + std::to_string(l) + "/" + leaf, want);
  };
  per_layer({"attn_norm/w"}, {C});
  per_layer({"attn_norm/b"}, {C});
  per_layer({"attn/wq", "attn/wk", "attn/wv"}, {C, C});
  per_layer({"attn/bq", "attn/bk", "attn/bv"}, {C});
  per_layer({"attn/wo"}, {C, C});
  per_layer({"attn/bo"}, {C});
  per_layer({"mlp_norm/w"}, {C});
  per_layer({"mlp_norm/b"}, {C});
  per_layer({"mlp/w_up"}, {4 * C, C});
  per_layer({"mlp/b_up"}, {4 * C});
  per_layer({"mlp/w_down"}, {C, 4 * C});
  per_layer({"mlp/b_down"}, {C});
  copy("model/final_norm/w", {C});
  copy("model/final_norm/b", {C});
  if (std::fflush(out) != 0 || ::fsync(fileno(out)) != 0)
    PENTAD_FATAL("flush " + tmp + ": " + std::strerror(errno));
  if (std::fclose(out) != 0) PENTAD_FATAL("close " + tmp + ": " + std::strerror(errno));
  rename_checked(tmp, out_path);
}

volatile std::sig_atomic_t g_signal = 0;

extern "C" void pentad_on_signal(int sig) { g_signal = sig; }

}  // namespace

// ---------------------------------------------------------------------------
// Public API

std::string write_checkpoint_file(const std::string& path, const CkptMeta& meta,
                                  const std::vector<CkptTensor>& tensors, MPI_Comm comm) {
  quiet_hdf5();
  agree_tensor_list(tensors, comm);

  // Every element written by exactly one writer (counts per tensor).
  std::vector<int64_t> written(tensors.size()), total(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    written[i] = tensors[i].writer ? n_elements(tensors[i].local_shape) : 0;
  MPI_CHECK(MPI_Allreduce(written.data(), total.data(), int(total.size()), MPI_INT64_T, MPI_SUM, comm));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t want = n_elements(tensors[i].shape);
    if (total[i] != want)
      throw InputError("checkpoint tensor '" + tensors[i].name + "': the writers' blocks cover " +
                       std::to_string(total[i]) + " elements of " + std::to_string(want) +
                       " (each block needs exactly one writer)");
  }

  make_dir_collective(parent_of(path), "checkpoint", comm);
  const std::string tmp = path + ".tmp";
  write_tmp(tmp, meta, tensors, comm);
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  if (rank == 0) {
    rename_checked(tmp, path);
    fsync_path(parent_of(path), true);
  }
  idle_barrier(comm);
  return path;
}

std::string save_checkpoint(const std::string& dir, const CkptMeta& meta,
                            const std::vector<CkptTensor>& tensors, int keep, MPI_Comm comm) {
  if (meta.step < 0) throw InputError("checkpoint: negative step " + std::to_string(meta.step));
  char name[64];
  std::snprintf(name, sizeof name, "step_%06lld.h5", static_cast<long long>(meta.step));
  const std::string path = (fs::path(dir) / name).string();
  make_dir_collective(dir, "checkpoint.dir", comm);
  write_checkpoint_file(path, meta, tensors, comm);
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  if (rank == 0) {
    write_small_file_atomic((fs::path(dir) / "latest").string(), std::string(name) + "\n");
    prune(dir, path, keep);
  }
  idle_barrier(comm);
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
  const auto from_pointer = [](const std::string& d) {
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
  };
  struct stat st {};
  if (spec == "latest") {
    file = from_pointer(dir.empty() ? "." : dir);
  } else if (::stat(spec.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    file = from_pointer(spec);
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

CkptMeta load_checkpoint(const std::string& path, const std::string& model_signature,
                         const std::vector<CkptTensor>& tensors, MPI_Comm comm) {
  quiet_hdf5();
  const std::string local = check_tensors_local(tensors);
  agree_or_throw(local.empty(), local, comm);
  on_root(comm, [&] {
    if (std::string err = precheck_file(path); !err.empty()) throw InputError(err);
  });

  // Independent metadata reads: every rank reads what it needs on its own,
  // so a damaged object fails on that rank without stranding the others.
  H5Id fapl = mpio_fapl(comm, false);
  H5Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  agree_opened(file, "checkpoint '" + path + "' cannot be opened: " + h5_error_detail(), comm);

  CkptMeta meta;
  std::string err = read_meta(file.get(), path, &meta);
  if (err.empty() && !model_signature.empty() && meta.model_signature != model_signature)
    err = "checkpoint '" + path + "' was written for another model:\n  checkpoint: " +
          meta.model_signature + "\n  this run:   " + model_signature;
  agree_or_throw(err.empty(), err, comm);

  std::vector<float> buf;
  for (const auto& t : tensors) {
    err = read_block(file.get(), path, t, &buf);
    agree_or_throw(err.empty(), err, comm);
    if (t.set) t.set(buf.data());
  }
  file.close_checked(path);
  return meta;
}

int ckpt_info(const std::string& spec, MPI_Comm comm) {
  const std::string path = resolve_collective(spec, CheckpointConfig{}.dir, comm);
  std::string report;
  on_root(comm, [&] {
    SerialCkpt c = open_serial(path);
    char line[1024];
    report += "checkpoint: " + path + "\n";
    report += "step: " + std::to_string(c.meta.step) + "\n";
    report += "seed: " + std::to_string(c.meta.seed) + "\n";
    report += "layout: " + c.meta.layout + "\n";
    report += "model: " + c.meta.model_signature + "\n";
    report += "tensors:\n";
    size_t width = 0;
    for (const auto& n : c.datasets) width = std::max(width, n.size());
    int64_t n_total = 0;
    for (const auto& n : c.datasets) {
      const auto shape = read_whole(c.file.get(), path, n, [](const float*, int64_t) {});
      const int64_t count = n_elements(shape);
      n_total += count;
      std::snprintf(line, sizeof line, "  %-*s  %-16s %12lld\n", int(width), n.c_str(),
                    shape_str(shape).c_str(), static_cast<long long>(count));
      report += line;
    }
    std::snprintf(line, sizeof line, "total: %zu tensors, %lld elements, %lld bytes (float32)\n",
                  c.datasets.size(), static_cast<long long>(n_total),
                  static_cast<long long>(n_total * 4));
    report += line;
    report += "checksums OK\n";
  });
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  if (rank == 0) std::fputs(report.c_str(), stdout);
  return 0;
}

int ckpt_export(const std::string& spec, const std::string& out_dir, MPI_Comm comm) {
  const std::string path = resolve_collective(spec, CheckpointConfig{}.dir, comm);
  make_dir_collective(out_dir, "ckpt export --to", comm);
  std::string report;
  on_root(comm, [&] {
    SerialCkpt c = open_serial(path);
    toml::table cfg;
    try {
      cfg = toml::parse(c.meta.config_toml, path + ":config");
    } catch (const toml::parse_error& e) {
      throw InputError("checkpoint '" + path + "': its config attribute is not valid TOML: " +
                       std::string(e.description()));
    }
    const std::string family = cfg["model"]["family"].value_or(std::string());

    // model.h5: the same layout as the trainer's final weights file.
    const std::string h5_path = (fs::path(out_dir) / "model.h5").string();
    int n_model = 0;
    {
      H5Writer w(h5_path);
      w.attr("format", "pentad-weights");
      w.attr("format_version", int64_t(1));
      w.attr("step", c.meta.step);
      w.attr("config", c.meta.config_toml);
      w.attr("model_signature", c.meta.model_signature);
      std::vector<float> all;
      for (const auto& n : c.datasets) {
        if (n.rfind("model/", 0) != 0) continue;
        all.clear();
        const auto shape = read_whole(c.file.get(), path, n, [&](const float* p, int64_t k) {
          all.insert(all.end(), p, p + k);
        });
        w.write(n, all.data(), shape);
        ++n_model;
      }
      w.commit();
    }
    report += "wrote " + h5_path + " (" + std::to_string(n_model) + " tensors, step " +
              std::to_string(c.meta.step) + ")\n";

    if (family == "gpt2") {
      const int64_t L = cfg["model"]["n_layers"].value_or(int64_t{-1});
      const int64_t NH = cfg["model"]["n_heads"].value_or(int64_t{-1});
      if (L < 0 || NH <= 0)
        throw InputError("checkpoint '" + path + "': its config lacks model.n_layers / model.n_heads");
      const std::string bin = (fs::path(out_dir) / "gpt2_model.bin").string();
      write_llmc_gpt2(c, path, bin, L, NH);
      report += "wrote " + bin + " (llm.c GPT-2 checkpoint, version 3, float32)\n";
    }
  });
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  if (rank == 0) std::fputs(report.c_str(), stdout);
  return 0;
}

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = pentad_on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGUSR1, SIGTERM})
    if (sigaction(sig, &sa, nullptr) != 0)
      PENTAD_FATAL(std::string("sigaction(") + strsignal(sig) + "): " + std::strerror(errno));
}

bool signal_received() { return g_signal != 0; }

}  // namespace pentad
