// The one HDF5 layer of pentad: an RAII handle (Id) that closes on scope exit,
// property lists and dataspaces built through it, attribute helpers, and the
// innermost message of HDF5's error stack for error texts. Used by the
// checkpoint (parallel, MPI-IO) and the serial writer (h5io.hpp).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pentad::h5 {

// An HDF5 object handle, closed on scope exit, so an InputError thrown on
// every rank at the same point closes the same objects in the same
// (collective) order.
class Id {
 public:
  Id() = default;
  Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Id(Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Id& operator=(Id&& o) noexcept {
    reset();
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = -1;
    return *this;
  }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  ~Id() { reset(); }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = -1;
  }
  // Close now and check it (a file close writes metadata: it can fail).
  void close_checked(const std::string& what);

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

void quiet();  // errors are reported by us, once: HDF5 prints nothing
Id plist(hid_t cls);
Id space(const std::vector<hsize_t>& dims);  // simple dataspace
Id scalar_space();
// The extent of a dataspace (empty if it cannot be read).
std::vector<int64_t> extent(hid_t space);

// The innermost message of HDF5's error stack (e.g. "truncated file: eof =
// ..."), for error messages. Call right after the failing call. *pipeline is
// set when a filter (the Fletcher32 checksum) failed.
std::string error_detail(bool* pipeline = nullptr);

// Attributes on obj: strings as variable-length UTF-8 (h5py returns a Python
// str), integers as 64-bit little-endian. A failure is fatal (local).
void write_attr(hid_t obj, const char* name, const std::string& value);
void write_attr(hid_t obj, const char* name, int64_t value);
void write_attr(hid_t obj, const char* name, uint64_t value);
// Reads of a possibly damaged file: nullopt instead of a fatal error.
std::optional<std::string> read_str_attr(hid_t obj, const char* name);
std::optional<int64_t> read_int_attr(hid_t obj, const char* name);
std::optional<uint64_t> read_uint_attr(hid_t obj, const char* name);

// Does the slash-separated path exist (every link on the way)?
bool path_exists(hid_t file, const std::string& name);

}  // namespace pentad::h5
