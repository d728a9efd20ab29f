// Reading the global weights of a checkpoint or an exported model.h5 (see
// weights.hpp): one serial HDF5 open, the meta attributes, then each tensor
// of the model's parameter list read whole (the Fletcher32 checksums of a
// checkpoint are verified by the read).
#include "infer/weights.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <toml++/toml.h>

#include "core/error.hpp"
#include "io/checkpoint.hpp"
#include "io/h5.hpp"
#include "io/hf_import.hpp"
#include "model/param_list.hpp"

namespace pentad {
namespace {

namespace fs = std::filesystem;

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

bool is_regular(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

ModelConfig model_config_of_deck(const std::string& deck_text, const std::string& where) {
  toml::table t;
  try {
    t = toml::parse(deck_text, where);
  } catch (const toml::parse_error& e) {
    throw InputError(where + ": the stored deck is not valid TOML: " + std::string(e.description()));
  }
  // The deck is validated against the layout it was trained with.
  int64_t world = 1;
  for (const char* axis : {"dp", "tp", "pp", "cp"}) world *= t["parallel"][axis].value_or(int64_t{1});
  return parse_config(deck_text, where, {}, int(world)).model;
}

ModelWeights load_model_weights(const std::string& path) {
  h5::quiet();
  const std::string what = "'" + path + "'";
  if (!is_regular(path)) throw InputError("weights " + what + " is not a readable file");
  if (H5Fis_hdf5(path.c_str()) <= 0) throw InputError("weights " + what + " is not an HDF5 file");
  h5::Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!f.ok()) throw InputError("weights " + what + " cannot be opened: " + h5::error_detail());
  const auto format = h5::read_str_attr(f.get(), "format");
  if (!format || (*format != "pentad-checkpoint" && *format != "pentad-weights"))
    throw InputError(what + " is neither a pentad checkpoint nor exported weights (attribute 'format' is " +
                     (format ? "'" + *format + "'" : std::string("missing")) + ")");
  const auto config = h5::read_str_attr(f.get(), "config");
  if (!config) throw InputError(what + ": attribute 'config' (the resolved deck) is missing");
  ModelWeights w;
  w.source = path;
  w.step = h5::read_int_attr(f.get(), "step").value_or(0);
  w.cfg = model_config_of_deck(*config, path + ":config");
  for (const ParamSpec& s : model_param_list(w.cfg, ParamRank{})) {
    const std::string t = "tensor '" + s.name + "' of " + what;
    if (!h5::path_exists(f.get(), s.name)) throw InputError(what + " has no tensor '" + s.name + "'");
    h5::Id ds(H5Dopen2(f.get(), s.name.c_str(), H5P_DEFAULT), H5Dclose);
    if (!ds.ok()) throw InputError(t + " cannot be opened: " + h5::error_detail());
    h5::Id sp(H5Dget_space(ds.get()), H5Sclose);
    const std::vector<int64_t> shape = sp.ok() ? h5::extent(sp.get()) : std::vector<int64_t>{};
    const std::vector<int64_t> want = s.saved_shape();  // files hold no vocabulary padding
    if (shape != want)
      throw InputError(t + " has shape " + shape_text(shape) + "; the stored deck implies " + shape_text(want));
    HostTensor& h = w.tensors[s.name];
    h.shape = shape;
    h.data.resize(size_t(s.global_numel()));
    if (H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, h.data.data()) < 0) {
      bool pipeline = false;
      const std::string detail = h5::error_detail(&pipeline);
      throw InputError(pipeline ? t + " failed its checksum (file corrupted)" : t + ": read error: " + detail);
    }
  }
  return w;
}

ModelWeights load_hf_weights(const std::string& dir, const ModelConfig& cfg) {
  const std::string what = "'" + dir + "'";
  hf::Import in(dir, cfg, what, "");
  ModelWeights w;
  w.cfg = cfg;
  w.source = dir;
  for (const ParamSpec& s : model_param_list(cfg, ParamRank{})) {
    HostTensor& h = w.tensors[s.name];
    h.shape = s.saved_shape();
    h.data = in.tensor(s.name, h.shape);
  }
  if (const std::string err = in.unused(); !err.empty()) throw InputError(err);
  return w;
}

std::string resolve_weights_path(const std::string& spec) {
  // An export directory holds model.h5 (and no latest pointer).
  if (is_dir(spec) && is_regular((fs::path(spec) / "model.h5").string()) &&
      !fs::exists(fs::path(spec) / "latest"))
    return (fs::path(spec) / "model.h5").string();
  // DIR/latest names the pointer file: follow it as the directory's latest.
  if (fs::path(spec).filename() == "latest" && is_regular(spec) && H5Fis_hdf5(spec.c_str()) <= 0) {
    const std::string dir = fs::path(spec).parent_path().string();
    return resolve_checkpoint("latest", dir.empty() ? "." : dir);
  }
  return resolve_checkpoint(spec, CheckpointConfig{}.dir);
}

}  // namespace pentad
