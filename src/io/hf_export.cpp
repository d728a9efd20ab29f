// `pentad ckpt export --format hf`: the checkpoint's global weights as a
// Hugging Face model directory (model.safetensors or shards with
// model.safetensors.index.json, config.json, generation_config.json),
// tensors renamed and reshaped by io/hf_map.hpp's rules. Rank 0 reads the
// checkpoint serially, a few pentad tensors at a time.
#include <algorithm>
#include <deque>
#include <filesystem>
#include <map>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/checkpoint_internal.hpp"
#include "io/hf_map.hpp"
#include "io/safetensors.hpp"
#include "tok/hf_tokenizer.hpp"
#include "io/run_state.hpp"

namespace pentad::ckpt_detail {

namespace {

namespace fs = std::filesystem;

// The last few pentad tensors read (a fused c_attn needs three, the experts
// of one (E, F, C) tensor one, read once for all E).
class TensorCache {
 public:
  TensorCache(const SerialCkpt& c, const std::string& path) : c_(c), path_(path) {}
  const std::vector<float>& get(const std::string& name) {
    for (auto& [n, v] : items_)
      if (n == name) return v;
    if (items_.size() >= 4) items_.pop_front();
    std::vector<float> all;
    read_whole(c_.file.get(), path_, name, [&](const float* p, int64_t k) { all.insert(all.end(), p, p + k); });
    items_.emplace_back(name, std::move(all));
    return items_.back().second;
  }

