// safetensors reading and writing (safetensors.hpp). The header is parsed
// and written with nlohmann::json; the reader checks every tensor's offsets
// against the data section and the others' before any tensor is read, so a
// damaged file fails on open with the name of the tensor at fault.
#include "io/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/json.hpp"

namespace pentad::safetensors {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The data section is little-endian and copied as it is.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

constexpr int64_t kMaxHeaderBytes = int64_t{100} << 20;  // the format's own limit

// Bytes per element of every dtype the format defines (0: unknown).
int64_t dtype_bytes(const std::string& d) {
  static const std::map<std::string, int64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
  const auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

// RAII file descriptor for pread.
struct Fd {
  int fd = -1;
  explicit Fd(const std::string& path) : fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// Exactly n bytes at offset, or false.
bool pread_all(int fd, void* dst, int64_t n, int64_t offset) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, size_t(std::min<int64_t>(n, int64_t{1} << 30)), off_t(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= got;
    offset += got;
  }
  return true;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// One header entry into info; "" or the problem.
std::string parse_entry(const std::string& name, const json& v, int64_t data_bytes, TensorInfo* t) {
  if (!v.is_object()) return "its entry is not a JSON object";
  const auto dt = v.find("dtype"), sh = v.find("shape"), off = v.find("data_offsets");
  if (dt == v.end() || !dt->is_string()) return "no string 'dtype'";
  if (sh == v.end() || !sh->is_array()) return "no array 'shape'";
  if (off == v.end() || !off->is_array() || off->size() != 2) return "no [begin, end] 'data_offsets'";
  t->name = name;
  t->dtype = dt->get<std::string>();
  const int64_t esize = dtype_bytes(t->dtype);
  if (esize == 0) return "unknown dtype '" + t->dtype + "'";
  int64_t n = 1;
  for (const json& d : *sh) {
    if (!d.is_number_unsigned()) return "shape " + sh->dump() + " is not a list of non-negative integers";
    const uint64_t x = d.get<uint64_t>();
    if (x > uint64_t(INT64_MAX) || (x > 0 && uint64_t(n) > uint64_t(INT64_MAX) / x))
      return "shape " + sh->dump() + " is too large";
    t->shape.push_back(int64_t(x));
    n *= int64_t(x);
  }
  for (const json& o : *off)
    if (!o.is_number_unsigned() || o.get<uint64_t>() > uint64_t(INT64_MAX))
      return "data_offsets " + off->dump() + " are not non-negative integers";
  t->begin = int64_t((*off)[0].get<uint64_t>());
  t->end = int64_t((*off)[1].get<uint64_t>());
  if (t->begin > t->end) return "data_offsets " + off->dump() + " end before they begin";
  if (t->end > data_bytes)
    return "data_offsets " + off->dump() + " run past the data section (" + std::to_string(data_bytes) +
           " bytes: truncated file?)";
  if (n > INT64_MAX / esize || t->end - t->begin != n * esize)
    return "data_offsets " + off->dump() + " hold " + std::to_string(t->end - t->begin) + " bytes, but " + t->dtype +
           " " + shape_str(t->shape) + " needs " + std::to_string(n * esize);
  return {};
}

}  // namespace

uint16_t to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return uint16_t((u >> 16) | 0x40);  // stays a (quiet) NaN
  return uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);  // round to nearest, ties to even
}

float from_bf16(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

float from_f16(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));  // inf, nan
  if (exp == 0) return (sign ? -1.0f : 1.0f) * std::ldexp(float(man), -24);        // zero, subnormal
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

// ---- Reader ----------------------------------------------------------------

