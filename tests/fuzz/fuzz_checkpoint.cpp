// libFuzzer target: a checkpoint's header attributes as pentad checks them
// before reading any tensor (precheck_file, then read_meta). The input
// chooses which meta attributes a well-formed HDF5 file carries, their
// types and values (structure-aware), so the fuzzer exercises pentad's
// checks, not HDF5's parser. Raw bytes as the file (PENTAD_FUZZ_CKPT_RAW=1)
// fuzz HDF5 1.10 itself, which crashes on damaged object headers and global
// heaps (a reproducer: tests/fuzz/known/hdf5_vlen_global_heap.h5).
#include <hdf5.h>
#include <unistd.h>

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "io/checkpoint_internal.hpp"

// checkpoint_common.cpp's collective resolve calls this (checkpoint.cpp,
// with the whole write path); the target never reaches it.
std::string pentad::resolve_checkpoint(const std::string&, const std::string&) { std::abort(); }

namespace {

// Reads the input front to back; past the end it yields zeros / "".
struct Input {
  const uint8_t* p;
  size_t n;
  uint8_t byte() { return n ? (--n, *p++) : 0; }
  int64_t i64() {
    uint64_t v = 0;
    for (int k = 0; k < 8; ++k) v = v << 8 | byte();
    return int64_t(v);
  }
  std::string str() {  // up to the next NUL
    std::string s;
    while (n && *p) s += char(byte());
    byte();
    return s;
  }
};

void str_attr(hid_t f, const char* name, const std::string& value, bool fixed) {
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, fixed ? std::max<size_t>(value.size(), 1) : H5T_VARIABLE);
  const hid_t s = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(f, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
  const char* c = value.c_str();
  H5Awrite(a, t, fixed ? static_cast<const void*>(c) : static_cast<const void*>(&c));
  H5Aclose(a);
  H5Sclose(s);
  H5Tclose(t);
}

void int_attr(hid_t f, const char* name, int64_t value, uint8_t kind) {
  const hid_t type = kind % 3 == 0 ? H5T_NATIVE_INT64 : kind % 3 == 1 ? H5T_NATIVE_UINT64 : H5T_NATIVE_DOUBLE;
  const double d = double(value);
  const hid_t s = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(f, name, type, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, type, kind % 3 == 2 ? static_cast<const void*>(&d) : static_cast<const void*>(&value));
  H5Aclose(a);
  H5Sclose(s);
}

// A well-formed file whose meta attributes the input picks.
bool write_structured(const std::string& path, Input in) {
  const uint8_t present = in.byte(), kinds = in.byte();
  const int64_t version = in.byte() < 200 ? 1 : in.i64(), step = in.i64(), seed = in.i64();
  const std::string format = in.byte() < 200 ? "pentad-checkpoint" : in.str();
  const std::string config = in.str(), layout = in.str(), sig = in.str();
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) return false;
  const bool fixed = kinds & 1;
  if (present & 1) str_attr(f, "format", format, fixed);
  if (present & 2) {
    if (kinds & 2) str_attr(f, "format_version", std::to_string(version), fixed);
    else int_attr(f, "format_version", version, kinds >> 2);
  }
  if (present & 4) int_attr(f, "step", step, kinds >> 4);
  if (present & 8) int_attr(f, "seed", seed, kinds >> 6);
  if (present & 16) str_attr(f, "config", config, fixed);
  if (present & 32) str_attr(f, "layout", layout, fixed);
  if (present & 64) str_attr(f, "model_signature", sig, fixed);
  H5Fclose(f);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/pentad_fuzz_ckpt_" + std::to_string(getpid()) + ".h5";
  static const bool raw = std::getenv("PENTAD_FUZZ_CKPT_RAW") != nullptr;
  static const bool quiet = (H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr), true);  // HDF5's own error print
  (void)quiet;
  if (raw) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return 0;
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else if (!write_structured(path, Input{data, size})) {
    return 0;
  }
  if (pentad::ckpt_detail::precheck_file(path).empty()) {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file >= 0) {
      pentad::CkptMeta meta;
      const std::string problem = pentad::ckpt_detail::read_meta(file, path, &meta);
      // Every problem is a message naming the file.
      if (!problem.empty() && problem.find("checkpoint '") != 0) std::abort();
      H5Fclose(file);
    }
  }
  std::remove(path.c_str());
  return 0;
}
