// checkpoint.init_from (init_from.hpp). A pentad checkpoint is read by
// load_checkpoint itself (the resume path: parallel hyperslabs), limited to
// its model/ tensors. A Hugging Face or llm.c file is read by rank 0, one
// pentad global tensor at a time built by the source's rules, broadcast over
// the job in slabs, and each rank hands its block to the tensor's set(): the
// blocks, and which rank holds what, are the resume path's CkptTensor list.
#include "io/init_from.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "comm/host.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/checkpoint_internal.hpp"
#include "io/hf_import.hpp"
#include "io/safetensors.hpp"

namespace pentad {

namespace {

namespace fs = std::filesystem;
using ckpt_detail::n_elements;
using ckpt_detail::shape_str;

constexpr int32_t kLlmcMagic = 20240326;

// A source of pentad global tensors, read on rank 0.
class Source {
 public:
  virtual ~Source() = default;
  // The whole tensor `name` of global shape `shape`, row-major; InputError
  // naming the file, the tensor and both shapes when it cannot be built.
  virtual std::vector<float> tensor(const std::string& name, const std::vector<int64_t>& shape) = 0;
  // After every tensor: the source's tensors nobody asked for ("" = none).
  virtual std::string unused() const { return {}; }
  virtual std::string describe() const = 0;
};

// ---- Hugging Face (io/hf_import.hpp) -----------------------------------------

class HfSource : public Source {
 public:
  HfSource(const std::string& path, const ModelConfig& m)
      : in_(path, m, "checkpoint.init_from = '" + path + "'", "checkpoint.init_from: ") {}
  std::vector<float> tensor(const std::string& name, const std::vector<int64_t>& shape) override {
    return in_.tensor(name, shape);
  }
  std::string unused() const override { return in_.unused(); }
  std::string describe() const override { return in_.describe(); }

 private:
  hf::Import in_;
};

// ---- llm.c -----------------------------------------------------------------

// gpt2_model.bin as llm.c's train_gpt2.c reads it (llmc_export.cpp has the
// layout): 256 int32 header, then the parameters in float32 (version 3) or
// bfloat16 (version 5); wte has Vp >= V rows.
class LlmcSource : public Source {
 public:
  LlmcSource(const std::string& path, const ModelConfig& m) : path_(path), in_(path, std::ios::binary) {
    const std::string what = "checkpoint.init_from = '" + path + "' (llm.c)";
    int32_t h[256] = {};
    if (!in_.read(reinterpret_cast<char*>(h), sizeof h)) throw InputError(what + ": shorter than its 1024-byte header");
    if (h[0] != kLlmcMagic) throw InputError(what + ": magic " + std::to_string(h[0]) + ", expected 20240326");
    if (h[1] != 3 && h[1] != 5)
      throw InputError(what + ": version " + std::to_string(h[1]) + "; pentad reads 3 (float32) and 5 (bfloat16)");
    bf16_ = h[1] == 5;
    const int64_t maxT = h[2], V = h[3], L = h[4], NH = h[5], C = h[6], Vp = h[7];
    if (m.family != Family::gpt2) throw InputError(what + ": an llm.c file is a GPT-2, but the deck has model.family = llama");
    if (m.n_experts > 0) throw InputError(what + ": an llm.c GPT-2 is dense, but the deck has model.n_experts > 0");
    if (!m.tied()) throw InputError(what + ": llm.c's GPT-2 ties lm_head to wte, but the deck has model.tied_embeddings = false");
    const std::pair<const char*, std::pair<int64_t, int64_t>> same[] = {
        {"model.vocab_size (header V)", {V, m.vocab_size}}, {"model.n_layers (header L)", {L, m.n_layers}},
        {"model.n_heads (header NH)", {NH, m.n_heads}},     {"model.d_model (header C)", {C, m.d_model}},
        {"model.d_ff (4 C)", {4 * C, m.d_ff}}};
    for (const auto& [key, v] : same)
      if (v.first != v.second)
        throw InputError(what + ": the file has " + key + " = " + std::to_string(v.first) + " but the deck " +
                         std::to_string(v.second));
    if (m.seq_len > maxT)
      throw InputError(what + ": the file's position table has maxT = " + std::to_string(maxT) +
                       " rows, fewer than the deck's model.seq_len = " + std::to_string(m.seq_len));
    if (Vp < V) throw InputError(what + ": padded vocabulary Vp = " + std::to_string(Vp) + " < V = " + std::to_string(V));
    // Element offsets of llm.c's tensors, in file order.
    int64_t off = 0;
    auto next = [&](int64_t n) { const int64_t at = off; off += n; return at; };
    const int64_t wte = next(Vp * C), wpe = next(maxT * C), ln1w = next(L * C), ln1b = next(L * C),
                  qkvw = next(L * 3 * C * C), qkvb = next(L * 3 * C), aw = next(L * C * C), ab = next(L * C),
                  ln2w = next(L * C), ln2b = next(L * C), fcw = next(L * 4 * C * C), fcb = next(L * 4 * C),
                  pw = next(L * C * 4 * C), pb = next(L * C), lnfw = next(C), lnfb = next(C);
    struct stat st {};
    const int64_t want_bytes = 1024 + off * (bf16_ ? 2 : 4);
    if (::stat(path.c_str(), &st) != 0 || int64_t(st.st_size) != want_bytes)
      throw InputError(what + ": " + std::to_string(int64_t(st.st_size)) + " bytes, but its header's model needs " +
                       std::to_string(want_bytes) + " (truncated, or another layout?)");
    at_["model/wte"] = {wte, V * C};  // padded rows V..Vp-1 dropped
    at_["model/wpe"] = {wpe, int64_t(m.seq_len) * C};
    for (int64_t l = 0; l < L; ++l) {
      const std::string p = "model/layers/" + std::to_string(l) + "/";
      at_[p + "attn_norm/w"] = {ln1w + l * C, C};
      at_[p + "attn_norm/b"] = {ln1b + l * C, C};
      at_[p + "attn/wq"] = {qkvw + l * 3 * C * C, C * C};
      at_[p + "attn/wk"] = {qkvw + l * 3 * C * C + C * C, C * C};
      at_[p + "attn/wv"] = {qkvw + l * 3 * C * C + 2 * C * C, C * C};
      at_[p + "attn/bq"] = {qkvb + l * 3 * C, C};
      at_[p + "attn/bk"] = {qkvb + l * 3 * C + C, C};
      at_[p + "attn/bv"] = {qkvb + l * 3 * C + 2 * C, C};
      at_[p + "attn/wo"] = {aw + l * C * C, C * C};
      at_[p + "attn/bo"] = {ab + l * C, C};
      at_[p + "mlp_norm/w"] = {ln2w + l * C, C};
      at_[p + "mlp_norm/b"] = {ln2b + l * C, C};
      at_[p + "mlp/w_up"] = {fcw + l * 4 * C * C, 4 * C * C};
      at_[p + "mlp/b_up"] = {fcb + l * 4 * C, 4 * C};
      at_[p + "mlp/w_down"] = {pw + l * C * 4 * C, 4 * C * C};
      at_[p + "mlp/b_down"] = {pb + l * C, C};
    }
    at_["model/final_norm/w"] = {lnfw, C};
    at_["model/final_norm/b"] = {lnfb, C};
    desc_ = "llm.c GPT-2, version " + std::to_string(h[1]) + (bf16_ ? " (bfloat16)" : " (float32)") +
            (Vp > V ? ", " + std::to_string(Vp - V) + " padded vocabulary rows dropped" : std::string());
  }

