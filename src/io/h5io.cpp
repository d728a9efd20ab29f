// Serial HDF5 output (rank 0 only) for weight and debug dumps.
#include "io/h5io.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.hpp"

namespace pentad {

static_assert(sizeof(hid_t) == sizeof(int64_t), "hid_t is 64-bit in HDF5 >= 1.10");

H5Writer::H5Writer(const std::string& path) : path_(path), tmp_(path + ".tmp") {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors are reported by us, once
  file_ = H5Fcreate(tmp_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file_ < 0) {
    throw InputError("cannot create HDF5 file '" + tmp_ + "' (is the directory writable?)");
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
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  const hid_t space = HDF5_CHECK(H5Screate_simple(int(dims.size()), dims.data(), nullptr));
  const hid_t lcpl = HDF5_CHECK(H5Pcreate(H5P_LINK_CREATE));
  HDF5_CHECK(H5Pset_create_intermediate_group(lcpl, 1));
  const hid_t ds = H5Dcreate2(file_, name.c_str(), file_type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  if (ds < 0) PENTAD_FATAL("HDF5: cannot create dataset '" + name + "' in " + tmp_);
  if (H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    PENTAD_FATAL("HDF5: cannot write dataset '" + name + "' in " + tmp_);
  H5Dclose(ds);
  H5Pclose(lcpl);
  H5Sclose(space);
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
  // Variable-length UTF-8, which h5py returns as a Python str.
  const hid_t type = HDF5_CHECK(H5Tcopy(H5T_C_S1));
  HDF5_CHECK(H5Tset_size(type, H5T_VARIABLE));
  HDF5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8));
  const hid_t space = HDF5_CHECK(H5Screate(H5S_SCALAR));
  const hid_t a = HDF5_CHECK(H5Acreate2(file_, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT));
  const char* ptr = value.c_str();
  HDF5_CHECK(H5Awrite(a, type, &ptr));
  H5Aclose(a);
  H5Sclose(space);
  H5Tclose(type);
}

void H5Writer::attr(const std::string& name, int64_t value) {
  const hid_t space = HDF5_CHECK(H5Screate(H5S_SCALAR));
  const hid_t a = HDF5_CHECK(H5Acreate2(file_, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT));
  HDF5_CHECK(H5Awrite(a, H5T_NATIVE_INT64, &value));
  H5Aclose(a);
  H5Sclose(space);
}

void H5Writer::commit() {
  if (H5Fclose(file_) < 0) PENTAD_FATAL("HDF5: closing " + tmp_ + " failed");
  file_ = -1;
  const int fd = ::open(tmp_.c_str(), O_RDONLY);
  if (fd < 0 || ::fsync(fd) != 0) PENTAD_FATAL("fsync " + tmp_ + ": " + std::strerror(errno));
  ::close(fd);
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    PENTAD_FATAL("rename " + tmp_ + " -> " + path_ + ": " + std::strerror(errno));
  committed_ = true;
}

std::vector<float> h5_read_floats(const std::string& path, const std::string& name,
                                  std::vector<int64_t>* shape) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) throw InputError("cannot open HDF5 file '" + path + "'");
  const hid_t ds = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  if (ds < 0) {
    H5Fclose(f);
    throw InputError("HDF5 file '" + path + "': no dataset '" + name + "'");
  }
  const hid_t space = H5Dget_space(ds);
  const int nd = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(size_t(nd > 0 ? nd : 0));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  size_t n = 1;
  if (shape) shape->clear();
  for (hsize_t d : dims) {
    n *= size_t(d);
    if (shape) shape->push_back(int64_t(d));
  }
  std::vector<float> out(n);
  const herr_t rc = H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
  H5Sclose(space);
  H5Dclose(ds);
  H5Fclose(f);
  if (rc < 0) throw InputError("HDF5 file '" + path + "': cannot read dataset '" + name + "'");
  return out;
}

}  // namespace pentad