 private:
  const SerialCkpt& c_;
  const std::string& path_;
  std::deque<std::pair<std::string, std::vector<float>>> items_;
};

std::vector<int64_t> dataset_shape(const SerialCkpt& c, const std::string& n) {
  h5::Id ds(HDF5_CHECK(H5Dopen2(c.file.get(), n.c_str(), H5P_DEFAULT)), H5Dclose);
  h5::Id sp(HDF5_CHECK(H5Dget_space(ds.get())), H5Sclose);
  return h5::extent(sp.get());
}

// The tokenizer files of --tokenizer for the model m: none, the byte
// tokenizer's ("bytes", or its tokenizer.json), a BPE's written from a rank
// file, or a BPE's tokenizer.json (byte-level or SentencePiece; a model's
// own) passed on as it is, with its tokenizer_config.json; and a chat
// template file beside a tokenizer.json.
hf::TokenizerFiles export_tokenizer(const ExportOptions& opt, const ModelConfig& m, const std::string& what) {
  const auto too_many = [&](int64_t ids, const std::string& name) {
    return InputError("ckpt export: " + name + " has " + std::to_string(ids) + " ids, more than the vocabulary of " +
                      what + " (" + std::to_string(m.vocab_size) + ", model.vocab_size)");
  };
  const auto bytes_files = [&] {
    if (m.vocab_size < 256) throw too_many(256, "the byte tokenizer");
    return hf::byte_tokenizer_files(m.seq_len);
  };
  if (opt.tokenizer.empty()) return {};
  if (opt.tokenizer == "bytes") return bytes_files();
  if (const std::string file = hf::tokenizer_file(opt.tokenizer); hf::is_tokenizer_json(file)) {
    hf::TokenizerJson t = hf::read_tokenizer_json(file, opt.pattern);
    hf::TokenizerFiles f;
    if (t.bytes) {
      f = bytes_files();
    } else {
      const int64_t ids = t.sentencepiece ? t.sp.vocab : t.parts.vocab;
      if (ids > m.vocab_size)
        throw too_many(ids, "tokenizer '" + opt.tokenizer + "' (" +
                                (t.sentencepiece ? std::string("SentencePiece BPE") : t.parts.pattern) + ")");
      f = hf::tokenizer_json_files(file, t, m.seq_len);
    }
    // A chat template kept apart from tokenizer_config.json (newer
    // transformers' chat_template.jinja; chat_template.json) goes along.
    for (const char* name : {"chat_template.jinja", "chat_template.json"}) {
      const std::string p = (fs::path(file).parent_path() / name).string();
      std::error_code ec;
      if (!fs::exists(p, ec)) continue;
      std::optional<std::string> text = read_text(p);
      if (!text) throw InputError("'" + p + "': cannot be read");
      f.extra.emplace_back(name, std::move(*text));
    }
    return f;
  }
  const BpeParts parts = load_bpe_parts(opt.tokenizer, opt.pattern);
  if (parts.vocab > m.vocab_size) throw too_many(parts.vocab, "tokenizer '" + opt.tokenizer + "' (" + parts.pattern + ")");
  return hf::tokenizer_files(parts, m.seq_len);
}

}  // namespace

void write_hf(const SerialCkpt& c, const std::string& path, const std::string& out_dir, const ExportOptions& opt,
              std::string* report) {
  const std::string what = "checkpoint '" + path + "'";
  const ModelConfig m = hf::model_of_deck(c.meta.config_toml, what);
  std::vector<std::string> notes;
  const hf::Arch arch = hf::export_arch(m, opt.hf_class, what + ": ckpt export --format hf", &notes);
  const std::vector<hf::Rule> rules = hf::rules(m, arch);

  // The tokenizer first: a bad rank file, or one with more ids than the
  // model has rows, stops the export before any file is written.
  const hf::TokenizerFiles tok = export_tokenizer(opt, m, what);

  // Every rule's tensor is in the checkpoint with its shape, and every model/
  // tensor has a rule: a checkpoint of another model fails here, by name.
  std::map<std::string, std::vector<int64_t>> have;
  for (const auto& n : c.datasets)
    if (n.rfind("model/", 0) == 0) have[n] = dataset_shape(c, n);
  std::map<std::string, bool> used;
  for (const hf::Rule& r : rules) {
    const auto it = have.find(r.pentad);
    if (it == have.end())
      throw InputError(what + " has no tensor '" + r.pentad + "' (needed by " + hf::arch_class(arch) + ")");
    if (it->second != r.pentad_shape)
      throw InputError(what + ": tensor '" + r.pentad + "' has shape " + shape_str(it->second) + ", " +
                       hf::arch_class(arch) + " of its deck needs " + shape_str(r.pentad_shape));
    used[r.pentad] = true;
  }
  for (const auto& [n, s] : have)
    if (!used.count(n)) throw InputError(what + ": tensor '" + n + "' has no place in " + hf::arch_class(arch));

  TensorCache cache(c, path);
  std::vector<safetensors::OutTensor> out;
  for (const std::string& name : hf::hf_names(rules)) {
    const auto r = std::find_if(rules.begin(), rules.end(), [&](const hf::Rule& x) { return x.hf == name; });
    out.push_back({name, r->hf_shape, [&rules, &cache, name](std::vector<float>& v) {
                     v = hf::build_hf(rules, name, [&](const std::string& n) -> const std::vector<float>& {
                       return cache.get(n);
                     });
                   }});
  }
  const std::map<std::string, std::string> meta = {
      {"format", "pt"}, {"pentad_step", std::to_string(c.meta.step)}, {"pentad_model", c.meta.model_signature}};
  const auto files = safetensors::write_model(out_dir, out, opt.dtype == "bf16" ? safetensors::OutDtype::bf16
                                                                                 : safetensors::OutDtype::f32,
                                              meta, opt.max_shard_bytes);
  const std::string torch_dtype = opt.dtype == "bf16" ? "bfloat16" : "float32";
  const hf::SpecialIds ids{tok.bos_id, tok.eos_id};
  std::vector<std::pair<std::string, std::string>> texts = {
      {"config.json", hf::config_json(m, arch, torch_dtype, ids)},
      {"generation_config.json", hf::generation_config_json(m, ids)}};
  if (!opt.tokenizer.empty()) {
    texts.emplace_back("tokenizer.json", std::move(tok.tokenizer_json));
    texts.emplace_back("tokenizer_config.json", std::move(tok.tokenizer_config_json));
    for (auto& [file, text] : tok.extra) texts.emplace_back(file, std::move(text));
  }
  for (const auto& [file, text] : texts) {
    const std::string p = (fs::path(out_dir) / file).string();
    if (FsStatus e = write_file_atomic(p, text)) throw InputError("writing '" + p + "': " + e->message());
  }
  *report += "wrote " + out_dir + ": " + hf::arch_class(arch) + " (" + std::to_string(out.size()) + " tensors, " +
             opt.dtype + ", step " + std::to_string(c.meta.step) + ") in";
  for (const auto& f : files) *report += " " + f;
  for (const auto& [file, text] : texts) *report += ", " + file;
  *report += "\n";
  if (opt.tokenizer == "bytes")
    *report += "tokenizer: bytes (256 ids) as tokenizer.json\n";
  else if (!opt.tokenizer.empty())
    *report += "tokenizer: " + opt.tokenizer + " as tokenizer.json (" + std::to_string(tok.merges) +
               " merges), bos " + std::to_string(tok.bos_id) + ", eos " + std::to_string(tok.eos_id) + "\n";
  for (const auto& n : notes) *report += "note: " + n + "\n";
}

}  // namespace pentad::ckpt_detail
