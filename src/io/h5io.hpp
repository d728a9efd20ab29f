// Small HDF5 writer for weight dumps and debug dumps: global tensors as
// datasets at slash-separated paths (groups created on the way), string
// attributes on the root. The file is written as `path.tmp` and renamed over
// `path` only by commit(), so a crash never leaves a file that looks valid.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pentad {

class H5Writer {
 public:
  // Throws InputError naming the path if it cannot be created.
  explicit H5Writer(const std::string& path);
  ~H5Writer();  // without commit(): closes and removes the temporary file
  H5Writer(const H5Writer&) = delete;
  H5Writer& operator=(const H5Writer&) = delete;

  void write(const std::string& name, const float* data, const std::vector<int64_t>& shape);
  void write(const std::string& name, const int32_t* data, const std::vector<int64_t>& shape);
  void write(const std::string& name, const double* data, const std::vector<int64_t>& shape);
  void attr(const std::string& name, const std::string& value);
  void attr(const std::string& name, int64_t value);
  void commit();  // close, fsync, rename over the final path

 private:
  void write_any(const std::string& name, const void* data, const std::vector<int64_t>& shape,
                 int64_t mem_type, int64_t file_type);
  std::string path_, tmp_;
  int64_t file_ = -1;  // hid_t
  bool committed_ = false;
};

// Read a float dataset (tests, tools). Throws InputError naming file and dataset.
std::vector<float> h5_read_floats(const std::string& path, const std::string& name,
                                  std::vector<int64_t>* shape = nullptr);

}  // namespace pentad
