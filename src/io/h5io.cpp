// Serial HDF5 output (rank 0 only) for weight and debug dumps, through the
// HDF5 layer of h5.hpp; the finished file is committed by core/fs.hpp
// (fsync, rename, fsync of the directory). file_ stays a raw hid_t so that
// h5io.hpp does not include hdf5.h.
#include "io/h5io.hpp"

#include <cstdio>
#include <utility>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/h5.hpp"

namespace pentad {

static_assert(sizeof(hid_t) == sizeof(int64_t), "hid_t is 64-bit in HDF5 >= 1.10");

H5Writer::H5Writer(const std::string& path) : path_(path), tmp_(path + ".tmp") {
  h5::quiet();
  file_ = H5Fcreate(tmp_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file_ < 0) {
    const std::string detail = h5::error_detail();
    std::remove(tmp_.c_str());  // a full disk can fail the create after the file appeared
    throw InputError("cannot create HDF5 file '" + tmp_ + "' (is the directory writable?)" +
                     (detail.empty() ? "" : ": " + detail));
  }
}

H5Writer::~H5Writer() {
  if (!committed_) {
    if (file_ >= 0) H5Fclose(file_);
    std::remove(tmp_.c_str());
  }
}

void H5Writer::write_any(const std::string& name, const void* data,
                         const std::vector<int64_t>& shape, int64_t mem_type, int64_t file_type) {
  h5::Id sp = h5::space(std::vector<hsize_t>(shape.begin(), shape.end()));
  h5::Id lcpl = h5::plist(H5P_LINK_CREATE);
  HDF5_CHECK(H5Pset_create_intermediate_group(lcpl.get(), 1));
  h5::Id ds(H5Dcreate2(file_, name.c_str(), file_type, sp.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
  if (!ds.ok()) PENTAD_FATAL("HDF5: cannot create dataset '" + name + "' in " + tmp_ + ": " + h5::error_detail());
  if (H5Dwrite(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    PENTAD_FATAL("HDF5: cannot write dataset '" + name + "' in " + tmp_ + ": " + h5::error_detail());
}

void H5Writer::write(const std::string& name, const float* data, const std::vector<int64_t>& shape) {
  write_any(name, data, shape, H5T_NATIVE_FLOAT, H5T_IEEE_F32LE);
}
void H5Writer::write(const std::string& name, const int32_t* data, const std::vector<int64_t>& shape) {
  write_any(name, data, shape, H5T_NATIVE_INT32, H5T_STD_I32LE);
}
void H5Writer::write(const std::string& name, const double* data, const std::vector<int64_t>& shape) {
  write_any(name, data, shape, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE);
}

void H5Writer::attr(const std::string& name, const std::string& value) {
  h5::write_attr(file_, name.c_str(), value);
}

void H5Writer::attr(const std::string& name, int64_t value) { h5::write_attr(file_, name.c_str(), value); }

void H5Writer::commit() {
  const hid_t file = std::exchange(file_, -1);  // closed (or abandoned) either way
  if (H5Fclose(file) < 0) PENTAD_FATAL("HDF5: closing " + tmp_ + " failed: " + h5::error_detail());
  if (FsStatus e = commit_file(tmp_, path_)) PENTAD_FATAL(e->message());
  committed_ = true;
}

std::vector<float> h5_read_floats(const std::string& path, const std::string& name,
                                  std::vector<int64_t>* shape) {
  h5::quiet();
  h5::Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!f.ok()) throw InputError("cannot open HDF5 file '" + path + "'");
  h5::Id ds(H5Dopen2(f.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) throw InputError("HDF5 file '" + path + "': no dataset '" + name + "'");
  h5::Id sp(H5Dget_space(ds.get()), H5Sclose);
  const std::vector<int64_t> dims = h5::extent(sp.get());
  size_t n = 1;
  for (int64_t d : dims) n *= size_t(d);
  if (shape) *shape = dims;
  std::vector<float> out(n);
  if (H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    throw InputError("HDF5 file '" + path + "': cannot read dataset '" + name + "'");
  return out;
}

}  // namespace pentad