Reader::Reader(const std::string& path) : path_(path) {
  const std::string what = "safetensors file '" + path + "'";
  Fd f(path);
  if (f.fd < 0) throw InputError(what + " cannot be opened: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) throw InputError(what + " is not a regular file");
  const int64_t size = st.st_size;
  uint8_t le[8];
  if (size < 8 || !pread_all(f.fd, le, 8, 0))
    throw InputError(what + " is truncated: " + std::to_string(size) + " bytes, shorter than the 8-byte header size");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | le[i];
  if (n > uint64_t(kMaxHeaderBytes) || int64_t(n) > size - 8)
    throw InputError(what + ": its header size " + std::to_string(n) + " exceeds " +
                     (int64_t(n) > size - 8 ? "the file (" + std::to_string(size) + " bytes: truncated or not safetensors)"
                                            : std::string("the format's 100 MiB limit")));
  std::string text(size_t(n), '\0');
  if (!pread_all(f.fd, text.data(), int64_t(n), 8)) throw InputError(what + ": cannot read its header");
  data_start_ = 8 + int64_t(n);
  const int64_t data_bytes = size - data_start_;

  json h;
  try {
    h = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(what + ": its header is not valid JSON: " + e.what());
  }
  if (!h.is_object()) throw InputError(what + ": its header is not a JSON object");
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) throw InputError(what + ": __metadata__ is not a JSON object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) throw InputError(what + ": __metadata__ value '" + m.key() + "' is not a string");
        metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    TensorInfo t;
    if (std::string err = parse_entry(it.key(), *it, data_bytes, &t); !err.empty())
      throw InputError(what + ": tensor '" + it.key() + "': " + err);
    tensors_.push_back(std::move(t));
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  for (size_t i = 1; i < tensors_.size(); ++i) {
    const TensorInfo &a = tensors_[i - 1], &b = tensors_[i];
    if (b.begin < a.end && b.begin != b.end && a.begin != a.end)
      throw InputError(what + ": tensor '" + b.name + "' (bytes " + std::to_string(b.begin) + ".." +
                       std::to_string(b.end) + ") overlaps tensor '" + a.name + "' (bytes " + std::to_string(a.begin) +
                       ".." + std::to_string(a.end) + ")");
  }
}

const TensorInfo* Reader::find(const std::string& name) const {
  for (const TensorInfo& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<float> Reader::read(const std::string& name) const {
  const std::string what = "safetensors file '" + path_ + "': tensor '" + name + "'";
  const TensorInfo* t = find(name);
  if (!t) throw InputError("safetensors file '" + path_ + "' has no tensor '" + name + "'");
  if (t->dtype != "F32" && t->dtype != "BF16" && t->dtype != "F16")
    throw InputError(what + " has dtype " + t->dtype + "; pentad reads F32, BF16 and F16");
  const int64_t n = numel(t->shape);
  std::vector<float> out(static_cast<size_t>(n));
  Fd f(path_);
  if (f.fd < 0) throw InputError(what + ": cannot open the file: " + std::strerror(errno));
  if (t->dtype == "F32") {
    if (!pread_all(f.fd, out.data(), n * 4, data_start_ + t->begin)) throw InputError(what + ": short read");
    return out;
  }
  std::vector<uint16_t> half(static_cast<size_t>(n));
  if (!pread_all(f.fd, half.data(), n * 2, data_start_ + t->begin)) throw InputError(what + ": short read");
  const bool bf = t->dtype == "BF16";
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t b = half[size_t(i)];
    out[size_t(i)] = bf ? from_bf16(b) : from_f16(b);
  }
  return out;
}

// ---- Model (a file or a directory of shards) -------------------------------

Model::Model(const std::string& path) : path_(path) {
  std::error_code ec;
  std::vector<std::string> files;
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path), single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
    if (fs::exists(index, ec)) {
      const std::string iw = "safetensors index '" + index.string() + "'";
      const auto text = read_text(index.string());
      if (!text) throw InputError(iw + " cannot be read");
      const json j = parse_json(*text, iw);
      const auto wm = j.is_object() ? j.find("weight_map") : j.end();
      if (!j.is_object() || wm == j.end() || !wm->is_object()) throw InputError(iw + " has no object 'weight_map'");
      std::map<std::string, size_t> file_index;
      std::map<std::string, std::string> claimed;  // tensor -> shard named by the index
      for (auto it = wm->begin(); it != wm->end(); ++it) {
        if (!it->is_string()) throw InputError(iw + ": weight_map entry '" + it.key() + "' is not a file name");
        const std::string f = it->get<std::string>();
        if (f.empty() || f.find('/') != std::string::npos)
          throw InputError(iw + ": weight_map entry '" + it.key() + "' names '" + f + "', not a file of the directory");
        if (!file_index.count(f)) {
          file_index[f] = files.size();
          files.push_back((dir / f).string());
        }
        claimed[it.key()] = f;
      }
      for (const std::string& f : files) shards_.push_back(std::make_unique<Reader>(f));
      for (const auto& [tensor, f] : claimed) {
        const size_t s = file_index[f];
        if (!shards_[s]->find(tensor))
          throw InputError(iw + " puts tensor '" + tensor + "' in '" + f + "', which has no such tensor");
        where_[tensor] = s;
      }
      return;
    }
    if (!fs::exists(single, ec))
      throw InputError("'" + path + "' holds neither model.safetensors nor model.safetensors.index.json");
    files.push_back(single.string());
  } else {
    files.push_back(path);
  }
  shards_.push_back(std::make_unique<Reader>(files[0]));
  for (const TensorInfo& t : shards_[0]->tensors()) where_[t.name] = 0;
}

