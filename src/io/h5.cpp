// The HDF5 layer (see h5.hpp): handles, spaces, attributes, error details.
#include "io/h5.hpp"

#include <cstring>

#include "core/error.hpp"

namespace pentad::h5 {

namespace {
// HDF5 installs an atexit handler that closes every file still open. On the
// fatal path that handler can run inside MPI_Abort (MPICH's abort ends the
// process with exit()) and flush an MPI-IO file through a dying MPI: a
// segfault in H5F__close_cb instead of the fatal message and rc 3. Every file
// here is closed by its owner (Id), and the parallel library still shuts down
// in MPI_Finalize (its MPI_COMM_SELF callback), so the handler is not needed.
// H5dont_atexit only works before the library starts: hence a static
// initialiser, which runs before main.
[[maybe_unused]] const herr_t g_no_atexit_handler = H5dont_atexit();
}  // namespace

void Id::close_checked(const std::string& what) {
  const hid_t id = id_;
  id_ = -1;
  if (id >= 0 && close_(id) < 0) PENTAD_FATAL("HDF5: closing " + what + " failed: " + error_detail());
}

void quiet() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

Id plist(hid_t cls) { return {HDF5_CHECK(H5Pcreate(cls)), H5Pclose}; }

Id space(const std::vector<hsize_t>& dims) {
  return {HDF5_CHECK(H5Screate_simple(int(dims.size()), dims.data(), nullptr)), H5Sclose};
}

Id scalar_space() { return {HDF5_CHECK(H5Screate(H5S_SCALAR)), H5Sclose}; }

std::vector<int64_t> extent(hid_t sp) {
  const int nd = H5Sget_simple_extent_ndims(sp);
  std::vector<hsize_t> d(size_t(nd > 0 ? nd : 0));
  if (nd > 0 && H5Sget_simple_extent_dims(sp, d.data(), nullptr) < 0) return {};
  return std::vector<int64_t>(d.begin(), d.end());
}

std::string error_detail(bool* pipeline) {
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
  // The POSIX driver's text ("file write failed: time = ..., filename = ...,
  // errno = 28, error message = 'No space left on device', buf = 0x...")
  // shortened to its operation and reason: "file write failed: No space left
  // on device" (the caller names the file).
  const auto reason = w.last.find("error message = '");
  if (reason != std::string::npos) {
    const size_t from = reason + std::strlen("error message = '");
    const size_t to = w.last.find('\'', from);
    const std::string what = w.last.substr(0, w.last.find(": time ="));
    if (to != std::string::npos) return what + ": " + w.last.substr(from, to - from);
  }
  return w.last;
}

namespace {

// The file obj belongs to, for error messages ("?" if HDF5 cannot say).
std::string file_name_of(hid_t obj) {
  const ssize_t n = H5Fget_name(obj, nullptr, 0);
  if (n <= 0) return "?";
  std::string s(size_t(n) + 1, '\0');
  H5Fget_name(obj, s.data(), s.size());
  s.resize(size_t(n));
  return s;
}

// One scalar attribute of `file_type`; creating or writing it can touch the
// disk (metadata cache eviction), so a failure names the file.
void write_scalar_attr(hid_t obj, const char* name, hid_t file_type, hid_t mem_type, const void* value) {
  Id sp = scalar_space();
  Id a(H5Acreate2(obj, name, file_type, sp.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!a.ok() || H5Awrite(a.get(), mem_type, value) < 0)
    PENTAD_FATAL("HDF5: writing attribute '" + std::string(name) + "' to " + file_name_of(obj) +
                 " failed: " + error_detail());
}

}  // namespace

void write_attr(hid_t obj, const char* name, const std::string& value) {
  Id type(HDF5_CHECK(H5Tcopy(H5T_C_S1)), H5Tclose);
  HDF5_CHECK(H5Tset_size(type.get(), H5T_VARIABLE));
  HDF5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8));
  const char* ptr = value.c_str();
  write_scalar_attr(obj, name, type.get(), type.get(), &ptr);
}

namespace {

void write_int64_attr(hid_t obj, const char* name, hid_t file_type, hid_t mem_type, const void* value) {
  write_scalar_attr(obj, name, file_type, mem_type, value);
}

// An integer attribute read as a 64-bit `mem_type`; nullopt if absent or not an integer.
template <class T>
std::optional<T> read_int64_attr(hid_t obj, const char* name, hid_t mem_type) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  Id a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  if (!a.ok()) return std::nullopt;
  Id ftype(H5Aget_type(a.get()), H5Tclose);
  if (!ftype.ok() || H5Tget_class(ftype.get()) != H5T_INTEGER) return std::nullopt;
  T v = 0;
  if (H5Aread(a.get(), mem_type, &v) < 0) return std::nullopt;
  return v;
}

}  // namespace

void write_attr(hid_t obj, const char* name, int64_t value) {
  write_int64_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

void write_attr(hid_t obj, const char* name, uint64_t value) {
  write_int64_attr(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &value);
}

std::optional<std::string> read_str_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  Id a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  if (!a.ok()) return std::nullopt;
  Id ftype(H5Aget_type(a.get()), H5Tclose);
  if (!ftype.ok() || H5Tget_class(ftype.get()) != H5T_STRING) return std::nullopt;
  Id mtype(HDF5_CHECK(H5Tcopy(H5T_C_S1)), H5Tclose);
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

std::optional<int64_t> read_int_attr(hid_t obj, const char* name) {
  return read_int64_attr<int64_t>(obj, name, H5T_NATIVE_INT64);
}

std::optional<uint64_t> read_uint_attr(hid_t obj, const char* name) {
  return read_int64_attr<uint64_t>(obj, name, H5T_NATIVE_UINT64);
}

bool path_exists(hid_t file, const std::string& name) {
  size_t pos = 0;
  while (true) {
    pos = name.find('/', pos + 1);
    const std::string prefix = name.substr(0, pos);
    if (H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (pos == std::string::npos) return true;
  }
}

}  // namespace pentad::h5