  std::vector<float> tensor(const std::string& name, const std::vector<int64_t>& shape) override {
    const auto it = at_.find(name);
    if (it == at_.end())
      throw InputError("checkpoint.init_from = '" + path_ + "' (llm.c) has no tensor for the deck's '" + name + "'");
    const auto [offset, count] = it->second;
    if (count != n_elements(shape))
      PENTAD_FATAL("llm.c import: tensor '" + name + "' " + shape_str(shape) + " vs " + std::to_string(count));
    std::vector<float> out(static_cast<size_t>(count));
    const int64_t esize = bf16_ ? 2 : 4;
    in_.seekg(std::streamoff(1024 + offset * esize));
    if (!bf16_) {
      in_.read(reinterpret_cast<char*>(out.data()), std::streamsize(count * 4));
    } else {
      std::vector<uint16_t> half(static_cast<size_t>(count));
      in_.read(reinterpret_cast<char*>(half.data()), std::streamsize(count * 2));
      for (int64_t i = 0; i < count; ++i) out[size_t(i)] = safetensors::from_bf16(half[size_t(i)]);
    }
    if (!in_) throw InputError("checkpoint.init_from = '" + path_ + "': reading tensor '" + name + "' failed");
    return out;
  }
  std::string describe() const override { return desc_; }