const TensorInfo* Model::find(const std::string& name) const {
  const auto it = where_.find(name);
  return it == where_.end() ? nullptr : shards_[it->second]->find(name);
}

std::vector<std::string> Model::names() const {
  std::vector<std::string> out;
  for (const auto& [n, s] : where_) out.push_back(n);
  return out;
}

std::vector<float> Model::read(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) throw InputError("safetensors model '" + path_ + "' has no tensor '" + name + "'");
  return shards_[it->second]->read(name);
}

// ---- Writer ----------------------------------------------------------------

namespace {

// One file of tensors [lo, hi).
void write_file(const std::string& path, const std::vector<OutTensor>& tensors, size_t lo, size_t hi, OutDtype dtype,
                const std::map<std::string, std::string>& metadata) {
  const int64_t esize = dtype == OutDtype::f32 ? 4 : 2;
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  int64_t off = 0;
  for (size_t i = lo; i < hi; ++i) {
    const int64_t n_bytes = numel(tensors[i].shape) * esize;
    h[tensors[i].name] = {{"dtype", dtype == OutDtype::f32 ? "F32" : "BF16"},
                          {"shape", tensors[i].shape},
                          {"data_offsets", {off, off + n_bytes}}};
    off += n_bytes;
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  AtomicFile out(path);
  const auto put = [&](const void* p, size_t n) {
    if (FsStatus e = out.write(p, n)) throw InputError("writing '" + path + "': " + e->message());
  };
  if (FsStatus e = out.open()) throw InputError("cannot create '" + out.tmp_path() + "': " + std::strerror(e->err));
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  put(le, 8);
  put(text.data(), text.size());
  std::vector<float> buf;
  std::vector<uint16_t> half;
  for (size_t i = lo; i < hi; ++i) {
    const size_t n = size_t(numel(tensors[i].shape));
    buf.assign(n, 0.0f);
    tensors[i].fetch(buf);
    if (buf.size() != n) PENTAD_FATAL("safetensors: tensor '" + tensors[i].name + "' fetched the wrong size");
    if (dtype == OutDtype::f32) {
      put(buf.data(), n * 4);
    } else {
      half.resize(n);
      for (size_t k = 0; k < n; ++k) half[k] = to_bf16(buf[k]);
      put(half.data(), n * 2);
    }
  }
  if (FsStatus e = out.commit()) throw InputError("committing '" + path + "': " + e->message());
}

}  // namespace

std::vector<std::string> write_model(const std::string& dir, const std::vector<OutTensor>& tensors, OutDtype dtype,
                                     const std::map<std::string, std::string>& metadata, int64_t max_shard_bytes) {
  const int64_t esize = dtype == OutDtype::f32 ? 4 : 2;
  // Shards: consecutive tensors while a shard stays under the limit (a
  // tensor larger than the limit gets a shard of its own).
  std::vector<size_t> cuts = {0};
  int64_t in_shard = 0, total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t b = numel(tensors[i].shape) * esize;
    if (in_shard > 0 && in_shard + b > max_shard_bytes) {
      cuts.push_back(i);
      in_shard = 0;
    }
    in_shard += b;
    total += b;
  }
  cuts.push_back(tensors.size());
  const size_t n_shards = cuts.size() - 1;
  std::vector<std::string> names;
  if (n_shards == 1) {
    write_file((fs::path(dir) / "model.safetensors").string(), tensors, 0, tensors.size(), dtype, metadata);
    return {"model.safetensors"};
  }
  json weight_map = json::object();
  for (size_t s = 0; s < n_shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, n_shards);
    write_file((fs::path(dir) / name).string(), tensors, cuts[s], cuts[s + 1], dtype, metadata);
    for (size_t i = cuts[s]; i < cuts[s + 1]; ++i) weight_map[tensors[i].name] = name;
    names.push_back(name);
  }
  const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  const std::string ipath = (fs::path(dir) / "model.safetensors.index.json").string();
  if (FsStatus e = write_file_atomic(ipath, index.dump(2) + "\n"))
    throw InputError("writing '" + ipath + "': " + e->message());
  names.push_back("model.safetensors.index.json");
  return names;
}

}  // namespace pentad::safetensors
