// The safetensors format (Hugging Face): an 8-byte little-endian header
// size N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets":
// [begin, end]}, "__metadata__": {str: str}}, then the raw little-endian
// tensors, offsets relative to the end of the header. Writer (float32 or
// bfloat16, sharded with model.safetensors.index.json over a size limit)
// and a strict reader (F32, BF16, F16 converted to float32).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pentad::safetensors {

enum class Dtype { f32, bf16, f16, other };  // other: a dtype the reader sizes but cannot convert

struct TensorInfo {
  std::string name;
  std::string dtype;           // as in the file: "F32", "BF16", ...
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;  // byte offsets into the data section
};

// One .safetensors file, header parsed and validated on open: a truncated or
// malformed header, a tensor whose offsets fall outside the data section or
// overlap another's, or whose byte count does not match dtype x shape, is an
// InputError naming the file (and the tensor).
class Reader {
 public:
  explicit Reader(const std::string& path);
  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in offset order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* find(const std::string& name) const;  // nullptr: absent
  // The tensor as float32, row-major. InputError naming the file and tensor:
  // absent, a dtype other than F32/BF16/F16, or a short read.
  std::vector<float> read(const std::string& name) const;

 private:
  std::string path_;
  int64_t data_start_ = 0;  // 8 + header size
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A model: one .safetensors file, or a directory with model.safetensors or
// model.safetensors.index.json (its weight_map names each tensor's shard).
class Model {
 public:
  explicit Model(const std::string& path);  // InputError: nothing to read, bad index, bad shard
  const std::string& path() const { return path_; }
  // Where name lives (nullptr: absent), and its info.
  const TensorInfo* find(const std::string& name) const;
  std::vector<std::string> names() const;  // every tensor, sorted
  // read() of the shard holding name; absent: an InputError naming the model and tensor.
  std::vector<float> read(const std::string& name) const;
  const Reader& first() const { return *shards_.front(); }

 private:
  std::string path_;
  std::vector<std::unique_ptr<Reader>> shards_;
  std::map<std::string, size_t> where_;  // tensor -> shard
};

// A tensor to write: its name and shape; fetch fills `out` (numel floats).
struct OutTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::function<void(std::vector<float>& out)> fetch;
};

enum class OutDtype { f32, bf16 };  // bf16: round to nearest even (NaN kept quiet)

// Writes DIR/model.safetensors, or, when the tensors exceed max_shard_bytes,
// DIR/model-0000i-of-0000n.safetensors with DIR/model.safetensors.index.json
// (metadata.total_size, weight_map). Each file atomically (core/fs.hpp);
// fetch is called once per tensor, in order, so only one tensor is held.
// Returns the file names written. An I/O failure is an InputError naming
// the file.
std::vector<std::string> write_model(const std::string& dir, const std::vector<OutTensor>& tensors, OutDtype dtype,
                                     const std::map<std::string, std::string>& metadata, int64_t max_shard_bytes);

// bfloat16 <-> float32 (shared with the readers of other bf16 formats).
uint16_t to_bf16(float x);
float from_bf16(uint16_t b);
float from_f16(uint16_t h);

}  // namespace pentad::safetensors