 private:
  std::string path_, desc_;
  std::ifstream in_;
  bool bf16_ = false;
  std::map<std::string, std::pair<int64_t, int64_t>> at_;  // pentad tensor -> (element offset, count)
};

// ---- dispatch --------------------------------------------------------------

enum class Kind { hf, llmc, pentad };

// What spec is (rank 0): its kind and the path to read.
Kind classify(const std::string& spec, std::string* path) {
  const std::string what = "checkpoint.init_from = '" + spec + "'";
  struct stat st {};
  if (::stat(spec.c_str(), &st) != 0) throw InputError(what + ": " + std::strerror(errno));
  *path = spec;
  if (S_ISDIR(st.st_mode)) {
    if (hf::is_model_dir(spec)) return Kind::hf;
    *path = resolve_checkpoint(spec, spec);  // a pentad checkpoint directory: its latest
    return Kind::pentad;
  }
  if (fs::path(spec).filename() == "latest") {  // a checkpoint directory's pointer file
    *path = resolve_checkpoint(spec, "");
    return Kind::pentad;
  }
  unsigned char head[8] = {};
  std::ifstream f(spec, std::ios::binary);
  f.read(reinterpret_cast<char*>(head), 8);
  static const unsigned char hdf5[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  if (std::memcmp(head, hdf5, 8) == 0) {
    *path = resolve_checkpoint(spec, "");
    return Kind::pentad;
  }
  int32_t magic = 0;
  std::memcpy(&magic, head, 4);
  if (magic == kLlmcMagic) return Kind::llmc;
  return Kind::hf;  // the safetensors reader names what is wrong with anything else
}

// "gpt2 L=2 ... T=16 ..." without its T= field (the context length is no
// tensor's shape for Llama, and wpe's shape is checked for GPT-2).
std::string without_seq_len(const std::string& sig) {
  const size_t t = sig.find(" T=");
  if (t == std::string::npos) return sig;
  const size_t end = sig.find(' ', t + 1);
  return sig.substr(0, t) + (end == std::string::npos ? std::string() : sig.substr(end));
}

// A pentad checkpoint's model/ tensors through load_checkpoint. Collective over comm.
std::string load_pentad(const std::string& path, const std::string& signature, const std::vector<CkptTensor>& tensors,
                        MPI_Comm comm) {
  ckpt_detail::on_root(comm, [&] {
    const ckpt_detail::SerialCkpt c = ckpt_detail::open_serial(path);
    if (without_seq_len(c.meta.model_signature) != without_seq_len(signature))
      throw InputError("checkpoint.init_from = '" + path + "' was written for another model:\n  checkpoint: " +
                       c.meta.model_signature + "\n  this run:   " + signature);
  });
  std::vector<CkptTensor> model;
  for (const CkptTensor& t : tensors)
    if (t.name.rfind("model/", 0) == 0) model.push_back(t);
  const CkptMeta meta = load_checkpoint(path, "", model, comm);
  return "pentad checkpoint of step " + std::to_string(meta.step) + " under " + meta.layout + ", weights only";
}

// This rank's block of a global row-major tensor.
void copy_block(const std::vector<float>& whole, const CkptTensor& t, std::vector<float>* block) {
  const size_t nd = t.shape.size();
  block->resize(size_t(n_elements(t.local_shape)));
  if (block->empty()) return;
  std::vector<int64_t> stride(nd, 1);
  for (size_t d = nd - 1; d-- > 0;) stride[d] = stride[d + 1] * t.shape[d + 1];
  const int64_t row = t.local_shape[nd - 1];
  const int64_t n_rows = int64_t(block->size()) / row;
  std::vector<int64_t> idx(nd, 0);  // position within the block, the last dimension whole
  for (int64_t r = 0; r < n_rows; ++r) {
    int64_t src = t.local_start[nd - 1];
    for (size_t d = 0; d + 1 < nd; ++d) src += (t.local_start[d] + idx[d]) * stride[d];
    std::copy_n(whole.data() + src, row, block->data() + r * row);
    for (size_t d = nd - 1; d-- > 0;) {
      if (++idx[d] < t.local_shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

std::string load_init_weights(const std::string& spec, const ModelConfig& m, const std::string& signature,
                              const std::vector<CkptTensor>& tensors, MPI_Comm comm) {
  const bool root = host::rank(comm) == 0;
  std::string path;
  int kind = 0;
  ckpt_detail::on_root(comm, [&] { kind = int(classify(spec, &path)); });
  host::bcast(comm, &kind, 1, 0);
  path = host::bcast_string(comm, path, 0);
  if (Kind(kind) == Kind::pentad) return "loaded " + path + " (" + load_pentad(path, signature, tensors, comm) + ")";

  std::unique_ptr<Source> src;
  ckpt_detail::on_root(comm, [&] {
    if (Kind(kind) == Kind::llmc)
      src = std::make_unique<LlmcSource>(path, m);
    else
      src = std::make_unique<HfSource>(path, m);
  });
  std::vector<float> whole, block;
  int n_loaded = 0;
  for (const CkptTensor& t : tensors) {
    if (t.name.rfind("model/", 0) != 0) continue;
    std::string err;
    if (root) {
      try {
        whole = src->tensor(t.name, t.shape);
      } catch (const InputError& e) {
        err = e.what();
      }
    }
    agree_or_throw(err.empty(), err, comm);
    whole.resize(size_t(n_elements(t.shape)));
    constexpr int64_t kSlab = int64_t{16} << 20;  // floats per broadcast
    for (int64_t at = 0; at < int64_t(whole.size()); at += kSlab)
      host::bcast(comm, whole.data() + at, int(std::min<int64_t>(kSlab, int64_t(whole.size()) - at)), 0);
    copy_block(whole, t, &block);
    if (t.set) t.set(block.data());
    ++n_loaded;
  }
  std::string err, desc;
  if (root) {
    err = src->unused();
    desc = src->describe();
  }
  agree_or_throw(err.empty(), err, comm);
  return "loaded " + path + " (" + desc + ", " + std::to_string(n_loaded) + " tensors)";
}

}  // namespace pentad
