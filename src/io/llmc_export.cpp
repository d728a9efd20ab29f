// `pentad ckpt export`, GPT-2 part: the checkpoint's global tensors as
// llm.c's gpt2_model.bin (the layout train_gpt2.c's gpt2_build_from_checkpoint
// reads), written atomically through core/fs.hpp.
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

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/checkpoint_internal.hpp"

namespace pentad::ckpt_detail {
namespace {

// llm.c's model dimensions, taken from the tensors' shapes.
struct LlmcDims {
  int64_t V = 0, C = 0, maxT = 0, L = 0, NH = 0, Vp = 0;
};

std::vector<int64_t> shape_of(const SerialCkpt& c, const std::string& path, const std::string& n) {
  if (std::find(c.datasets.begin(), c.datasets.end(), n) == c.datasets.end())
    throw InputError("checkpoint '" + path + "' has no tensor '" + n + "' (needed by the llm.c export)");
  h5::Id ds(HDF5_CHECK(H5Dopen2(c.file.get(), n.c_str(), H5P_DEFAULT)), H5Dclose);
  h5::Id sp(HDF5_CHECK(H5Dget_space(ds.get())), H5Sclose);
  return h5::extent(sp.get());
}

// The dimensions, or an InputError when the model does not fit llm.c's GPT-2.
LlmcDims llmc_dims(const SerialCkpt& c, const std::string& path, int64_t n_layers, int64_t n_heads) {
  const auto wte = shape_of(c, path, "model/wte"), wpe = shape_of(c, path, "model/wpe");
  if (wte.size() != 2 || wpe.size() != 2 || wte[1] != wpe[1])
    throw InputError("checkpoint '" + path + "': model/wte " + shape_str(wte) + " and model/wpe " +
                     shape_str(wpe) + " do not fit GPT-2");
  LlmcDims d{wte[0], wte[1], wpe[0], n_layers, n_heads, (wte[0] + 127) / 128 * 128};
  if (std::find(c.datasets.begin(), c.datasets.end(), "model/lm_head") != c.datasets.end())
    throw InputError("checkpoint '" + path + "': llm.c's GPT-2 ties lm_head to wte; this model is untied");
  if (n_heads <= 0 || d.C % n_heads != 0)
    throw InputError("checkpoint '" + path + "': n_heads=" + std::to_string(n_heads) +
                     " does not divide d_model=" + std::to_string(d.C));
  const std::string l0 = "model/layers/0/mlp/w_up";
  if (n_layers > 0 && shape_of(c, path, l0) != std::vector<int64_t>{4 * d.C, d.C})
    throw InputError("checkpoint '" + path + "': llm.c's GPT-2 needs d_ff = 4*d_model, but " + l0 +
                     " has shape " + shape_str(shape_of(c, path, l0)));
  for (int64_t x : {d.V, d.C, d.maxT, d.L, d.NH, d.Vp})
    if (x > INT32_MAX) throw InputError("checkpoint '" + path + "': a dimension exceeds int32 for llm.c");
  return d;
}

}  // namespace

void write_llmc_gpt2(const SerialCkpt& c, const std::string& path, const std::string& out_path,
                     int64_t n_layers, int64_t n_heads) {
  const LlmcDims d = llmc_dims(c, path, n_layers, n_heads);
  const int64_t C = d.C;
  AtomicFile out(out_path);  // an InputError below removes the temporary file
  if (FsStatus e = out.open())
    throw InputError("cannot create '" + out.tmp_path() + "': " + std::strerror(e->err));
  const auto put = [&](const void* p, size_t n_bytes) {
    if (FsStatus e = out.write(p, n_bytes)) PENTAD_FATAL(e->message());
  };
  int32_t header[256] = {};
  header[0] = 20240326;
  header[1] = 3;
  header[2] = int32_t(d.maxT);
  header[3] = int32_t(d.V);
  header[4] = int32_t(d.L);
  header[5] = int32_t(d.NH);
  header[6] = int32_t(C);
  header[7] = int32_t(d.Vp);
  put(header, sizeof header);

  // Each tensor is checked against its llm.c shape before it is copied.
  const auto copy = [&](const std::string& name, const std::vector<int64_t>& want) {
    const auto got = shape_of(c, path, name);
    if (got != want)
      throw InputError("checkpoint '" + path + "': tensor '" + name + "' has shape " + shape_str(got) +
                       ", the llm.c export expects " + shape_str(want));
    read_whole(c.file.get(), path, name,
               [&](const float* p, int64_t n) { put(p, size_t(n) * sizeof(float)); });
  };
  copy("model/wte", {d.V, C});
  const std::vector<float> zeros(size_t((d.Vp - d.V) * C), 0.0f);
  put(zeros.data(), zeros.size() * sizeof(float));
  copy("model/wpe", {d.maxT, C});
  const auto per_layer = [&](std::initializer_list<const char*> leaves, const std::vector<int64_t>& want) {
    for (int64_t l = 0; l < d.L; ++l)
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
  if (FsStatus e = out.commit()) PENTAD_FATAL(e->message());
}

}  // namespace pentad::ckpt_detail
